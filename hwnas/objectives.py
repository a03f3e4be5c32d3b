"""Objectives, constraints, trials, Pareto fronts and hypervolume (numpy only)."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _json_str
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

import numpy as np

from hwnas.architecture import Architecture, ArchitectureDict

Direction = Literal["min", "max"]
Status = Literal["ok", "infeasible", "failed"]


class _TrialDictFields(TypedDict):
    number: int
    arch_id: str
    arch: ArchitectureDict
    metrics: dict[str, float | None]
    status: Status
    cost_s: float


class TrialDict(_TrialDictFields, total=False):
    """The JSON form of a :class:`Trial` (:meth:`Trial.to_dict`, one journal line): ``error`` only on a failure;
    ``rung``, ``rungs`` and ``rung_cost`` only in a multi-fidelity run."""

    error: str
    rung: int
    rungs: int
    rung_cost: float


#: One objective's entry of :meth:`ReferencePoint.to_dict` (``from`` is a keyword, hence the call syntax).
ReferenceEntry = TypedDict("ReferenceEntry", {"value": float | None, "from": str})


@dataclass(frozen=True)
class Objective:
    """A metric to optimise.

    Args:
        metric: Metric name, with its unit in the name (``latency_ms``, ``top1``).
        direction: ``"min"`` or ``"max"``.
        reference: The worst value that still counts toward the hypervolume (the reference point's
            coordinate, in the metric's units); None to derive it (see :func:`reference_point`).
    """

    metric: str
    direction: Direction = "min"
    reference: float | None = None

    def __post_init__(self) -> None:
        if self.direction not in ("min", "max"):
            raise ValueError(f"objective {self.metric!r}: direction must be 'min' or 'max', not {self.direction!r}")
        if self.reference is not None and not math.isfinite(self.reference):
            raise ValueError(f"objective {self.metric!r}: the hypervolume reference must be finite")

    def to_minimise(self, value: float) -> float:
        """The value on a scale where smaller is better."""
        return -value if self.direction == "max" else value


#: References a relative constraint can be measured against (a member of the space, by name).
RELATIVE_TO: tuple[str, ...] = ("largest",)


@dataclass(frozen=True)
class Constraint:
    """A bound on a metric: ``min <= metrics[metric] <= max``.

    A relative constraint (``relative_to="largest"``) gives its bounds as fractions of the metric of a
    reference member of the space, measured by the same evaluator on the same machine: ``max=0.6`` is
    "at most 60 % of the largest network's latency", a budget that means the same on any hardware. It
    becomes absolute with :meth:`resolved` once the reference is measured (the run does it first); an
    unresolved one cannot judge a trial.

    Args:
        metric: Metric name.
        max: Upper bound, or None (a fraction of the reference's value when ``relative_to`` is set).
        min: Lower bound, or None (likewise).
        relative_to: ``"largest"`` for a relative constraint, None for an absolute one.
        reference_value: The reference's measured value, once resolved.
    """

    metric: str
    max: float | None = None
    min: float | None = None
    relative_to: str | None = None
    reference_value: float | None = None

    def __post_init__(self) -> None:
        if self.max is None and self.min is None:
            raise ValueError(f"constraint on {self.metric!r} needs 'max' or 'min'")
        for name, bound in (("max", self.max), ("min", self.min)):
            if bound is not None and not math.isfinite(bound):
                raise ValueError(f"constraint on {self.metric!r}: {name} {bound} is not a finite number")
        if self.max is not None and self.min is not None and self.min > self.max:
            raise ValueError(f"constraint on {self.metric!r}: min {self.min:g} is above max {self.max:g}: "
                             "no value satisfies it")
        if self.relative_to is not None and self.relative_to not in RELATIVE_TO:
            raise ValueError(f"constraint on {self.metric!r}: relative_to {self.relative_to!r} is not one of "
                             f"{', '.join(RELATIVE_TO)}")

    @property
    def is_resolved(self) -> bool:
        """Absolute, or relative with its reference measured."""
        return self.relative_to is None or self.reference_value is not None

    def resolved(self, reference_value: float) -> Constraint:
        """The absolute constraint of a relative one, given the reference's measured value."""
        if self.relative_to is None:
            raise ValueError(f"constraint {self.describe()} is not relative")
        if not (math.isfinite(reference_value) and reference_value > 0):
            raise ValueError(f"constraint on {self.metric!r}: the {self.relative_to} member measured "
                             f"{reference_value!r}; a relative bound needs a finite positive reference")
        scale = float(reference_value)
        return Constraint(self.metric, max=None if self.max is None else self.max * scale,
                          min=None if self.min is None else self.min * scale, relative_to=self.relative_to,
                          reference_value=scale)

    def violation(self, metrics: Mapping[str, float]) -> float:
        """How far the metric is outside the bound (0 when satisfied; inf when the metric is missing or NaN)."""
        if not self.is_resolved:
            raise ValueError(f"constraint on {self.metric!r} is relative to the {self.relative_to} member, which has "
                             "not been measured yet (the run resolves it before its first trial)")
        value = metrics.get(self.metric)
        if value is None or not math.isfinite(value):
            return math.inf
        v = 0.0
        if self.max is not None and value > self.max:
            v += value - self.max
        if self.min is not None and value < self.min:
            v += self.min - value
        return v

    def is_satisfied(self, metrics: Mapping[str, float]) -> bool:
        """True when the metric is present and within bounds."""
        return self.violation(metrics) == 0.0

    def describe(self) -> str:
        """Human form, e.g. ``latency_ms <= 2.5``, ``latency_ms <= 0.6 x largest`` or, resolved,
        ``latency_ms <= 0.0612 (0.6 x largest's 0.102)``."""
        parts = []
        for op, bound in ((">=", self.min), ("<=", self.max)):
            if bound is None:
                continue
            if self.relative_to is None:
                parts.append(f"{self.metric} {op} {bound:g}")
            elif self.reference_value is None:
                parts.append(f"{self.metric} {op} {bound:g} x {self.relative_to}")
            else:
                parts.append(f"{self.metric} {op} {bound:g} ({bound / self.reference_value:g} x {self.relative_to}'s "
                             f"{self.reference_value:g})")
        return " and ".join(parts)


@dataclass(frozen=True)
class Trial:
    """One evaluated candidate.

    Args:
        number: Position in the run (0-based, in the order candidates were asked).
        arch: The canonical architecture.
        metrics: Metric name to value (units in the names).
        status: ``ok``, ``infeasible`` (failed a constraint on cheap metrics, not evaluated further)
            or ``failed`` (an evaluator raised).
        cost_s: Wall seconds spent evaluating it.
        error: The failure message for failed trials.
        rung: In a multi-fidelity run, the rung (fidelity) this evaluation is of, 0 the cheapest; None otherwise.
            One candidate has one trial per rung it reached, all with its ``number``.
        rungs: How many rungs the run's schedule has (with ``rung``).
        rung_cost: What this evaluation cost in the schedule's unit (epochs, seconds), as the schedule states.
    """

    number: int
    arch: Architecture
    metrics: Mapping[str, float] = field(default_factory=dict)
    status: Status = "ok"
    cost_s: float = 0.0
    error: str | None = None
    rung: int | None = None
    rungs: int | None = None
    rung_cost: float | None = None

    @property
    def partial(self) -> bool:
        """A multi-fidelity evaluation below the top rung: its figures are not the run's final word on the
        candidate (it is on no front)."""
        return self.rung is not None and self.rungs is not None and self.rung < self.rungs - 1

    def to_dict(self) -> TrialDict:
        """JSON form (one journal line)."""
        out: TrialDict = {
            "number": self.number,
            "arch_id": self.arch.arch_id,
            "arch": self.arch.to_dict(),
            "metrics": {k: _json_float(v) for k, v in self.metrics.items()},
            "status": self.status,
            "cost_s": round(self.cost_s, 6),
        }
        if self.error:
            out["error"] = self.error
        if self.rung is not None:
            out["rung"] = self.rung
            out["rungs"] = int(self.rungs or 0)
            out["rung_cost"] = float(self.rung_cost or 0.0)
        return out

    def to_json(self, **extra: str) -> str:
        """:meth:`to_dict` as one line of JSON text, plus string fields ``extra`` (the journal's fast path:
        the architecture's canonical JSON is computed once per architecture, not once per line)."""
        tail = "".join(f", {_json_str(key)}: {_json_str(value)}" for key, value in extra.items())
        return self.json_line(tail + "}")

    def json_line(self, end: str = "}") -> str:
        """:meth:`to_json` with ``end`` (raw JSON text: further fields, then the closing brace) in place of
        ``extra``; a writer of many lines with the same extra fields encodes them once."""
        metrics = ", ".join([f"{_json_key(k)}: {_json_number(v)}" for k, v in self.metrics.items()])
        error = f', "error": {_json_str(self.error)}' if self.error else ""
        if self.rung is not None:
            error += (f', "rung": {int(self.rung)}, "rungs": {int(self.rungs or 0)}, '
                      f'"rung_cost": {_json_number(float(self.rung_cost or 0.0))}')
        return (f'{{"number": {int(self.number)}, "arch_id": "{self.arch.arch_id}", "arch": {self.arch.to_json()}, '
                f'"metrics": {{{metrics}}}, "status": {_json_key(self.status)}, '
                f'"cost_s": {_json_number(round(self.cost_s, 6))}{error}{end}')

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trial:
        """Inverse of :meth:`to_dict` (checks that the stored arch_id matches the architecture)."""
        arch = Architecture.from_dict(data["arch"])
        if "arch_id" in data and data["arch_id"] != arch.arch_id:
            raise ValueError(f"arch_id {data['arch_id']} does not match its genes ({arch.arch_id})")
        status = data.get("status", "ok")
        if status not in ("ok", "infeasible", "failed"):
            raise ValueError(f"unknown trial status {status!r}")
        metrics = {str(k): (math.nan if v is None else float(v)) for k, v in dict(data.get("metrics", {})).items()}
        return cls(
            number=int(data["number"]),
            arch=arch,
            metrics=metrics,
            status=status,
            cost_s=float(data.get("cost_s", 0.0)),
            error=data.get("error"),
            rung=int(data["rung"]) if data.get("rung") is not None else None,
            rungs=int(data["rungs"]) if data.get("rungs") is not None else None,
            rung_cost=float(data["rung_cost"]) if data.get("rung_cost") is not None else None,
        )


def _json_number(v: float) -> str:
    """JSON text of a float as :func:`json.dumps` writes it (``null`` for NaN and infinities, like ``to_dict``)."""
    text = repr(float(v))
    return "null" if text in _NOT_FINITE else text


_NOT_FINITE = frozenset({"nan", "inf", "-inf"})


@functools.lru_cache(maxsize=256)
def _json_key(key: str) -> str:
    """JSON text of a metric name (the same few names on every journal line: encoded once each)."""
    return _json_str(key)


def _json_float(v: float) -> float | None:
    v = float(v)
    return v if math.isfinite(v) else None


def objective_matrix(trials: Sequence[Trial], objectives: Sequence[Objective]) -> np.ndarray:
    """Objective values of trials as an (n, k) array on the minimise scale (NaN where missing)."""
    names = [o.metric for o in objectives]
    nan = math.nan
    out = np.array([[t.metrics.get(m, nan) for m in names] for t in trials], dtype=float)
    out = out.reshape(len(trials), len(objectives))
    signs = np.array([o.to_minimise(1.0) for o in objectives])
    scaled: np.ndarray = out * signs
    return scaled


def non_dominated(points: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated rows of ``points`` (all objectives minimised).

    Rows with a NaN are never on the front. Exact duplicates are all kept.
    """
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2:
        raise ValueError("points must be a 2-D array")
    valid = np.flatnonzero(~np.isnan(pts).any(axis=1))
    if valid.size == 0:
        return np.asarray([], dtype=int)
    P = pts[valid]
    if P.shape[1] == 2:
        on_front: np.ndarray = valid[_non_dominated_2d(P)]
        return on_front
    # A dominator precedes what it dominates in lexicographic order, and a dominated dominator's own
    # dominator dominates too: adding points in that order to an incremental front is enough, O(n·front).
    front = IncrementalFront(P.shape[1])
    keep = [int(valid[j]) for j in np.lexsort(P.T[::-1]) if front.add(P[j])]
    return np.sort(np.asarray(keep, dtype=int))


#: Up to this many rows :func:`non_dominated_rows` compares every pair in Python; past it, :func:`non_dominated`.
FEW_ROWS = 32


def non_dominated_rows(rows: Sequence[Sequence[float]]) -> list[int]:
    """:func:`non_dominated` of a few rows of Python floats (a tournament's), the same indices in the same
    (ascending) order, without numpy's per-call overhead: a pairwise test up to :data:`FEW_ROWS` rows.

    Rows with a NaN are never on the front; exact duplicates are all kept (neither dominates the other).
    """
    if len(rows) > FEW_ROWS:
        return [int(i) for i in non_dominated(np.asarray(rows, dtype=float).reshape(len(rows), -1))]
    out = []
    if all(len(r) == 2 for r in rows):
        points = [(i, x, y) for i, (x, y) in enumerate(rows) if x == x and y == y]  # NaN != NaN
        for i, x, y in points:
            for _, qx, qy in points:  # (qx, qy) dominates (x, y): no coordinate worse, one better
                if qx <= x and qy <= y and (qx < x or qy < y):
                    break
            else:
                out.append(i)
        return out
    valid = [(i, r) for i, r in enumerate(rows) if not any(v != v for v in r)]
    for i, p in valid:
        for _, q in valid:
            if all(a <= b for a, b in zip(q, p)) and any(a < b for a, b in zip(q, p)):
                break
        else:
            out.append(i)
    return out


def _non_dominated_2d(P: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated rows of an (n, 2) array without NaNs, in O(n log n), duplicates kept.

    Among distinct points in lexicographic order every earlier point q has q.x <= p.x, so q dominates p
    exactly when q.y <= p.y: p is on the front iff its y is below every earlier distinct point's y.
    """
    uniq, inverse = np.unique(P, axis=0, return_inverse=True)
    on_front = np.ones(len(uniq), dtype=bool)  # the first distinct point has no earlier one (even at y = inf)
    on_front[1:] = uniq[1:, 1] < np.minimum.accumulate(uniq[:-1, 1])
    return np.flatnonzero(on_front[inverse.ravel()])


class IncrementalFront:
    """The non-dominated set of points added one at a time (every coordinate minimised).

    Adding a point costs O(front size): following a search of n trials costs O(n·front), not the O(n²)
    of recomputing the front after every trial. A point equal to a member joins (duplicates are kept).
    """

    def __init__(self, n_objectives: int) -> None:
        self.points = np.empty((0, n_objectives))

    def add(self, point: np.ndarray) -> bool:
        """Add a point; returns whether it joined the front (members it dominates leave)."""
        F = self.points
        if len(F):
            if bool(np.any(np.all(F <= point, axis=1) & np.any(F < point, axis=1))):
                return False
            F = F[~(np.all(point <= F, axis=1) & np.any(point < F, axis=1))]
        self.points = np.vstack([F, point[None]])
        return True

    def add_many(self, points: np.ndarray) -> int:
        """Add the rows of ``points`` in order (the same front as :meth:`add` on each); returns how many joined.

        One vectorised test first drops the rows the current front already dominates (in a search, most of
        them), so a batch costs a few numpy calls rather than a few per point.
        """
        points = np.asarray(points, dtype=float).reshape(-1, self.points.shape[1])
        F = self.points
        if len(F) and len(points):
            le = np.all(F[None, :, :] <= points[:, None, :], axis=2)
            lt = np.any(F[None, :, :] < points[:, None, :], axis=2)
            points = points[~np.any(le & lt, axis=1)]
        return sum(self.add(p) for p in points)

    def __len__(self) -> int:
        return len(self.points)


def pareto_front(trials: Sequence[Trial], objectives: Sequence[Objective]) -> list[Trial]:
    """The ``ok`` trials that no other ``ok`` trial dominates, one per architecture, sorted by the first objective.

    In a multi-fidelity run only top-rung trials count: a candidate evaluated only at a lower rung is on no front.
    """
    ok = [t for t in trials if t.status == "ok" and not t.partial]
    seen: dict[str, Trial] = {}
    for t in ok:
        seen.setdefault(t.arch.arch_id, t)
    unique = list(seen.values())
    if not unique:
        return []
    idx = non_dominated(objective_matrix(unique, objectives))
    front = [unique[i] for i in idx]
    first = objectives[0]
    front.sort(key=lambda t: (first.to_minimise(t.metrics[first.metric]), t.number))
    return front


#: Unit suffixes of hardware metrics (time, energy, memory): what a device measures, as opposed to what the
#: network computes (accuracy, parameters, FLOPs). Metric names carry their unit (``latency_ms@pixel3``).
HARDWARE_UNITS = ("_ms", "_us", "_s", "_mj", "_j", "_mb", "_gb")


def is_hardware_metric(metric: str) -> bool:
    """Whether ``metric`` is measured on a device (its unit, before any ``@device``, is a time, energy or
    memory: see :data:`HARDWARE_UNITS`)."""
    return metric.partition("@")[0].endswith(HARDWARE_UNITS)


#: Metrics whose worst value is known without the experiment saying so: an accuracy (a fraction or a
#: percentage, with or without an ``@dataset`` suffix) is at least 0.
NATURAL_WORST: dict[str, float] = {"top1": 0.0, "top5": 0.0}


@dataclass(frozen=True)
class ReferencePoint:
    """The hypervolume reference of an experiment, fixed before the search so that fronts of different runs
    compare: per objective its value in the metric's units (None where none could be fixed) and where it
    came from."""

    values: tuple[float | None, ...]
    sources: tuple[str, ...]
    objectives: tuple[Objective, ...]

    @property
    def complete(self) -> bool:
        return all(v is not None for v in self.values)

    def point(self) -> np.ndarray:
        """On the minimise scale (raises when an objective has none)."""
        if not self.complete:
            raise ValueError(f"no hypervolume reference for {', '.join(self.missing())}")
        return np.array([o.to_minimise(float(v)) for o, v in zip(self.objectives, self.values)])  # type: ignore[arg-type]

    def missing(self) -> list[str]:
        return [o.metric for o, v in zip(self.objectives, self.values) if v is None]

    def to_dict(self) -> dict[str, ReferenceEntry]:
        """JSON form, for ``pareto.json``: ``{metric: {"value": v, "from": source}}``."""
        return {o.metric: {"value": v, "from": src} for o, v, src in zip(self.objectives, self.values, self.sources)}


def reference_point(objectives: Sequence[Objective], constraints: Sequence[Constraint] = ()) -> ReferencePoint:
    """The reference point fixed by the experiment, per objective in this order:

    1. the objective's own ``reference`` (``objectives[i].reference`` in the YAML);
    2. a constraint bound on the same metric on its worse side (``max`` of a minimised metric, ``min`` of a
       maximised one): a candidate beyond it is infeasible anyway;
    3. the metric's natural worst value (:data:`NATURAL_WORST`: an accuracy is at least 0, when maximised).

    An objective with none of these has no reference (``values[i]`` is None): its run reports no hypervolume
    rather than one measured from the run's own worst point, which does not compare across runs.
    """
    values: list[float | None] = []
    sources: list[str] = []
    for i, o in enumerate(objectives):
        if o.reference is not None:
            values.append(float(o.reference))
            sources.append(f"objectives[{i}].reference")
            continue
        side = "max" if o.direction == "min" else "min"
        bounds = [(j, getattr(c, side)) for j, c in enumerate(constraints)  # a relative one once measured
                  if c.metric == o.metric and getattr(c, side) is not None and c.is_resolved]
        if bounds:  # the tightest bound on the worse side
            j, bound = min(bounds, key=lambda jb: o.to_minimise(jb[1]))
            values.append(float(bound))
            sources.append(f"constraints[{j}].{side}")
            continue
        pending = [j for j, c in enumerate(constraints)
                   if c.metric == o.metric and getattr(c, side) is not None and not c.is_resolved]
        if pending:
            values.append(None)
            ref = constraints[pending[0]].relative_to
            sources.append(f"constraints[{pending[0]}].{side}, once the run measures its {ref} member")
            continue
        natural = NATURAL_WORST.get(o.metric.partition("@")[0])
        if natural is not None and o.direction == "max":
            values.append(natural)
            sources.append(f"the metric's natural bound (an accuracy is at least {natural:g})")
            continue
        values.append(None)
        sources.append(f"none: give objectives[{i}].reference")
    return ReferencePoint(tuple(values), tuple(sources), tuple(objectives))


def hypervolume(points: np.ndarray, reference: Sequence[float] | np.ndarray) -> float:
    """Hypervolume dominated by ``points`` (minimised) and bounded by ``reference``.

    Exact: a sweep in 2-D, slicing over the first objective in higher dimensions.
    Points that do not strictly dominate the reference add nothing.
    """
    pts = np.asarray(points, dtype=float)
    ref = np.asarray(reference, dtype=float)
    if pts.size == 0:
        return 0.0
    if pts.ndim != 2 or pts.shape[1] != ref.shape[0]:
        raise ValueError("points must be (n, k) with k == len(reference)")
    pts = pts[np.all(pts < ref, axis=1)]
    if len(pts) == 0:
        return 0.0
    pts = pts[non_dominated(pts)]
    return _hv(pts, ref)


def hypervolume_improvement(points: np.ndarray, front: np.ndarray, ref: Sequence[float] | np.ndarray) -> np.ndarray:
    """Per row of ``points``, the hypervolume it adds to ``front`` (minimised, bounded by ``ref``).

    Two objectives: exact and vectorised over the rows (the front's staircase cut into vertical strips).
    More: the difference of two exact hypervolumes per row.
    """
    pts = np.asarray(points, dtype=float)
    ref = np.asarray(ref, dtype=float)
    front = np.asarray(front, dtype=float).reshape(-1, pts.shape[1])
    front = front[np.all(front < ref, axis=1)]
    if front.shape[0] == 0:
        alone: np.ndarray = np.prod(np.clip(ref - pts, 0.0, None), axis=1)
        return alone
    if pts.shape[1] == 2:
        f = front[non_dominated(front)]
        f = f[np.argsort(f[:, 0], kind="stable")]
        # strips [x_k, x_{k+1}) in which the front covers everything above height h_k (h = ref before x_0)
        xs = np.concatenate([f[:, 0], [ref[0]]])
        starts = np.concatenate([[-np.inf], xs[:-1]])
        ends = xs
        heights = np.concatenate([[ref[1]], f[:, 1]])
        left = np.maximum(starts[None, :], pts[:, :1])
        width = np.clip(np.minimum(ends[None, :], ref[0]) - left, 0.0, None)
        height = np.clip(heights[None, :] - pts[:, 1:2], 0.0, None)
        return np.asarray((width * height).sum(axis=1))
    r = [float(v) for v in ref]
    base = hypervolume(front, r)
    return np.array([hypervolume(np.vstack([front, p]), r) - base for p in pts])


def _hv(pts: np.ndarray, ref: np.ndarray) -> float:
    k = pts.shape[1]
    if k == 1:
        return float(ref[0] - pts[:, 0].min())
    if k == 2:
        order = np.argsort(pts[:, 0])
        total, best_y = 0.0, ref[1]
        for x, y in pts[order]:
            if y < best_y:
                total += (ref[0] - x) * (best_y - y)
                best_y = y
        return float(total)
    order = np.argsort(pts[:, 0])
    pts = pts[order]
    total = 0.0
    for i in range(len(pts)):
        upper = pts[i + 1, 0] if i + 1 < len(pts) else ref[0]
        width = upper - pts[i, 0]
        if width <= 0:
            continue
        sl = pts[: i + 1, 1:]
        sl = sl[non_dominated(sl)]
        total += width * _hv(sl, ref[1:])
    return float(total)


#: Bounds on metrics: metric -> (lowest allowed or None, highest allowed or None).
Bounds = Mapping[str, tuple[float | None, float | None]]


@runtime_checkable
class KnownValues(Protocol):
    """An evaluator that knows before any search which values its metrics take over the space (a latency table's
    cheapest and dearest members, a benchmark table's rows). Read by :func:`joint_conflicts` for the user's warning
    only; nothing of it is handed to a strategy."""

    provides: Sequence[str]

    def unmeetable(self, bounds: Bounds) -> str | None:
        """None when some member of the space meets every bound on this evaluator's metrics at once (or it cannot
        say); else what the metrics can be, e.g. ``latency_ms@pixel3 ranges from 2.84 to 47.1 over ...``."""
        ...


def _bound_text(metric: str, lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"{metric} from {lo:g} to {hi:g}"
    return f"{metric} at least {lo:g}" if lo is not None else f"{metric} at most {hi:g}"


def joint_conflicts(constraints: Sequence[Constraint], known: Sequence[object] = ()) -> list[str]:
    """Constraints that no architecture can meet together: on one metric (and the same reference), the highest
    lower bound above the lowest upper bound, each named by its place in the list (``constraints[2]``); and, for the
    evaluators among ``known`` that know their metrics' values before any search (:class:`KnownValues`), absolute
    bounds that no member meets together. A single constraint's own ``min > max`` is refused where it is written;
    this finds the ones spread over several, or outside what the space can reach."""
    out = []
    groups: dict[tuple[str, str | None], list[tuple[int, Constraint]]] = {}
    for i, c in enumerate(constraints):
        groups.setdefault((c.metric, c.relative_to), []).append((i, c))
    for (metric, relative), members in groups.items():
        lows = [(c.min, i) for i, c in members if c.min is not None]
        highs = [(c.max, i) for i, c in members if c.max is not None]
        if not lows or not highs:
            continue
        (lo, i_lo), (hi, i_hi) = max(lows), min(highs)
        if lo > hi and i_lo != i_hi:
            of = f" of the {relative} member's" if relative else ""
            out.append(f"constraints[{i_lo}] and constraints[{i_hi}]: {metric} at least {lo:g}{of} and at most "
                       f"{hi:g}{of}: no architecture can meet both, so every trial will be infeasible")
    for ev in known:
        if not isinstance(ev, KnownValues):
            continue
        bounds: dict[str, tuple[float | None, float | None]] = {}
        named: list[int] = []
        for (metric, relative), members in groups.items():
            if relative or metric not in ev.provides:  # a relative bound is known once its reference is measured
                continue
            floor = max((c.min for _, c in members if c.min is not None), default=None)
            ceiling = min((c.max for _, c in members if c.max is not None), default=None)
            if floor is not None and ceiling is not None and floor > ceiling:  # said above
                continue
            bounds[metric] = (floor, ceiling)
            named += [i for i, _ in members]
        why = ev.unmeetable(bounds) if bounds else None
        if why:
            which = " and ".join(f"constraints[{i}]" for i in sorted(named))
            asked = ", ".join(_bound_text(m, *b) for m, b in bounds.items())
            out.append(f"{which}: {asked}: {why}: no architecture can meet "
                       f"{'them together' if len(named) > 1 else 'it'}, so every trial will be infeasible")
    return out


def promotion_order(trials: Sequence[Trial], objectives: Sequence[Objective],
                    constraints: Sequence[Constraint] = ()) -> list[Trial]:
    """Trials of one rung, best first, for a multi-fidelity run's promotions.

    Feasible (``ok``) trials first, by non-dominated rank (the fronts peeled with :func:`non_dominated`), within
    a front by hypervolume contribution (what the front loses without it, :func:`hypervolume_improvement`),
    largest first; then infeasible ones by total violation of ``constraints``, smallest first; failed ones last.
    Ties by trial number. The hypervolume reference is taken from these trials alone: per objective, the worst
    value among them plus a tenth of their range (so the extremes of a front contribute), never from anything
    the run has not evaluated.
    """
    ok = [t for t in trials if t.status == "ok"]
    points = objective_matrix(ok, objectives)
    usable = ~np.isnan(points).any(axis=1)
    ordered: list[Trial] = []
    if usable.any():
        pts = points[usable]
        members = [t for t, u in zip(ok, usable) if u]
        span = pts.max(axis=0) - pts.min(axis=0)
        ref = pts.max(axis=0) + 0.1 * span + 1e-9 * (1.0 + np.abs(pts.max(axis=0)))
        remaining = np.arange(len(members))
        while remaining.size:
            front = remaining[non_dominated(pts[remaining])]
            f = pts[front]
            gain = np.array([hypervolume_improvement(f[j:j + 1], np.delete(f, j, axis=0), ref)[0]
                             for j in range(len(front))])
            order = sorted(range(len(front)), key=lambda j: (-gain[j], members[int(front[j])].number))
            ordered.extend(members[int(front[j])] for j in order)
            remaining = np.setdiff1d(remaining, front, assume_unique=True)
    ordered.extend(sorted((t for t, u in zip(ok, usable) if not u), key=lambda t: t.number))  # a metric missing
    infeasible = [t for t in trials if t.status == "infeasible"]
    ordered.extend(sorted(infeasible, key=lambda t: (sum(c.violation(t.metrics) for c in constraints), t.number)))
    ordered.extend(sorted((t for t in trials if t.status == "failed"), key=lambda t: t.number))
    return ordered
