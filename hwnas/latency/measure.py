"""How one artifact is timed: the protocol, the statistics, the timing loops, and measuring one torch module.

The lowest module of :mod:`hwnas.latency` besides :mod:`~hwnas.latency.context` and the board runner
:mod:`~hwnas.latency.kit.run_kit`, which holds the stop rule, the timing loop and the statistics once for both
sides: the board runs it without hwnas, and hwnas imports it (it needs only the standard library there).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hwnas.latency.kit import run_kit as _runner

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.latency.backends.base import LatencyBackend


@dataclass(frozen=True)
class LatencyStats:
    """Summary of repeated timings of one model, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    iqr_ms: float
    count: int

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def central(self, statistic: str = "median") -> float:
        """The value a table keeps for the protocol's ``statistic`` (``median`` or ``p10``)."""
        return _runner.central_ms(self.to_dict(), statistic)


@dataclass(frozen=True)
class MeasureProtocol:
    """How one artifact is timed: ``warmup`` untimed runs, then at least ``repeats`` timed runs and at least
    ``min_time_s`` seconds of them (whichever is more, up to ``max_repeats``); the median and spread are kept.

    Raises:
        ValueError: A count or time is out of range (``max_repeats`` below ``repeats`` included).
    """

    warmup: int = 10
    repeats: int = 50
    min_time_s: float = 0.0
    max_repeats: int = 100_000
    #: What one timing keeps of its runs (:data:`hwnas.latency.kit.run_kit.STATISTICS`): ``median``, or ``p10``
    #: (their 10th percentile), steadier on a shared machine. A table records it, and its entries' and
    #: validation's central values (``median_ms``) are that statistic.
    statistic: str = "median"
    #: Time every artifact in this many rounds, each round going once over all of them (``nas latency
    #: profile``'s units, ``validate``'s networks), and keep the median of its rounds' medians: on a shared
    #: machine the slow drifts of its neighbours' load then fall on different artifacts in each round.
    rounds: int = 1

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ValueError(f"measure protocol: warmup must be >= 0, got {self.warmup}")
        if self.repeats < 1:
            raise ValueError(f"measure protocol: repeats must be >= 1, got {self.repeats}")
        if self.min_time_s < 0:
            raise ValueError(f"measure protocol: min_time_s must be >= 0, got {self.min_time_s}")
        if self.rounds < 1:
            raise ValueError(f"measure protocol: rounds must be >= 1, got {self.rounds}")
        if self.statistic not in _runner.STATISTICS:
            raise ValueError(f"measure protocol: statistic must be one of {', '.join(_runner.STATISTICS)}, "
                             f"got {self.statistic!r}")
        if self.max_repeats < self.repeats:
            raise ValueError(f"measure protocol: max_repeats ({self.max_repeats}) is below repeats ({self.repeats})")

    def to_dict(self) -> _runner.KitProtocol:
        return _runner.KitProtocol(warmup=self.warmup, repeats=self.repeats, min_time_s=self.min_time_s,
                                   max_repeats=self.max_repeats, statistic=self.statistic, rounds=self.rounds)

    def done(self) -> Callable[[int, float], bool]:
        """The stop rule for this protocol: ``done(count, elapsed_s)``
        (see :func:`hwnas.latency.kit.run_kit.stop_rule`)."""
        return _runner.stop_rule(self.to_dict())


def stats_from_ms(samples_ms: Sequence[float]) -> LatencyStats:
    """Median, p10/p90 and IQR of timings in ms (the runner's statistics: numpy's linear percentiles)."""
    stats = _runner.stats_from_ms(samples_ms)
    return LatencyStats(median_ms=stats["median_ms"], p10_ms=stats["p10_ms"], p90_ms=stats["p90_ms"],
                        iqr_ms=stats["iqr_ms"], count=stats["count"])


def time_callable(run: Callable[[], object], protocol: MeasureProtocol, *,
                  sync: Callable[[], object] | None = None) -> tuple[LatencyStats, float]:
    """Time ``run`` per the protocol with ``perf_counter``; returns the stats and the seconds spent timing.

    ``sync`` (e.g. ``torch.cuda.synchronize``) is called after every run, inside the timed span.
    """
    step = run
    if sync is not None:
        def step() -> None:
            run()
            sync()

    samples, seconds = _runner.time_runs(step, protocol.to_dict())
    return stats_from_ms(samples), seconds


