"""Latency models: what a search asks of latency (whole networks, and the cost of each unit), per device context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from hwnas.architecture import Architecture
from hwnas.errors import MissingLatencyEntry
from hwnas.latency.context import DeviceContext
from hwnas.latency.tables.table import LatencyTable

if TYPE_CHECKING:
    from hwnas.search_spaces import LayerKey, SearchSpace


@runtime_checkable
class LatencyModel(Protocol):
    """Latency of architectures of one search space under one :class:`DeviceContext`.

    A unit the model has no number for raises :class:`~hwnas.errors.MissingLatencyEntry` naming the keys: it
    is never priced as 0 and never guessed silently.

    Attributes:
        context: The device, runtime, precision, batch size, threads and input shape its numbers are for.
    """

    context: DeviceContext

    def predict_ms(self, archs: Sequence[Architecture]) -> np.ndarray:
        """One whole-network latency (ms) per architecture, in order."""
        ...

    def unit_costs_ms(self, arch: Architecture) -> dict[LayerKey, float]:
        """The cost (ms) of one instance of each distinct unit of ``arch`` (the keys of ``space.layers(arch)``).

        Summed over ``space.layers(arch)`` (a unit that occurs twice counts twice) they give the uncalibrated
        whole-network latency; a differentiable search sums ``p(op) * cost(op)`` over them.
        """
        ...


class TableLatencyModel:
    """A :class:`LatencyModel` from a per-unit :class:`~hwnas.latency.tables.LatencyTable`.

    An architecture costs the sum of its units' medians, corrected by the table's calibration when it has one
    and ``calibrated`` is set (:meth:`LatencyTable.predict_ms`).

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

    @property
    def context(self) -> DeviceContext:
        """The table's measurement context."""
        return self.table.context

    def _where(self) -> str:
        return self.table.source or f"{self.table.space} table"

    def predict_ms(self, archs: Sequence[Architecture]) -> np.ndarray:
        """Whole-network latency (ms) per architecture; every key missing from any of them is named at once."""
        out = np.empty(len(archs), dtype=float)
        missing: set[str] = set()
        for i, arch in enumerate(archs):
            try:
                out[i] = self.table.predict_ms(self.space.layers(arch), calibrated=self.calibrated)
            except MissingLatencyEntry as exc:
                missing.update(exc.keys)
        if missing:
            raise MissingLatencyEntry(sorted(missing), table=self._where())
        return out

    def unit_costs_ms(self, arch: Architecture) -> dict[LayerKey, float]:
        """Median (ms) of each distinct unit of ``arch``, in the order ``space.layers(arch)`` first lists them."""
        keys = self.space.layers(arch)
        missing = self.table.missing(keys)
        if missing:
            raise MissingLatencyEntry(missing, table=self._where())
        return {key: float(self.table.entries[key].median_ms) for key in dict.fromkeys(keys)}


__all__ = ["LatencyModel", "TableLatencyModel"]
