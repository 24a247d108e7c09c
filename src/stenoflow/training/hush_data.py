"""Training and held-out data for the hush word, synthesized from the training text pool.

The text comes from the "train" pool, which shares no sentence with the evaluation sets, and
the held-out clips use voices the training clips do not, so held-out figures say how the hush
word carries to an unseen speaker.
"""

from __future__ import annotations

from stenoflow.api import Model
from stenoflow.bench.datasets import short_clips
from stenoflow.training.hush_train import Example, self_distilled_targets

TRAIN_VOICES = ("flite:slt", "flite:rms", "flite:awb", "espeak:en-us", "espeak:en-gb", "espeak:en-us+m3",
                "espeak:en+f2", "espeak:en-gb-x-rp")
HELDOUT_VOICES = ("flite:kal16", "espeak:en-gb-scotland", "espeak:en-029")


def hush_examples(model: Model, n_train: int, n_heldout: int, timestamp_share: float, seed: int = 0
                  ) -> tuple[list[Example], list[Example]]:
    train_clips = short_clips(n_train, pool="train", min_s=1.0, max_s=25.0, seed=seed + 100, voices=TRAIN_VOICES)
    held_clips = short_clips(n_heldout, pool="train", min_s=2.0, max_s=25.0, seed=seed + 200, voices=HELDOUT_VOICES)
    train = self_distilled_targets(model, [c.load_audio() for c in train_clips], [c.text for c in train_clips],
                                   timestamp_share, seed)
    held = self_distilled_targets(model, [c.load_audio() for c in held_clips], [c.text for c in held_clips],
                                  0.0, seed + 1)
    return train, held
