"""The language of a live stream whose language was not given: detected, then kept with hysteresis.

Every round of such a stream reads Whisper's language probabilities off the speech it asks about
(one decoder step after <|startoftranscript|>, no prompt). The stream's language is fixed by the
first round whose buffer holds ``DETECT_SPEECH_S`` of speech and that is at least ``DETECT_PROB``
sure of one language, or by the round that has heard ``SURE_SPEECH_S`` whatever its doubt; rounds
before it decode in the language their own buffer sounds most like.

After that the language changes only on held evidence, as a cumulative-sum test: each round adds
``log(p(other) / p(current))`` (clipped to ``MAX_RATIO``) times the seconds of new speech it
heard to the evidence for the language that leads it, and a round where the current language
leads takes the evidence back down. The stream switches once the evidence reaches
``SWITCH_EVIDENCE``: under two seconds of speech another language is far likelier in, or
several seconds of a close call. A round asks about at least the buffer's last
``LANGUAGE_WINDOW_S``: over two seconds Whisper's identification of one telephone voice wavers
(Mexican Spanish read as Portuguese, English or Swedish for a round or three), over four it
holds. The words
committed before a switch keep the language they were heard in. Pure logic, tested without a model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

DETECT_SPEECH_S = 1.0  # speech a buffer holds before its language may be taken for the stream's ...
DETECT_PROB = 0.6  # ... if the round is this sure of it
SURE_SPEECH_S = 3.0  # or, whatever the doubt, once a buffer holds this much
MAX_RATIO = 1.5  # most log-probability ratio one round counts (nats): one round is not a switch
SWITCH_EVIDENCE = 2.5  # nat-seconds of new speech another language leads by: the stream switches
LANGUAGE_WINDOW_S = 4.0  # once known, the language is read off at least the buffer's last 4 s


@dataclass
class LanguageTrack:
    """The stream's language so far (None: not detected yet) and the evidence for a switch."""

    current: str | None = None
    candidate: str | None = None  # the language the evidence is for
    evidence: float = 0.0
    switches: int = 0

    def observe(self, probs: Mapping[str, float], buffer_speech_s: float, new_speech_s: float) -> bool:
        """Take one round's language probabilities; ``buffer_speech_s``: speech in its buffer,
        ``new_speech_s``: speech in the audio no round heard before it. True if the stream's
        language changed (or was first detected)."""
        if not probs:
            return False
        best = max(probs, key=probs.__getitem__)
        if self.current is None:
            sure = buffer_speech_s >= DETECT_SPEECH_S and probs[best] >= DETECT_PROB
            if not (sure or buffer_speech_s >= SURE_SPEECH_S):
                return False
            self.current = best
            return True
        floor = 1e-6
        if best == self.current:
            runner = max((k for k in probs if k != best), key=probs.__getitem__, default=None)
            lead = math.log(max(probs[best], floor) / max(probs.get(runner, 0.0) if runner else floor, floor))
            self.evidence = max(0.0, self.evidence - min(lead, MAX_RATIO) * new_speech_s)
            return False
        ratio = min(MAX_RATIO, math.log(max(probs[best], floor) / max(probs.get(self.current, 0.0), floor)))
        if best != self.candidate:
            self.candidate, self.evidence = best, 0.0
        self.evidence += ratio * new_speech_s
        if self.evidence < SWITCH_EVIDENCE:
            return False
        self.current, self.candidate, self.evidence = best, None, 0.0
        self.switches += 1
        return True
