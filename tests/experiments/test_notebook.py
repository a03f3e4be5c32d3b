"""The Jupyter progress display (an HTML line redrawn through IPython's display) and how optimize() picks it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

import hwnas
from hwnas.experiments.notebook import NotebookProgress, in_notebook, render_progress
from hwnas.testing.experiments import nb201_benchmark_yaml


class FakeDisplay:
    """IPython's ``display(obj, display_id=True)`` and the handle's ``update(obj)``, recorded."""

    def __init__(self) -> None:
        self.shown: list[Any] = []

    def __call__(self, obj: Any, *, display_id: bool) -> FakeDisplay:
        assert display_id is True
        self.shown.append(obj)
        return self

    def update(self, obj: Any) -> None:
        self.shown.append(obj)


def test_the_notebook_display_counts_trials_best_and_front(shared_data: Path, tmp_path: Path) -> None:
    cfg = yaml.safe_load(nb201_benchmark_yaml(shared_data, name="nb", trials=20, batch_size=5))
    cfg["output"] = {"root": str(tmp_path)}
    display = FakeDisplay()
    progress = NotebookProgress(max_hz=1e9, display=display)
    result = hwnas.run_experiment(cfg, progress=progress)
    last = str(display.shown[-1])
    best = max(t.metrics["top1"] for t in result.trials if t.status == "ok")
    assert '<progress value="20" max="20"' in last and "20/20" in last
    assert f"best top1={best:.4g}" in last and f"front {len(result.front)}" in last
    assert len(display.shown) >= 5  # drawn at start, then after every batch


def test_render_progress_says_the_eta_only_while_running() -> None:
    assert "ETA 30 s" in render_progress(25, 100, elapsed_s=10, best="", front=3, failed=0)
    done = render_progress(100, 100, elapsed_s=40, best="best x=1", front=3, failed=2)
    assert "ETA" not in done and "2 failed" in done


def test_outside_jupyter_no_notebook_display_is_chosen() -> None:
    from hwnas.experiments.study import _progress

    assert not in_notebook()
    assert _progress(False) is None
    assert type(_progress(True)).__name__ == "SearchProgress"
