"""A voice-command session: audio in, one final text per utterance out (PASU, seed 001).

``push(samples)`` runs the voice-activity detector over the new audio and the endpointer over its
probabilities, then does the work that is due:

* while the person speaks, a **pilot** every ``pilot_s`` of new audio (drafted by the previous one);
* at a pause, with ``final_in_hang``, the **final pass** on the utterance as it would be if it ended
  there: if the hang time runs out without more speech, that is the utterance's text, ready at the
  endpoint; if speech resumes, it drafts the next pilot;
* at the endpoint, the **offramp**: a hypothesis whose perplexity is above the offload threshold
  sends the waveform to the remote model (without a local final pass); otherwise the final pass
  (unless the hang already ran it) with beam collapse and early termination.

An utterance the model hears nothing in (noise, a cough that passed the detector) gives no event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from stenoflow.audio.io import validate_samples
from stenoflow.audio.vad import CHUNK, SileroVad
from stenoflow.utterance.endpoint import Endpointer, Kind, Mark
from stenoflow.utterance.offload import OffloadError
from stenoflow.utterance.options import UtteranceOptions
from stenoflow.utterance.passes import Hypothesis, UtteranceDecoder

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
Remote = Callable[[np.ndarray], str]  # transcribes an utterance's waveform on a larger model


@dataclass(frozen=True)
class Utterance:
    """One endpointed utterance and its text. Times are seconds since the stream began."""

    text: str
    start: float  # where its speech began
    end: float  # where its speech ended
    endpoint: float  # where the endpointer decided it was over (end + hang time, or the length cap)
    perplexity: float  # of the hypothesis the offramp judged
    offloaded: bool  # the text came from the remote model
    local_text: str  # what the local model heard (its final pass, or its last pilot if offloaded)
    pilots: int  # pilot decodings while it was spoken
    ready_at_endpoint: bool  # decoded in the hang time: no work was left at the endpoint
    compute_s: float  # local decoding time spent on it (pilots included)

    def to_dict(self) -> dict[str, object]:
        return {"text": self.text, "start": round(self.start, 3), "end": round(self.end, 3),
                "endpoint": round(self.endpoint, 3), "perplexity": round(self.perplexity, 4),
                "offloaded": self.offloaded, "local_text": self.local_text, "pilots": self.pilots,
                "ready_at_endpoint": self.ready_at_endpoint, "compute_s": round(self.compute_s, 4)}


class UtteranceSession:
    """Endpointing, pilots, the final pass and the offramp for one audio stream (16 kHz mono)."""

    def __init__(self, model: SpeechModel, options: UtteranceOptions, remote: Remote | None = None,
                 offload_perplexity: float = float("inf")) -> None:
        self.options = options
        self.decoder = UtteranceDecoder(model, options)
        self.remote = remote
        self.offload_perplexity = offload_perplexity
        self.vad = SileroVad()
        self.endpointer = Endpointer(options.endpoint, CHUNK)
        self.pre = round(options.endpoint.pre_s * SAMPLE_RATE)
        self.post = round(options.endpoint.post_s * SAMPLE_RATE)
        self.audio = np.zeros(0, dtype=np.float32)
        self.base = 0  # stream position of audio[0]
        self.received = 0  # samples pushed so far
        self.vad_at = 0  # stream position of the next chunk the detector scores
        self.finished = False
        self._reset()

    def _reset(self) -> None:
        self.draft: Hypothesis | None = None  # the newest decoding of the open utterance
        self.pilots = 0
        self.compute_s = 0.0
        self.pilot_at = 0  # stream position the last pilot heard up to
        self.pause: int | None = None  # where the open utterance's speech paused
        self.hang: tuple[int, Hypothesis] | None = None  # (pause, final pass) decoded in the hang time

    # --- the session ------------------------------------------------------------------------------
    def push(self, samples: np.ndarray) -> list[Utterance]:
        if self.finished:
            raise RuntimeError("this utterance session is finished; open a new one")
        samples = validate_samples(samples)
        self.audio = np.concatenate([self.audio, samples])
        self.received += samples.size
        done: list[Utterance] = []
        for p in self.vad(samples):
            mark = self.endpointer.update(self.vad_at, float(p))
            self.vad_at += CHUNK
            if mark is not None:
                done.extend(self._on(mark))
        self._work()
        self._trim()
        return done

    def finish(self) -> list[Utterance]:
        """The stream ended: an utterance still open ends here."""
        if self.finished:
            return []
        self.finished = True
        mark = self.endpointer.flush(self.received)
        return self._on(mark) if mark is not None else []

    # --- internals -----------------------------------------------------------------------------
    def _on(self, mark: Mark) -> list[Utterance]:
        if mark.kind is Kind.START:
            self._reset()
            self.pilot_at = mark.start
        elif mark.kind is Kind.PAUSE:
            self.pause = mark.end
        elif mark.kind is Kind.RESUME:
            self.pause = None
        elif mark.kind is Kind.DROP:
            self._reset()
        else:
            utterance = self._endpoint(mark)
            self._reset()
            return [utterance] if utterance is not None else []
        return []

    def _work(self) -> None:
        """A decoding in the hang time, or a pilot, if one is due."""
        o = self.options
        start = self.endpointer.start
        if start is None:
            return
        if self.pause is not None:
            if o.final_in_hang and self.received >= self.pause + self.post and \
                    (self.hang is None or self.hang[0] != self.pause):
                hyp = self._decode(start, self.pause, final=True)
                self.hang = (self.pause, hyp)
            return
        if o.pilot_s is not None and self.received - self.pilot_at >= o.pilot_s * SAMPLE_RATE and \
                self.received - start + self.pre >= o.pilot_min_s * SAMPLE_RATE:
            self.pilot_at = self.received
            self.pilots += 1
            self._decode(start, self.received - self.post, final=False)

    def _decode(self, start: int, end: int, final: bool) -> Hypothesis:
        audio = self._span(start, end)
        hyp = self.decoder.final(audio, self.draft) if final else self.decoder.pilot(audio, self.draft)
        self.compute_s += hyp.compute_s
        self.draft = hyp
        return hyp

    def _endpoint(self, mark: Mark) -> Utterance | None:
        audio_end = min(mark.end + self.post, self.received)
        ready = self.hang is not None and self.hang[0] == mark.end and \
            self.hang[1].samples == self._span(mark.start, mark.end).size
        judged = self.hang[1] if ready and self.hang is not None else self.draft
        offload = self.remote is not None and judged is not None and judged.text != "" and \
            judged.perplexity > self.offload_perplexity
        if not offload and not ready:
            judged = self._decode(mark.start, mark.end, final=True)
            offload = self.remote is not None and judged.text != "" and judged.perplexity > self.offload_perplexity
        assert judged is not None
        text, offloaded = judged.text, False
        if offload and self.remote is not None:
            try:
                text, offloaded = self.remote(self._span(mark.start, mark.end)), True
            except OffloadError as e:
                log.warning("offloading failed, keeping the local text: %s", e)
                if not judged.final:  # judged by a pilot: the local final pass is still owed
                    judged = self._decode(mark.start, mark.end, final=True)
                    text = judged.text
        if not text:
            log.debug("utterance %.2f-%.2f s: nothing heard", mark.start / SAMPLE_RATE, audio_end / SAMPLE_RATE)
            return None
        return Utterance(text, mark.start / SAMPLE_RATE, mark.end / SAMPLE_RATE, mark.at / SAMPLE_RATE,
                         judged.perplexity, offloaded, judged.text, self.pilots, ready, self.compute_s)

    def _span(self, start: int, end: int) -> np.ndarray:
        """The utterance audio from ``start`` to ``end`` (stream positions), with the lead-in before
        and the pad after it, as far as they were received and kept."""
        a = max(start - self.pre, self.base)
        b = min(end + self.post, self.received)
        return self.audio[a - self.base : b - self.base]

    def _trim(self) -> None:
        """Keep the open utterance (and its pad), or only the pad before the next one."""
        start = self.endpointer.start
        keep_from = (start if start is not None else self.vad_at) - self.pre - CHUNK
        drop = keep_from - self.base
        if drop > 0:
            self.audio = self.audio[drop:]
            self.base += drop
