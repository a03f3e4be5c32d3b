"""Reading finished (or stopped) runs back: the experiment rebuilt from a run directory's ``config.yaml`` with its
trials, and the measured trials of several runs (or a benchmark table's rows) as a predictor's training data."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, RunDirectoryError
from hwnas.experiments.config import Experiment, build, parse_config
from hwnas.experiments.config.yaml_io import load_yaml
from hwnas.experiments.journal import read_trials
from hwnas.experiments.references import apply_stored_references
from hwnas.experiments.rundir import CONFIG
from hwnas.predictors.fit import TrainingData, space_params

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace


def load_run(run_dir: str | Path) -> tuple[Experiment, list[Any]]:
    """The experiment (rebuilt from its config.yaml) and the trials of a run directory."""
    directory = Path(run_dir)
    if not (directory / CONFIG).is_file():
        raise RunDirectoryError(f"{directory} is not a run directory (no {CONFIG})")
    loaded = load_yaml(directory / CONFIG)
    experiment = build(parse_config(loaded), loaded=loaded, artifacts_dir=directory)
    apply_stored_references(experiment, directory)  # relative constraints: the values the run measured
    return experiment, read_trials(directory)


def from_runs(run_dirs: Sequence[str | Path], target: str) -> TrainingData:
    """The ``ok`` trials of one or more run directories that measured ``target`` (duplicates averaged).

    Raises:
        ConfigError: A folder that is not a run, runs over different spaces, or no trial with the metric.
    """
    if not run_dirs:
        raise ConfigError("no run directory given")
    space: SearchSpace | None = None
    params: dict[str, Any] = {}
    values: dict[Architecture, list[float]] = {}
    measured: dict[Architecture, dict[str, float]] = {}
    seen_metrics: set[str] = set()
    for run_dir in run_dirs:
        experiment, trials = load_run(run_dir)
        this_params = space_params(experiment.space)
        if space is None:
            space, params = experiment.space, this_params
        elif experiment.space.name != space.name or this_params != params:
            raise ConfigError(f"{run_dir}: its space ({experiment.space.name}, {this_params}) differs from the first "
                              f"run's ({space.name}, {params}); fit one predictor per space")
        for t in trials:
            seen_metrics.update(t.metrics)
            value = t.metrics.get(target)
            if t.status == "ok" and not t.partial and value is not None and np.isfinite(value):
                values.setdefault(t.arch, []).append(float(value))
                measured.setdefault(t.arch, dict(t.metrics))
    if not values:
        known = ", ".join(sorted(seen_metrics)) or "none"
        raise ConfigError(f"no ok trial in {', '.join(map(str, run_dirs))} has metric {target!r} "
                          f"(metrics there: {known})")
    archs = list(values)
    assert space is not None  # run_dirs is not empty
    return TrainingData(space, params, archs, np.array([np.mean(values[a]) for a in archs]), target,
                        [str(Path(r).resolve()) for r in run_dirs], [measured[a] for a in archs])


def measured_data(target: str, *, runs: Sequence[str | Path] = (), table: str | Path | None = None,
                  space: str | None = None, space_params: dict[str, Any] | None = None,
                  key_column: str | None = None) -> TrainingData:
    """Measured architectures to fit or judge a predictor on: the ok trials of ``runs`` (:func:`from_runs`; the
    space is theirs), or the rows of a benchmark ``table`` of ``space`` (:func:`hwnas.predictors.fit.from_table`).

    Raises:
        ConfigError: Both sources or neither, ``space`` or ``space_params`` with runs, a table without ``space``,
            or what reading them refuses.
    """
    from hwnas.predictors.fit import from_table

    if bool(runs) == bool(table):
        raise ConfigError("give either --run RUN_DIR (repeatable) or --table CSV with --space")
    if runs:
        if space or space_params:
            raise ConfigError("--space and --space-params go with --table; a run's space comes from its config.yaml")
        return from_runs(runs, target)
    if not space:
        raise ConfigError("--table needs --space (the space its architecture strings belong to)")
    from hwnas.search_spaces import SPACES

    assert table is not None
    return from_table(SPACES.create(space, space_params), table, target, key_column=key_column)
