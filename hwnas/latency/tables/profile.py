"""``nas latency profile``: measure every unit of a space into a latency table, resumably."""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hwnas.errors import ConfigError
from hwnas.latency.measure import LatencyStats, MeasureProtocol, measure_network
from hwnas.latency.tables.table import (
    Entry,
    LatencyTable,
    LatencyTableError,
    input_resolution_of,
    new_table,
    space_params_of,
    space_resolved_of,
)
from hwnas.search_spaces import UnitProfiledSpace
from hwnas.search_spaces.base import describe_differences

if TYPE_CHECKING:
    from torch import nn

    from hwnas.latency.backends.base import LatencyBackend
    from hwnas.search_spaces.base import SearchSpace

log = logging.getLogger(__name__)


def unit_profiled(space: SearchSpace) -> UnitProfiledSpace:
    """``space``, checked to be a :class:`~hwnas.search_spaces.UnitProfiledSpace`.

    Raises:
        ConfigError: The space is not a :class:`~hwnas.search_spaces.UnitProfiledSpace` (no ``all_layers()`` and
            ``build_layer(key)``).
    """
    if not isinstance(space, UnitProfiledSpace):
        name = getattr(space, "name", type(space).__name__)
        raise ConfigError(f"space {name!r} cannot be profiled unit by unit: it is not a UnitProfiledSpace (no "
                          "all_layers()/build_layer()); use whole-network measurement (ort_latency) or a learned "
                          "latency predictor")
    return space


def units_of(space: SearchSpace) -> list[str]:
    """Every latency-table unit of a space.

    Raises:
        ConfigError: The space is not a :class:`~hwnas.search_spaces.UnitProfiledSpace` (no ``all_layers()`` and
            ``build_layer(key)``).
    """
    return list(unit_profiled(space).all_layers())


@dataclass
class ProfileReport:
    """What a profiling run did."""

    table: LatencyTable
    measured: int
    reused: int
    failed: int
    wall_s: float
    measure_s: float

    @property
    def overhead(self) -> float:
        """Wall time over the bare timed-measurement time (the profiler's own cost on top of measuring)."""
        return self.wall_s / self.measure_s if self.measure_s > 0 else float("inf")


