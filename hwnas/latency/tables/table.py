"""Latency lookup tables: a versioned, self-describing JSON file with its provenance and its known error."""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeGuard, overload

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


def json_kind(value: object) -> str:
    """What a JSON value is, as an error message names it: ``null``, ``a boolean``, ``a number``, ``a string``,
    ``an array`` or ``an object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def is_number(value: object) -> TypeGuard[int | float]:
    """A JSON number (``true``/``false`` are not numbers here, though Python counts them as ints)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integer(value: object) -> TypeGuard[int]:
    """A JSON integer (not a boolean, not a float)."""
    return isinstance(value, int) and not isinstance(value, bool)


def shown_json(value: object) -> str:
    """A value for an error message: numbers and short strings as they are, anything else by its kind."""
    if value is None or isinstance(value, bool) or is_number(value):
        return json.dumps(value) if not (isinstance(value, float) and not math.isfinite(value)) else str(value)
    if isinstance(value, str) and len(value) <= 40:
        return repr(value)
    return json_kind(value)


class LatencyTableError(HwnasError):
    """A latency table file is unreadable, corrupt, or for another space or context."""


class _EntryDictFields(TypedDict):
    median_ms: float
    p10_ms: float
    p90_ms: float
    iqr_ms: float
    count: int


class EntryDict(_EntryDictFields, total=False):
    """An entry's JSON form (:meth:`Entry.to_dict`): ``rounds_ms`` only where it was measured in rounds."""

    rounds_ms: list[float]


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

    def to_dict(self) -> EntryDict:
        out: EntryDict = {"median_ms": self.median_ms, "p10_ms": self.p10_ms, "p90_ms": self.p90_ms,
                               "iqr_ms": self.iqr_ms, "count": self.count}
        if self.rounds_ms:
            out["rounds_ms"] = list(self.rounds_ms)
        return out

    @classmethod
    def from_dict(cls, key: str, d: object) -> Entry:
        """An entry as :meth:`to_dict` writes it (``median_ms`` alone is enough: the spread defaults to it).

        Raises:
            ValueError: ``d`` is not an object, or a field is missing or of the wrong type (named, with the key).
        """
        if not isinstance(d, Mapping):
            raise ValueError(f"entry {key!r} must be an object with median_ms, got {json_kind(d)}")
        if "median_ms" not in d:
            raise ValueError(f"entry {key!r}: median_ms is missing")

        def number(name: str, default: object = None, *, minimum: float | None = None) -> float:
            value = d.get(name, default)
            if not is_number(value) or not math.isfinite(value) or (minimum is not None and value < minimum):
                what = "a finite non-negative number" if minimum is not None else "a finite number"
                raise ValueError(f"entry {key!r}: {name} must be {what}, got {shown_json(value)}")
            return float(value)

        median = number("median_ms", minimum=0.0)
        count = d.get("count", 1)
        if not is_integer(count) or count < 0:
            raise ValueError(f"entry {key!r}: count must be a non-negative integer, got {shown_json(count)}")
        rounds = d.get("rounds_ms", [])
        if not isinstance(rounds, list) or not all(is_number(v) and math.isfinite(v) for v in rounds):
            raise ValueError(f"entry {key!r}: rounds_ms must be an array of finite numbers, got {shown_json(rounds)}")
        return cls(median_ms=median, p10_ms=number("p10_ms", median), p90_ms=number("p90_ms", median),
                   count=int(count), iqr_ms=number("iqr_ms", 0.0), rounds_ms=tuple(float(v) for v in rounds))


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
    def from_dict(cls, d: object) -> Calibration:
        """Raises ValueError for a missing or non-finite coefficient (named)."""
        if not isinstance(d, Mapping):
            raise ValueError(f"calibration must be an object, got {json_kind(d)}")
        values = []
        for k in ("a_per_sum", "b_per_unit_ms", "c_ms"):
            if k not in d:
                raise ValueError(f"calibration has no {k}")
            if not is_number(d[k]) or not math.isfinite(d[k]):
                raise ValueError(f"calibration coefficients must be finite numbers, got {k} {shown_json(d[k])}")
            values.append(float(d[k]))
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
        space_resolved: The space's parameters as the space resolved them (:func:`resolved_params`: the dataset's
            input channels and classes an experiment fills in, every default spelled out), to name a mismatch with
            an experiment's space (:meth:`space_differences`); None in tables made before it was recorded.
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
    space_resolved: dict[str, Any] | None = None

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

    def space_differences(self, space: SearchSpace, *, ignore: Sequence[str] = ()) -> list[tuple[str, object, object]]:
        """Where the table's space differs from ``space`` (:func:`~hwnas.search_spaces.base.space_differences`):
        by the resolved parameters the table records, or, in a table made before it recorded them, by its
        parameters resolved as ``space`` resolves them."""
        from hwnas.search_spaces.base import space_differences

        if self.space_resolved is not None:
            return space_differences(self.space, self.space_resolved, space, resolved=True, ignore=ignore)
        return space_differences(self.space, self.space_params, space, ignore=ignore)

    # -- files -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "space": self.space,
            "space_params": self.space_params,
            **({"space_resolved": self.space_resolved} if self.space_resolved is not None else {}),
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
    def from_dict(cls, data: object, source: str = "") -> LatencyTable:
        """A table from its JSON data, every field checked for its type and shape.

        Raises:
            LatencyTableError: Not a table, a format version this hwnas does not read, or a field of the wrong
                type or shape: one message naming the file (``source``) and the field.
        """
        where = source or "latency table"
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            known: dict[object, str] = {
                "hwnas.latency-model": "a latency model (nas latency fewshot; the latency_model evaluator reads it)",
                "hwnas.latency-kit-results": "a board kit's results (nas latency import turns them into a table)"}
            other = known.get(data.get("format") if isinstance(data, dict) else "")
            raise LatencyTableError(f"{where} is not an hwnas latency table (no \"format\": \"{FORMAT}\")"
                                    + (f": it is {other}" if other else ""))
        version = data.get("version")
        if not is_integer(version) or version > VERSION or version < 1:
            raise LatencyTableError(f"{where}: table format version {version!r} is not supported (this hwnas reads "
                                    f"version {VERSION})")
        check = _TableFields(where)
        unit = data.get("unit", "ms")
        if not isinstance(unit, str) or unit not in UNITS:
            raise LatencyTableError(f"{where}: unit {unit!r} is not one of {', '.join(map(repr, UNITS))}")
        for required in ("space", "context", "entries"):
            if required not in data:
                raise LatencyTableError(f"{where}: missing field {required!r}")
        space = check.string(data["space"], "space")
        context = check.context(data["context"])
        entries = check.entries(data["entries"])
        try:
            calibration = Calibration.from_dict(data["calibration"]) if data.get("calibration") is not None else None
        except ValueError as exc:
            raise check.error("calibration", str(exc).removeprefix("calibration ")) from None
        answers = data.get("answers", "calibration" if calibration else "sum")
        learned = check.mapping(data.get("learned"), "learned")
        if not isinstance(answers, str) or answers not in ANSWERS:
            raise LatencyTableError(f"{where}: answers {answers!r} is not one of {', '.join(map(repr, ANSWERS))}")
        if (answers == "calibration" and calibration is None) or (
                answers == "learned" and (calibration is None or learned is None)):
            raise LatencyTableError(f"{where}: answers {answers!r} but the table has no "
                                    f"{'calibration' if calibration is None else 'learned model'}")
        return cls(space=space, context=context, entries=entries,
                   protocol=dict(check.mapping(data.get("protocol"), "protocol") or {}),
                   provenance=check.provenance(data.get("provenance")),
                   space_params=dict(check.mapping(data.get("space_params"), "space_params") or {}),
                   failed=check.failed(data.get("failed")), validation=check.validation(data.get("validation")),
                   calibration=calibration, source=source, unit=unit, learned=learned, answers=answers,
                   space_resolved=check.mapping(data.get("space_resolved"), "space_resolved"))

    @classmethod
    def load(cls, path: str | Path, *, space: str | None = None, context: DeviceContext | None = None) -> LatencyTable:
        """Read a table; a missing, truncated or corrupt file, or one for another space/context, is one clear error."""
        path = Path(path)
        if path.is_dir():
            raise LatencyTableError(f"latency table {path} is a folder; give the table's .json file")
        if path.exists() and not path.is_file():
            raise LatencyTableError(f"latency table {path} is not a regular file (a device or a pipe)")
        if not path.is_file():
            raise LatencyTableError(f"latency table {path} does not exist")
        from hwnas.errors import ConfigError
        from hwnas.fileio import json_pairs_once, read_input_text

        try:
            text = read_input_text(path, "a latency table (JSON)")  # binary: called so, no byte of it printed
        except ConfigError as exc:
            raise LatencyTableError(f"latency table {exc}") from None
        try:
            data = json.loads(text, object_pairs_hook=json_pairs_once)
        except ValueError as exc:
            if "listed twice" in str(exc):  # a unit (or any key) twice: which figure is meant?
                raise LatencyTableError(f"latency table {path}: {exc}; each unit (and key) once") from None
            raise LatencyTableError(f"latency table {path} is corrupt or truncated ({exc})") from None
        table = cls.from_dict(data, source=str(path))
        table.check(space=space, context=context)
        return table


