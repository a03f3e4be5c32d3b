"""Tracking a run in MLflow (``pip install "hwnas[mlflow]"``): a callback for ``Study.optimize`` and
``run_experiment``.

    from hwnas.experiments.tracking import MLflowCallback
    study.optimize(callbacks=[MLflowCallback("sqlite:///mlflow.db", experiment="nas")])

It logs, to the tracking store at ``tracking_uri`` (a database ``sqlite:///...``, a server ``http://127.0.0.1:5000``,
or whatever MLflow accepts):

- when a session starts: the run's config as flattened parameters (``evaluators.0.name``; ``budget.trials``
  aside: it grows when the run is extended, and an MLflow parameter cannot change) and ``config.yaml`` as an
  artefact, with the tags ``hwnas.run_dir`` and ``hwnas.name``;
- after each trial evaluated: its metrics, at step = its trial number (plus ``ok`` 1 or 0);
- when the search ends: the front and the summary (``pareto.csv``, ``pareto.json``, ``summary.json``, the plot) as
  artefacts under ``hwnas/``, and the summary's ``hypervolume``, ``front_size`` and trial counts as metrics.

A run extended or resumed later (another ``optimize()``) goes on in the same MLflow run, found by its
``hwnas.run_dir`` tag. Only MLflow's client API is used (``MlflowClient``): no global active run is left behind.
A search that stops on an error (a callback that raised, Ctrl-C) marks the MLflow run ``FAILED``
(``KILLED`` for Ctrl-C); its resume sets it running again.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.extras import require
from hwnas.objectives import Trial

if TYPE_CHECKING:
    from hwnas.experiments.callbacks import RunHandle

log = logging.getLogger(__name__)

__all__ = ["MLflowCallback"]

#: The tag that ties an MLflow run to its hwnas run directory.
RUN_DIR_TAG = "hwnas.run_dir"
#: The files of the run directory logged as artefacts when the search ends (those that exist).
OUTPUTS = ("config.yaml", "pareto.csv", "pareto.json", "summary.json", "pareto.png")


def _flatten(data: object, prefix: str = "") -> dict[str, str]:
    if isinstance(data, Mapping):
        out: dict[str, str] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(data, list) and data and all(isinstance(v, Mapping) for v in data):
        out = {}
        for i, v in enumerate(data):
            out.update(_flatten(v, f"{prefix}.{i}"))
        return out
    text = str(data)
    return {prefix: text if len(text) <= 500 else text[:497] + "..."}  # MLflow's limit on a parameter's value


class MLflowCallback:
    """Logs a run to MLflow (see the module's docstring).

    Args:
        tracking_uri: The tracking store (``sqlite:///PATH``, ``http://127.0.0.1:PORT``, ...).
        experiment: The MLflow experiment's name (created when missing; default: the hwnas run's name).
        artifact_location: Where a new MLflow experiment keeps its artefacts (default: the store's choice).
        run_name: The MLflow run's name (default: the run directory's name).
    """

    def __init__(self, tracking_uri: str, *, experiment: str | None = None, artifact_location: str | None = None,
                 run_name: str | None = None) -> None:
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.artifact_location = artifact_location
        self.run_name = run_name
        self.client: Any = None
        self.run_id: str | None = None
        self._step_metrics: list[Any] = []

    def on_start(self, run: RunHandle) -> None:
        """Find or create the MLflow run of this hwnas run; log the config."""
        mlflow = require("mlflow", "mlflow", "MLflowCallback")
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        run_dir = Path(run.run_dir)
        import yaml

        config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
        name = self.experiment or str(config.get("name", run_dir.name))
        found = self.client.get_experiment_by_name(name)
        experiment_id = found.experiment_id if found is not None else self.client.create_experiment(
            name, artifact_location=self.artifact_location)
        key = str(run_dir.resolve())
        existing = self.client.search_runs([experiment_id], filter_string=f"tags.`{RUN_DIR_TAG}` = '{key}'",
                                           max_results=1)
        if existing:
            self.run_id = existing[0].info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            created = self.client.create_run(experiment_id, run_name=self.run_name or run_dir.name,
                                             tags={RUN_DIR_TAG: key, "hwnas.name": str(config.get("name", ""))})
            self.run_id = created.info.run_id
            params = {_key(k): v for k, v in _flatten(config).items() if k != "budget.trials"}
            items = [mlflow.entities.Param(k, v) for k, v in params.items()]
            for i in range(0, len(items), 100):  # MLflow takes at most 100 parameters per batch
                self.client.log_batch(self.run_id, params=items[i:i + 100])
        self.client.log_metric(self.run_id, "budget_trials", float(config["budget"]["trials"]))
        self.client.log_artifact(self.run_id, str(run_dir / "config.yaml"), artifact_path="hwnas")

    def on_trial(self, run: RunHandle, trial: Trial) -> None:
        """Log the trial's metrics at step = its number."""
        from mlflow.entities import Metric

        assert self.client is not None and self.run_id is not None
        import time

        now = int(time.time() * 1000)
        metrics = [Metric(_key(k), float(v), now, trial.number) for k, v in trial.metrics.items()]
        metrics.append(Metric("ok", 1.0 if trial.status == "ok" else 0.0, now, trial.number))
        self.client.log_batch(self.run_id, metrics=metrics)

    def on_end(self, run: RunHandle, result: object) -> None:
        """Log the front and the summary as artefacts and the summary's figures as metrics; end the MLflow run."""
        assert self.client is not None and self.run_id is not None
        run_dir = Path(run.run_dir)
        for name in OUTPUTS:
            if (run_dir / name).is_file():
                self.client.log_artifact(self.run_id, str(run_dir / name), artifact_path="hwnas")
        summary = getattr(result, "summary", None)
        if summary is not None:
            step = summary.trials.total
            figures = {"front_size": float(len(summary.front)), "trials_ok": float(summary.trials.ok),
                       "trials_infeasible": float(summary.trials.infeasible),
                       "trials_failed": float(summary.trials.failed)}
            if summary.hypervolume is not None:
                figures["hypervolume"] = float(summary.hypervolume)
            for k, v in figures.items():
                self.client.log_metric(self.run_id, k, v, step=step)
        self.client.set_terminated(self.run_id, status="FINISHED")


    def on_error(self, run: RunHandle, error: BaseException) -> None:
        """The search stopped on ``error``: mark the MLflow run failed (killed for Ctrl-C)."""
        if self.client is not None and self.run_id is not None:
            self.client.set_terminated(self.run_id, status="KILLED" if isinstance(error, KeyboardInterrupt)
                                       else "FAILED")


def _key(metric: str) -> str:
    """A metric name as MLflow allows it (alphanumerics, ``_-. :/``): ``latency_ms@pixel3`` ->
    ``latency_ms_at_pixel3``, any other character -> ``_``."""
    return re.sub(r"[^\w\-. :/]", "_", metric.replace("@", "_at_"))