class Carrier:
    """Builds the in-graph producer a unit is measured behind (``in_context`` mode)."""

    @staticmethod
    def module(shape: tuple[int, ...]) -> nn.Module:
        import torch.nn as nn

        # a depthwise 1x1 convolution: cheap, shape-preserving, and not folded away by graph optimizers
        return nn.Conv2d(shape[0], shape[0], 1, groups=shape[0], bias=False) if len(shape) == 3 else nn.Identity()

    @staticmethod
    def chain(unit: nn.Module, shape: tuple[int, ...], out_shape: tuple[int, ...] | None = None) -> nn.Sequential:
        """The unit behind a producer of ``shape``; with ``out_shape``, also before a consumer of that shape."""
        import torch.nn as nn

        parts = [Carrier.module(shape), unit]
        if out_shape is not None:
            parts.append(Carrier.module(out_shape))
        return nn.Sequential(*parts)

    @staticmethod
    def output_shape(unit: nn.Module, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape (without the batch) of what ``unit`` makes of one input of ``shape``."""
        import torch

        with torch.no_grad():
            return tuple(unit.eval()(torch.zeros(1, *shape)).shape[1:])


CONTEXT_MODES = ("isolated", "in_context", "between")
"""How a unit is timed: alone; behind a producer of its input (``in_context``); or between that producer and a
consumer of its output (``between``), so that a layout the runtime picks for the network (channels-last int8
kernels, for one) reaches the unit as it does inside a network instead of stopping at the graph's output."""


def context_mode(in_context: bool | str) -> str:
    """The table protocol's ``mode`` for profile_space's ``in_context`` argument (False, True, or a mode name)."""
    if in_context is True:
        return "in_context"
    if in_context is False:
        return "isolated"
    if in_context not in CONTEXT_MODES:
        raise ValueError(f"unknown in-context mode {in_context!r} (one of {', '.join(CONTEXT_MODES)})")
    return in_context


def profile_space(space: UnitProfiledSpace, backend: LatencyBackend, *, device: str, out: Path,
                  protocol: MeasureProtocol, in_context: bool | str = False,
                  on_unit: Callable[[int, int, str], None] | None = None) -> ProfileReport:
    """Measure every unit of ``space`` with ``backend`` into the table at ``out``.

    ``in_context``: a unit timed alone also pays what a whole network pays once (a session run, the input
    copy), so isolated sums overestimate. In context, each unit is timed inside a graph, behind a cheap
    producer of its input, and that producer's own time (measured once per input shape) is subtracted:
    the entry is the unit's cost inside a running network. ``in_context="between"`` also puts a cheap consumer of
    the unit's output behind it and subtracts producer and consumer: a runtime that lays the network out its own
    way (onnxruntime's int8 graphs run channels-last between quantised convolutions, and fall back to a slow
    channels-first kernel for an op whose output leaves the graph) then runs the unit as inside a network.

    The table is rewritten (atomically) after every unit, so an interrupted run resumes where it stopped:
    entries already in ``out`` for the same space, context and protocol are kept. A unit that fails to
    export or run is recorded by key in ``failed`` and the rest of the table is still written.
    """
    t_start = time.perf_counter()
    backend.check()
    keys = units_of(space)
    context = backend.context(device, input_resolution=input_resolution_of(space))
    space_params = space_params_of(space)
    mode = context_mode(in_context)
    table = new_table(space=space.name, space_params=space_params, context=context,
                      protocol={**protocol.to_dict(), "mode": mode}, tool="nas latency profile", provenance=_host(),
                      space_resolved=space_resolved_of(space))
    if out.exists():
        old = LatencyTable.load(out)
        old.require_latency("nas latency profile")
        problems = []
        other_space = old.space_differences(space)
        if other_space:
            problems.append(f"space ({describe_differences(other_space, 'the table', 'asked for')})")
        if old.context.differences(context):
            problems.append("context (" + "; ".join(old.context.differences(context)) + ")")
        theirs = {"rounds": 1, **old.protocol}  # tables from before rounds measured one
        if theirs != table.protocol:
            differ = sorted(k for k in set(theirs) | set(table.protocol) if theirs.get(k) != table.protocol.get(k))
            problems.append("measurement protocol (" + "; ".join(
                f"{k}: {theirs.get(k)!r} != {table.protocol.get(k)!r}" for k in differ[:4]) + ")")
        if problems:
            raise LatencyTableError(f"{out} exists with another {', '.join(problems)}; choose another --out "
                                    "(it is not overwritten)")
        table.entries = dict(old.entries)
        table.provenance = old.provenance
        table.failed = dict(old.failed)
        table.validation, table.calibration = old.validation, old.calibration  # kept: validate refits them
        log.info("resuming %s: %d of %d units already measured", out, len(table.entries), len(keys))
    rounds = protocol.rounds

    def rounds_done(key: str) -> int:
        entry = table.entries.get(key)
        return 0 if entry is None else max(1, len(entry.rounds_ms))

    reused = sum(rounds_done(k) >= rounds for k in keys)
    total = sum(max(0, rounds - rounds_done(k)) for k in keys)
    measured_keys: set[str] = set()
    failed_now: set[str] = set()
    measure_s = 0.0
    step = 0
    carriers: dict[tuple[int, ...], LatencyStats] = {}  # producer alone, per shape
    doubles: dict[tuple[int, ...], LatencyStats] = {}  # producer behind producer, per shape (between mode)

    def carrier(shape: tuple[int, ...], count: int, tmp: str) -> LatencyStats:
        nonlocal measure_s
        cache = carriers if count == 1 else doubles
        if shape not in cache:
            import torch.nn as nn

            module = nn.Sequential(*(Carrier.module(shape) for _ in range(count)))
            cache[shape], secs = measure_network(backend, module, shape, protocol, workdir=tmp,
                                                 name=f"carrier{len(carriers) + len(doubles)}")
            measure_s += secs
        return cache[shape]
    with tempfile.TemporaryDirectory(prefix="hwnas-profile-") as tmp:
        for rnd in range(rounds):  # each round goes once over every unit that lacks it
            carriers.clear()  # the baselines are timed afresh each round: one noisy baseline would shift a round,
            doubles.clear()  # not every round, of every unit of its shape
            for key in [k for k in keys if rounds_done(k) <= rnd and k not in failed_now]:
                step += 1
                try:
                    module, shape = space.build_layer(key)
                    shape = tuple(shape)
                    if mode == "in_context":
                        baseline = carrier(shape, 1, tmp)
                        module = Carrier.chain(module, shape)
                    elif mode == "between":
                        # producer + consumer: (producer twice) - (producer once) + (the consumer's own network)
                        out_shape = Carrier.output_shape(module, shape)
                        baseline = _plus(_minus(carrier(shape, 2, tmp), carrier(shape, 1, tmp)),
                                         carrier(out_shape, 1, tmp))
                        module = Carrier.chain(module, shape, out_shape)
                    stats, seconds = measure_network(backend, module, shape, protocol, workdir=tmp, name=f"unit{step}")
                    if mode != "isolated":
                        stats = _minus(stats, baseline)
                except Exception as exc:  # one bad unit must not lose the table
                    table.failed[key] = f"{type(exc).__name__}: {exc}"
                    failed_now.add(key)
                    log.warning("unit %s failed: %s", key, exc)
                else:
                    table.failed.pop(key, None)
                    table.entries[key] = _add_round(table.entries.get(key), stats, rounds, protocol.statistic)
                    measure_s += seconds
                    measured_keys.add(key)
                table.save(out)
                if on_unit:
                    on_unit(step, total, key)
    measured, failed = len(measured_keys), len(failed_now)
    if not total and not out.exists():
        table.save(out)  # an empty space; a complete table already on disk is left byte for byte as it is
    if measured and table.validation is not None:
        log.warning("%s: %d unit(s) were added after the table was validated; run nas latency validate again",
                    out, measured)
    return ProfileReport(table=table, measured=measured, reused=reused, failed=failed,
                         wall_s=time.perf_counter() - t_start, measure_s=measure_s)


@dataclass(frozen=True)
class ProfileOutput:
    """The table file a profile writes, checked before anything is built or measured (:meth:`check`), then
    profiled into (:meth:`profile`).

    Args:
        path: The table file.
        force: Measure every unit afresh and replace whatever the file holds.
        existed: Whether a file was there when it was checked.
    """

    path: Path
    force: bool = False
    existed: bool = False

    @classmethod
    def check(cls, path: str | Path, *, force: bool = False) -> ProfileOutput:
        """Refuse a path where no table file can be written, even with ``force`` (a folder, a device, a folder
        that cannot be made or written: :func:`hwnas.fileio.refuse_overwrite`).

        Raises:
            OutputExists: One line naming the path.
        """
        from hwnas.fileio import refuse_overwrite

        out = Path(path)
        refuse_overwrite([out], force=True)  # a file there is resumed or, with force, replaced: see profile()
        return cls(path=out, force=force, existed=out.exists())

    def profile(self, space: UnitProfiledSpace, backend: LatencyBackend, *, device: str, protocol: MeasureProtocol,
                in_context: bool | str = False,
                on_unit: Callable[[int, int, str], None] | None = None) -> ProfileReport:
        """:func:`profile_space` into the file: a table there of the same space, context and protocol is resumed.
        With ``force``, a file that was there is replaced only once the new table is complete: every unit is
        measured into a new file beside it, which then replaces it (:func:`hwnas.fileio.atomic_write`), and is
        removed in any case (an interrupted ``force`` run starts afresh again).

        Raises:
            OutputExists: Without ``force``, a file there that is not a table this profile can resume.
        """
        import os

        from hwnas.errors import OutputExists
        from hwnas.fileio import atomic_write

        out = self.path
        replace = self.existed and self.force
        target = out.with_name(f".{out.name}.{os.getpid()}.new") if replace else out
        try:
            rep = profile_space(space, backend, device=device, out=target, protocol=protocol, in_context=in_context,
                                on_unit=on_unit)
            if replace:
                atomic_write(out, target.read_bytes())
                rep.table.source = str(out)
        except LatencyTableError as exc:
            if self.existed and not self.force:  # the file at out is not a table this profile can resume
                raise OutputExists(f"{exc}; or pass --force to replace it") from None
            raise
        finally:
            if replace:
                target.unlink(missing_ok=True)
        return rep


def _add_round(prev: Entry | None, stats: LatencyStats, rounds: int, statistic: str = "median") -> Entry:
    """The entry after one more round: the median over rounds of each round's ``statistic`` (one round: the
    timing itself). The entry's central value (``median_ms``) is that statistic, as the table's protocol says."""
    value = stats.central(statistic)
    if rounds == 1:
        return Entry(median_ms=value, p10_ms=stats.p10_ms, p90_ms=stats.p90_ms, iqr_ms=stats.iqr_ms,
                     count=stats.count)
    so_far = list(prev.rounds_ms or (prev.median_ms,)) if prev is not None else []
    so_far.append(value)
    return Entry(median_ms=float(statistics.median(so_far)), p10_ms=stats.p10_ms, p90_ms=stats.p90_ms,
                 iqr_ms=stats.iqr_ms, count=(prev.count if prev is not None else 0) + stats.count,
                 rounds_ms=tuple(so_far))


def _minus(stats: LatencyStats, carrier: LatencyStats) -> LatencyStats:
    """A unit's timing with its carrier's taken off, statistic by statistic (floored at zero: noise can undercut
    a tiny unit)."""
    return LatencyStats(median_ms=max(stats.median_ms - carrier.median_ms, 0.0),
                        p10_ms=max(stats.p10_ms - carrier.p10_ms, 0.0),
                        p90_ms=max(stats.p90_ms - carrier.p90_ms, 0.0), iqr_ms=stats.iqr_ms, count=stats.count)


def _plus(a: LatencyStats, b: LatencyStats) -> LatencyStats:
    """Two timings added statistic by statistic (a baseline made of parts timed apart)."""
    return LatencyStats(median_ms=a.median_ms + b.median_ms, p10_ms=a.p10_ms + b.p10_ms, p90_ms=a.p90_ms + b.p90_ms,
                        iqr_ms=max(a.iqr_ms, b.iqr_ms), count=min(a.count, b.count))


def _host() -> dict[str, str | int | None]:
    import platform

    from hwnas.latency.onnx_export import host_description

    try:
        h = host_description()
    except Exception:  # onnxruntime missing: still describe the host
        h = {"host": platform.node(), "cpu": platform.processor()}
    return {"host": h.get("host"), "cpu": h.get("cpu"), "cores": h.get("cores")}
