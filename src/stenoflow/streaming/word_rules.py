"""The word rules of the live session: which words of a hearing are new, said, final or set
aside, each a function of the words' times and the speech under them.

``LiveSession`` (:mod:`.live`) applies them to every round; :mod:`.rules` names each rule that
drops words, with the case it is for. Times are absolute seconds; ``speech(lo, hi)`` and
``Sound`` give the seconds of speech or sound between two times.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from stenoflow.streaming.agreement import said_alignment, spoken_keys, word_key
from stenoflow.streaming.events import SENTENCE_END
from stenoflow.streaming.live_round import HeardWord, unheard_run

log = logging.getLogger(__name__)

CONTEXT_WORDS = 100  # committed words a hypothesis start is aligned with
TIME_TOLERANCE_S = 0.1  # a word starting this little before the committed end is still new
# The last committed word heard again this far from where it was committed is another saying of
# it; a word starting this far inside the committed audio is not new.
MISPLACED_S = 1.0
PROMPT_COPY_WORDS = 3  # committed words written again in a row that make a copy of the prompt
Sound = Callable[[float, float], float]  # seconds of sound (as a caller counts it) between two absolute times
ECHO_SOUND_S = 0.2  # a repeat of the committed words over less sound than this is the decoder looping
SAID_COPY_S = 0.15  # a copy of the last committed word over this much sound of its own may have been said
UNSPOKEN_S = 0.5  # last words with no speech this close to them were not said: Whisper wrote them over noise
MAX_WORD_SPEECH_S = 1.5  # a word DTW lays over more speech than this was stretched over words not heard
COPY_SPEECH_S = 0.1  # a word written again right after itself over less speech than this is a loop copy
# ... but a number in digits is said in several words ("$947." as "nine hundred and forty-seven
# dollars", 1.5 s): it may span this much more speech per digit
DIGIT_SPEECH_S = 0.6
SILENT_READ_S = 0.1  # punctuation read this far from any speech was read off silence
WORD_EDGE_S = 0.2  # silence a word keeps on either side of the speech under it
INSTANT_S = 0.06  # a word DTW lays over less audio than this, in silence, was not heard
WORD_PAUSE_S = 0.5  # silence no word is said across
WORD_SOUND_S = 0.1  # the least sound a word is said in (ten words a second)
# A word heard alone that the model was less sure of than this is as likely wrong as right (most
# often the end of the last committed word, heard again): it does not outweigh a later hearing.
SURE_ALONE_P = 0.5


def new_words(words: Sequence[HeardWord], committed: Sequence[HeardWord], committed_end: float,
              sound: Sound | None = None, runs: Sequence[tuple[float, float]] = (),
              pending: Sequence[HeardWord] = ()) -> list[HeardWord]:
    """The words of a hypothesis after those that re-transcribe ``committed`` (the committed
    words its audio may hold, the last ending at ``committed_end``): by text where the two
    clearly line up (two words or more, or the last committed word heard again before the
    committed end), else by time. One word alike elsewhere is no proof: a stream's first word
    said again after a pause ("Again. ... Again.") matched the one word committed, and no later
    saying of it was ever new; by time, a first word that repeats the last
    committed one is new only over sound of its own (see :func:`drop_clipped_repeat`).

    By time, each word is placed as it would be committed, over the speech ``runs`` under it
    (see :func:`on_speech`), as the committed words were: a later round that heard the last
    committed word differently ("Play some charts." over the committed "Play some shots.")
    stretches it over the pause after it, where it lay mostly after the committed end and was
    committed again, and the word after it a third time ("shots. charts. jazz").

    DTW starts a hypothesis at its buffer's start: where the decoder skipped the committed words
    still in the buffer, it lays its first word over them ("Down." over the committed "Hello.").
    A first word that is the first word left unconfirmed (``pending``) and none of the committed
    words is that word, and new, wherever it lies."""
    if committed and words:
        # Compared as said (see :func:`spoken_keys`): "$42" re-transcribes "42 dollars". Of a
        # word the alignment ends inside ("$42.50." after the committed "42 dollars and 50"),
        # the rest is new, as said ("cents."): no later round writes it apart ...
        score, cut, inside, keys = said_alignment([w.word.word for w in committed[-CONTEXT_WORDS:]],
                                                  [w.word.word for w in words])
        last = committed[-1].word
        last_key = said_last(committed)
        heard_last = cut > 0 and not inside and keys[cut - 1][-1] == last_key
        # One word alike is proof where it is the last committed word, heard again before the
        # committed end: that saying, and what follows it is new wherever DTW puts it ("Um, I"
        # committed, then "I mean, let's just go." with "I" laid over "Um" and "mean," mostly
        # before the committed end).
        if score >= 2 or (score == 1 and heard_last and not mostly_after(words[cut - 1], committed_end)):
            if inside:
                # ... where there is speech for it: a round that writes the committed "947" as
                # "$947." adds no "dollars" to what was said.
                end = words[cut].word.end
                said = sum(b - a for a, b in runs_within(runs, last.end, end)) if runs else end - last.end
                rest = [rest_of(words[cut], keys[cut][inside:], last.end)] if said >= WORD_SOUND_S else []
                return [*rest, *words[cut + 1 :]]
            # Ties leave revised last words ("maus trap" heard again as "mouth strap") over as
            # new: they are not, when they start within the committed words. A word after the
            # last committed word heard again as it was is new, wherever DTW puts it.
            if heard_last and words[cut - 1].word.end < last.end - MISPLACED_S:
                # Matched to an earlier saying of the last word ("six of hearts" after "queen of
                # hearts"): the hypothesis re-transcribes up to a later one heard where it was.
                sayings = [q for q in range(cut + 1, len(words) + 1)
                           if keys[q - 1][-1] == last_key
                           and abs(words[q - 1].word.end - last.end) <= MISPLACED_S]
                cut = min(sayings, key=lambda q: abs(words[q - 1].word.end - last.end), default=cut)
            while not heard_last and cut < len(words) and words[cut].word.start < last.end - TIME_TOLERANCE_S:
                cut += 1
            return list(words[cut:])
    # By time: a word is new when most of it lies after the committed words, and it does not
    # start deep inside them: that is a committed word whose end DTW stretched over
    # audio the decoder did not hear ("day." over 71.6-77.8 s, after it stopped at "in a day.").
    if words and pending and first_pending(words[0], pending[0], committed[-CONTEXT_WORDS:]):
        # laid over the first speech after the committed words, and no further than the next word
        first = words[0].word
        run = next(((a, b) for a, b in runs if a >= committed_end - TIME_TOLERANCE_S), None)
        if first.start < committed_end and run is not None:
            end = min(run[1], words[1].word.start) if len(words) > 1 else run[1]
            first = replace(first, start=run[0], end=max(run[0], end))
        return drop_clipped_repeat([replace(words[0], word=first), *words[1:]], committed[-2:], sound=sound)
    placed = on_speech(words, runs) if runs else words
    fresh = [w for w, p in zip(words, placed, strict=True)
             if mostly_after(p, committed_end) and w.word.start >= committed_end - MISPLACED_S]
    return drop_clipped_repeat(fresh, committed[-2:], sound=sound)


def first_pending(word: HeardWord, pending: HeardWord, committed: Sequence[HeardWord]) -> bool:
    """Whether ``word`` is said as ``pending`` is and as none of ``committed`` is."""
    keys = spoken_keys([word.word.word])
    return keys == spoken_keys([pending.word.word]) and all(keys != spoken_keys([c.word.word]) for c in committed)


def said_last(committed: Sequence[HeardWord]) -> str:
    """The last key of the committed words as said (see :func:`spoken_keys`), the word before
    the last one read with it: "cents" after "$42" ".50."."""
    return spoken_keys([w.word.word for w in committed[-2:]])[-1][-1]


def rest_of(word: HeardWord, said: Sequence[str], after: float) -> HeardWord:
    """The part ``said`` (word keys) of ``word``, from ``after`` on: the words it is said in
    ("cents." of "$42.50."), with its end punctuation and no tokens of its own."""
    text = word.word.word.rstrip()
    mark = text[len(text.rstrip(".,!?;:")) :]
    start = min(max(word.word.start, after), word.word.end)
    return replace(word, word=replace(word.word, word=" " + " ".join(said) + mark, start=start), tokens=())


def on_speech(words: Sequence[HeardWord], runs: Sequence[tuple[float, float]]) -> list[HeardWord]:
    """``words`` each laid over the speech under it: DTW stretches a word said alone over the
    silence around it, and the speech ``runs`` (absolute (start, end) stretches, by a voice
    activity model) say where it was said. A word that starts (or ends) more than
    ``WORD_EDGE_S`` before (or after) the speech under it is cut to that much of silence.
    Rounds that heard "Five. ... Nine." with seconds of silence around them laid "5" over
    2.0-5.6 s (said at 3.1-3.6 s) and "9" over 3.7-7.5 s (said at 6.1-6.5 s): behind the
    committed "5", "9" started too deep inside the committed words to be new. A word over no
    speech at all stays where it is."""
    out = []
    for w in words:
        under = [(a, b) for a, b in runs if a < w.word.end and b > w.word.start]
        if not under:
            out.append(w)
            continue
        start = under[0][0] - WORD_EDGE_S if under[0][0] - w.word.start > WORD_EDGE_S + 1e-6 else w.word.start
        end = under[-1][1] + WORD_EDGE_S if w.word.end - under[-1][1] > WORD_EDGE_S + 1e-6 else w.word.end
        out.append(w if (start, end) == (w.word.start, w.word.end) else
                   replace(w, word=replace(w.word, start=start, end=end)))
    return out


def where_spoken(words: Sequence[HeardWord], speech: Callable[[float, float], float], end: float,
                 quiet_s: float) -> list[HeardWord]:
    """``words`` (heard in audio that ends at ``end``), each heard where its spoken tokens were
    when the punctuation after them was read off silence (no ``speech`` within
    ``SILENT_READ_S`` of it, or past the end of the audio) and the audio ends in ``quiet_s`` of
    silence. A sentence's closing punctuation attends to the silence after it, near the end of
    what a round heard, however much of it there is: read as where the word was heard, it held
    "hair." back until 1.2-2 s of audio after it, 0.4 s being the margin. Punctuation read off
    speech, or with speech near the end of the audio, still counts: Whisper writes "sixty
    seven cents" as "$17.67.", whose period waits for "cents" after the pause before it."""
    if speech(end - quiet_s, end):
        return list(words)
    return [replace(w, heard_at=w.spoken_at)
            if w.spoken_at is not None and not speech(w.heard_at - SILENT_READ_S, w.heard_at + SILENT_READ_S)
            else w for w in words]


