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


ONE_THREAD_FOLDERS = ("search_spaces", "supernet", "evaluators")


@pytest.fixture(autouse=True)
def _one_torch_thread(request: pytest.FixtureRequest):
    """Tests of spaces and supernets run torch on one intra-op thread: their tensors are tiny, and on a small
    shared machine torch's thread pool spins against other processes (one SGD test: 11 s on two threads,
    0.1 s on one)."""
    if Path(str(request.node.path)).parent.name not in ONE_THREAD_FOLDERS:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


#: Files whose tests take minutes (whole documented examples, repeated kills and resumes, Ray clusters, a browser):
#: collected first, so that the xdist workers start them early instead of finishing on one of them alone.
SLOW_FIRST = ("tests/docs/test_examples.py", "tests/experiments/test_ray.py", "tests/experiments/test_sweep.py",
              "tests/supernet/test_kill_and_race.py", "tests/experiments/test_sweep_kill_and_race.py",
              "tests/experiments/test_kill_and_race.py", "tests/test_examples.py", "tests/docs/test_site.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Moves the tests of :data:`SLOW_FIRST` to the front, in that order (the rest keep theirs)."""
    def rank(item: pytest.Item) -> int:
        path = Path(str(item.path)).resolve()
        rel = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.as_posix()
        return SLOW_FIRST.index(rel) if rel in SLOW_FIRST else len(SLOW_FIRST)

    items.sort(key=rank)  # stable: the order within a file, and of the rest, is kept
