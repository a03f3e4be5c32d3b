"""A latency model priced from a per-unit table: :class:`TableLatencyModel` (the sum of a member's units, with the
table's calibration or learned correction, and resolutions the table did not measure interpolated)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture, MissingLatencyEntry
from hwnas.latency.context import DeviceContext
from hwnas.latency.tables.table import LatencyTable

if TYPE_CHECKING:
    from hwnas.search_spaces import ElasticResolutionSpace, LayerKey, SearchSpace


class TableLatencyModel:
    """A :class:`LatencyModel` from a per-unit :class:`~hwnas.latency.tables.LatencyTable`.

    An architecture costs the sum of its units' medians, corrected by the table's calibration when it has one
    and ``calibrated`` is set (:meth:`LatencyTable.predict_ms`), and by the table's learned whole-network
    correction when validation chose it (``table.answers == "learned"``, :mod:`hwnas.latency.tables.learned`).

    Args:
        table: The table; it must be for ``space``.
        space: The search space whose ``layers()`` key the table.
        calibrated: Apply the table's calibration when it has one.

    Raises:
        LatencyTableError: The table is for another space.
    """

    def __init__(self, *, table: LatencyTable, space: SearchSpace, calibrated: bool = True) -> None:
        table.check(space=space.name)
        self.table = table
        self.space = space
        self.calibrated = calibrated
        #: The resolutions the table measured, where it prices the others of ``space`` by interpolation.
        self.measured_resolutions: tuple[int, ...] | None = None
        #: The space the table was measured for: it prices (keys, encodes) the networks at measured resolutions.
        self.table_space: SearchSpace = space
        self._elastic: ElasticResolutionSpace | None = None  # the space, where the table prices it by interpolation
        self._init_interpolation()
        #: Per unmeasured resolution, the factor that corrects the interpolated price (fitted by ``nas latency
        #: validate --space-param resolutions=[...]`` on whole networks there, used where it judged better).
        self.resolution_factors: dict[int, float] | None = None
        if self.measured_resolutions is not None and calibrated:
            self.resolution_factors = used_resolution_factors(table, self.measured_resolutions)
        self._learned: Any = None
        if self.uses_learned:
            from hwnas.latency.tables.learned import load_model
            from hwnas.latency.tables.table import LatencyTableError

            try:
                self._learned = load_model(table)
            except ValueError as exc:
                raise LatencyTableError(str(exc)) from None

    def _init_interpolation(self) -> None:
        """A table measured at some resolutions of an elastic-resolution space prices the others in between."""
        from hwnas.latency.tables.table import LatencyTableError
        from hwnas.search_spaces.base import ElasticResolutionSpace

        theirs = self.table.space_params
        if not theirs or not isinstance(self.space, ElasticResolutionSpace):
            return
        mine = dict(self.space.params.model_dump(mode="json"))
        measured = theirs.get("resolutions")
        if not isinstance(measured, list) or measured == mine.get("resolutions"):
            return
        other = sorted(k for k in set(mine) | set(theirs) if k != "resolutions" and mine.get(k) != theirs.get(k))
        if other:
            return  # not a resolution subset: the evaluator's parameter check names the difference
        self.table_space = type(self.space)(**theirs)
        self.measured_resolutions = tuple(sorted(int(r) for r in measured))
        self._elastic = self.space
        lo, hi = self.measured_resolutions[0], self.measured_resolutions[-1]
        outside = [r for r in self.space.resolution_choices() if not lo <= r <= hi]
        if outside:
            raise LatencyTableError(f"{self._where()} measured resolutions {list(self.measured_resolutions)}; the "
                                    f"space's {outside} lie outside them and cannot be interpolated: profile "
                                    f"those resolutions (--space-param resolutions=[...])")

    def _bracket(self, arch: Architecture) -> list[tuple[Architecture, float]]:
        """``arch`` as (architecture at a measured resolution, weight) pairs: itself, or its two neighbours
        weighted linearly in pixel count (``r²``)."""
        elastic = self._elastic
        if self.measured_resolutions is None or elastic is None:  # both set, or neither
            return [(arch, 1.0)]
        res = self.measured_resolutions
        r = elastic.resolution_of(arch)
        if r in res:
            return [(arch, 1.0)]
        hi = next(i for i, m in enumerate(res) if m > r)
        r0, r1 = res[hi - 1], res[hi]
        w = (r * r - r0 * r0) / (r1 * r1 - r0 * r0)
        at = elastic.at_resolution
        return [(at(arch, r0), 1.0 - w), (at(arch, r1), w)]

    @property
    def uses_learned(self) -> bool:
        """Whether whole networks are priced by the table's learned correction (validation chose it)."""
        return self.calibrated and self.table.answers == "learned" and self.table.calibration is not None

    @property
    def context(self) -> DeviceContext:
        """The table's measurement context."""
        return self.table.context

    def _where(self) -> str:
        return self.table.source or f"{self.table.space} table"

    def predict_ms(self, archs: Sequence[Architecture]) -> np.ndarray:
        """Whole-network latency (ms) per architecture; every key missing from any of them is named at once.

        At a resolution the table did not measure, the prediction interpolates (in pixel count) between the
        predictions at the two measured resolutions around it, times that resolution's factor where the table
        has a per-resolution correction in use (:attr:`resolution_factors`).
        """
        pairs = [self._bracket(a) for a in archs]
        flat = [a for pair in pairs for a, _ in pair]
        priced = self._predict_measured(flat)
        out = np.empty(len(archs), dtype=float)
        k = 0
        for i, pair in enumerate(pairs):
            out[i] = sum(w * priced[k + j] for j, (_, w) in enumerate(pair))
            k += len(pair)
        if self.resolution_factors and self._elastic is not None:  # factors exist only where it interpolates
            res = [self._elastic.resolution_of(a) for a in archs]
            out *= np.array([resolution_factor(self.resolution_factors, self.measured_resolutions or (), r)
                             for r in res])
        return out

    def _predict_measured(self, archs: Sequence[Architecture]) -> np.ndarray:
        out = np.empty(len(archs), dtype=float)
        missing: set[str] = set()
        space = self.table_space
        for i, arch in enumerate(archs):
            try:
                out[i] = self.table.predict_ms(space.layers(arch), calibrated=self.calibrated)
            except MissingLatencyEntry as exc:
                missing.update(exc.keys)
        if missing:
            raise MissingLatencyEntry(sorted(missing), table=self._where())
        if self._learned is not None and len(archs):
            from hwnas.latency.tables.learned import predict

            assert self.table.calibration is not None
            keys = [space.layers(a) for a in archs]
            sums = np.array([self.table.sum_ms(k) for k in keys])
            units = np.array([len(k) for k in keys])
            out = predict(self._learned, self.table.calibration, space, archs, sums, units)
        return out

    def range_ms(self, *, enumerate_up_to: int = 20_000, passes: int = 6) -> tuple[float, float, str]:
        """(the lowest, the highest price of a member of the space, how they were found), knowable before any
        search: every member priced where the space can list at most ``enumerate_up_to`` of them, else a search
        one gene at a time from the smallest member (every gene at its smallest choice) down and from the largest
        up, until a pass changes nothing. A table sums per-unit costs, so per-gene search finds the extremes
        where each gene's units cost what they cost whatever the other genes; both ends are real members' prices.

        For the user's view of their constraints only (``nas validate``); never handed to a strategy.

        Raises:
            MissingLatencyEntry: A member uses a unit the table lacks.
        """
        from hwnas.search_spaces.base import EnumerableSpace

        space = self.space
        if isinstance(space, EnumerableSpace) and space.unique_size() <= enumerate_up_to:
            members, _ = space.distribution()
            prices = self.predict_ms(members)
            return float(prices.min()), float(prices.max()), f"over its {len(members):,} members"
        genes = [g for g in space.genes() if len(g.choices) > 1]

        def search(start: dict[str, Any], better: Any) -> float:
            try:
                first = space.canonicalize(Architecture(space.name, start))
                space.validate(first)
            except (ValueError, InvalidArchitecture):  # not every gene can be at its extreme at once
                first = space.sample(np.random.default_rng(0))
            current = dict(first.genes)
            best = float(self.predict_ms([first])[0])
            for _ in range(passes):
                changed = False
                for g in genes:
                    tried: list[tuple[Any, Architecture]] = []
                    for choice in g.choices:
                        try:
                            arch = space.canonicalize(Architecture(space.name, {**current, g.name: choice}))
                            space.validate(arch)
                        except (ValueError, InvalidArchitecture):
                            continue
                        tried.append((choice, arch))
                    if not tried:
                        continue
                    prices = self.predict_ms([a for _, a in tried])
                    k = int(better(prices))
                    if better(np.array([best, prices[k]])) == 1 and prices[k] != best:
                        current[g.name], best, changed = tried[k][0], float(prices[k]), True
                if not changed:
                    break
            return best

        all_genes = space.genes()
        low = search({g.name: min(g.choices) for g in all_genes}, np.argmin)
        high = search({g.name: max(g.choices) for g in all_genes}, np.argmax)
        return low, high, "over its members, searched one gene at a time"

    def unit_costs_ms(self, arch: Architecture) -> dict[LayerKey, float]:
        """Median (ms) of each distinct unit of ``arch``, in the order ``space.layers(arch)`` first lists them.

        At an unmeasured resolution each unit's cost is interpolated from the unit at the same position of the
        network at the measured resolutions around it (the same weights as :meth:`predict_ms`).
        """
        keys = self.space.layers(arch)
        pair = self._bracket(arch)
        costs = np.zeros(len(keys))
        for a, w in pair:
            theirs = self.table_space.layers(a)
            missing = self.table.missing(theirs)
            if missing:
                raise MissingLatencyEntry(missing, table=self._where())
            costs += w * np.array([self.table.entries[k].median_ms for k in theirs])
        out: dict[LayerKey, float] = {}
        for key, cost in zip(keys, costs):
            out.setdefault(key, float(cost))
        return out


