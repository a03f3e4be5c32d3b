"""The MLflow callback against a real local MLflow tracking store (SQLite database, artefacts in a folder): no mock
(issue 46)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import hwnas
from hwnas.experiments.callbacks import CallbackError
from hwnas.testing.experiments import nb201_benchmark_yaml

pytest.importorskip("mlflow")

from mlflow.tracking import MlflowClient

from hwnas.experiments.tracking import MLflowCallback


def study(shared: Path, root: Path, trials: int) -> Any:
    cfg = yaml.safe_load(nb201_benchmark_yaml(shared, name="tracked", trials=trials, batch_size=5))
    cfg["objectives"][1]["reference"] = 40.0
    cfg["output"] = {"root": str(root)}
    return hwnas.create_run(cfg)


def test_mlflow_gets_the_config_every_trial_and_the_front_and_an_extension_continues_its_run(shared_data, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    s = study(shared_data, tmp_path / "runs", trials=12)
    s.optimize(callbacks=[MLflowCallback(uri, experiment="nas", artifact_location=str(tmp_path / "artefacts"))])
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("nas")
    [run] = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["hwnas.run_dir"] == str(s.run_dir.resolve())
    assert run.data.params["seed"] == "3" and run.data.params["strategy.name"] == "random"
    assert "budget.trials" not in run.data.params
    history = client.get_metric_history(run.info.run_id, "top1")
    trials = s.trials
    assert sorted((m.step, m.value) for m in history) == [(t.number, t.metrics["top1"]) for t in trials]
    pixel3 = client.get_metric_history(run.info.run_id, "latency_ms_at_pixel3")
    assert len(pixel3) == 12
    assert run.data.metrics["hypervolume"] == pytest.approx(s.summary.hypervolume)
    assert run.data.metrics["front_size"] == len(s.best_trials)
    files = {f.path for f in client.list_artifacts(run.info.run_id, "hwnas")}
    assert {"hwnas/config.yaml", "hwnas/pareto.csv", "hwnas/pareto.json", "hwnas/summary.json"} <= files
    local = Path(client.download_artifacts(run.info.run_id, "hwnas/pareto.csv", str(tmp_path / "dl")))
    assert local.read_bytes() == (s.run_dir / "pareto.csv").read_bytes()

    s.optimize(n_trials=8, callbacks=[MLflowCallback(uri, experiment="nas")])  # the same MLflow run goes on
    [run] = client.search_runs([exp.experiment_id])
    assert len(client.get_metric_history(run.info.run_id, "top1")) == 20
    assert [m.value for m in client.get_metric_history(run.info.run_id, "budget_trials")] == [12.0, 20.0]


def test_a_failing_callback_marks_the_mlflow_run_failed(shared_data, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    s = study(shared_data, tmp_path / "runs", trials=10)

    def boom(run: Any, trial: Any) -> None:
        if trial.number == 3:
            raise RuntimeError("stop here")

    with pytest.raises(CallbackError, match="boom raised RuntimeError: stop here"):
        s.optimize(callbacks=[MLflowCallback(uri, experiment="nas", artifact_location=str(tmp_path / "a")), boom])
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("nas").experiment_id])
    assert run.info.status == "FAILED"
    assert len(client.get_metric_history(run.info.run_id, "top1")) == 4  # trials 0-3 were logged before it raised
