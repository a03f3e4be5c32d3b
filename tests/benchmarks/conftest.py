"""The benchmark protocols are not library code: they live in benchmarks/, which is put on sys.path here."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))


@pytest.fixture(autouse=True)
def _one_blas_thread() -> Iterator[None]:
    """Tiny matrices: BLAS threads only contend (on a busy 2-core machine, 20x slower)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield
