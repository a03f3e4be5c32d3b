"""Latency models: what a search asks of latency (whole networks, and the cost of each unit), per device context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from hwnas.architecture import Architecture
from hwnas.latency.context import DeviceContext

if TYPE_CHECKING:
    from hwnas.search_spaces import LayerKey


@runtime_checkable
class LatencyModel(Protocol):
    """Latency of architectures of one search space under one :class:`DeviceContext`.

    A unit the model has no number for raises :class:`~hwnas.errors.MissingLatencyEntry` naming the keys: it
    is never priced as 0 and never guessed silently.

    Attributes:
        context: The device, runtime, precision, batch size, threads and input shape its numbers are for
            (read-only: a model may compute it, as :class:`TableLatencyModel` reads its table's).
    """

    @property
    def context(self) -> DeviceContext:
        """The measurement context of the model's numbers."""
        ...

    def predict_ms(self, archs: Sequence[Architecture]) -> np.ndarray:
        """One whole-network latency (ms) per architecture, in order."""
        ...

    def unit_costs_ms(self, arch: Architecture) -> dict[LayerKey, float]:
        """The cost (ms) of one instance of each distinct unit of ``arch`` (the keys of ``space.layers(arch)``).

        Summed over ``space.layers(arch)`` (a unit that occurs twice counts twice) they give the uncalibrated
        whole-network latency; a differentiable search sums ``p(op) * cost(op)`` over them.
        """
        ...
