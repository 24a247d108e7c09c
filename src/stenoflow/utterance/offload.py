"""The offramp: which utterances the local model keeps, and the remote model that takes the rest.

Seed 001 §5: at the endpoint the device decides from the perplexity of its best hypothesis so far
(the last pilot, or the final pass when it already ran in the hang time) whether its own answer is
good enough; if not, the waveform (tens of KB for a command) goes to a larger model on a server.
Here the server is ``stenoflow serve`` (or any OpenAI-compatible endpoint): the utterance is posted
to ``/v1/audio/transcriptions`` as a 16-bit WAV.

``NaiveHybrid`` is the paper's baseline: offload at random at a given rate, blind to the audio.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
import wave
from dataclasses import dataclass
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

import numpy as np

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class OffloadOptions:
    url: str  # base URL of the server, e.g. http://gpu-box:8000
    perplexity: float = 1.3  # offload utterances whose perplexity is above this
    api_key: str | None = None
    model: str = "whisper-1"  # the name the server is asked for (a stenoflow server serves its model as whisper-1)
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"offload url must start with http:// or https://, got {self.url!r}")
        if not self.perplexity >= 1.0:
            raise ValueError(f"an offload perplexity threshold below 1 offloads everything; got {self.perplexity}")


class OffloadError(RuntimeError):
    """The remote model could not transcribe an utterance (the local text is kept)."""


def wav_bytes(samples: np.ndarray) -> bytes:
    """16 kHz mono float samples as a 16-bit PCM WAV file."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm.tobytes())
    return out.getvalue()


class RemoteTranscriber:
    """Posts an utterance to an OpenAI-compatible transcription endpoint and returns its text."""

    def __init__(self, options: OffloadOptions, language: str | None = "en") -> None:
        self.options = options
        self.language = language
        self.endpoint = options.url.rstrip("/") + "/v1/audio/transcriptions"

    def __call__(self, samples: np.ndarray) -> str:
        fields = {"model": self.options.model, "response_format": "json"}
        if self.language:
            fields["language"] = self.language
        body, content_type = multipart(fields, ("file", "utterance.wav", "audio/wav", wav_bytes(samples)))
        headers = {"Content-Type": content_type}
        if self.options.api_key:
            headers["Authorization"] = f"Bearer {self.options.api_key}"
        request = Request(self.endpoint, data=body, headers=headers, method="POST")
        try:
            with urlopen(request, timeout=self.options.timeout_s) as response:
                answer = json.loads(response.read().decode("utf-8"))
        except HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:300]
            raise OffloadError(f"{self.endpoint} answered {e.code}: {detail}") from e
        except (URLError, OSError, ValueError) as e:
            raise OffloadError(f"could not reach {self.endpoint}: {e}") from e
        if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
            raise OffloadError(f"{self.endpoint} answered without a text: {str(answer)[:200]}")
        return answer["text"].strip()


def multipart(fields: dict[str, str], file: tuple[str, str, str, bytes]) -> tuple[bytes, str]:
    """A multipart/form-data body (RFC 7578) with text ``fields`` and one ``file``
    (field name, file name, media type, content); returns the body and its Content-Type."""
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    name, filename, media, content = file
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                 f"Content-Type: {media}\r\n\r\n".encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"