def mostly_after(word: HeardWord, time: float) -> bool:
    """Whether most of ``word`` lies after absolute ``time`` (within ``TIME_TOLERANCE_S``): DTW
    squeezes the times of words at the end of a buffer, so a start alone may fall a little early."""
    return (word.word.start + word.word.end) / 2 >= time - TIME_TOLERANCE_S


def spoken_length(words: Sequence[HeardWord], speech: Callable[[float, float], float], end: float) -> int:
    """How many of ``words`` (heard in audio that ends at ``end``) to keep: all but the last
    ones that no speech lies near (``speech``: seconds of speech between two times, by a voice
    activity model). Over hiss, hum or music after speech, Whisper writes "you." or the prompt's
    words again ("And so my"), and two rounds agree on them. A word before a spoken one stays,
    wherever DTW put it: after a long pause, "The" of "The most" may be placed seconds before
    its speech."""
    n = len(words)
    while n and not speech(words[n - 1].word.start - UNSPOKEN_S, min(end, words[n - 1].word.end + UNSPOKEN_S)):
        n -= 1
    return n


def stretched_at(words: Sequence[HeardWord], speech: Callable[[float, float], float]) -> int:
    """Index of the first of ``words`` whose span holds more than ``MAX_WORD_SPEECH_S`` of speech
    (``speech``: seconds of speech between two times, by a voice activity model); ``len(words)``
    if none. Whisper sometimes writes the first word of a sentence it cannot make out and stops,
    and DTW lays that word over the whole sentence ("The" over 2.9 s of "Turn the volume down to
    nine"): committed, its end would put the sentence behind the committed words, lost. Words
    from it on wait for a round that hears them. A number in digits may span more speech (see
    :func:`speech_allowance`)."""
    return next((i for i, w in enumerate(words) if speech(w.word.start, w.word.end) > speech_allowance(w.word.word)),
                len(words))


