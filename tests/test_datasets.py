"""Synthesized evaluation sets: sample rate, durations, sentence spans, pools and caching.

Builds a tiny set (two short clips and a 20-second long-form) into a temporary cache.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from stenoflow.bench import datasets
from stenoflow.bench.text_pool import (
    DICTIONARY,
    all_words_known,
    is_clean_sentence,
    load_dictionary,
    load_pools,
    pool_of,
    split_sentences,
)

pytestmark = pytest.mark.slow

needs_synth = pytest.mark.skipif(
    shutil.which("flite") is None or shutil.which("espeak-ng") is None,
    reason="flite and espeak-ng are not installed; run `bash scripts/setup.sh`",
)
needs_fortunes = pytest.mark.skipif(
    not Path("/usr/share/games/fortunes/fortunes").is_file(),
    reason="Debian fortunes are not installed; run `bash scripts/setup.sh`",
)

LONG_S = 20.0


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STENOFLOW_DATA", str(tmp_path))
    return tmp_path


def _check_clip(clip: datasets.Clip) -> np.ndarray:
    info = sf.info(str(clip.audio_path))
    assert info.samplerate == 16_000
    assert info.channels == 1
    assert info.subtype == "FLOAT"
    audio = clip.load_audio()
    assert audio.dtype == np.float32
    assert len(audio) / 16_000 == pytest.approx(clip.duration, abs=1e-3)
    assert np.all(np.isfinite(audio)) and np.abs(audio).max() <= 1.0
    assert clip.sentences, "a clip holds at least one sentence"
    previous_end = 0.0
    for start, end, text in clip.sentences:
        assert previous_end <= start < end <= clip.duration
        previous_end = end
        assert text
    assert clip.text == " ".join(text for _, _, text in clip.sentences)
    assert len(clip.sentence_voices) == len(clip.sentences)
    sidecar = json.loads(clip.audio_path.with_suffix(".json").read_text())
    assert sidecar["text"] == clip.text
    return audio


def test_data_dir_follows_environment(cache: Path) -> None:
    assert datasets.data_dir() == cache


def test_data_dir_defaults_to_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STENOFLOW_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    assert datasets.data_dir() == tmp_path / ".cache" / "stenoflow" / "data"


def test_jfk_missing_tells_how_to_fetch_it(cache: Path) -> None:
    with pytest.raises(FileNotFoundError, match="scripts/setup.sh"):
        datasets.jfk()


@needs_fortunes
def test_pools_are_disjoint_and_stable() -> None:
    pools = load_pools()
    assert len(pools.eval) > 500
    train_share = len(pools.train) / (len(pools.train) + len(pools.eval))
    assert 0.75 < train_share < 0.85  # 8 of 10 hash buckets
    assert not set(pools.train) & set(pools.eval)
    assert all(pool_of(s) == "train" for s in pools.train[:200])
    assert all(pool_of(s) == "eval" for s in pools.eval[:200])
    assert all(is_clean_sentence(s) for s in pools.eval)
    assert load_pools().fingerprint("eval") == pools.fingerprint("eval")
    with pytest.raises(ValueError):
        pools.get("test")


def test_sentence_cleaning() -> None:
    assert is_clean_sentence("Nondeterminism means never having to say you are wrong.")
    assert not is_clean_sentence("Visit http://example.com for more details today.")
    assert not is_clean_sentence("THIS IS SHOUTING AT YOU NOW.")
    assert not is_clean_sentence("There were 42 people in the room today.")
    assert not is_clean_sentence("Too short.")
    assert not is_clean_sentence("Mr. Smith went to the market to buy things.")
    assert split_sentences("Mr. Smith left. He came back! Did he?") == [
        "Mr. Smith left.",
        "He came back!",
        "Did he?",
    ]


@pytest.mark.skipif(not DICTIONARY.is_file(), reason="wamerican is not installed")
def test_dictionary_check_rejects_non_english() -> None:
    known = load_dictionary()
    assert known is not None
    assert all_words_known("They've been honoring him ever since, Peter's friend said.", known)
    assert all_words_known("Zeus gave Leda the well-known bird.", known)
    assert not all_words_known("Ist easy schnappen der springenwerk und blowenfusen.", known)


@needs_synth
@needs_fortunes
def test_tiny_set_builds_and_is_cached(cache: Path) -> None:
    shorts = datasets.short_clips(2)
    long_clip = datasets.long_form("longform-test", minutes=LONG_S / 60)

    assert len(shorts) == 2
    for clip in shorts:
        _check_clip(clip)
        assert 2.0 <= clip.duration <= 25.0
        assert clip.voice.split(":")[0] in ("flite", "espeak")
        assert cache in clip.audio_path.parents

    audio = _check_clip(long_clip)
    assert long_clip.duration == pytest.approx(LONG_S, abs=0.01)
    assert len(set(long_clip.sentence_voices)) >= 1
    # Between sentences there is only the faint noise floor, far below speech.
    inside = np.zeros(len(audio), dtype=bool)
    for start, end, _ in long_clip.sentences:
        inside[int(start * 16_000) : int(end * 16_000)] = True
    speech_rms = float(np.sqrt(np.mean(audio[inside] ** 2)))
    gap_rms = float(np.sqrt(np.mean(audio[~inside] ** 2)))
    assert gap_rms < speech_rms / 10

    eval_text = set(load_pools().eval)
    used = [t for c in [*shorts, long_clip] for _, _, t in c.sentences]
    assert all(t in eval_text for t in used)

    train_clip = datasets.short_clips(1, pool="train")[0]
    assert all(pool_of(t) == "train" for _, _, t in train_clip.sentences)
    assert not {t for _, _, t in train_clip.sentences} & set(used)

    paths = [c.audio_path for c in [*shorts, long_clip]]
    mtimes = [p.stat().st_mtime_ns for p in paths]
    again = [*datasets.short_clips(2), datasets.long_form("longform-test", minutes=LONG_S / 60)]
    assert [c.audio_path for c in again] == paths
    assert [p.stat().st_mtime_ns for p in paths] == mtimes
    assert again == [*shorts, long_clip]

    # The first clips of a larger set are the same clips: nothing is rebuilt.
    assert datasets.short_clips(3)[:2] == shorts
    assert [p.stat().st_mtime_ns for p in paths[:2]] == mtimes[:2]


@needs_synth
@needs_fortunes
def test_changed_parameters_rebuild(cache: Path) -> None:
    first = datasets.long_form("longform-param", minutes=0.2)
    second = datasets.long_form("longform-param", minutes=0.25)
    assert first.audio_path == second.audio_path
    assert second.duration == pytest.approx(15.0, abs=0.01)


def test_clip_names_with_dots_keep_their_own_files() -> None:
    from stenoflow.bench.clips import clip_paths

    first, second = clip_paths(Path("d/varied-1.5min-0")), clip_paths(Path("d/varied-1.5min-1"))
    assert first == (Path("d/varied-1.5min-0.wav"), Path("d/varied-1.5min-0.json"))
    assert set(first).isdisjoint(second)


@needs_synth
@needs_fortunes
def test_sparse_streams_space_their_items_by_long_pauses(cache: Path) -> None:
    from stenoflow.bench.varied import SPARSE_PAUSE_S, sparse_streams

    (clip,) = sparse_streams(1, minutes=0.75)
    _check_clip(clip)
    assert len(clip.sentences) >= 3
    low, high = SPARSE_PAUSE_S
    gaps = [b[0] - a[1] for a, b in zip(clip.sentences, clip.sentences[1:], strict=False)]
    # a sentence's span is its trimmed speech, so a gap is the pause and a little lead-in
    assert all(low - 0.05 <= g <= high + 0.5 for g in gaps), gaps
    assert sparse_streams(1, minutes=0.75) == [clip]
