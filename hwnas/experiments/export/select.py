"""Which trials an export writes: the Pareto front over every objective, one device's front, the top K by a
metric, or architectures named by id."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hwnas.errors import RunDirectoryError
from hwnas.experiments.config import Experiment
from hwnas.objectives import Trial, is_hardware_metric, pareto_front

#: The device name of a latency metric without ``@device``: measured on the host the search ran on.
LOCAL = "local"


def device_of(metric: str) -> str:
    """``latency_ms@pixel3`` -> ``pixel3``; ``latency_ms`` -> ``local`` (the search's own host)."""
    return metric.partition("@")[2] or LOCAL


def select_models(experiment: Experiment, trials: Sequence[Trial], *, device: str | None = None,
                  top_k: int | None = None, by: str | None = None,
                  archs: Sequence[str] = ()) -> tuple[list[Trial], str]:
    """The trials to export and a one-line description of the choice.

    * ``archs``: those architectures (full ids or unique prefixes), in the order given;
    * ``top_k`` (with ``by``, an objective's metric): the best ``top_k`` feasible trials by that objective;
    * otherwise the Pareto front, over every objective or, with ``device``, over the objectives that are not
      hardware metrics plus that device's hardware metrics.

    Raises:
        RunDirectoryError: an architecture not in the run (or ambiguous, or failed), an unknown device, a ``by``
            that is not an objective, or a run with no evaluated trial to export.
    """
    objectives = list(experiment.objectives)
    if archs:
        by_id: dict[str, Trial] = {}
        for t in trials:  # in a multi-fidelity run, a candidate's trial of the highest rung it reached
            if t.arch.arch_id not in by_id or (t.rung or 0) > (by_id[t.arch.arch_id].rung or 0):
                by_id[t.arch.arch_id] = t
        chosen = []
        for name in archs:
            hits = [t for i, t in by_id.items() if i == name] or [t for i, t in by_id.items() if i.startswith(name)]
            if not hits:
                raise RunDirectoryError(f"architecture {name!r} is not in the run ({len(by_id)} architectures; "
                                        "see nas report RUN_DIR --all for their ids)")
            if len(hits) > 1:
                raise RunDirectoryError(f"architecture {name!r} is ambiguous: {len(hits)} ids start with it "
                                        f"({', '.join(t.arch.arch_id for t in hits[:3])}, ...)")
            if hits[0].status == "failed":
                raise RunDirectoryError(f"architecture {hits[0].arch.arch_id} failed in the run "
                                        f"({hits[0].error or 'no message'}): nothing to export")
            if hits[0] not in chosen:
                chosen.append(hits[0])
        return chosen, f"named architectures: {', '.join(t.arch.arch_id for t in chosen)}"
    ok = [t for t in trials if t.status == "ok" and not t.partial]  # a lower rung is not the final word
    if not ok:
        raise RunDirectoryError("the run has no successfully evaluated feasible trial to export")
    if top_k is not None:
        if top_k < 1:
            raise RunDirectoryError(f"--top-k must be at least 1, got {top_k}")
        names = [o.metric for o in objectives]
        objective = next((o for o in objectives if o.metric == by), None)
        if objective is None:
            raise RunDirectoryError(f"--by {by!r} is not an objective of the run; choose one of {', '.join(names)}")
        scored = [t for t in ok if math.isfinite(float(t.metrics.get(objective.metric, math.nan)))]
        scored.sort(key=lambda t: (-1 if objective.direction == "max" else 1) * float(t.metrics[objective.metric]))
        return scored[:top_k], f"top {top_k} by {objective.metric} ({objective.direction})"
    if device is not None:
        devices = sorted({device_of(o.metric) for o in objectives if is_hardware_metric(o.metric)})
        if device not in devices:
            raise RunDirectoryError(f"device {device!r} is not among the run's hardware objectives "
                                    f"({', '.join(devices) or 'none'})")
        objectives = [o for o in objectives if not is_hardware_metric(o.metric) or device_of(o.metric) == device]
    label = f"Pareto front{f' for device {device}' if device else ''} ({', '.join(o.metric for o in objectives)})"
    return pareto_front(trials, objectives), label