def at_instant(word: HeardWord) -> bool:
    """Whether DTW lays ``word`` over less than ``INSTANT_S`` of audio: no audio of its own."""
    return word.word.end - word.word.start < INSTANT_S


def instant_in_silence_at(words: Sequence[HeardWord], speech: Callable[[float, float], float]) -> int:
    """Index of the first of ``words`` that DTW lays over less than ``INSTANT_S`` of audio with
    no speech (``speech``: seconds of it between two times, by a voice activity model) within
    ``WORD_EDGE_S`` of it; ``len(words)`` if none. Prompted with a list ("Red, green, blue"),
    the decoder may go on with it where the audio holds none ("Yellow, blue," after "Yellow."
    said, the "blue," at 20 ms of the silence after it), and the next round agrees. A word said
    has audio and speech of its own. Words from it on are not committed before a round hears
    them."""
    return next((i for i, w in enumerate(words) if at_instant(w)
                 and not speech(w.word.start - WORD_EDGE_S, w.word.end + WORD_EDGE_S)), len(words))


def unfinished_at(words: Sequence[HeardWord], speech: Callable[[float, float], float], end: float) -> int:
    """``len(words) - 1`` when the speech under the last of ``words`` runs on without a pause to
    ``end`` (the end of the audio its round heard; ``speech``: seconds of speech between two
    times, by a voice activity model), else ``len(words)``. A round whose audio ends while a long
    word is said writes its start as a word ("Finalize" of "finalization"), complete by the text's
    end; committed, the rest of the word is heard next as the word again. A word said ends at a
    pause or is followed by the next word written: until then the last word waits."""
    if not words:
        return 0
    last = words[-1].word.end
    return len(words) - 1 if end - last > 0 and speech(last, end) >= end - last - WORD_SOUND_S else len(words)


