"""The ``latency_table`` evaluator: latency predicted from a measured table, per device."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, InvalidArchitecture, MissingLatencyEntry
from hwnas.evaluation import EvalContext, EvaluatorParams, Metrics, ResolvedPath, stable_fingerprint

if TYPE_CHECKING:
    from hwnas.objectives import Bounds

log = logging.getLogger(__name__)


def device_name(device: str, precision: str) -> str:
    """The device part of a metric name: the precision is part of it where it is not fp32 (``cpu-int8``)."""
    return device if precision == "fp32" or device.endswith(f"-{precision}") else f"{device}-{precision}"


class LatencyTableParams(EvaluatorParams):
    table: ResolvedPath = Field(description="path of an hwnas latency table (nas latency profile / kit / import)")
    device: str | None = Field(None, description="metric name suffix; default: the table's device, with its "
                                                 "precision when not fp32 (latency_ms@cpu-int8)")
    calibrated: bool = Field(True, description="apply the table's calibration when it has one")


class LatencyTableEvaluator:
    """Latency from a per-device lookup table (sum of units, calibrated): metric latency_ms@<device>
    (energy_mj@<device> for an energy table imported from HW-NAS-Bench).

    Prices through a :class:`~hwnas.latency.tables.model.TableLatencyModel` (:attr:`model`), the one table pricing.
    """

    Params = LatencyTableParams
    cheap = True

    def __init__(self, *, context: EvalContext, table: str, device: str | None = None, calibrated: bool = True) -> None:
        from hwnas.latency.tables import LatencyTable, LatencyTableError
        from hwnas.latency.tables.model import TableLatencyModel

        path = Path(table).expanduser()
        try:
            self.table = LatencyTable.load(path, space=context.space.name)
            self.space = context.space
            self.model = TableLatencyModel(table=self.table, space=self.space, calibrated=calibrated)
        except LatencyTableError as exc:
            raise ConfigError(str(exc)) from None
        self.path = path
        self.calibrated = calibrated
        self.device = device or device_name(self.table.context.device, self.table.context.precision)
        self.provides = (f"{self.table.metric_prefix}@{self.device}",)
        self.lookup_metrics = self.provides  # a table: a strategy may price candidates with it before it asks
        self._digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]

    def prepare(self) -> None:
        """Check the table against the space before any trial: the same space parameters (keys encode shapes,
        but a table measured at another resolution must not price this one), and every unit the space can
        use priced (where the space lists its units)."""
        from hwnas.search_spaces.base import UnitListedSpace, describe_differences, neutral_params

        where = self.table.source or str(self.path)
        interpolated = self.model.measured_resolutions is not None
        if interpolated:
            log.info("latency_table: %s measured resolutions %s; the others are priced by interpolation%s", where,
                     list(self.model.measured_resolutions or ()),
                     ", corrected per resolution" if self.model.resolution_factors else "")
        neutral = list(neutral_params(self.space))  # they change no network
        differ = self.table.space_differences(self.space, ignore=[*neutral, *(["resolutions"] if interpolated else [])])
        if differ:  # the table was made for another space than the one this experiment resolves (its dataset's
            # channels and classes included): every difference, with both values
            raise ConfigError(f"latency_table: {where} was measured for other space parameters than this experiment's "
                              f"{self.space.name} space: {describe_differences(differ, 'table', 'experiment')}; make "
                              "the table (or the board kit) with --experiment to measure this experiment's space")
        if isinstance(self.model.table_space, UnitListedSpace):
            missing = self.table.missing(self.model.table_space.all_layers())
            if missing:
                raise ConfigError(f"latency_table: {where} has no entry for {len(missing)} unit(s) of space "
                                  f"{self.space.name!r}, e.g. {', '.join(missing[:3])}; profile them (nas latency "
                                  "profile resumes into the same table)")

    def unmeetable(self, bounds: Bounds) -> str | None:
        """What the table prices its members at, where no member meets ``bounds`` (:class:`KnownValues`: the
        user's warning at ``nas validate`` and run start, never a strategy's input); None where one does."""
        name = self.provides[0]
        if name not in bounds:
            return None
        lo, hi = bounds[name]
        try:
            low, high, how = self.model.range_ms()
        except (MissingLatencyEntry, InvalidArchitecture, ValueError):  # said by prepare(), or unknowable
            return None
        if (lo is not None and lo > high) or (hi is not None and hi < low):
            return f"the table {self.path.name} prices {name} from {low:.4g} to {high:.4g} {how}"
        return None

    def fingerprint(self) -> str:
        return stable_fingerprint("latency_table", {"sha": self._digest, "calibrated": self.calibrated,
                                                    "device": self.device})

    def trust(self) -> dict[str, object] | None:
        """The table's validation figures (how far its latency can be trusted), for reports."""
        return self.table.validation

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        name = self.provides[0]
        try:  # the whole batch at once (the common case) ...
            return [{name: ms} for ms in self.model.predict_ms(archs).tolist()]
        except Exception:  # ... else one at a time below, so that only the bad ones fail
            pass
        out: list[Metrics | BaseException] = []
        for arch in archs:
            try:  # one architecture at a time: a missing entry fails that trial only
                ms = float(self.model.predict_ms([arch])[0])
                out.append({name: ms})
            except Exception as exc:
                out.append(exc)
        return out


class LatencyModelParams(EvaluatorParams):
    model: ResolvedPath = Field(description="path of a latency model file (nas latency fewshot)")
    device: str | None = Field(None, description="metric name suffix; default: the model's device")


class LatencyModelEvaluator:
    """Latency from a learned whole-network model of a device (nas latency fewshot): metric latency_ms@<device>."""

    Params = LatencyModelParams
    cheap = True

    def __init__(self, *, context: EvalContext, model: str, device: str | None = None) -> None:
        from hwnas.latency.fewshot import FewShotLatencyModel, LatencyModelError

        path = Path(model).expanduser()
        try:
            self.model = FewShotLatencyModel.load(path)
        except LatencyModelError as exc:
            raise ConfigError(str(exc)) from None
        if self.model.space != context.space.name:
            raise ConfigError(f"latency_model: {path} is for space {self.model.space!r}, not {context.space.name!r}")
        self.space = context.space
        self.path = path
        self.device = device or self.model.device
        self.provides = (f"latency_ms@{self.device}",)
        self.lookup_metrics = self.provides  # a fitted model: a strategy may price candidates with it before it asks
        self._digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]

    def prepare(self) -> None:
        """The model must be for the space's parameters (its encoding's width and meaning depend on them)."""
        from hwnas.search_spaces.base import resolved_params

        mine, theirs = resolved_params(self.space), resolved_params(self.space, self.model.space_params)
        differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        if differ:
            shown = ", ".join(f"{k} {theirs.get(k)!r} (the space has {mine.get(k)!r})" for k in differ[:4])
            raise ConfigError(f"latency_model: {self.path} was fitted for other space parameters: {shown}")

    def fingerprint(self) -> str:
        return stable_fingerprint("latency_model", {"sha": self._digest, "device": self.device})

    def trust(self) -> dict[str, object] | None:
        """The model's validation figures (leave-one-out over its measured networks), for reports."""
        validation = self.model.data.get("validation")
        return validation if isinstance(validation, dict) else None

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        name = self.provides[0]
        try:
            return [{name: float(ms)} for ms in self.model.predict_ms(self.space, archs)]
        except Exception as exc:  # an architecture the encoding refuses fails its own trial only
            return [exc for _ in archs]
