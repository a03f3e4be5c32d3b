"""The ``latency_table`` evaluator: latency predicted from a measured table, per device."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.evaluation import EVALUATORS, EvalContext, EvaluatorParams, Metrics, ResolvedPath, stable_fingerprint


class LatencyTableParams(EvaluatorParams):
    table: ResolvedPath = Field(description="path of an hwnas latency table (nas latency profile / kit / import)")
    device: str | None = Field(None, description="metric name suffix; default: the table's device")
    calibrated: bool = Field(True, description="apply the table's calibration when it has one")


@EVALUATORS.register("latency_table")
class LatencyTableEvaluator:
    """Latency from a per-device lookup table (sum of units, calibrated): metric latency_ms@<device>.

    Prices through a :class:`~hwnas.latency.model.TableLatencyModel` (:attr:`model`), the one table pricing.
    """

    Params = LatencyTableParams
    cheap = True

    def __init__(self, *, context: EvalContext, table: str, device: str | None = None, calibrated: bool = True) -> None:
        from hwnas.latency.model import TableLatencyModel
        from hwnas.latency.tables import LatencyTable, LatencyTableError

        path = Path(table).expanduser()
        try:
            self.table = LatencyTable.load(path, space=context.space.name)
        except LatencyTableError as exc:
            raise ConfigError(str(exc)) from None
        self.space = context.space
        self.model = TableLatencyModel(table=self.table, space=self.space, calibrated=calibrated)
        self.path = path
        self.calibrated = calibrated
        self.device = device or self.table.context.device
        self.provides = (f"latency_ms@{self.device}",)
        self._digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]

    def fingerprint(self) -> str:
        return stable_fingerprint("latency_table", {"sha": self._digest, "calibrated": self.calibrated,
                                                    "device": self.device})

    def trust(self) -> dict[str, Any] | None:
        """The table's validation figures (how far its latency can be trusted), for reports."""
        return self.table.validation

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        out: list[Metrics | BaseException] = []
        for arch in archs:
            try:  # one architecture at a time: a missing entry fails that trial only
                ms = float(self.model.predict_ms([arch])[0])
                out.append({self.provides[0]: ms})
            except Exception as exc:
                out.append(exc)
        return out