def silent_copy_at(words: Sequence[HeardWord], speech: Callable[[float, float], float],
                   before: Sequence[HeardWord] = ()) -> int:
    """Index of the first of ``words`` that repeats the word before it (the last of ``before``,
    the committed word, for the first) over less than ``COPY_SPEECH_S`` of speech (numbers
    spelled or in digits alike; ``speech``: seconds of speech between two times, by a voice
    activity model); ``len(words)`` if none. A word said again after a pause ("Again. ...
    Again.") is written as a loop of copies, one more than was said, and DTW gives each copy
    audio of its own, the extra one the silence beside a saying: committed, it is a word never
    said. Words from it on wait for a round that hears them. A word said twice ("very very")
    has speech under each saying."""
    lead = len(before[-1:])
    keys = said_keys([*before[-1:], *words])
    return next((i for i in range(1 - lead, len(words))
                 if keys[i + lead] == keys[i + lead - 1]
                 and speech(words[i].word.start, words[i].word.end) < COPY_SPEECH_S),
                len(words))


def without_silent_copies(words: Sequence[HeardWord], speech: Callable[[float, float], float],
                          before: Sequence[HeardWord] = ()) -> list[HeardWord]:
    """``words`` of a stream's final hearing without each copy of the word before it laid over
    silence (see :func:`silent_copy_at`; ``before``: the committed words). A round holds such a
    copy back for the next round to hear again; the final hearing has no next: "... Snooze.
    Stop." was heard as "stop. stop.", the second at an instant after the one saying."""
    kept = list(words)
    while (k := silent_copy_at(kept, speech, before)) < len(kept):
        log.debug("dropped %r: repeats the word before it over silence", kept[k].word.word)
        del kept[k]
    return kept


def without_silent_runs(words: Sequence[HeardWord], speech: Callable[[float, float], float]) -> list[HeardWord]:
    """``words`` of a stream's final hearing without every run of words written at one instant
    (see :func:`~stenoflow.streaming.live_round.unheard_run`) with no speech (``speech``: seconds
    of it between two times, by a voice activity model) within ``SILENT_READ_S`` of that
    instant. A round leaves such runs at the end of its audio to the next, since speech heard
    in part is squeezed there; the final hearing has no next, and its audio ends in the
    silence after the last word, where tiny.en wrote "Power. Enter. Power. Power." after the
    "Enter." said. Over speech the stream ended in, a run stays: those words were said. There,
    too, a last word at an instant over silence goes, one word being run enough after the last
    sound: tiny.en heard "That's all." alone as "All right.", the "right." 0.27 s past the speech."""
    kept = list(words)

    def silent(at: float) -> bool:
        return not speech(at - SILENT_READ_S, at + SILENT_READ_S)

    while (run := unheard_run(kept, silent)) is not None:
        log.debug("dropped %r: written at one instant over silence", "".join(w.word.word for w in kept[run[0]:run[1]]))
        kept = kept[: run[0]] + kept[run[1] :]
    while kept and kept[-1].word.start == kept[-1].word.end and silent(kept[-1].word.end):
        log.debug("dropped %r: the last word, written at an instant over silence", kept[-1].word.word)
        kept.pop()
    return kept


def speech_allowance(word: str) -> float:
    """The most speech one written word may span: ``MAX_WORD_SPEECH_S``, and ``DIGIT_SPEECH_S``
    more for each digit of a number, which is said in several words ("1984", "$17.67")."""
    return MAX_WORD_SPEECH_S + DIGIT_SPEECH_S * sum(ch.isdigit() for ch in word)


def said_keys(words: Sequence[HeardWord]) -> list[str]:
    """The words' comparison keys, a number spelled or in digits alike ("seven", "7.")."""
    return [same_number(word_key(w.word.word)) for w in words]


def echo_length(words: Sequence[HeardWord], committed: Sequence[HeardWord]) -> int:
    """How many words at the start of ``words`` repeat the last committed words (numbers spelled
    or in digits alike): the longest verbatim repeat of two or more; one when ``words`` are
    nothing but the last committed word again (the decoder looping on it: "Seven. 7. 7."); else
    0. A single word said twice before others ("That that is") is speech too often to drop."""
    keys = said_keys(words)
    ends = said_keys(committed[-len(keys):]) if keys else []
    for k in range(min(len(keys), len(ends)), 1, -1):
        if keys[:k] == ends[len(ends) - k:]:
            return k
    return 1 if ends and all(key == ends[-1] for key in keys) else 0


