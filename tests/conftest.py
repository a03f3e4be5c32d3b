"""Shared fixtures: where the published benchmark data lives (../shared/data beside the repository)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """``$HWNAS_SHARED_DATA``, or ``../shared/data`` next to the repository."""
    env = os.environ.get("HWNAS_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The published NAS benchmark data (never copied into the repository)."""
    path = shared_data_dir()
    if path is None:
        pytest.skip("published benchmark data not found: set HWNAS_SHARED_DATA or put it at ../shared/data")
    return path
