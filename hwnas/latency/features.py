"""Features of a network for learned latency models: the space's encoding, unit counts, unit-attribute counts.

Used by the few-shot model of a new device (:mod:`hwnas.latency.fewshot`) and by a table's learned
whole-network correction (:mod:`hwnas.latency.tables.learned`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from hwnas.architecture import Architecture

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace

__all__ = ["UnitFeatures"]


class UnitFeatures:
    """Features of a network of a space that lists its latency units: encoding, unit counts, attribute counts.

    A network's row is the space's own encoding (``space.encode``: which op sits where), then, for every
    unit of the space (``space.all_layers()``), how often the network uses it, then, for every attribute
    token of those units, how often a used unit carries it. The tokens come from the unit keys, split at
    ``-``, ``_`` and ``:`` and prefixed with the key's first part
    (``ConvBlock_H32_W32_Cin16_Cout24_exp6_kernel5_stride1_group1`` gives ``ConvBlock``,
    ``ConvBlock|exp6``, ``ConvBlock|kernel5``, ...). A device whose latency is a sum of unit costs is linear
    in the unit counts; the token counts give the ridge models a coarser, shared level (one cost per
    kernel size, expand ratio, resolution) that a few samples can pin down where a hundred unit counts
    cannot; the encoding keeps what counts lose (in a cell, which edge an op is on). The vocabularies are
    stored with the model, so a saved model computes the same columns.
    """

    kind = "encoding+units+tokens"

    def __init__(self, units: Sequence[str], tokens: Sequence[str]) -> None:
        self.units = [str(u) for u in units]
        self.tokens = [str(t) for t in tokens]
        self._unit_index = {u: i for i, u in enumerate(self.units)}
        self._token_index = {t: len(self.units) + i for i, t in enumerate(self.tokens)}
        self._columns: dict[str, list[int]] = {}  # unit key -> the columns it adds 1 to

    @staticmethod
    def tokens_of(key: str) -> list[str]:
        """The attribute tokens of one unit key."""
        head, *rest = re.split(r"[-_:]", key)
        return [head] + [f"{head}|{part}" for part in rest if part]

    @classmethod
    def of_space(cls, space: SearchSpace) -> UnitFeatures | None:
        """The features of ``space``, or None where it does not list its units."""
        from hwnas.search_spaces.base import UnitListedSpace

        if not isinstance(space, UnitListedSpace):
            return None
        units = sorted(str(k) for k in space.all_layers())
        return cls(units, sorted({t for key in units for t in cls.tokens_of(key)}))

    def transform(self, space: SearchSpace, archs: Sequence[Architecture]) -> np.ndarray:
        """One row per architecture: the encoding's columns, then the counts (:meth:`counts`)."""
        if not archs:
            raise ValueError("no architectures to compute features of")
        return np.hstack([np.stack([space.encode(a) for a in archs]), self.counts(space, archs)])

    def counts(self, space: SearchSpace, archs: Sequence[Architecture]) -> np.ndarray:
        """One row per architecture, ``len(units) + len(tokens)`` columns: unit counts, then token counts.

        A unit or token outside the vocabularies (a unit the space did not list when the model was fitted)
        adds nothing.
        """
        rows = np.zeros((len(archs), len(self.units) + len(self.tokens)))
        for r, arch in enumerate(archs):
            for key in space.layers(arch):
                key = str(key)
                cols = self._columns.get(key)
                if cols is None:
                    found = [self._unit_index.get(key)] + [self._token_index.get(t) for t in self.tokens_of(key)]
                    cols = self._columns[key] = [c for c in found if c is not None]
                for col in cols:
                    rows[r, col] += 1
        return rows

    def to_dict(self) -> dict[str, str | list[str]]:
        return {"kind": self.kind, "units": self.units, "tokens": self.tokens}

    @classmethod
    def from_dict(cls, data: object) -> UnitFeatures:
        if (not isinstance(data, dict) or data.get("kind") != cls.kind
                or not all(isinstance(data.get(k), list) for k in ("units", "tokens"))):
            raise ValueError(f"features must be {{\"kind\": \"{cls.kind}\", \"units\": [...], \"tokens\": [...]}}")
        return cls(data["units"], data["tokens"])
