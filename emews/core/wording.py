"""Counts in the words users read: ``1 worker``, ``2 workers``."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, the noun plural unless the count is one (``plural``: when it is not
    ``noun + "s"``)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def noun_for(count: int, noun: str, plural: str | None = None) -> str:
    """``noun`` for a count of one, its plural otherwise (for ``busy/total workers``)."""
    return noun if count == 1 else plural or noun + "s"
