"""A stream's language, detected and kept with hysteresis, and what the options refuse; no model."""

from __future__ import annotations

import pytest

from stenoflow.streaming.language import DETECT_SPEECH_S, SURE_SPEECH_S, LanguageTrack
from stenoflow.streaming.options import StreamOptions

ES = {"es": 0.9, "en": 0.05, "fr": 0.05}
EN = {"en": 0.85, "es": 0.1, "fr": 0.05}
UNSURE_FR = {"fr": 0.4, "en": 0.35, "es": 0.25}


def test_the_language_is_taken_once_the_buffer_holds_enough_speech_and_the_round_is_sure() -> None:
    track = LanguageTrack()
    assert not track.observe(ES, DETECT_SPEECH_S / 2, DETECT_SPEECH_S / 2)
    assert track.current is None
    assert not track.observe(UNSURE_FR, DETECT_SPEECH_S, 0.3)  # enough speech, but unsure
    assert track.observe(ES, DETECT_SPEECH_S, 0.3)
    assert track.current == "es" and track.switches == 0
    unsure = LanguageTrack()
    assert unsure.observe(UNSURE_FR, SURE_SPEECH_S, 0.3) and unsure.current == "fr"  # heard long enough


def test_one_round_of_another_language_is_no_switch_and_a_held_one_is() -> None:
    track = LanguageTrack(current="es")
    step = 0.35  # a round every 0.35 s of speech
    assert not track.observe(EN, 3.0, step)  # a name, a borrowed word
    assert not track.observe(ES, 3.0, step)  # back: the evidence is taken down again
    assert track.evidence == 0.0
    for _ in range(4):
        assert not track.observe(EN, 3.0, step)
    assert track.current == "es"
    assert track.observe(EN, 3.0, step)  # under two seconds of speech far likelier English
    assert track.current == "en" and track.switches == 1


def test_a_close_call_and_silent_rounds_do_not_switch() -> None:
    track = LanguageTrack(current="en")
    for _ in range(10):  # ten seconds of French just ahead of English
        assert not track.observe(UNSURE_FR, 3.0, 1.0)
    for _ in range(10):
        assert not track.observe(ES, 3.0, 0.0)  # no new speech: no new evidence
    assert track.current == "en"


def test_language_and_task_are_checked() -> None:
    assert StreamOptions(language="auto").detects_language
    assert StreamOptions(language=None).detects_language
    assert not StreamOptions().detects_language
    with pytest.raises(ValueError, match="task"):
        StreamOptions(task="summarize")


def test_text_in_any_script_is_compared_without_case_accents_or_punctuation() -> None:
    from stenoflow.bench.language_bench import error_rates, neutral

    assert neutral("¡Él está aquí!  Ça va?") == "el esta aqui ca va"
    assert neutral("Appuyez sur deux.") == neutral("appuyez sur 2") and neutral("Trés") == "3"
    assert neutral("Введите пароль.") == neutral("введите ПАРОЛЬ")  # Cyrillic kept, not wiped
    wer, cer, words, chars = error_rates("Введите пароль конференции", "Введите пароли конференции")
    assert words == 3 and round(wer, 3) == round(1 / 3, 3)
    assert 0 < cer < wer and chars == len("Введитепарольконференции")


def test_switches_are_timed_in_speech_and_words_in_another_language_counted() -> None:
    from stenoflow.bench.language_bench import switches
    from stenoflow.streaming.drivers import EmittedWord

    sentences = [(0.0, 2.0, "uno dos"), (3.0, 5.0, "un deux"), (6.0, 8.0, "trois quatre")]
    languages = ["es", "fr", "fr"]
    heard = [EmittedWord(" uno", 0.2, 0.6, 1.0, "es"), EmittedWord(" dos", 1.0, 1.5, 2.0, "es"),
             EmittedWord(" un", 3.2, 3.6, 4.5, "es"),  # still in Spanish after the switch
             EmittedWord(" deux", 4.0, 4.5, 5.0, "fr"), EmittedWord(" trois", 6.2, 6.8, 7.0, "fr")]
    delays, wrong = switches(sentences, languages, heard)
    assert delays == [1.0] and wrong == 1
    late = [w for w in heard if w.word != " deux" and w.word != " trois"]
    assert switches(sentences, languages, late) == ([None], 1)