def resolution_factor(factors: dict[int, float], measured: Sequence[int], r: int) -> float:
    """The correction of an interpolated price at resolution ``r``: its own fitted factor, else the log-factor
    interpolated linearly in ``r`` between the nearest resolutions that have one (a measured resolution has
    factor 1: the table is its own price there), else the nearest one's."""
    known = {**{int(m): 0.0 for m in measured}, **{int(k): float(np.log(v)) for k, v in factors.items()}}
    if r in known:
        return float(np.exp(known[r]))
    lo = [x for x in sorted(known) if x < r]
    hi = [x for x in sorted(known) if x > r]
    if lo and hi:
        a, b = lo[-1], hi[0]
        w = (r - a) / (b - a)
        return float(np.exp((1 - w) * known[a] + w * known[b]))
    return float(np.exp(known[lo[-1] if lo else hi[0]]))


def used_resolution_factors(table: LatencyTable, measured: Sequence[int]) -> dict[int, float] | None:
    """The table's per-resolution correction of interpolated prices, when validation chose to use it and it
    was fitted between the resolutions the table measured."""
    interpolated = (table.validation or {}).get("interpolated") or {}
    correction = interpolated.get("correction") or {}
    if not correction.get("used") or list(interpolated.get("measured_resolutions") or []) != list(measured):
        return None
    return {int(k): float(v) for k, v in correction["factors"].items()}


__all__ = ["TableLatencyModel", "resolution_factor", "used_resolution_factors"]
