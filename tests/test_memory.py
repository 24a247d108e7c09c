"""Heap trimming: at most once per interval, and a real call into the C library here (glibc)."""

from __future__ import annotations

from stenoflow.memory import HeapTrimmer


def test_the_heap_is_trimmed_at_most_once_per_interval() -> None:
    never = HeapTrimmer(interval_s=3600)
    assert not never.maybe()
    always = HeapTrimmer(interval_s=0.0)
    assert always._trim is not None, "glibc's malloc_trim should be found on Debian"
    assert always.maybe() and always.maybe()
