"""DeviceContext: everything a latency number depends on besides the network."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, TypedDict

Precision = Literal["fp32", "fp16", "bf16", "int8", "mixed"]


class DeviceContextDict(TypedDict):
    """The JSON form of a :class:`DeviceContext` (:meth:`DeviceContext.to_dict`): its fields."""

    device: str
    runtime: str
    runtime_version: str
    provider: str | None
    precision: Precision
    batch_size: int
    threads: int | None
    input_resolution: int | None
    power_mode: str | None


@dataclass(frozen=True)
class DeviceContext:
    """The measurement context a latency table (or a measured latency) is valid for.

    Args:
        device: Device name as users call it (``jetson-orin-nano``, ``xeon-6130``, ``h100``): names the
            metric ``latency_ms@<device>``.
        runtime: ``onnxruntime``, ``tensorrt``, ``trtexec``, ``torch`` or ``published`` (an imported table).
        runtime_version: Version of the runtime that measured.
        provider: Execution provider or backend detail (``CPUExecutionProvider``, ``cuda``), if any.
        precision: Numeric precision of the measured graphs.
        batch_size: Batch size of the measured inputs.
        threads: Intra-op threads, pinned (None where the runtime does not expose it).
        input_resolution: Input height/width the table was measured for, where the space fixes one.
        power_mode: Board power mode (Jetson nvpmodel, phone governor), where the board has one.
    """

    device: str
    runtime: str
    runtime_version: str = ""
    provider: str | None = None
    precision: Precision = "fp32"
    batch_size: int = 1
    threads: int | None = None
    input_resolution: int | None = None
    power_mode: str | None = None

    def to_dict(self) -> DeviceContextDict:
        return DeviceContextDict(device=self.device, runtime=self.runtime, runtime_version=self.runtime_version,
                                 provider=self.provider, precision=self.precision, batch_size=self.batch_size,
                                 threads=self.threads, input_resolution=self.input_resolution,
                                 power_mode=self.power_mode)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceContext:
        """Inverse of :meth:`to_dict`; unknown or missing required fields are a ValueError naming them."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown device context field(s): {', '.join(unknown)}")
        for required in ("device", "runtime"):
            if required not in data:
                raise ValueError(f"device context needs {required!r}")
        return cls(**dict(data))

    def differences(self, other: DeviceContext) -> list[str]:
        """Field names where two contexts differ, as ``name: a != b``."""
        return [f"{f.name}: {getattr(self, f.name)!r} != {getattr(other, f.name)!r}"
                for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]

    def describe(self) -> str:
        """One line, e.g. ``xeon on onnxruntime 1.20 (CPUExecutionProvider, fp32, batch 1, 1 thread)``."""
        parts = [p for p in (self.provider, self.precision, f"batch {self.batch_size}",
                             f"{self.threads} thread(s)" if self.threads else None,
                             f"{self.input_resolution}px" if self.input_resolution else None,
                             f"power {self.power_mode}" if self.power_mode else None) if p]
        return f"{self.device} on {self.runtime} {self.runtime_version}".rstrip() + f" ({', '.join(parts)})"
