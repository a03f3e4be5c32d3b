"""The shipped notebook-style example runs end to end with small settings (issue 46)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_python_api_example_runs_extends_twice_draws_four_figures_and_exports(shared_data, tmp_path):
    pytest.importorskip("pandas")
    pytest.importorskip("plotly")
    done = subprocess.run([sys.executable, str(REPO / "examples" / "python_api.py"), "--data", str(shared_data),
                           "--out", str(tmp_path), "--trials", "16"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "first session: 16 evaluated" in done.stdout
    assert "extended to 20: 4 evaluated, 16 reused from the journal" in done.stdout
    assert "extended to 24: 4 evaluated, 20 reused from the journal" in done.stdout
    run = tmp_path / "nb201-pixel3"
    assert len((run / "trials.jsonl").read_text().splitlines()) == 24
    for name in ("front", "hypervolume", "parallel", "importance"):
        assert (tmp_path / f"{name}.html").stat().st_size > 1_000_000  # plotly.js inlined
    front = json.loads((run / "pareto.json").read_text())["front"]
    exported = json.loads((run / "models" / "export.json").read_text())
    assert sorted(exported["models"]) == sorted(t["arch_id"] for t in front)
    assert all((run / "models" / f"{t['arch_id']}.onnx").is_file() for t in front)