def echo_at(fresh: Sequence[HeardWord], committed: Sequence[HeardWord], committed_end: float, end: float,
            sound: Sound, said: Sound) -> int:
    """How many words at the start of ``fresh`` (the words after the committed ones, in audio
    that ends at ``end``) are the decoder's echo of the committed words: the committed words said
    once more (see :func:`echo_length`, "Seven. 7.") or the last sentence started over (see
    :func:`restart_length`), where ``sound`` (seconds of sound said after a pause) finds too
    little from the committed end to the next word (or ``end``) for them to have been said
    again; else 0. Sound still under way at the committed end is the rest of the committed
    saying, which DTW often ends early ("cart" ended 0.4 s before its sound did, and its echo
    was committed over that rest), so it does not count; a speaker who says the words again
    ("you, you know") pauses, however briefly, before them, or says them again and again (see
    :func:`said_again`; ``said``: seconds of sound, whether after a pause or not)."""
    k = echo_length(fresh, committed) or restart_length(fresh, committed)
    if not k or said_again(fresh, committed, said):
        return 0
    until = fresh[k].word.start if k < len(fresh) else end
    return 0 if sound(committed_end, until) >= ECHO_SOUND_S else k


def said_again(fresh: Sequence[HeardWord], committed: Sequence[HeardWord], sound: Sound) -> bool:
    """Whether ``fresh`` opens with two or more copies of the last committed word, each laid over
    ``SAID_COPY_S`` of ``sound`` of its own, and together over more than twice the sound of that
    word as committed: a word said again and again without a pause ("words words words words"),
    where the decoder's echo lies at an instant, or over the rest of one saying, which DTW ended
    early ("cart" committed over 0.3 s of its sound, its echo over the last 0.4 s)."""
    if not committed:
        return False
    last = committed[-1].word
    key = said_keys(committed[-1:])[0]
    keys = said_keys(fresh)
    m = next((i for i, k in enumerate(keys) if k != key), len(keys))
    copies = fresh[:m]
    return (m >= 2 and all(sound(w.word.start, w.word.end) >= SAID_COPY_S for w in copies)
            and sound(copies[0].word.start, copies[-1].word.end) > 2 * sound(last.start, last.end))


def restart_length(words: Sequence[HeardWord], committed: Sequence[HeardWord]) -> int:
    """``len(words)`` when ``words`` are nothing but the start of the last committed sentence
    again (the decoder starting it over: "Open" after "Open the front door."), else 0."""
    keys = said_keys(words)
    start = next((i for i in range(len(committed) - 1, 0, -1)
                  if committed[i - 1].word.word.rstrip().endswith(SENTENCE_END)), 0)
    sentence = said_keys(committed[start:])
    return len(keys) if keys and len(keys) < len(sentence) and sentence[: len(keys)] == keys else 0


