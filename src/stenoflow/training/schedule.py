"""The learning-rate schedule the trainers share."""

from __future__ import annotations

import math


def cosine_lr(step: int, steps: int, lr: float, lr_final: float) -> float:
    """``lr`` at step 0 down to ``lr_final`` at ``steps`` along half a cosine (flat after)."""
    progress = min(1.0, step / steps)
    return lr_final + 0.5 * (lr - lr_final) * (1 + math.cos(math.pi * progress))