def time_cuda_events(run: Callable[[], object], protocol: MeasureProtocol, *,
                     stream: torch.cuda.Stream | None = None) -> tuple[LatencyStats, float]:
    """Time ``run`` on a CUDA stream with a ``torch.cuda.Event`` pair around each run.

    ``protocol.warmup`` untimed runs come first; the timed runs follow :class:`MeasureProtocol`'s rule. Each
    sample is the GPU time between the two events (``Event.elapsed_time``, ms), so host-side launch overhead
    that overlaps with GPU work is not counted, and the end event is synchronized before the next run.

    Args:
        run: Enqueues one inference on ``stream`` (or the current stream).
        protocol: Warm-up and repeat counts.
        stream: A ``torch.cuda.Stream``; the current stream when None.

    Returns:
        The stats and the wall seconds spent in the timed runs.
    """
    import torch

    done = protocol.done()
    stream = stream if stream is not None else torch.cuda.current_stream()
    for _ in range(protocol.warmup):
        run()
    stream.synchronize()
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    samples: list[float] = []
    start = time.perf_counter()
    while True:
        begin.record(stream)
        run()
        end.record(stream)
        end.synchronize()
        samples.append(float(begin.elapsed_time(end)))
        if done(len(samples), time.perf_counter() - start):
            break
    return stats_from_ms(samples), time.perf_counter() - start


def time_cuda_graph(run: Callable[[], object], protocol: MeasureProtocol) -> tuple[LatencyStats, float]:
    """Capture one call of ``run`` as a CUDA graph and time its replays with :func:`time_cuda_events`.

    A replay launches the whole network's kernels at once, so the host's launching of hundreds of small kernels
    (what batch-1 eager timings of small networks mostly measure) drops out and what is timed is the GPU's own
    work, as ``trtexec --useCudaGraph`` times an engine. ``run`` is first called on a side stream, at least
    three times (``protocol.warmup`` if more), so that cuDNN and cuBLAS choose their algorithms and create their
    handles before the capture, on the stream the capture then uses; the timed replays run on the current stream.

    Raises:
        ValueError: ``run`` cannot be captured (it synchronises with the host, or its shapes depend on data);
            the message carries CUDA's reason.
    """
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(3, protocol.warmup)):
            run()
    side.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):  # other threads: not ours
            run()
    except RuntimeError as exc:
        raise ValueError("cannot be captured as a CUDA graph (time it without CUDA graphs): "
                         + " ".join(str(exc).split())) from None
    torch.cuda.current_stream().wait_stream(side)
    return time_cuda_events(graph.replay, protocol)  # the graph and its private memory pool go when it returns


def measure_network(backend: LatencyBackend, model: nn.Module, input_shape: Sequence[int], protocol: MeasureProtocol,
                    *, workdir: str | Path, name: str) -> tuple[LatencyStats, float]:
    """Convert one torch module (a whole network, or one unit) with ``backend`` and time it.

    The artifact is written under ``workdir`` as ``name`` (plus the backend's suffix) and removed after timing.

    Args:
        backend: A :class:`~hwnas.latency.backends.base.LatencyBackend` (its ``check()`` is the caller's).
        model: The module, as built (the backend puts it in eval mode).
        input_shape: Shape of one input without the batch dimension, e.g. ``(3, 224, 224)``.
        protocol: Warm-up, repeats, minimum time.
        workdir: A folder for the artifact.
        name: The artifact's file stem (unique within ``workdir``).

    Returns:
        The stats and the seconds spent in timed runs.
    """
    shape = tuple(int(s) for s in input_shape)
    artifact = backend.convert(model, shape, Path(workdir), name)
    try:
        return backend.profile(artifact, shape, protocol)
    finally:
        Path(artifact).unlink(missing_ok=True)


def measure_rounds(backend: LatencyBackend, models: Iterable[tuple[nn.Module, Sequence[int]]],
                   protocol: MeasureProtocol, rounds: int, *, workdir: str | Path,
                   on_timing: Callable[[int, int], None] | None = None) -> list[list[float]]:
    """Convert each (module, input shape) once with ``backend`` (``models`` may be a generator: each module can go
    once converted), then time them all in ``rounds`` rounds, each round going once over every artifact in order:
    the per-round central values (``protocol.statistic``), one list per round.

    Networks timed in one round are timed within moments of each other, so on a machine whose speed drifts
    (a shared VM, a board that throttles) their ratios hold far better than each one's latency does from one
    minute to the next. The artifacts are written under ``workdir`` and removed afterwards.
    """
    artifacts: list[tuple[Path, tuple[int, ...]]] = []
    try:
        for i, (model, input_shape) in enumerate(models):
            shape = tuple(int(s) for s in input_shape)
            artifacts.append((Path(backend.convert(model, shape, Path(workdir), f"round{i}")), shape))
        out: list[list[float]] = []
        for r in range(rounds):
            row = []
            for i, (artifact, shape) in enumerate(artifacts):
                stats, _ = backend.profile(artifact, shape, protocol)
                row.append(stats.central(protocol.statistic))
                if on_timing is not None:
                    on_timing(r * len(artifacts) + i + 1, rounds * len(artifacts))
            out.append(row)
        return out
    finally:
        for artifact, _ in artifacts:
            artifact.unlink(missing_ok=True)


__all__ = ["LatencyStats", "MeasureProtocol", "measure_network", "measure_rounds", "stats_from_ms", "time_callable",
           "time_cuda_events"]
