"""A run imports what its components use and no more; env.json says what was imported, and never imports a
package to describe it (real processes: a test process has imported torch long before)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from hwnas.experiments.rundir import HEAVY, NOT_IMPORTED, note_imports
from hwnas.testing.experiments import nb201_benchmark_yaml

#: ``nas ARGS``, then the heavy packages the process had imported when it exited, as one JSON line on stderr.
PROBE = ("import atexit, json, sys\n"
         f"atexit.register(lambda: print('IMPORTED ' + json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), "
         "file=sys.stderr))\n"
         "sys.argv = ['nas'] + sys.argv[1:]\n"
         "from hwnas.cli import main\n"
         "raise SystemExit(main())\n")


def _nas(*args: str, cwd: Path) -> list[str]:
    """Run ``nas ARGS``; the heavy packages it imported."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stderr.splitlines() if x.startswith("IMPORTED "))
    return list(json.loads(line.removeprefix("IMPORTED ")))


def test_a_table_only_run_imports_neither_torch_nor_onnxruntime(shared_data, tmp_path):
    path = tmp_path / "nb201.yaml"
    path.write_text(nb201_benchmark_yaml(shared_data, strategy="evolution", trials=6, batch_size=3))
    imported = _nas("run", str(path), "--quiet", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    # no torch, onnx, onnxruntime, timm, optuna, pymoo, sklearn, ray; matplotlib, pareto.png's, here only where no
    # drawing process took it (hwnas.experiments.report.drawer: where a core was idle)
    assert imported in ([], ["matplotlib"])
    env = json.loads((tmp_path / "run" / "env.json").read_text())
    assert env["imported"] == {name: name in imported for name in HEAVY}
    assert env["torch_threads"] == NOT_IMPORTED and env["cuda_devices"] == NOT_IMPORTED
    # the installed versions are still recorded, read from the installed metadata
    assert env["versions"]["torch"] == metadata.version("torch")
    assert env["versions"]["onnxruntime"] == metadata.version("onnxruntime")
    assert env["cpu"] and env["cpu_cores"] >= 1
    assert (tmp_path / "run" / "pareto.png").stat().st_size > 10_000
    assert _nas("validate", str(path), cwd=tmp_path) == []


@pytest.mark.slow
def test_a_run_that_trains_records_torch_imported_after_env_json_was_first_written(tiny_yaml, tmp_path):
    """env.json is written before the first trial; torch comes with the first model built, and the record is
    brought up to date when the search ends."""
    run = tmp_path / "trained"
    imported = _nas("run", str(tiny_yaml), "--quiet", "--run-dir", str(run), "--set", "budget.trials=2",
                    "--set", "export.enabled=false", cwd=tmp_path)
    assert "torch" in imported and "onnxruntime" not in imported
    env = json.loads((run / "env.json").read_text())
    assert env["imported"]["torch"] is True and env["imported"]["onnxruntime"] is False
    assert env["versions"]["torch"] == metadata.version("torch")
    assert isinstance(env["torch_threads"], int) and env["torch_threads"] >= 1
    assert isinstance(env["cuda_devices"], list)


def test_note_imports_updates_the_newest_record_only(tmp_path):
    first = {"started": "then", "imported": {}, "torch_threads": NOT_IMPORTED, "cuda_devices": NOT_IMPORTED}
    resumed = dict(first, started="now")
    (tmp_path / "env.json").write_text(json.dumps({**first, "resumes": [resumed]}))
    note_imports(tmp_path)
    env = json.loads((tmp_path / "env.json").read_text())
    assert {k: env[k] for k in first} == first  # the first start's record is history
    newest = env["resumes"][-1]
    assert newest["started"] == "now" and set(newest["imported"]) == set(HEAVY)
    assert newest["imported"]["torch"] == ("torch" in sys.modules)
    note_imports(tmp_path / "nowhere")  # no env.json: a warning, never an error