def final_words(heard: list[HeardWord], tail: list[HeardWord], sound_to: Callable[[float], float],
                committed: Sequence[HeardWord] = (), tail_alone: bool = False,
                runs: Sequence[tuple[float, float]] = (), after_pause: Sound | None = None) -> list[HeardWord]:
    """What a stream's final hearing ``heard`` commits in place of ``tail``, the words the last
    round, in context, left unconfirmed.

    Alone, a second of audio can make Whisper write anything ("country" as "I'm afraid."): a
    final hearing that shares no word with ``tail`` does not replace it, unless ``tail`` writes
    ``committed`` words again (see :func:`repeats_committed`: "The Queen of Hearts" over
    "Done.", whether the final hearing heard it or nothing, or words it was unsure of over less
    than ``ECHO_SOUND_S`` of sound), or unless it writes more words than ``tail`` and a word of
    ``tail`` lies over a pause between two stretches of speech (see :func:`over_pause`; ``runs``:
    the speech): no word is said across a pause, and the last round wrote one word where two
    things were said ("meters", a word of its prompt, over "Down. ... Enter."); or unless
    ``tail`` has more words than the sound after the committed words could hold and the final
    hearing does not (see :func:`fits_sound`): prompted with a recipe, the last round wrote
    "Add 1 cup of sugar." over the 0.3 s of "Done.", the final hearing "Done.". The words it puts
    after the last of ``tail`` over sound there follow it; with ``after_pause`` (seconds of sound
    after a pause between two times), only sound after a pause counts: quiet, "Never mind." was heard
    alone as "Reminds me." laid over the rest of "mind", whose time ran early. Where the last
    round heard no word before one the final hearing heard too, the final hearing's words before
    it are the end of the last committed word heard alone ("forward ... were 10 meters"; "listening"
    ... "the ring. Good."), unless there is sound for them, or before the last round's first word,
    after a pause (the last round laid "Hello?" early, deaf to "Is anyone there?" said after
    eight seconds of silence). One that shares a word is taken, without the words it puts
    after the last of ``tail`` over less sound than a word ("that load." over "that?"), and
    with its start as the last round heard it: heard alone from the end of the last committed
    word, whose time runs early, the rest of that word becomes a word of its own ("forward" ...
    "were 10 meters") or merges into the next one ("for" and "25" as "425"). Where both put
    words of their own before the first word both heard alike, the last round's stand; where
    only the final hearing does, they stand if ``sound_to`` (seconds of sound from the committed
    end to a time) finds a word's worth before the last round's first word: the last round, in
    context, may have been deaf to them. Where only the last round does, they stand if there is
    sound for them: alone, Whisper may have been deaf to them; so do the last round's words
    after the final hearing's last word (see :func:`heard_past`).

    Where ``tail`` writes committed words again after words of its own that the last round
    was sure of on the whole, only those are the tail ("go straight." then the prompt again,
    at an instant past the speech).

    All this holds for a last round that heard ``tail`` in context. Where ``tail_alone``, a deaf
    round's retry heard it alone, in a short window: the final hearing, of the same audio alone
    but through to its last sound and padded as Whisper was trained, replaces it ("of the Father
    of the Father of" written over "... down to nine" by a retry, "high." by the final hearing),
    except the words before its first one that the retry was sure of and heard over sound."""
    keys = [word_key(w.word.word) for w in tail]
    if tail_alone:
        # Both heard the audio alone: of the words the final hearing laid its first one over,
        # those the retry was sure of stand.
        kept = [w for w in tail[: laid_over(heard, keys, tail, sound_to)] if w.word.probability >= SURE_ALONE_P]
        log.debug("final hearing %r in place of %r, heard alone by a retry%s", "".join(w.word.word for w in heard),
                  "".join(w.word.word for w in tail), f"; kept {''.join(w.word.word for w in kept)!r}" if kept else "")
        return [*kept, *heard]
    r = committed_run_at(tail, committed)
    if 0 < r < len(tail) and sum(w.word.probability for w in tail[:r]) >= r * SURE_ALONE_P:
        # In context, the last round heard words, then wrote the prompt again: those words are
        # the tail ("go straight." then "Turn left at the next light. then go straight." at
        # the audio's end, over "Then go straight." with "Then" committed), where it was sure
        # of them; else they are the start of the copy ("Add 1 cup of flour. Stir." after "Add
        # two cups of flour. Stir.", unsure of "Add 1 cup").
        log.debug("set aside %r: writes committed words again", "".join(w.word.word for w in tail[r:]))
        return final_words(heard, tail[:r], sound_to, committed, tail_alone, runs, after_pause)
    heard_keys = [word_key(w.word.word) for w in heard]
    i = next((k for k, key in enumerate(heard_keys) if key in keys), None)
    if i is None:
        if r < len(tail):
            # ... and so may its final hearing, of the end of the last committed word alone:
            # words it was unsure of, over less sound than a word, were not said ("I'm sorry."
            # over the last 0.5 s of "... orange. ... White.").
            unsure = all(w.word.probability < SURE_ALONE_P for w in heard)
            said = [] if heard and unsure and sound_to(heard[-1].word.end) < ECHO_SOUND_S else heard
            log.debug("final hearing %r in place of %r, which writes committed words again",
                      "".join(w.word.word for w in said), "".join(w.word.word for w in tail))
            return said
        if heard and all(at_instant(w) for w in tail):
            log.debug("final hearing %r in place of %r, which has no audio of its own",
                      "".join(w.word.word for w in heard), "".join(w.word.word for w in tail))
            return heard
        if len(heard) > len(tail) and any(over_pause(w, runs) for w in tail):
            log.debug("final hearing %r in place of %r, which lies one word over a pause",
                      "".join(w.word.word for w in heard), "".join(w.word.word for w in tail))
            return heard
        sound = sound_to(max(w.word.end for w in (*tail, *heard)) + WORD_EDGE_S)
        if heard and not fits_sound(tail, sound) and fits_sound(heard, sound):
            log.debug("final hearing %r in place of %r, more words than %.2f s of sound holds",
                      "".join(w.word.word for w in heard), "".join(w.word.word for w in tail), sound)
            return heard
        # The last round stands; what the final hearing heard after its last word, over sound
        # there, the last round had not heard yet. Sound still under way at that word's end,
        # which runs early, is the rest of it (``after_pause``).
        k, fresh = past_tail(heard, 0, tail, sound_to, after_pause)
        if not fresh:
            return tail
        log.debug("kept %r, then %r heard alone after it", "".join(w.word.word for w in tail),
                  "".join(w.word.word for w in heard[k:]))
        return [*tail, *heard[k:]]
    j = keys.index(heard_keys[i])
    # So, where the two share a word, are the words the final hearing writes after the last
    # round's last word: over "that?", heard alone as "that load.", "load." had 0.1 s of sound.
    again = [q for q, key in enumerate(heard_keys) if key == keys[-1]]  # the last round's last word
    k, fresh = past_tail(heard, max([i, *again]) + 1, tail, sound_to)
    if k < len(heard) and not fresh:
        log.debug("dropped %r: heard alone after %r, over too little sound", "".join(w.word.word for w in heard[k:]),
                  tail[-1].word.word)
        heard = heard[:k]
    words = heard
    if i and j and tail[j - 1].word.start <= heard[i].word.start:
        log.debug("heard alone %r where the last round heard %r: kept the last round's",
                  "".join(w.word.word for w in heard[:i]), "".join(w.word.word for w in tail[:j]))
        words = [*tail[:j], *heard[i:]]
    elif not i and laid_over(heard, keys, tail, sound_to):  # the last round, in context, heard them over sound
        log.debug("kept %r: the last round heard it before %r, over sound the final hearing missed",
                  "".join(w.word.word for w in tail[:j]), heard[0].word.word)
        first = heard[0].word
        start = min(max(first.start, tail[j].word.start), first.end)
        words = [*tail[:j], replace(heard[0], word=replace(first, start=start)), *heard[1:]]
    elif i and not j and (sound_to(tail[0].word.start) if after_pause is None or not committed else after_pause(
            committed[-1].word.end, max(tail[0].word.start, heard[i - 1].word.end))) < ECHO_SOUND_S:
        log.debug("dropped %r: the end of the last committed word, heard alone",
                  "".join(w.word.word for w in heard[:i]))
        words = heard[i:]
    after = heard_past(heard, keys, tail, sound_to)
    if after:
        log.debug("kept %r: the last round heard it after %r, over sound the final hearing missed",
                  "".join(w.word.word for w in after), heard[-1].word.word)
    return [*words, *after]


