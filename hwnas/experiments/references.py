"""Relative constraints: the reference member measured once per run, by the evaluator that gives the metric.

``{metric: latency_ms, max: 0.6, relative_to: largest}`` bounds the metric at 60 % of the space's largest
member's value, measured by the same evaluator on the same machine, so an experiment file means the same
on a laptop, a board or a server. The run measures the reference before its first trial and keeps the value
in ``references.json`` in the run directory (with the evaluators' fingerprint): a resumed run, ``nas report``
and ``nas export`` use that value rather than measuring again, so the bound never moves within a run.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.errors import ConfigError, RunDirectoryError

if TYPE_CHECKING:
    from hwnas.experiments.config import Experiment
    from hwnas.objectives import Constraint

log = logging.getLogger(__name__)

REFERENCES = "references.json"
FORMAT = "hwnas.references"
#: Evaluations of the reference by a cheap evaluator; the median is the reference value.
REPEATS = 3


def _key(constraint: Constraint) -> str:
    return f"{constraint.relative_to}:{constraint.metric}"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunDirectoryError(f"{path} is unreadable or corrupt ({exc}); it holds the measured references of the "
                                "run's relative constraints") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("values"), dict):
        raise RunDirectoryError(f"{path} is not an hwnas references file")
    return data


def apply_stored_references(experiment: Experiment, run_dir: Path) -> bool:
    """Resolve the experiment's relative constraints from the run's ``references.json``, measuring nothing.

    Returns whether every constraint is now absolute (False where the run never measured its references).
    """
    pending = [i for i, c in enumerate(experiment.constraints) if not c.is_resolved]
    path = Path(run_dir) / REFERENCES
    if not pending or not path.is_file():
        return not pending
    values = _read(path)["values"]
    for i in pending:
        c = experiment.constraints[i]
        found = values.get(_key(c))
        if isinstance(found, dict) and isinstance(found.get("value"), (int, float)):
            experiment.constraints[i] = c.resolved(float(found["value"]))
    return all(c.is_resolved for c in experiment.constraints)


def resolve_relative_constraints(experiment: Experiment, run_dir: Path, fingerprint: str, *,
                                 journaled: int = 0) -> None:
    """Make every relative constraint absolute: the stored reference values of this run, else measured now.

    The reference (``space.largest()``) is evaluated by the evaluator that provides the constrained metric, in
    this process, and written to ``references.json`` before the first trial.

    Args:
        journaled: Trials the run's journal holds already (judged against the stored references).

    Raises:
        RunDirectoryError: The stored references were measured under other evaluators (another fingerprint), or
            they are missing from a run whose journal holds trials judged against them.
        ConfigError: The reference could not be evaluated, or gave no finite positive value.
    """
    pending = [i for i, c in enumerate(experiment.constraints) if not c.is_resolved]
    if not pending:
        return
    path = Path(run_dir) / REFERENCES
    stored: dict[str, Any] = {"format": FORMAT, "fingerprint": fingerprint, "values": {}}
    if not path.is_file() and journaled:
        raise RunDirectoryError(f"{path} is missing, but the journal holds {journaled} trial(s) judged against the "
                                "reference it stored; restore it to resume this run, or start a new run")
    if path.is_file():
        stored = _read(path)
        if stored.get("fingerprint") != fingerprint:
            raise RunDirectoryError(f"{path}: the references were measured under evaluator fingerprint "
                                    f"{stored.get('fingerprint')}, this machine and config give {fingerprint}; "
                                    "start a new run instead of resuming this one")
    providers = {m: ev for ev in experiment.evaluators for m in ev.provides}
    reference = experiment.space.largest()
    measured_now = False
    for i in pending:
        c = experiment.constraints[i]
        key = _key(c)
        if key not in stored["values"]:
            ev = providers[c.metric]  # the config check guarantees a provider
            # a cheap metric (a timing) is taken REPEATS times and its median kept: one noisy timing must not
            # move the bound of the whole run; an expensive one (training) once
            outs = [ev.evaluate([reference])[0] for _ in range(REPEATS if ev.cheap else 1)]
            bad = next((o for o in outs if isinstance(o, BaseException)), None)
            if bad is not None:
                raise ConfigError(f"constraints[{i}]: the {c.relative_to} member ({reference.arch_id}) could not be "
                                  f"evaluated for {c.metric}: {type(bad).__name__}: {bad}")
            taken = [o.get(c.metric) for o in outs if not isinstance(o, BaseException)]
            try:
                value = statistics.median(float(v) for v in taken)
            except (TypeError, ValueError):
                value = None  # refused by name below
            stored["values"][key] = {"arch": reference.to_dict(), "value": value, "taken": taken}
            measured_now = True
        value = stored["values"][key]["value"]
        try:
            experiment.constraints[i] = c.resolved(float(value) if value is not None else math.nan)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"constraints[{i}]: {exc}") from None
        log.info("constraint %d: %s", i, experiment.constraints[i].describe())
    if measured_now:
        from hwnas.fileio import atomic_write

        atomic_write(path, json.dumps(stored, indent=1, allow_nan=False) + "\n")