class _TableFields:
    """Checks the fields of one table file: each wrong one is a :class:`LatencyTableError` naming the file and
    the field (``validation.raw.mape_pct``, ``provenance.networks[2].median_ms``), and what it holds instead."""

    def __init__(self, where: str) -> None:
        self.where = where

    def error(self, name: str, problem: str) -> LatencyTableError:
        return LatencyTableError(f'{self.where}: field "{name}" {problem}')

    def mapping(self, value: object, name: str, *, optional: bool = True) -> dict[str, object] | None:
        """An object (or, where ``optional``, null)."""
        if value is None and optional:
            return None
        if not isinstance(value, dict):
            raise self.error(name, f"must be an object{' or null' if optional else ''}, got {json_kind(value)}")
        return value

    @overload
    def string(self, value: object, name: str, *, optional: Literal[False] = False, empty: bool = False) -> str: ...

    @overload
    def string(self, value: object, name: str, *, optional: bool, empty: bool = False) -> str | None: ...

    def string(self, value: object, name: str, *, optional: bool = False, empty: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str) or (not empty and not value):
            what = "a string" if empty else "a non-empty string"
            raise self.error(name, f"must be {what}{' or null' if optional else ''}, got {shown_json(value)}")
        return value

    def integer(self, value: object, name: str, *, minimum: int, optional: bool = False) -> int | None:
        if value is None and optional:
            return None
        if not is_integer(value) or value < minimum:
            raise self.error(name, f"must be an integer >= {minimum}{' or null' if optional else ''}, got "
                                   f"{shown_json(value)}")
        return value

    def number(self, value: object, name: str) -> float:
        if not is_number(value) or not math.isfinite(value):
            raise self.error(name, f"must be a finite number, got {shown_json(value)}")
        return float(value)

    def array(self, value: object, name: str, *, optional: bool = True) -> list[object]:
        if value is None and optional:
            return []
        if not isinstance(value, list):
            raise self.error(name, f"must be an array{' or null' if optional else ''}, got {json_kind(value)}")
        return value

    # -- the fields ------------------------------------------------------------------------------
    def context(self, value: object) -> DeviceContext:
        d = self.mapping(value, "context", optional=False)
        assert d is not None
        try:
            DeviceContext.from_dict(d)  # unknown and missing fields, named
        except ValueError as exc:
            raise self.error("context", f"is not a device context: {exc}") from None
        self.string(d["device"], "context.device")
        self.string(d["runtime"], "context.runtime")
        self.string(d.get("runtime_version", ""), "context.runtime_version", empty=True)
        self.string(d.get("provider"), "context.provider", optional=True)
        self.string(d.get("precision", "fp32"), "context.precision")
        self.integer(d.get("batch_size", 1), "context.batch_size", minimum=1)
        self.integer(d.get("threads"), "context.threads", minimum=0, optional=True)
        self.integer(d.get("input_resolution"), "context.input_resolution", minimum=1, optional=True)
        self.string(d.get("power_mode"), "context.power_mode", optional=True, empty=True)
        return DeviceContext.from_dict(d)

    def entries(self, value: object) -> dict[str, Entry]:
        if not isinstance(value, dict):
            raise self.error("entries", f"must be an object (unit key -> timing), got {json_kind(value)}")
        try:
            return {str(k): Entry.from_dict(k, v) for k, v in value.items()}
        except ValueError as exc:
            raise LatencyTableError(f'{self.where}: field "entries": {exc}') from None

    def failed(self, value: object) -> dict[str, str]:
        d = self.mapping(value, "failed") or {}
        out: dict[str, str] = {}
        for key, why in d.items():
            if not isinstance(why, str):
                raise self.error("failed", f"must map each unit key to its error (a string), got {json_kind(why)} "
                                           f"for {key!r}")
            out[key] = why
        return out

    def provenance(self, value: object) -> dict[str, object]:
        """Provenance is free-form, but for the whole networks a board measured (kit imports), which calibration,
        validation and few-shot fits read: each needs its arch, its layer keys and a positive latency."""
        d = dict(self.mapping(value, "provenance") or {})
        for i, net in enumerate(self.array(d.get("networks"), "provenance.networks")):
            name = f"provenance.networks[{i}]"
            net = self.mapping(net, name, optional=False)
            assert net is not None
            self.mapping(net.get("arch"), f"{name}.arch", optional=False)
            layers = self.array(net.get("layers"), f"{name}.layers", optional=False)
            if not all(isinstance(k, str) for k in layers):
                raise self.error(f"{name}.layers", "must be an array of unit keys (strings)")
            median = net.get("median_ms")
            if not is_number(median) or not math.isfinite(median) or median <= 0:
                raise self.error(f"{name}.median_ms", f"must be a finite positive number, got {shown_json(median)}")
        return d

    def figures(self, value: object, name: str) -> None:
        """Accuracy figures (:func:`accuracy_figures`) as validation stores them: an object (or null) whose
        figures, where it has them, are numbers."""
        d = self.mapping(value, name)
        if d is None:
            return
        for key in ("mape_pct", "within_5pct", "within_10pct", "kendall_tau"):
            if key in d and not is_number(d[key]):  # a number, NaN included (one network's Kendall tau)
                raise self.error(f"{name}.{key}", f"must be a number, got {shown_json(d[key])}")
        for key, least in (("n", 0), ("train", 0), ("splits", 1)):
            if key in d:
                self.integer(d[key], f"{name}.{key}", minimum=least)

    def validation(self, value: object) -> dict[str, object] | None:
        """The figures ``nas latency validate`` stores (raw, held-out, their means over halvings, interpolation):
        each block that is there must have its type (blocks may be absent: tables validated by older versions,
        or only judged for interpolation, lack some)."""
        d = self.mapping(value, "validation")
        if not d:
            return d
        for key in ("raw", "calibrated_heldout", "learned_heldout"):
            self.figures(d.get(key), f"validation.{key}")
        mean = self.mapping(d.get("mean_heldout"), "validation.mean_heldout") or {}
        for key in ("calibrated", "learned"):
            self.figures(mean.get(key), f"validation.mean_heldout.{key}")
        if "networks" in d:
            self.integer(d["networks"], "validation.networks", minimum=0)
        self.string(d.get("how"), "validation.how", optional=True, empty=True)
        self.string(d.get("answers"), "validation.answers", optional=True)
        self.measured(d.get("measured"), "validation.measured")
        interpolated = self.mapping(d.get("interpolated"), "validation.interpolated")
        if interpolated:
            name = "validation.interpolated"
            self.figures(interpolated, name)
            for key in ("measured_resolutions", "resolutions"):
                values = self.array(interpolated.get(key), f"{name}.{key}")
                if not all(is_integer(r) for r in values):
                    raise self.error(f"{name}.{key}", "must be an array of integers (pixels)")
            held = self.mapping(interpolated.get("heldout"), f"{name}.heldout") or {}
            for key in ("interpolated", "corrected"):
                self.figures(held.get(key), f"{name}.heldout.{key}")
            correction = self.mapping(interpolated.get("correction"), f"{name}.correction") or {}
            if "used" in correction and not isinstance(correction["used"], bool):
                raise self.error(f"{name}.correction.used", f"must be true or false, got "
                                                             f"{shown_json(correction['used'])}")
            for r, f in (self.mapping(correction.get("factors"), f"{name}.correction.factors") or {}).items():
                if not r.isdigit():
                    raise self.error(f"{name}.correction.factors", f"must be keyed by resolution, got {r!r}")
                self.number(f, f"{name}.correction.factors.{r}")
            self.measured(interpolated.get("measured"), f"{name}.measured")
        return d

    def measured(self, value: object, name: str) -> None:
        """The networks a validation measured: each its arch and its measured latency."""
        for i, m in enumerate(self.array(value, name)):
            m = self.mapping(m, f"{name}[{i}]", optional=False)
            assert m is not None
            self.mapping(m.get("arch"), f"{name}[{i}].arch", optional=False)
            self.number(m.get("measured_ms"), f"{name}[{i}].measured_ms")

