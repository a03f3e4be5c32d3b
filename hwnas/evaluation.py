"""The Evaluator protocol: batched, cheap or expensive, with a fingerprint for caching."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol, runtime_checkable

from pydantic import AfterValidator, BaseModel, ConfigDict

from hwnas.architecture import Architecture
from hwnas.registry import Registry

if TYPE_CHECKING:
    from hwnas.objectives import Trial
    from hwnas.search_spaces.base import SearchSpace

Metrics = dict[str, float]


@runtime_checkable
class Evaluator(Protocol):
    """Scores architectures.

    Attributes:
        provides: Metric names this evaluator returns (units in the names).
        cheap: True when it is fast enough to run before constraints filter candidates
            (tables, counters, predictors, quick measurements); False for training and the like.

    Both are read-only here (an evaluator may compute them, or narrow ``provides`` to a fixed-length tuple).
    """

    @property
    def provides(self) -> tuple[str, ...]:
        """Metric names this evaluator returns."""
        ...

    @property
    def cheap(self) -> bool:
        """Whether it runs before constraints filter candidates."""
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the evaluator would return different numbers."""
        ...

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        """Metrics per architecture, in order; an exception in a slot marks that one as failed."""
        ...


def protocol_problems(ev: object) -> list[str]:
    """What an evaluator object lacks of :class:`Evaluator` (empty when it conforms): checked when an experiment
    is built, so that a plug-in's slip is one line at ``nas validate`` rather than a traceback mid-run."""
    problems = []
    provides = getattr(ev, "provides", None)
    if not isinstance(provides, (tuple, list)) or not provides or not all(isinstance(m, str) for m in provides):
        problems.append(f"'provides' must be a non-empty tuple of metric names, got {provides!r}")
    if not isinstance(getattr(ev, "cheap", None), bool):
        problems.append(f"'cheap' must be True or False, got {getattr(ev, 'cheap', None)!r}")
    if not callable(getattr(ev, "evaluate", None)):
        problems.append("it has no evaluate(archs) method")
    fingerprint = getattr(ev, "fingerprint", None)
    if not callable(fingerprint):
        problems.append("it has no fingerprint() method")
    else:
        fp = fingerprint()
        if not isinstance(fp, str) or not fp:
            problems.append(f"fingerprint() must return a non-empty string, returned {fp!r}")
    return problems


@runtime_checkable
class Preparable(Protocol):
    """A component with one-off work (reading a table, loading a model, precomputing a space's isomorphism
    classes) that can be done before the search.

    The runner calls :meth:`prepare` on the space and on every evaluator that has it, once, before its first
    ask, and reports the time as setup, so the search loop's rate is not the rate of file reads; a worker
    process prepares its evaluators before it says it is ready. Components without it do such work on first
    use.
    """

    def prepare(self) -> None:
        """Do the one-off work now (idempotent)."""
        ...


def prepare_all(components: Sequence[object]) -> None:
    """:meth:`Preparable.prepare` on each component that has it."""
    for c in components:
        if isinstance(c, Preparable):
            c.prepare()


@runtime_checkable
class Observer(Protocol):
    """A cheap evaluator that learns from the run as it goes (a predictor refitted from the journal).

    The runner calls :meth:`observe` in the driver, in trial order, with every batch of finished trials once
    they are journaled, replayed trials of a resumed run included, so an observer sees the same history and
    answers the same on resume. Only cheap evaluators are observed (expensive ones may live in worker
    processes).
    """

    def observe(self, trials: Sequence[Trial]) -> None:
        """Learn from finished :class:`~hwnas.objectives.Trial` objects (ok, infeasible and failed alike)."""
        ...


@runtime_checkable
class LookupEvaluator(Protocol):
    """A cheap evaluator some of whose metrics are table lookups: a fixed function of the architecture, priced in
    microseconds (a latency table, a learned latency model, the columns of a benchmark table named as lookups).

    The runner gives a :class:`~hwnas.strategies.base.LookupAware` strategy these metrics of any candidate before
    it asks, so that a hardware-aware search spends its evaluations on accuracy alone.
    """

    lookup_metrics: tuple[str, ...]

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        """As :meth:`Evaluator.evaluate`; fast enough to price thousands of candidates per ask."""
        ...


@runtime_checkable
class InstantEvaluator(Protocol):
    """An evaluator whose :meth:`Evaluator.evaluate` takes microseconds per architecture, whatever cost it reports
    (a benchmark table standing in for training): an executor may evaluate every task it holds in one call,
    since no result then waits behind a slow one. ``instant`` is False on instances that do real work."""

    instant: bool

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        """As :meth:`Evaluator.evaluate`."""
        ...


@runtime_checkable
class MultiFidelityEvaluator(Protocol):
    """An evaluator that can score at several fidelities (a multi-fidelity run's rungs): ``train`` at a number of
    epochs, ``benchmark`` from another column of its table.

    ``fidelity_kind`` says in words what a rung's ``fidelity`` is; :meth:`fidelity_problems` says why a value is
    not a fidelity this instance offers (empty when it is one); :meth:`fidelity_params` gives the parameters that
    change at that fidelity, merged over the evaluator's own to build the rung's evaluator (so that a worker
    rebuilds it from plain parameters, and its fingerprint says which fidelity it is).
    """

    fidelity_kind: str

    def fidelity_problems(self, fidelity: object) -> list[str]:
        """Why ``fidelity`` is not offered (one line each), or nothing."""
        ...

    def fidelity_params(self, fidelity: object) -> dict[str, object]:
        """The parameters that differ at ``fidelity`` (checked by :meth:`fidelity_problems` first)."""
        ...


#: The built-in evaluators are listed in :data:`hwnas.evaluators.BUILTIN_EVALUATORS` (the room above this one),
#: read and imported on first lookup.
EVALUATORS: Registry[Evaluator] = Registry(kind="evaluator", entry_point_group="hwnas.evaluators",
                                           builtins="hwnas.evaluators:BUILTIN_EVALUATORS")


def evaluate_each(fn: Callable[[Architecture], Metrics],
                  archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
    """``fn`` on each architecture; an exception goes in that architecture's slot and the batch goes on."""
    out: list[Metrics | BaseException] = []
    for arch in archs:
        try:
            out.append(fn(arch))
        except Exception as exc:  # reported per architecture
            out.append(exc)
    return out


def stable_fingerprint(name: str, params: Mapping[str, object]) -> str:
    """A short, stable hash of a component name and its parameters."""
    text = json.dumps({"name": name, "params": params}, sort_keys=True, default=str, separators=(",", ":"))
    return f"{name}:{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().resolve())


ResolvedPath = Annotated[str, AfterValidator(_absolute)]
"""A file path parameter: relative paths are taken from the working directory and recorded absolute."""


class EvaluatorParams(BaseModel):
    """Parameters common to every evaluator; subclasses add their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class EvalContext:
    """What the experiment hands every evaluator it builds.

    Args:
        space: The search space object.
        data: ``data(resolution)`` loads the dataset at that input resolution, once (None without a dataset).
        artifacts_dir: Folder for files an evaluator keeps (trained weights), or None.
        seed: The experiment seed.
    """

    space: SearchSpace
    data: Callable[[int], Any] | None = None
    artifacts_dir: Path | None = None
    seed: int = 0
