"""The multi-topic transcripts of the "mixed" set, in the order they are stored."""

from __future__ import annotations

from .home_transcripts import household, shop
from .transcripts import Conversation
from .work_transcripts import platform, research


def conversations() -> list[Conversation]:
    """A platform engineer's week, a PhD student's month, a household, a small shop."""
    return [platform(), research(), household(), shop()]