def now_iso() -> str:
    """The current UTC time, ISO 8601, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def space_params_of(space: SearchSpace) -> dict[str, object]:
    """The space's parameters as JSON data (every registered space has a pydantic ``params``)."""
    return dict(space.params.model_dump(mode="json"))


def space_resolved_of(space: SearchSpace) -> dict[str, object]:
    """The space's parameters as it resolves them (every default spelled out), as tables and kits record them."""
    from hwnas.search_spaces.base import resolved_params

    return dict(resolved_params(space))


def input_resolution_of(space: SearchSpace) -> int | None:
    """The input height/width where the space has a square ``input_shape`` (C, H, W), else None."""
    try:
        shape = tuple(space.input_shape)
    except (AttributeError, NotImplementedError, TypeError):
        return None
    return int(shape[-1]) if len(shape) == 3 and shape[-1] == shape[-2] else None


def new_table(*, space: str, space_params: Mapping[str, object], context: DeviceContext,
              protocol: Mapping[str, object], tool: str, provenance: Mapping[str, object] | None = None,
              stamp: str = "created", entries: Mapping[str, Entry] | None = None,
              failed: Mapping[str, str] | None = None, unit: str = "ms",
              space_resolved: Mapping[str, object] | None = None) -> LatencyTable:
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
        space_resolved: The space's resolved parameters (:func:`space_resolved_of`), where the producer knows them.

    Returns:
        The table (not saved).
    """
    return LatencyTable(space=space, context=context, entries=dict(entries or {}), protocol=dict(protocol),
                        provenance={"tool": tool, stamp: now_iso(), **(provenance or {})},
                        space_params=dict(space_params), failed=dict(failed or {}), unit=unit,
                        space_resolved=dict(space_resolved) if space_resolved is not None else None)


def accuracy_figures(measured: Sequence[float] | np.ndarray,
                     predicted: Sequence[float] | np.ndarray) -> dict[str, float]:
    """MAPE (%), share within ±5 % and ±10 %, and Kendall τ of predicted against measured latencies.

    Where either side gives every network the same latency (a learned correction's trees can, on the two or three
    networks a small validation holds out) τ is 0, not scipy's NaN: such a prediction orders none of them, and a
    table's figures must stay JSON numbers. τ is NaN only for fewer than two networks.
    """
    from scipy.stats import kendalltau

    m = np.asarray(measured, dtype=float)
    p = np.asarray(predicted, dtype=float)
    rel = np.abs(p - m) / m
    if len(m) < 2:
        tau = float("nan")
    elif np.ptp(m) == 0 or np.ptp(p) == 0:
        tau = 0.0
    else:
        tau = kendalltau(m, p).statistic
    return {"n": int(len(m)), "mape_pct": float(100 * rel.mean()), "within_5pct": float((rel <= 0.05).mean()),
            "within_10pct": float((rel <= 0.10).mean()), "kendall_tau": float(tau)}
