"""Pure-logic tests: text normalisation, word alignment and WER."""

from __future__ import annotations

import random
import time

import pytest

from stenoflow.bench.metrics import WerResult, align_words, edit_distance, wer
from stenoflow.bench.normalize import NormalizeOptions, normalize_text, words_to_digits

# --- normaliser -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "And so my fellow Americans, ask not what your country can do for you.",
            "and so my fellow americans ask not what your country can do for you",
        ),
        ("I won't, can't, shan't or cannot.", "i will not can not shall not or can not"),
        ("Don't they're we'll I've I'm", "do not they are we will i have i am"),
        ("It's the dog's bone", "its the dogs bone"),
        ("Hello [music] there (laughs) {noise} <|endoftext|> you", "hello there you"),
        ("Um, so, uh, hmm, I think mm yes", "so i think yes"),
        ("a // b -- c ... d!? e", "a b c d e"),
        ("The colour of the centre is grey.", "the color of the center is gray"),
        ("Mr. Smith and Dr. Jones", "mister smith and doctor jones"),
        ("The U.S.A. is big", "the usa is big"),
        ("Caf\u00e9 na\u00efve \u201cquoted\u201d it\u2019s", "cafe naive quoted its"),
        ("  lots   of\n\twhitespace  ", "lots of whitespace"),
        ("well-known state-of-the-art", "well known state of the art"),
        ("", ""),
        ("[inaudible]", ""),
    ],
)
def test_normalize_text(text: str, expected: str) -> None:
    assert normalize_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("twenty-five", "25"),
        ("Twenty five people", "25 people"),
        ("one hundred and five", "105"),
        ("two thousand and five", "2005"),
        ("one thousand two hundred thirty four", "1234"),
        ("seven hundred thousand", "700000"),
        ("three million two hundred thousand", "3200000"),
        ("nineteen eighty four", "1984"),
        ("one two three", "1 2 3"),
        ("twenty twenty", "20 20"),
        ("zero zero seven", "0 0 7"),
        ("a hundred, three million", "a 100 3000000"),
        ("ninety nine bottles", "99 bottles"),
        ("no one is the one", "no 1 is the 1"),
        ("1,000 people", "1000 people"),
        ("$5 and 3.5% of 12", "5 dollars and 3.5 percent of 12"),
        ("the seventies", "the seventies"),
    ],
)
def test_numbers_become_digits(text: str, expected: str) -> None:
    assert normalize_text(text) == expected


def test_spoken_and_written_numbers_agree() -> None:
    assert normalize_text("I paid twenty-five dollars") == normalize_text("I paid $25")
    assert normalize_text("in nineteen eighty four") == normalize_text("in 1984")
    spoken = normalize_text("It costs seventeen dollars and sixty-seven cents, or nine pounds and five pence.")
    assert spoken == normalize_text("It costs $17.67, or \u00a39.05.")
    assert normalize_text("$3.5 and \u20ac4.125") == "3.5 dollars and 4.125 euros"  # not amounts in cents


def test_options_switch_rules_off() -> None:
    opts = NormalizeOptions(
        remove_fillers=False, numbers_to_digits=False, standardize_spellings=False
    )
    assert normalize_text("Um, twenty colours", opts) == "um twenty colours"


def test_words_to_digits_leaves_other_words() -> None:
    assert words_to_digits(["and", "one", "and", "two"]) == ["and", "1", "and", "2"]


def test_normalize_is_idempotent() -> None:
    text = "Well, Mr. Smith won't pay $1,000 for twenty-five grey (used) cars, um."
    once = normalize_text(text)
    assert normalize_text(once) == once


# --- alignment ------------------------------------------------------------------------------


