"""The clock the store reads, moved ahead of the real one."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agents_sqlalchemy.repository import schema as repository_module


def travel(monkeypatch: pytest.MonkeyPatch, ahead: timedelta) -> None:
    """Make the store's reads and purges see a clock `ahead` of the real one."""
    real = repository_module.utcnow
    monkeypatch.setattr(repository_module, "utcnow", lambda: real() + ahead)
