"""Executors run the expensive evaluations of a batch and hand results back as they finish.

The runner (the driver) submits :class:`Task` s and takes :class:`Outcome` s in completion order; it alone
writes the journal and tells the strategy, in the order it asked. Built in:

- ``local``: in this process, one after another (the evaluator instances the experiment built);
- ``process``: a pool of worker processes (spawn start method). Each worker rebuilds the evaluators from
  their :class:`PipelineSpec` (registry names, resolved parameters, the space's spec, the dataset config),
  so nothing unpicklable crosses a process boundary, and sets its own torch thread count. A worker that
  dies mid-evaluation (a crash, SIGKILL, out of memory) is replaced; its evaluation is retried
  ``max_retries`` times, then recorded as failed, and the run goes on.

- ``ray``: Ray actors on a Ray cluster (:mod:`hwnas.experiments.executors.ray`), the same protocol.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, HwnasError
from hwnas.registry import Registry

if TYPE_CHECKING:
    from hwnas.data import ImageData
    from hwnas.evaluation import Evaluator

T = TypeVar("T")

log = logging.getLogger(__name__)

#: The built-in executors (imported on first lookup; plug-ins come from the ``hwnas.executors`` entry points).
BUILTIN_EXECUTORS = {
    "local": "hwnas.experiments.executors.local:LocalExecutor",
    "process": "hwnas.experiments.executors.process:ProcessExecutor",
    "ray": "hwnas.experiments.executors.ray:RayExecutor",
}
EXECUTORS: Registry[Executor] = Registry(kind="executor", entry_point_group="hwnas.executors",
                                         builtins=BUILTIN_EXECUTORS)


class ExecutorError(HwnasError):
    """An executor cannot run the evaluations (a worker cannot rebuild an evaluator, workers keep dying)."""


# -- what crosses a process boundary -------------------------------------------------------------------------


@dataclass(frozen=True)
class ComponentSpec:
    """A registered component as plain data: rebuilt anywhere with ``registry.create(name, params, ...)``.

    Args:
        name: Registered name.
        params: Resolved parameters (JSON values).
        module: The module that registers it, imported first in a worker (components registered in code,
            not only through entry points, are found that way).
    """

    name: str
    params: dict[str, Any]
    module: str


@dataclass(frozen=True)
class PipelineSpec:
    """Everything a worker needs to rebuild the expensive evaluators, as JSON-able data.

    Args:
        space: The search space.
        dataset: The dataset config (``DataConfig`` as JSON), or None.
        artifacts_dir: The run directory (evaluators keep files under it), or None.
        seed: The experiment seed.
        evaluators: The expensive evaluators, in the order they run.
        names: Their labels in messages (``evaluators[2] (train)``).
        fingerprints: What the driver's instances report; a worker's rebuilt ones must match.
        stages: Per stage, the indices of the evaluators a task of that stage runs, in order (a multi-fidelity
            run's rungs: stage ``r`` runs the evaluator at rung ``r``); empty: one stage, every evaluator.
    """

    space: ComponentSpec
    dataset: dict[str, Any] | None
    artifacts_dir: str | None
    seed: int
    evaluators: tuple[ComponentSpec, ...]
    names: tuple[str, ...]
    fingerprints: tuple[str, ...]
    stages: tuple[tuple[int, ...], ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self), allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> PipelineSpec:
        d = json.loads(text)
        return cls(space=ComponentSpec(**d["space"]), dataset=d["dataset"], artifacts_dir=d["artifacts_dir"],
                   seed=d["seed"], evaluators=tuple(ComponentSpec(**e) for e in d["evaluators"]),
                   names=tuple(d["names"]), fingerprints=tuple(d["fingerprints"]),
                   stages=tuple(tuple(int(i) for i in st) for st in d.get("stages", ())))


def shared_files(spec: PipelineSpec) -> dict[str, Path]:
    """The large read-only files the pipeline's evaluators read (a supernet checkpoint), by ``"<index>:<param>"``:
    what an evaluator class lists through its ``shared_files(params)``, for an executor to ship once."""
    from hwnas.evaluation import EVALUATORS

    out: dict[str, Path] = {}
    for i, ev in enumerate(spec.evaluators):
        importlib.import_module(ev.module)
        lister = getattr(EVALUATORS.get(ev.name), "shared_files", None)
        if lister is not None:
            out.update({f"{i}:{param}": Path(path) for param, path in lister(ev.params).items()})
    return out


def with_local_files(spec: PipelineSpec, blobs: Mapping[str, tuple[str, bytes]], folder: Path) -> PipelineSpec:
    """The spec with each shipped file (``"<index>:<param>"`` -> (file name, bytes); ``<param>`` may be
    ``<list parameter>.<position>``) written under ``folder`` and its evaluator parameter pointing there (the
    files' bytes, hence the evaluators' fingerprints, are the same)."""
    evaluators = list(spec.evaluators)
    for key, (name, data) in blobs.items():
        index, param = key.split(":", 1)
        local = folder / f"{index}-{param}" / name
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(data)
        ev = evaluators[int(index)]
        params = dict(ev.params)
        name_, _, item = param.partition(".")  # "ensemble.2": the third path of the list parameter ensemble
        if item:
            paths = list(params[name_])
            paths[int(item)] = str(local)
            params[name_] = paths
        else:
            params[param] = str(local)
        evaluators[int(index)] = ComponentSpec(ev.name, params, ev.module)
    return PipelineSpec(space=spec.space, dataset=spec.dataset, artifacts_dir=spec.artifacts_dir, seed=spec.seed,
                        evaluators=tuple(evaluators), names=spec.names, fingerprints=spec.fingerprints,
                        stages=spec.stages)


def check_rebuildable(spec: ComponentSpec, params_model: type[BaseModel], label: str) -> None:
    """Refuse parameters that do not survive the trip to a worker (JSON and back to the same values).

    Raises:
        ConfigError: Naming the component and the parameters that change on the way.
    """
    try:
        text = json.dumps(spec.params, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{label}: its params cannot be rebuilt in a worker process ({exc}); "
                          "use executor: {name: local}") from None
    original = params_model.model_validate(spec.params).model_dump()
    again = params_model.model_validate(json.loads(text)).model_dump()
    changed = sorted(k for k in original if original[k] != again.get(k))
    if changed:
        raise ConfigError(f"{label}: params {', '.join(changed)} change when sent to a worker process "
                          "(not plain JSON values); use executor: {name: local}")


def rebuild_evaluators(spec: PipelineSpec, *,
                       data: dict[int, ImageData] | None = None) -> list[tuple[str, Evaluator]]:
    """Build the pipeline's evaluators from their specs (in a worker); their fingerprints must match. ``data``:
    the dataset already loaded at some resolutions (an :class:`~hwnas.data.ImageData` each), handed over instead
    of read again from its path.

    Raises:
        ExecutorError: An evaluator cannot be rebuilt, or rebuilt it reports another fingerprint.
    """
    from hwnas.data import DataConfig, DataSource
    from hwnas.evaluation import EVALUATORS, EvalContext, prepare_all
    from hwnas.search_spaces import SPACES

    for module in {spec.space.module, *(e.module for e in spec.evaluators)}:
        importlib.import_module(module)
    space = SPACES.create(spec.space.name, spec.space.params)
    context = EvalContext(space=space,
                          data=DataSource(DataConfig(**spec.dataset), loaded=data) if spec.dataset else None,
                          artifacts_dir=Path(spec.artifacts_dir) if spec.artifacts_dir else None, seed=spec.seed)
    out = []
    for label, ev, expected in zip(spec.names, spec.evaluators, spec.fingerprints):
        try:
            built = EVALUATORS.create(ev.name, ev.params, context=context)
        except Exception as exc:
            raise ExecutorError(f"{label}: cannot be rebuilt in a worker process: "
                                f"{type(exc).__name__}: {exc}") from None
        if built.fingerprint() != expected:
            raise ExecutorError(f"{label}: rebuilt in a worker process it has fingerprint {built.fingerprint()}, "
                                f"the driver's has {expected}; its state is not all in its params")
        try:
            prepare_all([built])
        except Exception as exc:
            raise ExecutorError(f"{label}: cannot be prepared in a worker process: "
                                f"{type(exc).__name__}: {exc}") from None
        out.append((label, built))
    return out


# -- tasks and outcomes ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One architecture to evaluate; ``key`` is the runner's handle for it; ``stage`` says which of the
    pipeline's stages to run (:attr:`PipelineSpec.stages`; 0 in a run with one)."""

    key: int
    arch: Architecture
    stage: int = 0


def stage_evaluators(evaluators: Sequence[tuple[str, T]], stages: Sequence[Sequence[int]],
                     stage: int) -> list[tuple[str, T]]:
    """The evaluators a task of ``stage`` runs: all of them when the pipeline has no stages."""
    if not stages:
        return list(evaluators)
    return [evaluators[i] for i in stages[stage]]


@dataclass(frozen=True)
class Outcome:
    """What the expensive evaluators gave for one task.

    Args:
        key: The task's key.
        metrics: Merged metrics (possibly partial when ``error`` is set).
        error: ``"<evaluator>: <Type>: <message>"`` when an evaluation failed, else None.
        cost_s: Seconds spent evaluating (the last attempt).
        attempts: How many times it was started (more than one after a worker died).
    """

    key: int
    metrics: dict[str, float]
    error: str | None
    cost_s: float
    attempts: int = 1


def merge_result(name: str, result: object, metrics: dict[str, float], provides: Sequence[str] = ()) -> str | None:
    """Merge one evaluator's result for one architecture into ``metrics``; returns an error text or None: the
    evaluator's exception, a result that is not a mapping of metric -> number, a metric it ``provides`` but left
    out, or a non-finite value."""
    if isinstance(result, BaseException):
        return f"{name}: {type(result).__name__}: {result}"
    if not isinstance(result, Mapping):
        return f"{name}: returned {type(result).__name__} for an architecture, not a mapping of metric -> value"
    bad = []
    for m, v in result.items():
        try:
            v = metrics[m] = float(v)
        except (TypeError, ValueError):
            return f"{name}: metric {m!r} is {v!r}, not a number"
        if not math.isfinite(v):
            bad.append(m)
    if bad:
        return f"{name}: non-finite value for {', '.join(bad)}"
    missing = [m for m in provides if m not in result]
    return f"{name}: returned no {', '.join(missing)} (a metric it provides)" if missing else None


def evaluate_chain(evaluators: Sequence[tuple[str, Evaluator]],
                   arch: Architecture) -> tuple[dict[str, float], str | None, float]:
    """Run the evaluators on one architecture in order, stopping at the first failure: (metrics, error, seconds)."""
    metrics: dict[str, float] = {}
    t0 = time.perf_counter()
    for name, ev in evaluators:
        try:
            results = list(ev.evaluate([arch]))
            if len(results) != 1:
                raise ValueError(f"returned {len(results)} results for 1 architecture")
            result = results[0]
        except Exception as exc:  # an evaluator that raises instead of returning the exception
            result = exc
        error = merge_result(name, result, metrics, getattr(ev, "provides", ()))
        if error is not None:
            return metrics, error, time.perf_counter() - t0
    return metrics, None, time.perf_counter() - t0


def evaluate_batch(evaluators: Sequence[tuple[str, Evaluator]],
                   archs: Sequence[Architecture]) -> list[tuple[dict[str, float], str | None, float]]:
    """:func:`evaluate_chain` of each architecture, with one call per evaluator for the whole batch (for
    :class:`~hwnas.evaluation.InstantEvaluator` chains): the same metrics and errors, and each architecture's
    cost is its share of the batch's time.

    An evaluator that raises for the whole call, or returns the wrong number of results, is called again one
    architecture at a time, so that only the architectures it fails on fail.
    """
    n = len(archs)
    metrics: list[dict[str, float]] = [{} for _ in range(n)]
    errors: list[str | None] = [None] * n
    t0 = time.perf_counter()
    for name, ev in evaluators:
        todo = [k for k in range(n) if errors[k] is None]
        if not todo:
            break
        try:
            results = list(ev.evaluate([archs[k] for k in todo]))
            if len(results) != len(todo):
                raise ValueError(f"{len(results)} results for {len(todo)} architectures")
        except Exception:
            chained = [evaluate_chain(((name, ev),), archs[k]) for k in todo]
            for k, (m, error, _) in zip(todo, chained):
                metrics[k].update(m)
                errors[k] = error
            continue
        for k, res in zip(todo, results):
            errors[k] = merge_result(name, res, metrics[k], getattr(ev, "provides", ()))
    share = (time.perf_counter() - t0) / max(n, 1)
    return [(m, e, share) for m, e in zip(metrics, errors)]


@dataclass
class Pipeline:
    """The expensive evaluators: the driver's instances and the spec workers rebuild them from."""

    spec: PipelineSpec
    evaluators: list[tuple[str, Any]] = field(default_factory=list)

    def stage(self, stage: int) -> list[tuple[str, Any]]:
        """The driver's evaluators of one stage (:func:`stage_evaluators`)."""
        return stage_evaluators(self.evaluators, self.spec.stages, stage)


def retry_or_fail(task: Task, attempts: dict[int, int], queue: deque[Task], max_retries: int,
                  what: str) -> Outcome | None:
    """After the worker evaluating ``task`` died (``what`` says how): queue it again first while it has had at
    most ``max_retries`` retries (None), else its failed :class:`Outcome`."""
    n = attempts.get(task.key, 1)
    if n <= max_retries:
        log.warning("%s while evaluating %s; retrying (attempt %d of %d)", what, task.arch.arch_id, n + 1,
                    max_retries + 1)
        queue.appendleft(task)
        return None
    attempts.pop(task.key, None)
    return Outcome(task.key, {}, f"{what} in {n} attempt(s)", 0.0, n)


@runtime_checkable
class Executor(Protocol):
    """Runs expensive evaluations; results come back in completion order."""

    def start(self, pipeline: Pipeline) -> None:
        """Prepare to evaluate with this pipeline (start workers, connect to a cluster)."""
        ...

    def submit(self, tasks: Sequence[Task]) -> None:
        """Queue tasks."""
        ...

    def as_completed(self) -> Iterator[Outcome]:
        """Outcomes as they finish, until every submitted task has one."""
        ...

    def close(self) -> None:
        """Stop workers and release resources (idempotent)."""
        ...


class ExecutorParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def component_spec(registry: Registry[T], name: str, params: Mapping[str, object]) -> ComponentSpec:
    """The spec of a registered component with resolved (JSON) params."""
    return ComponentSpec(name=name, params=dict(params), module=registry.get(name).__module__)