def past_tail(heard: Sequence[HeardWord], first: int, tail: Sequence[HeardWord],
              sound_to: Callable[[float], float], after_pause: Sound | None = None) -> tuple[int, bool]:
    """Index of the first of the final hearing's words ``heard[first:]`` that lies mostly after
    ``tail``'s last word, the last round's (``len(heard)`` if none), and whether those words
    have ``ECHO_SOUND_S`` of sound between the end of that word and the end of ``heard``
    (``sound_to``, as in :func:`final_words`; with ``after_pause``, only sound after a pause
    counts). The last round heard the stream to its end, in context: alone, Whisper writes a
    word past it over the end of its last word, or its punctuation."""
    end = tail[-1].word.end
    k = next((k for k in range(first, len(heard)) if mostly_after(heard[k], end)), len(heard))
    if k == len(heard):
        return k, False
    last = heard[-1].word.end
    fresh = sound_to(last) - sound_to(end) if after_pause is None else after_pause(end, last)
    return k, fresh >= ECHO_SOUND_S


def fits_sound(words: Sequence[HeardWord], sound: float) -> bool:
    """Whether ``words`` could have been said in ``sound`` seconds of sound: each takes at least
    ``WORD_SOUND_S`` of it, faster than anyone speaks."""
    return len(words) * WORD_SOUND_S <= sound + 1e-9