def _reference_distance(a: list[str], b: list[str]) -> int:
    """Textbook O(n*m) Levenshtein in pure Python, to check the vectorised one against."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def test_align_substitution_and_insertion() -> None:
    assert align_words(["a", "b", "c", "d"], ["a", "x", "c", "d", "e"]) == [
        (0, 0, "equal"),
        (1, 1, "sub"),
        (2, 2, "equal"),
        (3, 3, "equal"),
        (None, 4, "ins"),
    ]


def test_align_deletion() -> None:
    assert align_words(["the", "quick", "brown", "fox"], ["the", "brown", "fox"]) == [
        (0, 0, "equal"),
        (1, None, "del"),
        (2, 1, "equal"),
        (3, 2, "equal"),
    ]


def test_align_empty_sides() -> None:
    assert align_words([], []) == []
    assert align_words(["a", "b"], []) == [(0, None, "del"), (1, None, "del")]
    assert align_words([], ["a", "b"]) == [(None, 0, "ins"), (None, 1, "ins")]


def test_align_prefers_substitution_over_delete_plus_insert() -> None:
    ops = [op for _, _, op in align_words(["cat"], ["hat"])]
    assert ops == ["sub"]


def test_align_random_cases_are_minimal_and_complete() -> None:
    rng = random.Random(1234)
    vocab = [f"w{i}" for i in range(6)]
    for _ in range(400):
        ref = [rng.choice(vocab) for _ in range(rng.randint(0, 15))]
        hyp = [rng.choice(vocab) for _ in range(rng.randint(0, 15))]
        pairs = align_words(ref, hyp)
        expected = _reference_distance(ref, hyp)
        assert edit_distance(ref, hyp) == expected
        assert sum(op != "equal" for _, _, op in pairs) == expected
        assert [i for i, _, _ in pairs if i is not None] == list(range(len(ref)))
        assert [j for _, j, _ in pairs if j is not None] == list(range(len(hyp)))
        for i, j, op in pairs:
            if op == "equal":
                assert ref[i] == hyp[j]  # type: ignore[index]
            elif op == "sub":
                assert ref[i] != hyp[j]  # type: ignore[index]
            elif op == "del":
                assert j is None and i is not None
            else:
                assert i is None and j is not None


def test_alignment_is_fast_for_long_texts() -> None:
    rng = random.Random(7)
    ref = [f"w{rng.randrange(500)}" for _ in range(1000)]
    hyp = [w if rng.random() < 0.9 else f"x{rng.randrange(50)}" for w in ref]
    del hyp[100:130]
    start = time.perf_counter()
    pairs = align_words(ref, hyp)
    elapsed = time.perf_counter() - start
    assert len([p for p in pairs if p[0] is not None]) == 1000
    assert elapsed < 2.0, f"aligning 1,000 words took {elapsed:.2f} s"


# --- WER ------------------------------------------------------------------------------------


def test_wer_perfect_after_normalisation() -> None:
    result = wer(["And so, my fellow Americans: ask not!"], ["and so my fellow americans ask not"])
    assert result == WerResult(0.0, 0, 0, 0, 7)


def test_wer_counts_each_kind() -> None:
    result = wer(["the cat sat on the mat"], ["oh the bat sat on mat"])
    assert (result.substitutions, result.deletions, result.insertions) == (1, 1, 1)
    assert result.ref_words == 6
    assert result.wer == pytest.approx(3 / 6)
    assert result.errors == 3
    assert result.hits == 4


def test_wer_is_corpus_level_and_pairs_are_aligned_separately() -> None:
    result = wer(["a b c d", "e f"], ["a b c d", "x f"])
    assert result.ref_words == 6
    assert result.substitutions == 1
    assert result.wer == pytest.approx(1 / 6)


def test_wer_empty_reference_and_hypothesis() -> None:
    assert wer([""], [""]).wer == 0.0
    assert wer([], []) == WerResult(0.0, 0, 0, 0, 0)
    only_insertions = wer([""], ["hello there"])
    assert only_insertions.insertions == 2 and only_insertions.wer == 1.0
    all_deleted = wer(["hello there"], [""])
    assert all_deleted.deletions == 2 and all_deleted.wer == 1.0


def test_wer_accepts_single_strings_and_can_skip_normalisation() -> None:
    assert wer("Hello, world", "hello world").wer == 0.0
    raw = wer("Hello, world", "hello world", normalize=False)
    assert raw.substitutions == 1  # "Hello," against "hello"; "world" matches


def test_wer_can_exceed_one_with_insertions() -> None:
    assert wer(["a"], ["b c d"]).wer == pytest.approx(3.0)


def test_wer_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError):
        wer(["a", "b"], ["a"])


def test_numbers_do_not_count_as_errors() -> None:
    assert wer(["I have twenty five cats"], ["I have 25 cats."]).wer == 0.0
