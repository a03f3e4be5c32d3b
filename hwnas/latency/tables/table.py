"""Latency lookup tables: a versioned, self-describing JSON file with its provenance and its known error."""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.errors import HwnasError, MissingLatencyEntry
from hwnas.latency.context import DeviceContext

if TYPE_CHECKING:
    from hwnas.search_spaces import SearchSpace

FORMAT = "hwnas.latency-table"
_MEDIAN = operator.attrgetter("median_ms")
VERSION = 1

#: The quantity a table holds, by its ``unit``, as the metric-name prefix its evaluator reports
#: (``latency_ms@device``, ``energy_mj@device``). Entries keep their field names (``median_ms`` ...) whatever the
#: unit: in an energy table they hold millijoules. Only latency tables are measured here (profile, validate);
#: energy tables come from published data (HW-NAS-Bench).
UNITS: dict[str, str] = {"ms": "latency_ms", "mJ": "energy_mj"}
#: What can price a whole network: the plain sum, the calibrated sum, or the learned correction on top of it.
ANSWERS: tuple[str, ...] = ("sum", "calibration", "learned")


class LatencyTableError(HwnasError):
    """A latency table file is unreadable, corrupt, or for another space or context."""


@dataclass(frozen=True)
class Entry:
    """Timing of one unit in ms over ``count`` timed runs: its central value and spread.

    ``median_ms`` is the value the table answers with: the median of the timed runs, or the statistic the
    table's protocol names instead (``p10``: their 10th percentile; ``mean`` for a published table).
    """

    median_ms: float
    p10_ms: float
    p90_ms: float
    count: int
    iqr_ms: float = 0.0
    #: The central value of each measuring round so far (``MeasureProtocol.rounds``); ``median_ms`` is their
    #: median.
    rounds_ms: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"median_ms": self.median_ms, "p10_ms": self.p10_ms, "p90_ms": self.p90_ms,
                               "iqr_ms": self.iqr_ms, "count": self.count}
        if self.rounds_ms:
            out["rounds_ms"] = list(self.rounds_ms)
        return out

    @classmethod
    def from_dict(cls, key: str, d: Mapping[str, Any]) -> Entry:
        try:
            e = cls(median_ms=float(d["median_ms"]), p10_ms=float(d.get("p10_ms", d["median_ms"])),
                    p90_ms=float(d.get("p90_ms", d["median_ms"])), count=int(d.get("count", 1)),
                    iqr_ms=float(d.get("iqr_ms", 0.0)), rounds_ms=tuple(float(v) for v in d.get("rounds_ms", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"entry {key!r}: {exc}") from None
        if not (math.isfinite(e.median_ms) and e.median_ms >= 0):
            raise ValueError(f"entry {key!r}: median_ms must be a finite non-negative number, got {e.median_ms}")
        return e


@dataclass(frozen=True)
class Calibration:
    """``measured ≈ a·sum + b·units + c``, fitted robustly on whole networks measured end to end."""

    a: float
    b: float
    c: float

    def apply(self, sum_ms: float, units: int) -> float:
        return self.a * sum_ms + self.b * units + self.c

    def to_dict(self) -> dict[str, float]:
        return {"a_per_sum": self.a, "b_per_unit_ms": self.b, "c_ms": self.c}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Calibration:
        """Raises ValueError for a missing or non-finite coefficient."""
        values = [float(d[k]) for k in ("a_per_sum", "b_per_unit_ms", "c_ms")]
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"calibration coefficients must be finite numbers, got {dict(d)}")
        return cls(*values)


@dataclass
class LatencyTable:
    """A per-unit latency table for one search space under one :class:`DeviceContext`.

    Args:
        space: Registry name of the search space whose ``layers()`` keys the entries.
        context: What the numbers were measured on.
        entries: Layer key -> timing.
        protocol: How they were measured (warm-up, repeats, statistic, isolated or in context).
        provenance: Host, date, tool, and anything else worth keeping.
        space_params: The space's parameters (keys encode shapes; kept for the record).
        failed: Layer key -> error, for units that could not be exported or run.
        validation: Figures of ``nas latency validate`` (MAPE, ±5 %/±10 % shares, Kendall τ).
        calibration: The fitted correction, if any.
        unit: ``ms`` (latency) or ``mJ`` (energy, from published tables): see :data:`UNITS`.
        learned: A learned whole-network correction (:mod:`hwnas.latency.tables.learned`): its model, features
            and held-out figures, fitted by validation.
        answers: What prices a whole network: ``"sum"`` (no calibration yet), ``"calibration"`` or
            ``"learned"`` (whichever validated better on the held-out networks).
    """

    space: str
    context: DeviceContext
    entries: dict[str, Entry] = field(default_factory=dict)
    protocol: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    space_params: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    validation: dict[str, Any] | None = None
    calibration: Calibration | None = None
    source: str = ""
    unit: str = "ms"
    learned: dict[str, Any] | None = None
    answers: str = "sum"

    @property
    def metric_prefix(self) -> str:
        """``latency_ms`` or ``energy_mj``: the metric this table's evaluator reports (before ``@device``)."""
        return UNITS[self.unit]

    def require_latency(self, what: str) -> None:
        """Refuse a table that does not hold latencies for ``what`` (timing on a device), naming the file."""
        if self.unit != "ms":
            raise LatencyTableError(f"{self.source or 'this table'} holds {self.metric_prefix} (unit {self.unit!r}, "
                                    f"imported from published data); {what} works on latency tables only")

    # -- prediction --------------------------------------------------------------------------
    def missing(self, keys: Iterable[str]) -> list[str]:
        """Keys not in the table (sorted, unique)."""
        return sorted({k for k in keys if k not in self.entries})

    def sum_ms(self, keys: Sequence[str]) -> float:
        """Sum of the medians of ``keys``; a missing key raises :class:`MissingLatencyEntry` (never 0)."""
        try:
            return float(sum(map(_MEDIAN, map(self.entries.__getitem__, keys))))
        except KeyError:
            raise MissingLatencyEntry(self.missing(keys), table=self.source or f"{self.space} table") from None

    def predict_ms(self, keys: Sequence[str], *, calibrated: bool = True) -> float:
        """Sum of the units, corrected by the calibration when there is one and ``calibrated``."""
        s = self.sum_ms(keys)
        if calibrated and self.calibration is not None:
            return self.calibration.apply(s, len(keys))
        return s

    # -- checks ------------------------------------------------------------------------------
    def check(self, *, space: str | None = None, context: DeviceContext | None = None) -> None:
        """Raise :class:`LatencyTableError` if the table is for another space or context."""
        where = self.source or "latency table"
        if space is not None and space != self.space:
            raise LatencyTableError(f"{where} is for space {self.space!r}, not {space!r}")
        if context is not None:
            diff = self.context.differences(context)
            if diff:
                raise LatencyTableError(f"{where} was measured in another context: {'; '.join(diff)}")

    # -- files -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "space": self.space,
            "space_params": self.space_params,
            "context": self.context.to_dict(),
            "unit": self.unit,
            "protocol": self.protocol,
            "provenance": self.provenance,
            "entries": {k: self.entries[k].to_dict() for k in sorted(self.entries)},
            "failed": dict(sorted(self.failed.items())),
            "validation": self.validation,
            "calibration": self.calibration.to_dict() if self.calibration else None,
            "answers": self.answers,
            "learned": self.learned,
        }

    def save(self, path: str | Path) -> Path:
        """Write atomically (a crash leaves the old file or the new one, never half of one)."""
        from hwnas.fileio import atomic_write

        path = Path(path)
        atomic_write(path, json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n")
        self.source = str(path)
        return path

    @classmethod
    def from_dict(cls, data: Any, source: str = "") -> LatencyTable:
        where = source or "latency table"
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise LatencyTableError(f"{where} is not an hwnas latency table (no \"format\": \"{FORMAT}\")")
        version = data.get("version")
        if not isinstance(version, int) or version > VERSION or version < 1:
            raise LatencyTableError(f"{where}: table format version {version!r} is not supported (this hwnas reads "
                                    f"version {VERSION})")
        unit = data.get("unit", "ms")
        if unit not in UNITS:
            raise LatencyTableError(f"{where}: unit {unit!r} is not one of {', '.join(map(repr, UNITS))}")
        for required in ("space", "context", "entries"):
            if required not in data:
                raise LatencyTableError(f"{where}: missing field {required!r}")
        try:
            context = DeviceContext.from_dict(data["context"])
            entries = {str(k): Entry.from_dict(k, v) for k, v in dict(data["entries"]).items()}
            calibration = Calibration.from_dict(data["calibration"]) if data.get("calibration") else None
        except (ValueError, TypeError, KeyError) as exc:
            raise LatencyTableError(f"{where}: {exc}") from None
        answers = data.get("answers", "calibration" if calibration else "sum")
        learned = data.get("learned")
        if answers not in ANSWERS:
            raise LatencyTableError(f"{where}: answers {answers!r} is not one of {', '.join(map(repr, ANSWERS))}")
        if (answers == "calibration" and calibration is None) or (
                answers == "learned" and (calibration is None or not isinstance(learned, dict))):
            raise LatencyTableError(f"{where}: answers {answers!r} but the table has no "
                                    f"{'calibration' if calibration is None else 'learned model'}")
        return cls(space=str(data["space"]), context=context, entries=entries,
                   protocol=dict(data.get("protocol") or {}), provenance=dict(data.get("provenance") or {}),
                   space_params=dict(data.get("space_params") or {}), failed=dict(data.get("failed") or {}),
                   validation=data.get("validation"), calibration=calibration, source=source, unit=str(unit),
                   learned=learned if isinstance(learned, dict) else None, answers=str(answers))

    @classmethod
    def load(cls, path: str | Path, *, space: str | None = None, context: DeviceContext | None = None) -> LatencyTable:
        """Read a table; a missing, truncated or corrupt file, or one for another space/context, is one clear error."""
        path = Path(path)
        if not path.is_file():
            raise LatencyTableError(f"latency table {path} does not exist")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise LatencyTableError(f"latency table {path} is corrupt or truncated ({exc})") from None
        table = cls.from_dict(data, source=str(path))
        table.check(space=space, context=context)
        return table


def now_iso() -> str:
    """The current UTC time, ISO 8601, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def space_params_of(space: SearchSpace) -> dict[str, Any]:
    """The space's parameters as JSON data (every registered space has a pydantic ``params``)."""
    return dict(space.params.model_dump(mode="json"))  # type: ignore[attr-defined]


def input_resolution_of(space: SearchSpace) -> int | None:
    """The input height/width where the space has a square ``input_shape`` (C, H, W), else None."""
    try:
        shape = tuple(space.input_shape)  # type: ignore[attr-defined]
    except (AttributeError, NotImplementedError, TypeError):
        return None
    return int(shape[-1]) if len(shape) == 3 and shape[-1] == shape[-2] else None


def new_table(*, space: str, space_params: Mapping[str, Any], context: DeviceContext, protocol: Mapping[str, Any],
              tool: str, provenance: Mapping[str, Any] | None = None, stamp: str = "created",
              entries: Mapping[str, Entry] | None = None, failed: Mapping[str, str] | None = None,
              unit: str = "ms") -> LatencyTable:
    """A table with its header: what every producer (profile, board kit, published import) writes the same way.

    Args:
        space: Registry name of the space whose ``layers()`` key the entries.
        space_params: The space's parameters as JSON data (see :func:`space_params_of`).
        context: What the numbers were measured on.
        protocol: How they were measured.
        tool: What made the table (``nas latency profile``, the board kit, an import).
        provenance: More facts to keep (host, source file, citation, ...), after ``tool`` and the date.
        stamp: The provenance key of the date the table is made (``created``, or ``imported`` for tables
            read from elsewhere).
        entries: Entries to start with.
        failed: Units that could not be measured, by key.
        unit: ``ms`` or ``mJ`` (:data:`UNITS`).

    Returns:
        The table (not saved).
    """
    return LatencyTable(space=space, context=context, entries=dict(entries or {}), protocol=dict(protocol),
                        provenance={"tool": tool, stamp: now_iso(), **(provenance or {})},
                        space_params=dict(space_params), failed=dict(failed or {}), unit=unit)


def accuracy_figures(measured: Sequence[float], predicted: Sequence[float]) -> dict[str, float]:
    """MAPE (%), share within ±5 % and ±10 %, and Kendall τ of predicted against measured latencies."""
    from scipy.stats import kendalltau

    m = np.asarray(measured, dtype=float)
    p = np.asarray(predicted, dtype=float)
    rel = np.abs(p - m) / m
    tau = kendalltau(m, p).statistic if len(m) > 1 else float("nan")
    return {"n": int(len(m)), "mape_pct": float(100 * rel.mean()), "within_5pct": float((rel <= 0.05).mean()),
            "within_10pct": float((rel <= 0.10).mean()), "kendall_tau": float(tau)}
