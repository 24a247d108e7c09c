"""The language of a live stream whose language was not given: detected, then kept with hysteresis.

Every round of such a stream reads Whisper's language probabilities off its encoded buffer (one
decoder step after <|startoftranscript|>, no prompt). The first round that heard
``DETECT_SPEECH_S`` of speech fixes the stream's language; rounds before it decode in the
language their own buffer sounds most like. After that the language changes only when another
one leads, each round at least ``SWITCH_PROB`` likely, over ``SWITCH_SPEECH_S`` of new speech in
a row: one round that hears a name or a borrowed word is not a switch. The words committed
before a switch keep the language they were heard in. Pure logic, tested without a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DETECT_SPEECH_S = 1.0  # speech a buffer holds before its language is taken for the stream's
SWITCH_PROB = 0.5  # another language leads with at least this probability ...
SWITCH_SPEECH_S = 1.0  # ... over this much new speech, round after round: the stream switches
LANGUAGE_WINDOW_S = 2.0  # once known, the language is read off at least the buffer's last 2 s


@dataclass
class LanguageTrack:
    """The stream's language so far (None: not detected yet) and the evidence for a switch."""

    current: str | None = None
    candidate: str | None = None  # the language that led the rounds since the last that agreed
    candidate_s: float = 0.0  # new speech those rounds heard
    switches: int = 0

    def observe(self, probs: Mapping[str, float], buffer_speech_s: float, new_speech_s: float) -> bool:
        """Take one round's language probabilities; ``buffer_speech_s``: speech in its buffer,
        ``new_speech_s``: speech in the audio no round heard before it. True if the stream's
        language changed (or was first detected)."""
        if not probs:
            return False
        best = max(probs, key=probs.__getitem__)
        if self.current is None:
            if buffer_speech_s < DETECT_SPEECH_S:
                return False
            self.current = best
            return True
        if best == self.current or probs[best] < SWITCH_PROB:
            self.candidate, self.candidate_s = None, 0.0
            return False
        if best != self.candidate:
            self.candidate, self.candidate_s = best, 0.0
        self.candidate_s += new_speech_s
        if self.candidate_s < SWITCH_SPEECH_S:
            return False
        self.current, self.candidate, self.candidate_s = best, None, 0.0
        self.switches += 1
        return True

    def for_round(self, probs: Mapping[str, float]) -> str:
        """The language a round decodes in: the stream's, or before it is known the one the
        round's own ``probs`` favour."""
        return self.current if self.current is not None else max(probs, key=probs.__getitem__)