def runs_within(runs: Sequence[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of the speech ``runs`` (absolute (start, end) stretches, in order) between ``lo``
    and ``hi`` that are not empty."""
    return [(max(a, lo), min(b, hi)) for a, b in runs if max(a, lo) < min(b, hi)]


def over_pause(word: HeardWord, runs: Sequence[tuple[float, float]]) -> bool:
    """Whether ``word`` lies over a pause: over ``COPY_SPEECH_S`` of speech or more on either
    side of at least ``WORD_PAUSE_S`` of silence (``runs``: absolute (start, end) stretches of
    speech, in order). DTW stretches a word said alone over the silence around it, not over the
    speech of another word beyond it."""
    under = runs_within(runs, word.word.start, word.word.end)
    return any(b1 - a1 >= COPY_SPEECH_S and b2 - a2 >= COPY_SPEECH_S and a2 - b1 >= WORD_PAUSE_S
               for i, (a1, b1) in enumerate(under) for a2, b2 in under[i + 1 :])


def laid_over(heard: Sequence[HeardWord], keys: Sequence[str], tail: Sequence[HeardWord],
              sound_to: Callable[[float], float]) -> int:
    """How many of ``tail``'s words (``keys``) the final hearing ``heard`` laid its first word
    over: alone, Whisper may miss a short word before the next one and lay that one over both
    ("Enter" over "Down. ... Enter."). 0 unless its first word is a later word of ``tail`` with
    sound for the words before it (``sound_to``, as in :func:`final_words`): ``WORD_SOUND_S``
    for each, up to ``ECHO_SOUND_S`` (tiny.en heard "it" of "Put it in my calendar." in
    context, over 0.16 s of sound, and alone "in my calendar.")."""
    first = word_key(heard[0].word.word) if heard else None
    j = keys.index(first) if first in keys else 0
    return j if j and sound_to(tail[j].word.start) >= min(ECHO_SOUND_S, j * WORD_SOUND_S) else 0


def heard_past(heard: Sequence[HeardWord], keys: Sequence[str], tail: Sequence[HeardWord],
               sound_to: Callable[[float], float]) -> list[HeardWord]:
    """The words of ``tail`` (``keys``) after the last word of the final hearing ``heard``, where
    ``tail`` holds that word and there is sound under them (``sound_to``, as in
    :func:`final_words`): alone, Whisper may lay its last word over the words after it too
    ("pause" over "Pause. ... Next."), as it lays its first word over those before it (see
    :func:`laid_over`). Empty otherwise."""
    last = word_key(heard[-1].word.word)
    k = next((k for k in range(len(keys) - 1, -1, -1) if keys[k] == last), len(keys))
    rest = list(tail[k + 1 :])
    return rest if rest and sound_to(rest[-1].word.end) - sound_to(rest[0].word.start) >= ECHO_SOUND_S else []


def repeats_committed(words: Sequence[HeardWord], committed: Sequence[HeardWord]) -> bool:
    """Whether ``words`` hold a run of ``PROMPT_COPY_WORDS`` words that ``committed`` holds too.
    Conditioned on its prompt, over speech it cannot make out, Whisper writes the prompt again
    ("Go forward 10 meters." over "Down. Enter."); unconditioned, it does not."""
    return committed_run_at(words, committed) < len(words)


def committed_run_at(words: Sequence[HeardWord], committed: Sequence[HeardWord]) -> int:
    """Index of the first of ``words`` that starts a run of ``PROMPT_COPY_WORDS`` words that
    ``committed`` holds too (see :func:`repeats_committed`); ``len(words)`` if none."""
    def runs(ws: Sequence[HeardWord]) -> list[tuple[str, ...]]:
        keys = said_keys(ws)
        return [tuple(keys[k : k + PROMPT_COPY_WORDS]) for k in range(len(keys) - PROMPT_COPY_WORDS + 1)]

    held = set(runs(committed))
    return next((k for k, run in enumerate(runs(words)) if run in held), len(words))


def copies_prompt(words: Sequence[HeardWord], tail: Sequence[HeardWord], committed: Sequence[HeardWord]) -> bool:
    """Whether a round's new ``words`` write ``committed`` words again (see
    :func:`repeats_committed`) in place of ``tail``, the words the last round left unconfirmed,
    sharing none of them. A speaker may say a phrase again, but its words then come after the
    unconfirmed ones, or as them."""
    return bool(tail) and not set(said_keys(words)) & set(said_keys(tail)) and repeats_committed(words, committed)


def drop_clipped_repeat(words: list[HeardWord], last: Sequence[HeardWord], window_s: float = 0.4,
                        sound: Sound | None = None) -> list[HeardWord]:
    """Without context, a decoding that starts right at the end of the last committed word
    may hear that word (or its ending: "$17.67" as "7") again: drop such a first word, unless
    ``sound`` (seconds of sound said after a pause, between two times) finds a word's worth of
    it from the committed end to the word after it: the speaker said it again ("Again. ...
    Again."; the last word of a hypothesis waits for one), as :func:`echo_at` judges an echo. So is a first
    word that lies mostly inside the last committed word and is a variant of it ("knock" heard
    again as "knack", "trap" as "strap", "eight" as "8"): the same audio written another way.
    ``last`` ends with the last committed word, and may hold words before it: the amount it is
    the cents of (".50." after "$42" ends in "cents", said; see :func:`spoken_keys`)."""
    if not words or not last:
        return words
    prev, first = same_number(word_key(last[-1].word.word)), same_number(word_key(words[0].word.word))
    said = same_number(said_last(last))
    w, last_end = words[0].word, last[-1].word.end
    if not first:
        return words
    repeats = first in (prev, said)
    if w.start < last_end + window_s and (repeats or ((len(first) >= 2 or is_number(first))
                                                      and prev.endswith(first))):
        until = words[1].word.start if len(words) > 1 else w.end
        if repeats and sound is not None and sound(last_end, until) >= ECHO_SOUND_S:
            return words
        return words[1:]
    if (w.start + w.end) / 2 < last_end and is_variant(prev, first):
        return words[1:]
    return words


_NUMBERS = {name: str(i) for i, name in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"))}


def same_number(key: str) -> str:
    """A word key with a spelled number up to twenty in digits ("seven" and "7" alike)."""
    return _NUMBERS.get(key, key)


def is_number(key: str) -> bool:
    """Whether a word key holds a number written in digits ("457", "1767", "4x2s")."""
    return any(ch.isdigit() for ch in key)


def is_variant(a: str, b: str) -> bool:
    """Whether two word keys are one word written two ways: the same number (spelled or in
    digits), one a longer form of the other at its start ("trap", "strap"), or, for words of
    four letters or more, one letter apart ("knock", "knack"; "risk", "risks")."""
    if same_number(a) == same_number(b):
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) < 3 or len(long_) - len(short) > 1:
        return False
    if long_.endswith(short):
        return True
    return len(short) >= 4 and _one_edit(short, long_)


def _one_edit(short: str, long_: str) -> bool:
    """``long_`` is ``short`` with one letter changed (same length) or inserted."""
    if len(short) == len(long_):
        return sum(x != y for x, y in zip(short, long_, strict=True)) == 1
    i = next((k for k, (x, y) in enumerate(zip(short, long_, strict=False)) if x != y), len(short))
    return short[i:] == long_[i + 1:]
