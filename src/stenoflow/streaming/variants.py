"""Named round variants: a policy name with options, e.g. ``whisper-s+hush+verify``.

A variant names what the streaming benchmark compares and what the CLI can ask for: the base
policy, then ``+hush`` (speech ⊕ hush word instead of 30 s padding) and ``+prune`` or
``+verify`` (the previous round guides the beam). Pure string handling, no model.
"""

from __future__ import annotations

from dataclasses import dataclass

GUIDES = ("prune", "verify")
DEFAULT_VARIANTS = ("whisper-s", "whisper-s+hush", "whisper-s+prune", "whisper-s+verify",
                    "whisper-s+hush+prune", "whisper-s+hush+verify")


@dataclass(frozen=True)
class Variant:
    policy: str
    hush: bool = False
    guide: str | None = None

    @property
    def name(self) -> str:
        return self.policy + ("+hush" if self.hush else "") + (f"+{self.guide}" if self.guide else "")


def parse_variant(name: str) -> Variant:
    policy, *extras = name.strip().split("+")
    if not policy:
        raise ValueError(f"variant {name!r} names no policy (e.g. whisper-s+hush)")
    unknown = [e for e in extras if e != "hush" and e not in GUIDES]
    if unknown:
        raise ValueError(f"variant {name!r}: unknown option(s) {unknown}; known: hush, {', '.join(GUIDES)}")
    guides = [e for e in extras if e in GUIDES]
    if len(guides) > 1 or extras.count("hush") > 1:
        raise ValueError(f"variant {name!r}: give hush at most once and at most one of {', '.join(GUIDES)}")
    return Variant(policy, "hush" in extras, guides[0] if guides else None)
