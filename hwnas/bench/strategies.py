"""Judge search strategies on NAS-Bench-201 (and FBNet) with published tables: ``nas bench strategies``.

Strategies are driven in process through their ask/tell protocol, exactly as the runner drives them (ask at
most ``batch`` candidates, canonicalize, evaluate the new ones, tell every slot of the batch), but with every
metric read from a table: no run directories, no runner, no training. A strategy does not know the budget, so
each (strategy, seed) is run once to the largest budget and the smaller budgets are read off the same run
(the *anytime* curve). Seed ``s`` of every strategy is ``np.random.default_rng(s)``.

Four measurements:

1. **Accuracy** (NAS-Bench-201, isomorphic cells merged, as the runner does without a hardware objective): search
   on a dataset's 12-epoch validation accuracy (``<dataset>_valid_12ep``; ``oracle``: its 200-epoch test
   accuracy) and report the 200-epoch test accuracy (``<dataset>_test_200ep``) of the architecture with the best
   searched value among the first B distinct queries. The *ceiling* is the same figure for the whole space.
2. **Hardware-aware** (NAS-Bench-201, every cell kept apart): 12-epoch validation accuracy (max) x one device's
   latency from HELP (min); the hypervolume of the non-dominated set of the first B queries as a fraction of
   the true front's (all 15,625 cells), with the reference point at the medians over all cells.
3. **FBNet** (HW-NAS-Bench's FBNet lookup table, if present): there is no accuracy for FBNet, and a
   latency x latency (or latency x energy) front is a single point, since ``skip`` is the cheapest op of every
   layer on every device. So the FBNet problem is FLOPs (a capacity proxy, max) x one device's latency (min).
   Both are sums over the 22 layers of a cost that depends only on the layer and its op, so the true front is
   computed exactly (a Minkowski sum of the layers' options, pruned to its non-dominated set after each layer).
4. **Overhead**: wall seconds of ``ask`` + ``tell`` per 1,000 candidates (metric look-ups excluded), every
   strategy measured in one process on this machine.

A strategy that raises is recorded as failed for that (problem, seed) and the bench goes on; one that cannot be
built for a problem with the parameters given (e.g. MnasNet-style REINFORCE needs a reward block with two
objectives: ``--hw-params`` with placeholders, :func:`fill_placeholders`) is not run there, with one line saying why.

What a strategy may use: the space, the objectives and their directions, the parameters given on the command line
(numbers the user wrote, and the objectives' metric names through the placeholders ``{accuracy}`` and ``{latency}``),
its own seeded generator, the metrics of the candidates it asked for, and, with a lookup, the latency column for any
candidate (as a latency table prices any candidate in ``nas run``). What it may not: anything computed from a whole
table. The scoring box (the reference point at the medians over all cells, or over random architectures for FBNet)
and the true front are the harness's own, used only to score the fronts found, never passed to a strategy.
"""

from __future__ import annotations

import csv
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, overload

import numpy as np

from hwnas.architecture import Architecture
from hwnas.bench.journal import BenchJournal
from hwnas.errors import ConfigError
from hwnas.objectives import Objective, Trial, hypervolume, non_dominated
from hwnas.strategies.loop import BatchLoop, Candidate

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console
    from rich.progress import Progress, TaskID
    from rich.table import Table
    from torch import Tensor, nn

    from hwnas.search_spaces.base import SearchSpace
    from hwnas.search_spaces.fbnet import FBNetSpace
    from hwnas.search_spaces.nb201 import NB201Space
    from hwnas.strategies.base import Strategy

#: Dataset name -> (label, 12-epoch validation column, 200-epoch test column) of ``nb201_accuracy.csv``.
DATASETS: dict[str, tuple[str, str, str]] = {
    "cifar10": ("CIFAR-10", "cifar10_valid_12ep", "cifar10_test_200ep"),
    "cifar100": ("CIFAR-100", "cifar100_valid_12ep", "cifar100_test_200ep"),
    "imagenet16": ("ImageNet16-120", "imagenet16_valid_12ep", "imagenet16_test_200ep"),
}
DEFAULT_BUDGETS: tuple[int, ...] = (25, 50, 100, 200, 500)
DEFAULT_SEEDS = 20
DEFAULT_HW_BUDGET = 300
DEFAULT_BATCH = 10
#: HELP device columns: a phone measured by HW-NAS-Bench (pixel3), a phone measured by HELP, a server CPU and
#: two desktop GPUs at batch 1.
DEFAULT_DEVICES: tuple[str, ...] = ("pixel3", "samsung_a50", "gold_6240", "titan_rtx_1", "1080ti_1")
DEFAULT_FBNET_DEVICES: tuple[str, ...] = ("pixel3", "raspi4")
OVERHEAD_CANDIDATES = 10_000

ACCURACY_FILE = "nas-bench-201/nb201_accuracy.csv"
LATENCY_FILE = "help-latency/nb201_latency.csv"
FBNET_FILE = "hw-nas-bench/fbnet_lut.json"


NB201_CELLS = 5**6


class BenchDataMissing(ConfigError):
    """A benchmark table the bench needs is not where it was looked for."""


# -- driving a strategy ------------------------------------------------------------------------------------
Evaluate = Callable[[Sequence[Architecture]], list[dict[str, float]]]


@dataclass
class DriveResult:
    """The distinct architectures a strategy asked, in the order first asked, and its ask+tell time."""

    trials: list[Trial]
    ask_tell_s: float
    stuck: bool = False  # the strategy proposed nothing new for MAX_STALE_BATCHES batches (or said it had no more)


def drive(strategy: Strategy, space: SearchSpace, budget: int, batch: int, evaluate: Evaluate, *,
          max_ask_tell_s: float | None = None) -> DriveResult:
    """Run ``strategy`` for ``budget`` distinct architectures, batch by batch, with the runner's loop
    (:class:`~hwnas.strategies.loop.BatchLoop`).

    Each batch asks ``min(batch, budget - evaluated)``; asked architectures are canonicalized; new ones are
    evaluated (``evaluate`` returns one metrics dict per architecture) and numbered in the order first asked;
    repeats get their earlier trial; the whole batch, slot by slot, is told. Only ``ask`` and ``tell`` are timed;
    with ``max_ask_tell_s`` the run stops after the batch in which they passed that many seconds.
    """

    def trials_for(candidates: Sequence[Candidate]) -> list[Trial]:
        if not candidates:
            return []
        metrics = evaluate([c.arch for c in candidates])
        return [Trial(number=c.number, arch=c.arch, metrics=m) for c, m in zip(candidates, metrics)]

    loop = BatchLoop(strategy, space, trials_for, budget=budget, batch_size=batch, max_ask_tell_s=max_ask_tell_s)
    stop = loop.run()
    return DriveResult(list(loop.trials.values()), loop.ask_tell_s, stuck=stop.early)


def make_strategy(name: str, params: Mapping[str, object] | None, *, space: SearchSpace,
                  objectives: Sequence[Objective], seed: int) -> Strategy:
    """``STRATEGIES.create`` with the bench's conventions: no constraints, no run directory, ``default_rng(seed)``."""
    from hwnas.strategies import STRATEGIES

    return STRATEGIES.create(name, dict(params or {}), space=space, objectives=list(objectives), constraints=[],
                             rng=np.random.default_rng(seed), run_dir=None)


def default_strategies() -> list[str]:
    """Every registered ask/tell strategy (one-shot strategies have their own registry and are left out)."""
    from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES

    one_shot = set(ONE_SHOT_STRATEGIES.names())
    return [n for n, cls in STRATEGIES.items() if n not in one_shot and callable(getattr(cls, "ask", None))]


# -- NAS-Bench-201 tables ----------------------------------------------------------------------------------
def nb201_space(*, merge: bool) -> NB201Space:
    from hwnas.search_spaces.nb201 import NB201Space

    space = NB201Space(merge_isomorphic=merge)
    space.prepare()
    return space


def nb201_code(space: NB201Space, arch: Architecture) -> int:
    """The cell's number 0..15,624: its six op indices (edge ``e1_0`` first) read as a base-5 number."""
    code = 0
    for op in space.ops_of(arch):
        code = code * 5 + op
    return code


@dataclass
class NB201Data:
    """NAS-Bench-201 accuracies and HELP latencies, each column an array indexed by :func:`nb201_code`."""

    accuracy: dict[str, np.ndarray]
    latency: dict[str, np.ndarray]
    files: dict[str, str]

    @property
    def devices(self) -> list[str]:
        return list(self.latency)


def _need(data_dir: Path, rel: str) -> Path:
    path = data_dir / rel
    if not path.is_file():
        raise BenchDataMissing(f"benchmark table not found: {path} (give the data folder with --data)")
    return path


def arch_str_code(text: str) -> int:
    """The cell number (see :func:`nb201_code`) of an official NAS-Bench-201 string ``|op~0|+|op~0|op~1|+|...|``.

    Raises:
        ValueError: When the string is not a cell of the space.
    """
    from hwnas.search_spaces.nb201 import OPS

    code = 0
    nodes = text.split("+")
    if len(nodes) != 3:
        raise ValueError(f"not a NAS-Bench-201 cell: {text!r}")
    for to, node in enumerate(nodes, start=1):
        edges = node.strip("|").split("|")
        if len(edges) != to:
            raise ValueError(f"not a NAS-Bench-201 cell: {text!r}")
        for frm, edge in enumerate(edges):
            op, _, src = edge.partition("~")
            if src != str(frm) or op not in OPS:
                raise ValueError(f"not a NAS-Bench-201 cell: {text!r} (edge {edge!r})")
            code = code * 5 + OPS.index(op)
    return code


def _read_by_code(path: Path, skip: Sequence[str]) -> dict[str, np.ndarray]:
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or "arch_str" not in header:
            raise ConfigError(f"{path}: expected a header with an arch_str column")
        at = header.index("arch_str")
        cols = [(j, c) for j, c in enumerate(header) if c not in skip and c != "arch_str"]
        out = {c: np.full(NB201_CELLS, np.nan) for _, c in cols}
        filled = np.zeros(NB201_CELLS, dtype=bool)
        for line, row in enumerate(reader, start=2):
            if len(row) != len(header):
                raise ConfigError(f"{path}:{line}: {len(row)} cells, the header has {len(header)}")
            try:
                code = arch_str_code(row[at])
                if filled[code]:
                    raise ValueError(f"{row[at]} appears twice")
                filled[code] = True
                for j, c in cols:
                    out[c][code] = float(row[j])
            except ValueError as exc:
                raise ConfigError(f"{path}:{line}: {exc}") from None
    if not filled.all():
        raise ConfigError(f"{path}: {int((~filled).sum())} of the {NB201_CELLS} NAS-Bench-201 cells have no row")
    for c, values in out.items():
        if not np.isfinite(values).all():
            raise ConfigError(f"{path}: column {c} has missing or non-finite values")
        values.flags.writeable = False
    return out


def load_nb201(data_dir: str | Path) -> NB201Data:
    """Read ``nas-bench-201/nb201_accuracy.csv`` and ``help-latency/nb201_latency.csv`` under ``data_dir`` (once
    per version of the files: the arrays are read-only and shared).

    Raises:
        BenchDataMissing: Naming the file that is not there.
    """
    data_dir = Path(data_dir)
    acc_path, lat_path = _need(data_dir, ACCURACY_FILE), _need(data_dir, LATENCY_FILE)
    stamp = tuple((str(p.resolve()), p.stat().st_mtime_ns, p.stat().st_size) for p in (acc_path, lat_path))
    return _load_nb201(acc_path, lat_path, stamp)


@functools.lru_cache(maxsize=4)
def _load_nb201(acc_path: Path, lat_path: Path, stamp: tuple[tuple[str, int, int], ...]) -> NB201Data:
    del stamp  # part of the cache key only
    accuracy = _read_by_code(acc_path, skip=("index",))
    missing = [c for _, v, t in DATASETS.values() for c in (v, t) if c not in accuracy]
    if missing:
        raise ConfigError(f"{acc_path}: no column {', '.join(missing)}")
    latency = _read_by_code(lat_path, skip=("index",))
    return NB201Data(accuracy, latency, {"accuracy": str(acc_path), "latency": str(lat_path)})


def columns(dataset: str, *, oracle: bool = False) -> tuple[str, str]:
    """(column searched on, column reported) for a dataset."""
    if dataset not in DATASETS:
        raise ConfigError(f"unknown dataset {dataset!r} (datasets: {', '.join(DATASETS)})")
    _, valid, test = DATASETS[dataset]
    return (test if oracle else valid), test


def merged_codes() -> np.ndarray:
    """The cell numbers of the 6,466 isomorphism-class representatives (what a merged space proposes)."""
    space = nb201_space(merge=True)
    members, _ = space.distribution()
    return np.array([nb201_code(space, a) for a in members])


@dataclass(frozen=True)
class Ceiling:
    """The architecture with the best searched value in the whole (merged) space, and its reported value."""

    dataset: str
    searched_column: str
    reported_column: str
    code: int
    arch_str: str
    searched: float
    reported: float
    best_reported: float  # the best reported value of any architecture (the ceiling of an oracle search)


def ceiling(data: NB201Data, dataset: str, *, oracle: bool = False) -> Ceiling:
    """The best a search on ``dataset`` can report: see :class:`Ceiling` (first code on ties)."""
    search_col, report_col = columns(dataset, oracle=oracle)
    codes = merged_codes()
    s = data.accuracy[search_col][codes]
    best = int(codes[int(np.argmax(s))])
    space = nb201_space(merge=False)
    arch = space.from_ops([(best // 5 ** (5 - k)) % 5 for k in range(6)])
    return Ceiling(dataset, search_col, report_col, best, space.to_str(arch), float(data.accuracy[search_col][best]),
                   float(data.accuracy[report_col][best]), float(data.accuracy[report_col][codes].max()))


# -- 1. accuracy -----------------------------------------------------------------------------------------
@dataclass
class AnytimeCurve:
    """One run's anytime curve: after ``k + 1`` distinct queries, the best searched value (``searched[k]``) and
    the reported value of the architecture that has it (``reported[k]``; the first found on ties)."""

    codes: np.ndarray
    searched: np.ndarray
    reported: np.ndarray
    ask_tell_s: float = 0.0
    stuck: bool = False

    @property
    def n_queries(self) -> int:
        return len(self.codes)

    def at(self, budgets: Sequence[int], which: str = "reported") -> list[float]:
        """The curve at each budget (a run that stopped short keeps its last value)."""
        curve = self.reported if which == "reported" else self.searched
        return [float(curve[min(b, len(curve)) - 1]) for b in budgets]


def anytime(codes: np.ndarray, search: np.ndarray, report: np.ndarray) -> AnytimeCurve:
    """The anytime curve of queries ``codes`` (in order) with per-cell values ``search`` (max) and ``report``."""
    codes = np.asarray(codes, dtype=int)
    s = search[codes]
    best = np.maximum.accumulate(s)
    improved = np.ones(len(s), dtype=bool)
    improved[1:] = s[1:] > best[:-1]
    where = np.maximum.accumulate(np.where(improved, np.arange(len(s)), 0))
    return AnytimeCurve(codes, best, report[codes][where])


def run_accuracy(strategy: str, params: Mapping[str, object] | None, dataset: str, seed: int, budget: int, *,
                 data: NB201Data, batch: int = DEFAULT_BATCH, oracle: bool = False) -> AnytimeCurve:
    """One seeded run of ``strategy`` on the merged NAS-Bench-201 space searching ``dataset``'s 12-epoch validation
    accuracy (``oracle``: its 200-epoch test accuracy) as ``top1`` (max), to ``budget`` distinct queries."""
    search_col, report_col = columns(dataset, oracle=oracle)
    search = data.accuracy[search_col]
    space = nb201_space(merge=True)
    codes: list[int] = []

    def evaluate(archs: Sequence[Architecture]) -> list[dict[str, float]]:
        out = []
        for a in archs:
            c = nb201_code(space, a)
            codes.append(c)
            out.append({"top1": float(search[c])})
        return out

    strat = make_strategy(strategy, params, space=space, objectives=[Objective("top1", "max")], seed=seed)
    res = drive(strat, space, budget, batch, evaluate)
    curve = anytime(np.array(codes, dtype=int), search, data.accuracy[report_col])
    curve.ask_tell_s, curve.stuck = res.ask_tell_s, res.stuck
    return curve


# -- 2. hardware-aware -----------------------------------------------------------------------------------
@dataclass
class FrontProblem:
    """A two-objective problem over a finite table: per candidate its objective values on the minimise scale
    (``points``), the hypervolume reference, and the true front's hypervolume."""

    name: str
    objectives: tuple[Objective, Objective]
    points: np.ndarray  # (n, 2), minimise scale
    reference: np.ndarray  # (2,), minimise scale
    true_hv: float
    true_front_size: int
    describe: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def fraction(self, points: np.ndarray) -> float:
        """Hypervolume of ``points`` (minimise scale) over the true front's."""
        if len(points) == 0:
            return 0.0
        return hypervolume(points, self.reference.tolist()) / self.true_hv


def hardware_problem(data: NB201Data, device: str, *, dataset: str = "cifar10") -> FrontProblem:
    """12-epoch validation accuracy on ``dataset`` (max) x ``device``'s latency (min) over every cell; the
    reference point is (median accuracy, median latency) over all 15,625 cells."""
    if device not in data.latency:
        raise ConfigError(f"no latency column {device!r} in {data.files['latency']} "
                          f"(devices: {', '.join(data.devices)})")
    search_col, _ = columns(dataset)
    acc, lat = data.accuracy[search_col], data.latency[device]
    points = np.stack([-acc, lat], axis=1)
    reference = np.array([-float(np.median(acc)), float(np.median(lat))])
    true_hv = hypervolume(points, reference.tolist())
    inside = points[np.all(points < reference, axis=1)]
    front = len(non_dominated(inside)) if len(inside) else 0
    objectives = (Objective("top1", "max"), Objective(f"latency_ms@{device}", "min"))
    return FrontProblem(f"nb201:{dataset}:{device}", objectives, points, reference, true_hv, front,
                        describe=f"{DATASETS[dataset][0]} 12-epoch validation accuracy (max) x {device} latency "
                                 "(min), every NAS-Bench-201 cell (isomorphic cells kept apart)",
                        extra={"accuracy_column": search_col, "latency_column": device,
                               "reference": {"top1": float(np.median(acc)), "latency_ms": float(np.median(lat))}})


@dataclass
class FrontRun:
    """One run on a :class:`FrontProblem`: the hypervolume fraction after each checkpoint budget."""

    budgets: list[int]
    fractions: list[float]
    n_queries: int
    ask_tell_s: float = 0.0
    stuck: bool = False


def hardware_fraction(problem: FrontProblem, codes: Sequence[int] | np.ndarray,
                      budgets: Sequence[int] | None = None) -> list[float]:
    """The hypervolume fraction of the first ``b`` queries ``codes`` for each ``b`` in ``budgets`` (default: all)."""
    codes = np.asarray(codes, dtype=int)
    budgets = [len(codes)] if budgets is None else list(budgets)
    return [problem.fraction(problem.points[codes[: min(b, len(codes))]]) for b in budgets]


def run_front(strategy: str, params: Mapping[str, object] | None, problem: FrontProblem, seed: int,
              budgets: Sequence[int], *, space: S, code_of: Callable[[S, Architecture], int],
              batch: int = DEFAULT_BATCH, max_ask_tell_s: float | None = None, lookup: bool = True) -> FrontRun:
    """One seeded run of ``strategy`` on ``problem`` to ``max(budgets)`` distinct queries.

    With ``lookup`` the second objective (the device's latency) is given to a :class:`LookupAware` strategy as a
    lookup, as ``nas run`` gives it a latency table's metric: a query is an evaluation of the first objective.
    """
    from hwnas.strategies.base import LookupAware
    metric_a, metric_b = (o.metric for o in problem.objectives)
    codes: list[int] = []
    sign = [-1.0 if o.direction == "max" else 1.0 for o in problem.objectives]

    def evaluate(archs: Sequence[Architecture]) -> list[dict[str, float]]:
        out = []
        for a in archs:
            c = code_of(space, a)
            codes.append(c)
            p = problem.points[c]
            out.append({metric_a: sign[0] * float(p[0]), metric_b: sign[1] * float(p[1])})
        return out

    def look_up(archs: Sequence[Architecture]) -> list[dict[str, float]]:
        return [{metric_b: sign[1] * float(problem.points[code_of(space, a), 1])} for a in archs]

    strat = make_strategy(strategy, params, space=space, objectives=problem.objectives, seed=seed)
    if lookup and isinstance(strat, LookupAware):
        strat.use_lookup(look_up, [metric_b])
    res = drive(strat, space, max(budgets), batch, evaluate, max_ask_tell_s=max_ask_tell_s)
    return FrontRun(list(budgets), hardware_fraction(problem, codes, budgets), len(codes), res.ask_tell_s, res.stuck)


def run_hardware(strategy: str, params: Mapping[str, object] | None, problem: FrontProblem, seed: int,
                 budgets: Sequence[int], *, batch: int = DEFAULT_BATCH,
                 max_ask_tell_s: float | None = None, lookup: bool = True) -> FrontRun:
    """A run on a NAS-Bench-201 :func:`hardware_problem` over the unmerged space (see :func:`run_front`)."""
    return run_front(strategy, params, problem, seed, budgets, space=nb201_space(merge=False), code_of=nb201_code,
                     batch=batch, max_ask_tell_s=max_ask_tell_s, lookup=lookup)


# -- 3. FBNet ---------------------------------------------------------------------------------------------
@dataclass
class FBNetTables:
    """Per layer and op, the FLOPs (millions) and each device's latency (ms); plus the fixed stem and head."""

    flops_m: np.ndarray  # (22, 9)
    fixed_flops_m: float
    latency_ms: dict[str, np.ndarray]  # device -> (22, 9)
    fixed_latency_ms: dict[str, float]
    file: str


def fbnet_devices(data_dir: str | Path) -> list[str] | None:
    """The latency metrics of HW-NAS-Bench's FBNet table (device names), or None when the file is absent."""
    import json

    path = Path(data_dir) / FBNET_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return sorted(k[: -len("_latency")] for k in data if k.endswith("_latency"))


def load_fbnet(data_dir: str | Path, devices: Sequence[str]) -> FBNetTables:
    """Per-layer costs of the FBNet space (CIFAR-100 setting, HW-NAS-Bench's) from ``hw-nas-bench/fbnet_lut.json``
    imported as ``nas latency import-published hw-nas-bench-fbnet`` does, and per-layer FLOPs counted by torch on
    the space's own networks. Checks that the per-layer sums reproduce the table's whole-network latency."""
    from hwnas.latency.published import hw_nas_bench_fbnet_table
    from hwnas.search_spaces.fbnet import NUM_LAYERS, OPS, FBNetSpace

    path = _need(Path(data_dir), FBNET_FILE)
    space: Any = FBNetSpace()
    uniform = [space.from_op_indices([j] * NUM_LAYERS) for j in range(len(OPS))]
    keys = [space.layers(a) for a in uniform]  # stem, 22 layers, head conv, pool, classifier
    latency: dict[str, np.ndarray] = {}
    fixed_latency: dict[str, float] = {}
    for device in devices:
        table = hw_nas_bench_fbnet_table(path, space=space, metric=f"{device}_latency", device=device)
        cost = np.array([[table.entries[keys[j][1 + i]].median_ms for j in range(len(OPS))]
                         for i in range(NUM_LAYERS)])
        fixed = table.sum_ms(keys[0]) - float(cost[:, 0].sum())
        probe = space.from_op_indices([int(x) for x in np.random.default_rng(0).integers(len(OPS), size=NUM_LAYERS)])
        want = table.sum_ms(space.layers(probe))
        got = fixed + float(cost[np.arange(NUM_LAYERS), space.op_indices(probe)].sum())
        if not math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-9):
            raise ConfigError(f"{path}: {device} latency is not a per-layer sum ({got} != {want})")
        latency[device], fixed_latency[device] = cost, fixed
    flops, fixed_flops = _fbnet_flops(space, uniform)
    return FBNetTables(flops, fixed_flops, latency, fixed_latency, str(path))


def _fbnet_flops(space: FBNetSpace, uniform: Sequence[Architecture]) -> tuple[np.ndarray, float]:
    """(per layer and op FLOPs in millions, FLOPs of the stem and head), counted on the space's own networks as
    torch's FlopCounterMode (and the ``complexity`` evaluator) counts them: convolutions and linear layers, a
    multiply-add is 2 FLOPs. One forward pass per op on the meta device (shapes only) with hooks that charge
    each convolution or linear layer to its block (``blocks.<i>``) or to the fixed part."""
    import torch
    from torch import nn

    per_layer: list[list[float]] = []
    fixed = 0.0
    for arch in uniform:
        model = space.build(arch).eval().to("meta")
        counts: dict[str, float] = {}
        for name, module in model.named_modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                parts = name.split(".")
                owner = f"blocks.{parts[1]}" if parts[0] == "blocks" else "fixed"
                module.register_forward_hook(_flop_hook(counts, owner))
        with torch.no_grad():
            model(torch.zeros(1, *space.input_shape_of(arch), device="meta"))
        per_layer.append([counts.get(f"blocks.{i}", 0.0) for i in range(len(space.layer_specs(arch)))])
        fixed = counts["fixed"]
    return np.array(per_layer).T, fixed


def _flop_hook(counts: dict[str, float], owner: str) -> Callable[..., None]:
    """A forward hook adding a convolution's or linear layer's FLOPs (millions) to ``counts[owner]``."""

    def hook(module: nn.Conv2d | nn.Linear, inputs: tuple[Tensor, ...], output: Tensor) -> None:
        per_output = 2 * math.prod(module.weight.shape[1:])  # weight: (out, in / groups, *kernel) or (out, in)
        counts[owner] = counts.get(owner, 0.0) + per_output * output.numel() / 1e6

    return hook


def _front_2d(points: np.ndarray) -> np.ndarray:
    """The distinct non-dominated rows of an (n, 2) array (minimised)."""
    pts = np.unique(points.round(9), axis=0)  # sums in another order differ in the last bits: one point
    return pts[non_dominated(pts)]


def fbnet_problem(tables: FBNetTables, device: str, *, samples: int = 100_000) -> FrontProblem:
    """FLOPs (max) x ``device`` latency (min) on FBNet: the exact true front by dynamic programming over layers;
    the reference point at the medians of ``samples`` uniform random architectures (``default_rng(0)``)."""
    cost = tables.latency_ms[device]
    flops = tables.flops_m
    layers, n_ops = cost.shape
    front = np.array([[-tables.fixed_flops_m, tables.fixed_latency_ms[device]]])
    for i in range(layers):
        options = np.stack([-flops[i], cost[i]], axis=1)
        front = _front_2d((front[:, None, :] + options[None, :, :]).reshape(-1, 2))
    ops = np.random.default_rng(0).integers(n_ops, size=(samples, layers))
    rows = np.arange(layers)
    sample_flops = tables.fixed_flops_m + flops[rows, ops].sum(axis=1)
    sample_lat = tables.fixed_latency_ms[device] + cost[rows, ops].sum(axis=1)
    reference = np.array([-float(np.median(sample_flops)), float(np.median(sample_lat))])
    true_hv = hypervolume(front, reference.tolist())
    objectives = (Objective("flops_m", "max"), Objective(f"latency_ms@{device}", "min"))
    inside = int(np.all(front < reference, axis=1).sum())
    return FrontProblem(f"fbnet:{device}", objectives, front, reference, true_hv, inside,
                        describe=f"FBNet (HW-NAS-Bench, CIFAR-100 setting): FLOPs (capacity proxy, max) x {device} "
                                 "latency (min); exact true front",
                        extra={"reference": {"flops_m": float(np.median(sample_flops)),
                                             "latency_ms": float(np.median(sample_lat)),
                                             "from": f"medians of {samples:,} uniform random architectures"},
                               "true_front_points": len(front)})


def run_fbnet(strategy: str, params: Mapping[str, object] | None, tables: FBNetTables, problem: FrontProblem,
              seed: int, budgets: Sequence[int], *, batch: int = DEFAULT_BATCH, lookup: bool = True) -> FrontRun:
    """One seeded run of ``strategy`` on :func:`fbnet_problem`; the points found are priced from the tables (with
    ``lookup``, the latency is also given to a :class:`LookupAware` strategy as a lookup: see :func:`run_front`)."""
    from hwnas.search_spaces.fbnet import FBNetSpace
    from hwnas.strategies.base import LookupAware

    space = FBNetSpace()
    device = problem.objectives[1].metric.partition("@")[2]
    cost, flops = tables.latency_ms[device], tables.flops_m
    rows = np.arange(cost.shape[0])
    found: list[tuple[float, float]] = []

    def evaluate(archs: Sequence[Architecture]) -> list[dict[str, float]]:
        out = []
        for a in archs:
            ops = space.op_indices(a)
            f = tables.fixed_flops_m + float(flops[rows, ops].sum())
            lat = tables.fixed_latency_ms[device] + float(cost[rows, ops].sum())
            found.append((-f, lat))
            out.append({"flops_m": f, f"latency_ms@{device}": lat})
        return out

    def look_up(archs: Sequence[Architecture]) -> list[dict[str, float]]:
        if not archs:
            return []
        ops = np.stack([space.op_indices(a) for a in archs])  # one gather for the batch: row sums as one by one
        return [{f"latency_ms@{device}": tables.fixed_latency_ms[device] + float(v)}
                for v in cost[rows, ops].sum(axis=1)]

    strat = make_strategy(strategy, params, space=space, objectives=problem.objectives, seed=seed)
    if lookup and isinstance(strat, LookupAware):
        strat.use_lookup(look_up, [f"latency_ms@{device}"])
    res = drive(strat, space, max(budgets), batch, evaluate)
    pts = np.array(found).reshape(-1, 2)
    fractions = [problem.fraction(pts[: min(b, len(pts))]) for b in budgets]
    return FrontRun(list(budgets), fractions, len(pts), res.ask_tell_s, res.stuck)


# -- 4. overhead ------------------------------------------------------------------------------------------
class OverheadRun(TypedDict):
    """One strategy's overhead figures (:func:`strategy_overhead`)."""

    candidates: int
    ask_tell_s: float
    wall_s: float
    ask_tell_s_per_1000: float
    stuck: bool
    cut_at_max_s: bool


def strategy_overhead(strategy: str, params: Mapping[str, object] | None, problem: FrontProblem, *,
                      n: int = OVERHEAD_CANDIDATES, batch: int = DEFAULT_BATCH, seed: int = 0,
                      max_s: float | None = None) -> OverheadRun:
    """Wall seconds of ``ask`` + ``tell`` for ``n`` candidates of a NAS-Bench-201 :func:`hardware_problem`
    (every cell kept apart), or for as many as fit in ``max_s`` seconds of them (``candidates`` says how many)."""
    t0 = time.perf_counter()
    run = run_hardware(strategy, params, problem, seed, [n], batch=batch, max_ask_tell_s=max_s)
    wall = time.perf_counter() - t0
    return {"candidates": run.n_queries, "ask_tell_s": run.ask_tell_s, "wall_s": wall,
            "ask_tell_s_per_1000": 1000 * run.ask_tell_s / max(run.n_queries, 1), "stuck": run.stuck,
            "cut_at_max_s": run.n_queries < n and not run.stuck}


# -- summaries --------------------------------------------------------------------------------------------
def summarise(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (ddof 1; 0 for one value), median, quartiles, min, max and count."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {"n": 0}
    q25, med, q75 = np.percentile(v, [25, 50, 75])
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0, "median": float(med),
            "q25": float(q25), "q75": float(q75), "min": float(v.min()), "max": float(v.max()), "n": int(v.size)}


def mean_std_curves(curves: Sequence[AnytimeCurve], length: int) -> tuple[np.ndarray, np.ndarray]:
    """Per query count 1..``length``, the mean and sample std over runs of the reported curve (runs that
    stopped short keep their last value)."""
    m = np.array([c.reported[np.minimum(np.arange(length), len(c.reported) - 1)] for c in curves])
    std = m.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(length)
    return m.mean(axis=0), std


# -- the whole bench --------------------------------------------------------------------------------------
@dataclass
class BenchConfig:
    """What ``nas bench strategies`` runs (see the command's ``--help``)."""

    data_dir: Path
    strategies: list[str]
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    seeds: int = DEFAULT_SEEDS
    budgets: list[int] = field(default_factory=lambda: list(DEFAULT_BUDGETS))
    datasets: list[str] = field(default_factory=lambda: list(DATASETS))
    oracle: bool = False
    hw_budget: int = DEFAULT_HW_BUDGET
    hw_dataset: str = "cifar10"
    devices: list[str] = field(default_factory=lambda: list(DEFAULT_DEVICES))
    fbnet_devices: list[str] = field(default_factory=lambda: list(DEFAULT_FBNET_DEVICES))
    fbnet_budget: int = 1000
    batch: int = DEFAULT_BATCH
    overhead: bool = False
    overhead_candidates: int = OVERHEAD_CANDIDATES
    overhead_max_s: float = 120.0
    hw_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    lookup: bool = True  # the two-objective problems give the latency to a LookupAware strategy as a table lookup

    def check(self) -> None:
        """Counts, names and parameters, checked before anything runs (ConfigError naming the option)."""
        from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES

        for option, value, least in (("--seeds", self.seeds, 1), ("--hw-budget", self.hw_budget, 1),
                                     ("--fbnet-budget", self.fbnet_budget, 1), ("--batch", self.batch, 1),
                                     ("--overhead-candidates", self.overhead_candidates, 1),
                                     ("--overhead-max-s", self.overhead_max_s, 1)):
            if value < least:
                raise ConfigError(f"{option} must be at least {least}, got {value}")
        if not self.budgets or min(self.budgets) < 1:
            raise ConfigError(f"--budgets must be positive integers, got {self.budgets}")
        if not self.strategies:
            raise ConfigError("--strategies: no strategy to run")
        for name in self.strategies:
            if name in ONE_SHOT_STRATEGIES and name not in STRATEGIES:
                raise ConfigError(f"--strategies: {name!r} is a one-shot strategy (it trains a supernet); the bench "
                                  "judges ask/tell strategies")
            STRATEGIES.get(name)  # UnknownComponent suggests close names
        for name, params in self.params.items():
            if name not in self.strategies:
                raise ConfigError(f"--params {name}: not among the strategies run ({', '.join(self.strategies)})")
            STRATEGIES.validate_params(name, params)
        for name, hw in self.hw_params.items():
            if name not in self.strategies:
                raise ConfigError(f"--hw-params {name}: not among the strategies run ({', '.join(self.strategies)})")
            if removed := removed_placeholders(hw):
                raise ConfigError(f"--hw-params {name}: {', '.join(sorted(set(removed)))} no longer exist: they gave "
                                  "the strategy the bench's scoring box (the medians over the whole table), which no "
                                  "user has before searching; write a number you chose, or let the strategy derive "
                                  "its reference from its own trials (bayes_opt, predictor_guided: reference_from)")
            # checked now with stand-in placeholders (the real ones are known once a hardware problem is loaded)
            from types import SimpleNamespace

            stand_in: Any = SimpleNamespace(objectives=[SimpleNamespace(metric="top1"),
                                                        SimpleNamespace(metric="latency_ms@device")])
            try:
                STRATEGIES.validate_params(name, {**(self.params.get(name) or {}), **fill_placeholders(hw, stand_in)})
            except ConfigError as exc:
                raise ConfigError(f"--hw-params {name}: {exc}") from None
        for ds in [*self.datasets, self.hw_dataset]:
            columns(ds)

    def strategy_params(self, name: str) -> dict[str, object]:
        """The strategy's full parameters (defaults filled in), for the record."""
        from hwnas.strategies import STRATEGIES

        return dict(STRATEGIES.validate_params(name, self.params.get(name)).model_dump())

    def params_for(self, name: str, problem: FrontProblem | None = None) -> dict[str, object]:
        """``--params`` of the strategy, and on a two-objective ``problem`` its ``--hw-params`` over them with
        the placeholders filled in (:func:`fill_placeholders`)."""
        out = dict(self.params.get(name) or {})
        if problem is not None and name in self.hw_params:
            out.update(fill_placeholders(self.hw_params[name], problem))
        if problem is not None:
            check_reference(name, out.get("reference"), problem)
        return out

    def to_dict(self) -> dict[str, object]:
        return {"data_dir": str(self.data_dir), "strategies": self.strategies,
                "params": {n: self.strategy_params(n) for n in self.strategies},
                "params_given": self.params, "hw_params_given": self.hw_params, "seeds": self.seeds,
                "seed_rule": "np.random.default_rng(seed), seed 0..N-1",
                "budgets": self.budgets, "datasets": self.datasets, "oracle": self.oracle, "hw_budget": self.hw_budget,
                "hw_dataset": self.hw_dataset, "devices": self.devices, "fbnet_devices": self.fbnet_devices,
                "fbnet_budget": self.fbnet_budget, "batch": self.batch, "overhead": self.overhead,
                "overhead_candidates": self.overhead_candidates, "overhead_max_s": self.overhead_max_s,
                "latency_lookup": self.lookup}


#: Placeholders of ``--hw-params`` values, filled per problem: the two objectives' metric names, which a user knows.
PLACEHOLDERS = ("{accuracy}", "{latency}")
#: Placeholders that handed a strategy the bench's scoring box (the medians over the whole table), removed.
REMOVED_PLACEHOLDERS = ("{accuracy_reference}", "{latency_reference}")


@overload
def fill_placeholders(value: Mapping[str, object], problem: FrontProblem) -> dict[str, object]: ...


@overload
def fill_placeholders(value: object, problem: FrontProblem) -> object: ...


def fill_placeholders(value: object, problem: FrontProblem) -> object:
    """``value`` with every string equal to a placeholder replaced, per problem: ``{accuracy}`` and ``{latency}``
    by the maximised and the minimised objective's metric names (``top1``/``flops_m``, ``latency_ms@<device>``).

    Nothing computed from the table reaches a strategy: the scoring box (the reference point at the medians) stays
    with the harness, so a strategy that needs a reference derives it from its own trials (``bayes_opt``'s
    ``reference_from``) or takes a number the user wrote."""
    if isinstance(value, Mapping):
        return {k: fill_placeholders(v, problem) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_placeholders(v, problem) for v in value]
    if isinstance(value, str):
        table = {"{accuracy}": problem.objectives[0].metric, "{latency}": problem.objectives[1].metric}
        return table.get(value, value)
    return value


def check_reference(name: str, reference: object, problem: FrontProblem) -> None:
    """A ``reference`` the user gave a strategy must have one value per objective, each within that objective's
    range on the problem: not better than its best value (no candidate could lie inside it) and, where the problem
    holds every candidate (NAS-Bench-201; FBNet's holds only its exact front), not beyond its worst (every
    candidate would). Else a ConfigError naming the strategy, the objective, the value and the range. The range only
    checks the user's input; it never reaches the strategy."""
    if reference is None:
        return
    where = f"--hw-params {name}: reference {reference!r}"
    if not isinstance(reference, list) or len(reference) != len(problem.objectives):
        raise ConfigError(f"{where}: needs {len(problem.objectives)} numbers, one per objective "
                          f"({', '.join(o.metric for o in problem.objectives)})")
    for j, (objective, value) in enumerate(zip(problem.objectives, reference)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{where}: {objective.metric} needs a finite number, not {value!r}")
        best, worst = float(problem.points[:, j].min()), float(problem.points[:, j].max())  # minimise scale
        v = objective.to_minimise(float(value))
        every = problem.name.startswith("nb201")
        if v <= best or (every and v > worst):
            lo, hi = sorted((objective.to_minimise(best), objective.to_minimise(worst)))
            span = f"{lo:g} to {hi:g}" if every else f"its best value {objective.to_minimise(best):g}"
            raise ConfigError(f"{where}: {objective.metric} {value:g} lies outside its range on {problem.name} "
                              f"({span})")


def removed_placeholders(value: object) -> list[str]:
    """The removed placeholders ``value`` still uses (nested mappings and lists searched)."""
    if isinstance(value, Mapping):
        return [p for v in value.values() for p in removed_placeholders(v)]
    if isinstance(value, list):
        return [p for v in value for p in removed_placeholders(v)]
    return [value] if isinstance(value, str) and value in REMOVED_PLACEHOLDERS else []


def machine() -> dict[str, str | int | None]:
    """This machine, for the overhead figures."""
    import os
    import platform

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    from hwnas import __version__

    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "hwnas": __version__, "platform": platform.platform()}


def _checkpoints(budgets: Sequence[int], last: int) -> list[int]:
    return sorted({b for b in budgets if b < last} | {last})


T = TypeVar("T")
S = TypeVar("S", bound="SearchSpace")


def _attempt(fn: Callable[[], T], what: str, say: Callable[[str], None]) -> T | str:
    """``fn()``, or the error's one-line text when a strategy raises (said, and recorded instead of the run)."""
    try:
        return fn()
    except Exception as exc:  # one strategy's bug must not end the whole bench
        text = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        say(f"error: {what} failed: {text}")
        return text


def _buildable(name: str, params: Mapping[str, object], *, space: SearchSpace, objectives: Sequence[Objective],
               where: str, say: Callable[[str], None]) -> str | None:
    """None when the strategy can be built for the problem; else why not (said once: its seeds are not run)."""
    try:
        make_strategy(name, params, space=space, objectives=objectives, seed=0)
    except Exception as exc:  # a strategy that needs parameters for this problem
        text = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        hint = " (give them with --hw-params)" if len(objectives) > 1 else ""
        say(f"skipped: {name} on {where}: it cannot be built with these parameters{hint}: {text}")
        return text
    return None


def _front_runs(dev: dict[str, Any], name: str, checkpoints: Sequence[int], seeds: int, run: Callable[[int], FrontRun],
                *, say: Callable[[str], None], step: Callable[[str], None], where: str,
                not_built: str | None = None) -> None:
    """Seeds 0..seeds-1 of one strategy on one front problem (``run(seed)``), recorded in ``dev``."""
    records: list[dict[str, Any]] = []
    ok: list[FrontRun] = []
    if not_built is not None:
        dev.setdefault("not_run", {})[name] = not_built
        seeds_to_run = 0
        for seed in range(seeds):
            step(f"{where} {name} seed {seed} (not run)")
    else:
        seeds_to_run = seeds
    for seed in range(seeds_to_run):
        r = _attempt(functools.partial(run, seed), f"{name} seed {seed} on {where}", say)
        step(f"{where} {name} seed {seed}")
        if isinstance(r, str):
            records.append({"seed": seed, "error": r})
            continue
        if r.stuck:
            say(f"note: {name} seed {seed} on {where} stopped after {r.n_queries} distinct queries")
        ok.append(r)
        records.append({"seed": seed, "n_queries": r.n_queries, "ask_tell_s": r.ask_tell_s,
                        "fractions": dict(zip(map(str, r.budgets), r.fractions))})
    dev["runs"][name] = records
    dev["summary"][name] = {str(b): summarise([r.fractions[k] for r in ok]) for k, b in enumerate(checkpoints)}


def run_bench(cfg: BenchConfig, *, progress: Progress | None = None,
              say: Callable[[str], None] = print, journal: BenchJournal | None = None) -> dict[str, Any]:
    """Every measurement of the bench; the result is what ``results.json`` holds (plots are drawn from it).

    Args:
        progress: A rich ``Progress`` (started) to show (strategy, seed) runs on, or None.
        say: Where one-line notes go (a skipped section, a stuck run).
        journal: Where the results so far are kept after every strategy (and what an interrupted bench left to
            reuse); None keeps nothing until the end.
    """
    t_start = time.perf_counter()
    cfg.check()
    data = load_nb201(cfg.data_dir)
    fb_available = _check_devices(cfg, data)
    out: dict[str, Any] = {"config": cfg.to_dict(), "machine": machine(), "data": dict(data.files),
                           "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if journal is not None:
        journal.results = out
        if journal.prior:
            out["resumed_from"] = {"created": journal.prior.get("created"), "machine": journal.prior.get("machine")}
    step = _progress_steps(cfg, progress, fbnet=fb_available is not None)
    out["accuracy"] = {}
    for ds in cfg.datasets:
        _accuracy_section(cfg, data, ds, into=out["accuracy"], step=functools.partial(step, "accuracy"), say=say,
                          journal=journal)
    out["hardware"] = _hardware_section(cfg, data, step=functools.partial(step, "hardware"), say=say,
                                        journal=journal)
    out["fbnet"] = _fbnet_section(cfg, fb_available, step=functools.partial(step, "fbnet"), say=say,
                                  journal=journal)
    if cfg.overhead:
        out["overhead"] = _overhead_section(cfg, data, progress=progress, say=say, journal=journal)
    out["wall_s"] = time.perf_counter() - t_start
    return out


def _kept(journal: BenchJournal | None) -> None:
    if journal is not None:
        journal.save()


def _check_devices(cfg: BenchConfig, data: NB201Data) -> list[str] | None:
    """The FBNet table's devices (None without the table, or without ``--fbnet-devices``), once every device asked
    for is known to be in its table (ConfigError naming the option otherwise)."""
    unknown = [d for d in cfg.devices if d not in data.latency]
    if unknown:
        raise ConfigError(f"--devices: no latency column {', '.join(map(repr, unknown))} in {data.files['latency']} "
                          f"(devices: {', '.join(data.devices)})")
    fb_available = fbnet_devices(cfg.data_dir) if cfg.fbnet_devices else None
    if fb_available is not None:
        bad = [d for d in cfg.fbnet_devices if d not in fb_available]
        if bad:
            raise ConfigError(f"--fbnet-devices: no {', '.join(f'{d}_latency' for d in bad)} in "
                              f"{cfg.data_dir / FBNET_FILE} (devices: {', '.join(fb_available)})")
    return fb_available


def _progress_steps(cfg: BenchConfig, progress: Progress | None, *, fbnet: bool) -> Callable[[str, str], None]:
    """A progress task per section that runs (strategy, seed) runs; ``step(section, status)`` advances one."""
    n_runs = len(cfg.strategies) * cfg.seeds
    tasks: dict[str, TaskID] = {}
    if progress is not None:
        for key, count, label in (("accuracy", len(cfg.datasets), "accuracy"),
                                  ("hardware", len(cfg.devices), "hardware-aware"),
                                  ("fbnet", len(cfg.fbnet_devices) if fbnet else 0, "FBNet")):
            if count:
                tasks[key] = progress.add_task(label, total=count * n_runs, status="")

    def step(key: str, status: str) -> None:
        if progress is not None and key in tasks:
            progress.update(tasks[key], advance=1, status=status)

    return step


def _accuracy_section(cfg: BenchConfig, data: NB201Data, ds: str, *, into: dict[str, Any],
                      step: Callable[[str], None], say: Callable[[str], None],
                      journal: BenchJournal | None = None) -> dict[str, Any]:
    """1. accuracy on one dataset (``into[ds]``): the ceiling, and per strategy its seeds' runs, summary and mean
    curve."""
    search_col, report_col = columns(ds, oracle=cfg.oracle)
    ceil = ceiling(data, ds, oracle=cfg.oracle)
    entry: dict[str, Any] = {
        "label": DATASETS[ds][0], "searched_column": search_col, "reported_column": report_col,
        "space": "nb201, isomorphic cells merged (6,466 architectures)",
        "ceiling": {"arch_str": ceil.arch_str, "searched": ceil.searched, "reported": ceil.reported,
                    "best_reported_of_any": ceil.best_reported},
        "runs": {}, "summary": {}, "curve": {}}
    into[ds] = entry
    for name in cfg.strategies:
        if journal is not None and journal.reuse(("accuracy", ds), name, entry):
            for seed in range(cfg.seeds):
                step(f"{ds} {name} seed {seed} (done before)")
            continue
        why = _buildable(name, cfg.params_for(name), space=nb201_space(merge=True),
                         objectives=[Objective("top1", "max")], where=ds, say=say)
        if why is not None:
            entry.setdefault("not_run", {})[name] = why
        _accuracy_runs(entry, cfg, data, ds, name, step=step, say=say, not_built=why)
        _kept(journal)
    return entry


def _accuracy_runs(entry: dict[str, Any], cfg: BenchConfig, data: NB201Data, ds: str, name: str, *,
                   step: Callable[[str], None], say: Callable[[str], None], not_built: str | None) -> None:
    """Seeds 0..seeds-1 of one strategy on one dataset, recorded in ``entry`` (runs, summary, mean curve)."""
    top = max(cfg.budgets)
    curves: list[AnytimeCurve] = []
    records: list[dict[str, Any]] = []
    for seed in range(cfg.seeds):
        if not_built is not None:
            step(f"{ds} {name} seed {seed} (not run)")
            continue
        c = _attempt(functools.partial(run_accuracy, name, cfg.params_for(name), ds, seed, top, data=data,
                                       batch=cfg.batch, oracle=cfg.oracle), f"{name} seed {seed} on {ds}", say)
        step(f"{ds} {name} seed {seed}")
        if isinstance(c, str):
            records.append({"seed": seed, "error": c})
            continue
        if c.stuck or c.n_queries < top:
            say(f"note: {name} seed {seed} on {ds} stopped after {c.n_queries} distinct queries "
                f"(of {top}): it proposed nothing new")
        curves.append(c)
        records.append({"seed": seed, "n_queries": c.n_queries, "ask_tell_s": c.ask_tell_s,
                        "reported": dict(zip(map(str, cfg.budgets), c.at(cfg.budgets))),
                        "searched": dict(zip(map(str, cfg.budgets), c.at(cfg.budgets, "searched")))})
    entry["runs"][name] = records
    entry["summary"][name] = {str(b): summarise([c.at([b])[0] for c in curves]) for b in cfg.budgets}
    if curves:
        mean, std = mean_std_curves(curves, top)
        entry["curve"][name] = {"mean": mean.tolist(), "std": std.tolist(), "runs": len(curves)}


def _front_device(problem: FrontProblem) -> dict[str, Any]:
    """A two-objective problem's entry of a section's ``devices``, before its runs."""
    return {"describe": problem.describe, "objectives": [o.metric for o in problem.objectives], **problem.extra,
            "true_hypervolume": problem.true_hv, "true_front_size_beyond_reference": problem.true_front_size,
            "runs": {}, "summary": {}}


def _hardware_section(cfg: BenchConfig, data: NB201Data, *, step: Callable[[str], None],
                      say: Callable[[str], None], journal: BenchJournal | None = None) -> dict[str, Any]:
    """2. hardware-aware: per device, every strategy's seeds on its :func:`hardware_problem`."""
    checkpoints = _checkpoints(cfg.budgets, cfg.hw_budget)
    hw_out: dict[str, Any] = {"dataset": cfg.hw_dataset, "budget": cfg.hw_budget, "checkpoints": checkpoints,
                              "space": "nb201, every cell kept apart (15,625 architectures)",
                              "latency": ("a lookup for strategies that use one (a query is an accuracy evaluation)"
                                          if cfg.lookup else "known to a strategy only once it queried the cell"),
                              "devices": {}}
    if journal is not None and journal.results is not None:
        journal.results["hardware"] = hw_out
    for device in cfg.devices:
        problem = hardware_problem(data, device, dataset=cfg.hw_dataset)
        dev = hw_out["devices"][device] = _front_device(problem)
        for name in cfg.strategies:
            if journal is not None and journal.reuse(("hardware", "devices", device), name, dev):
                for seed in range(cfg.seeds):
                    step(f"{device} {name} seed {seed} (done before)")
                continue
            params = cfg.params_for(name, problem)
            why = _buildable(name, params, space=nb201_space(merge=False), objectives=problem.objectives,
                             where=device, say=say)
            run = functools.partial(run_hardware, name, params, problem, budgets=checkpoints, batch=cfg.batch,
                                    lookup=cfg.lookup)
            _front_runs(dev, name, checkpoints, cfg.seeds, run, say=say, step=step, where=device, not_built=why)
            _kept(journal)
    return hw_out


def _fbnet_section(cfg: BenchConfig, fb_available: list[str] | None, *, step: Callable[[str], None],
                   say: Callable[[str], None], journal: BenchJournal | None = None) -> dict[str, Any]:
    """3. FBNet: per device, every strategy's seeds on its :func:`fbnet_problem` (skipped, saying why, without
    ``--fbnet-devices`` or the table)."""
    if not cfg.fbnet_devices:
        return {"skipped": "no --fbnet-devices"}
    if fb_available is None:
        reason = f"{cfg.data_dir / FBNET_FILE} not found (HW-NAS-Bench's FBNet lookup table)"
        say(f"FBNet: skipped: {reason}")
        return {"skipped": reason}
    from hwnas.search_spaces.fbnet import FBNetSpace

    tables = load_fbnet(cfg.data_dir, cfg.fbnet_devices)
    fb_checkpoints = _checkpoints(cfg.budgets, cfg.fbnet_budget)
    fb_out: dict[str, Any] = {
        "budget": cfg.fbnet_budget, "checkpoints": fb_checkpoints, "file": tables.file,
        "why": "HW-NAS-Bench has no FBNet accuracy, and a front of two latencies (or latency and energy) is one "
               "point: skip is the cheapest op of every layer on every device. FLOPs stand in for capacity.",
        "devices": {}}
    if journal is not None and journal.results is not None:
        journal.results["fbnet"] = fb_out
    for device in cfg.fbnet_devices:
        problem = fbnet_problem(tables, device)
        dev = fb_out["devices"][device] = _front_device(problem)
        for name in cfg.strategies:
            if journal is not None and journal.reuse(("fbnet", "devices", device), name, dev):
                for seed in range(cfg.seeds):
                    step(f"FBNet {device} {name} seed {seed} (done before)")
                continue
            params = cfg.params_for(name, problem)
            why = _buildable(name, params, space=FBNetSpace(), objectives=problem.objectives,
                             where=f"FBNet {device}", say=say)
            run = functools.partial(run_fbnet, name, params, tables, problem, budgets=fb_checkpoints,
                                    batch=cfg.batch, lookup=cfg.lookup)
            _front_runs(dev, name, fb_checkpoints, cfg.seeds, run, say=say, step=step, where=f"FBNet {device}",
                        not_built=why)
            _kept(journal)
    return fb_out


def _overhead_section(cfg: BenchConfig, data: NB201Data, *, progress: Progress | None,
                      say: Callable[[str], None], journal: BenchJournal | None = None) -> dict[str, Any]:
    """4. overhead: every strategy's ask + tell seconds on one hardware-aware problem, seed 0."""
    device = "pixel3" if "pixel3" in data.latency else data.devices[0]
    problem = hardware_problem(data, device)
    ov: dict[str, Any] = {
        "problem": f"NAS-Bench-201, every cell: CIFAR-10 12-epoch validation accuracy x {device} latency, seed 0, "
                   f"batch {cfg.batch}", "candidates": cfg.overhead_candidates,
        "note": "wall seconds of ask + tell on this machine (metric look-ups excluded), strategies measured one "
                f"after another in one process; a strategy is stopped after the batch in which its ask + tell "
                f"passed {cfg.overhead_max_s:g} s (fewer candidates)", "strategies": {}}
    task = progress.add_task("overhead", total=len(cfg.strategies), status="") if progress is not None else None
    if journal is not None and journal.results is not None:
        journal.results["overhead"] = ov
    for name in cfg.strategies:
        if journal is not None and journal.reuse(("overhead",), name, ov, keys=("strategies",)):
            if progress is not None and task is not None:
                progress.update(task, advance=1, status=f"{name} (done before)")
            continue
        params = cfg.params_for(name, problem)
        why = _buildable(name, params, space=nb201_space(merge=False), objectives=problem.objectives,
                         where="the overhead problem", say=say)
        if why is not None:
            ov["strategies"][name] = {"not_run": why}
        else:
            got = _attempt(functools.partial(strategy_overhead, name, params, problem, n=cfg.overhead_candidates,
                                             batch=cfg.batch, max_s=cfg.overhead_max_s), f"{name} overhead", say)
            if not isinstance(got, str) and got["cut_at_max_s"]:
                say(f"note: {name}'s overhead was measured on {got['candidates']:,} candidates: its ask + tell "
                    f"passed --overhead-max-s {cfg.overhead_max_s:g} s")
            ov["strategies"][name] = {"error": got} if isinstance(got, str) else got
        _kept(journal)
        if progress is not None and task is not None:
            progress.update(task, advance=1, status=name)
    return ov


# -- report -----------------------------------------------------------------------------------------------
def _searched_label(res: Mapping[str, Any]) -> str:
    return "200-epoch test (oracle)" if res["config"]["oracle"] else "12-epoch validation"


def accuracy_tables(res: Mapping[str, Any]) -> list[tuple[str, Table]]:
    """Per dataset (what was measured, a rich table): mean ± std over seeds of the reported accuracy per budget."""
    from rich.table import Table

    out = []
    seeds = res["config"]["seeds"]
    searched = _searched_label(res)
    for entry in res["accuracy"].values():
        budgets = list(next(iter(entry["summary"].values())))
        what = (f"{entry['label']}: 200-epoch test accuracy (%) of the architecture with the best {searched} "
                f"accuracy among the first B distinct queries; mean ± std (ddof 1) over {seeds} seeds; NAS-Bench-201, "
                f"isomorphic cells merged. Ceiling, what a search reports once it has found the best {searched} "
                f"architecture of the whole space: {entry['ceiling']['reported']:.2f} (not an upper bound: an "
                f"architecture that is best among fewer queries can have a better test accuracy); best 200-epoch "
                f"test of any architecture: {entry['ceiling']['best_reported_of_any']:.2f}.")
        t = Table(title=f"{entry['label']}: searched {searched}, reported 200-epoch test")
        t.add_column("strategy")
        for b in budgets:
            t.add_column(f"B={b}", justify="right")
        best = {b: max((s[b]["mean"] for s in entry["summary"].values() if s[b]["n"]), default=None) for b in budgets}
        for name, summ in entry["summary"].items():
            cells = []
            for b in budgets:
                text = _cell(summ[b], entry["runs"][name],
                             f"{summ[b].get('mean', 0):.2f} ± {summ[b].get('std', 0):.2f}")
                cells.append(f"[bold]{text}[/bold]" if summ[b]["n"] and summ[b]["mean"] == best[b] else text)
            t.add_row(name, *cells)
        out.append((what, t))
    return out


def _cell(summary: Mapping[str, float], runs: Sequence[object], text: str) -> str:
    """A table cell: ``text``, with the count of seeds when some failed; ``failed`` when all did, ``not run`` when
    the strategy could not be built for the problem."""
    if not runs:
        return "not run"
    if not summary["n"]:
        return "[red]failed[/red]"
    return text if summary["n"] == len(runs) else f"{text} [yellow](n={summary['n']})[/yellow]"


def front_table(section: Mapping[str, Any], *, title: str, budget: int) -> Table:
    """Median [IQR] of the hypervolume fractions at ``budget``: a row per strategy, a column per device."""
    from rich.table import Table

    devices = section["devices"]
    t = Table(title=title)
    t.add_column("strategy")
    for d in devices:
        t.add_column(d, justify="right")
    names = list(next(iter(devices.values()))["summary"]) if devices else []
    best = {d: max((v["summary"][n][str(budget)]["median"] for n in names if v["summary"][n][str(budget)]["n"]),
                   default=None) for d, v in devices.items()}
    for n in names:
        cells = []
        for d, v in devices.items():
            s = v["summary"][n][str(budget)]
            text = _cell(s, v["runs"][n], f"{s.get('median', 0):.3f} [{s.get('q25', 0):.3f}, {s.get('q75', 0):.3f}]")
            cells.append(f"[bold]{text}[/bold]" if s["n"] and s["median"] == best[d] else text)
        t.add_row(n, *cells)
    return t


def overhead_table(res: Mapping[str, Any]) -> Table:
    from rich.table import Table

    ov = res["overhead"]
    m = res["machine"]
    t = Table(title=f"ask + tell seconds per 1,000 candidates on {m['host']}")
    t.add_column("strategy")
    t.add_column("candidates", justify="right")
    t.add_column("ask+tell s", justify="right")
    t.add_column("s / 1,000", justify="right")
    for name, v in ov["strategies"].items():
        if "error" in v or "not_run" in v:
            t.add_row(name, "[red]failed[/red]" if "error" in v else "not run", "", "")
        else:
            cut = " [yellow](cut at --overhead-max-s)[/yellow]" if v.get("cut_at_max_s") else ""
            t.add_row(name, f"{v['candidates']:,}{cut}", f"{v['ask_tell_s']:.2f}", f"{v['ask_tell_s_per_1000']:.3f}")
    return t


def _print_not_run(console: Console, not_run: Mapping[str, str]) -> None:
    for name, why in not_run.items():
        console.print(f"not run: {name}: {why}", markup=False)


def print_report(res: Mapping[str, Any], console: Console) -> None:
    """Every table of the bench on a rich console, each after a line saying what it measures."""
    for (what, t), entry in zip(accuracy_tables(res), res["accuracy"].values()):
        console.print(what)
        console.print(t)
        _print_not_run(console, entry.get("not_run", {}))
    hw = res["hardware"]
    seeds = res["config"]["seeds"]
    if hw["devices"]:
        console.print(f"Hardware-aware, NAS-Bench-201 with every cell kept apart: hypervolume of the non-dominated "
                      f"set of the first {hw['budget']} distinct queries / the true front's (all 15,625 cells); "
                      f"{DATASETS[hw['dataset']][0]} 12-epoch validation accuracy (max) x the device's latency from "
                      f"HELP (min); reference point (median accuracy, median latency) over all cells; median "
                      f"[IQR] over {seeds} seeds.")
        console.print(front_table(hw, budget=hw["budget"], title=f"hypervolume fraction at {hw['budget']} queries"))
        _print_not_run(console, {k: v for d in hw["devices"].values() for k, v in d.get("not_run", {}).items()})
    fb = res.get("fbnet", {})
    if fb.get("skipped"):
        console.print(f"FBNet: skipped: {fb['skipped']}")
    elif fb.get("devices"):
        console.print(f"FBNet (HW-NAS-Bench lookup table, CIFAR-100 setting): hypervolume of the non-dominated set of "
                      f"the first {fb['budget']} distinct queries / the exact true front's; FLOPs (capacity proxy, "
                      f"max) x the device's latency (min); reference point at the medians of 100,000 random "
                      f"architectures; median [IQR] over {seeds} seeds. Why FLOPs: {fb['why']}")
        console.print(front_table(fb, budget=fb["budget"],
                                  title=f"FBNet hypervolume fraction at {fb['budget']} queries"))
        _print_not_run(console, {k: v for d in fb["devices"].values() for k, v in d.get("not_run", {}).items()})
    if "overhead" in res:
        ov, m = res["overhead"], res["machine"]
        console.print(f"Strategy overhead, this machine's figure ({m['cpu']}, {m['cores']} cores): {ov['note']}; "
                      f"{ov['problem']}.")
        console.print(overhead_table(res))


# -- plots ------------------------------------------------------------------------------------------------
def _save(fig: Figure, path: Path) -> None:
    import io

    import matplotlib.pyplot as plt

    from hwnas.fileio import atomic_write

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write(path, buf.getvalue())


def _wrap(text: str, fig: Figure) -> str:
    """A figure title wrapped to the figure's width."""
    import textwrap

    return textwrap.fill(text, width=max(40, int(fig.get_figwidth() * 14)))


def _pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_anytime(res: Mapping[str, Any], path: Path) -> None:
    """Reported accuracy vs distinct queries, mean with a ±std band, one panel per dataset, a line per strategy."""
    plt = _pyplot()
    from matplotlib.ticker import NullFormatter

    acc = res["accuracy"]
    if not acc:
        return
    cfg = res["config"]
    fig, axes = plt.subplots(1, len(acc), figsize=(5.5 * len(acc), 4.6), dpi=120, squeeze=False)
    low_budget = min(cfg["budgets"])
    for ax, entry in zip(axes[0], acc.values()):
        lows, highs = [], []
        for name, curve in entry["curve"].items():
            mean, std = np.array(curve["mean"]), np.array(curve["std"])
            x = np.arange(1, len(mean) + 1)
            runs = curve.get("runs", cfg["seeds"])
            label = name if runs == cfg["seeds"] else f"{name} ({runs} of {cfg['seeds']} seeds; others failed)"
            (line,) = ax.plot(x, mean, lw=1.5, label=label)
            ax.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=0.1, lw=0)
            lows.append(float((mean - std)[low_budget - 1:].min()))
            highs.append(float((mean + std)[low_budget - 1:].max()))
        c = entry["ceiling"]["reported"]
        ax.axhline(c, ls="--", c="k", lw=1, label=f"ceiling {c:.2f}")
        ax.set_xscale("log")
        ax.set_xlim(low_budget / 2, len(mean))
        ax.set_xticks(cfg["budgets"], [str(b) for b in cfg["budgets"]])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(min(lows) - 0.3, max(max(highs), c) + 0.3)
        ax.set_xlabel("distinct architectures queried (B)")
        ax.set_ylabel(f"{entry['label']} 200-epoch test accuracy (%)")
        ax.set_title(f"{entry['label']}: searched on {_searched_label(res)}\nreported: 200-epoch test", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(_wrap(f"NAS-Bench-201 (isomorphic cells merged): 200-epoch test accuracy of the architecture with the "
                       f"best {_searched_label(res)} accuracy among the first B distinct queries; mean ± std over "
                       f"{cfg['seeds']} seeds, batch {cfg['batch']}", fig), fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def plot_fractions(section: Mapping[str, Any], path: Path, *, title: str) -> None:
    """Box plots of the hypervolume fractions at the section's budget: a panel per device, a box per strategy."""
    plt = _pyplot()
    devices = section["devices"]
    if not devices:
        return
    budget = str(section["budget"])
    n_strategies = len(next(iter(devices.values()))["runs"])
    width = max(3.5, 0.5 * n_strategies + 1.2)
    ncols = min(3, len(devices))
    nrows = -(-len(devices) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, 4.6 * nrows), dpi=120, squeeze=False)
    for ax in axes.flat[len(devices):]:
        ax.set_visible(False)
    for ax, (device, dev) in zip(axes.flat, devices.items()):
        names = [n for n, runs in dev["runs"].items() if any("fractions" in r for r in runs)]
        values = [[r["fractions"][budget] for r in dev["runs"][n] if "fractions" in r] for n in names]
        ax.boxplot([v or [np.nan] for v in values], showfliers=True)
        labels = [n if len(v) == len(dev["runs"][n]) else f"{n} (n={len(v)})" for n, v in zip(names, values)]
        ax.set_xticks(range(1, len(names) + 1), labels, rotation=45, ha="right", fontsize=8)
        ax.set_title(f"{device} latency", fontsize=10)
        ax.set_ylabel("hypervolume / true front's")
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(_wrap(title, fig), fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def plot_overhead(res: Mapping[str, Any], path: Path) -> None:
    plt = _pyplot()
    ov = res["overhead"]
    names = [n for n, v in ov["strategies"].items() if "ask_tell_s_per_1000" in v]
    values = [ov["strategies"][n]["ask_tell_s_per_1000"] for n in names]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.8), dpi=120)
    ax.barh(names, values, color="tab:blue")
    ax.set_xlabel("ask + tell wall seconds per 1,000 candidates")
    m = res["machine"]
    ax.set_title(f"Strategy overhead on this machine ({m['cpu']}, {m['cores']} cores)\n{ov['problem']}, "
                 f"{ov['candidates']:,} candidates", fontsize=8)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    _save(fig, path)


#: The files :func:`write_outputs` writes.
OUTPUT_FILES = ("results.json", "anytime.png", "hw_fractions.png", "fbnet_fractions.png", "overhead.png")


def write_outputs(res: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """``results.json`` and the plots in ``out_dir``; returns the paths written."""
    import json

    from hwnas.fileio import atomic_write

    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "results.json"]
    atomic_write(written[0], json.dumps(res, indent=1) + "\n")
    seeds = res["config"]["seeds"]
    if res["accuracy"]:
        plot_anytime(res, out_dir / "anytime.png")
        written.append(out_dir / "anytime.png")
    hw = res["hardware"]
    if hw["devices"]:
        plot_fractions(hw, out_dir / "hw_fractions.png",
                       title=f"NAS-Bench-201, every cell: hypervolume of the front of the first {hw['budget']} queries "
                             f"/ true front's; {DATASETS[hw['dataset']][0]} 12-epoch validation accuracy x device "
                             f"latency (HELP); reference = medians over all cells; {seeds} seeds")
        written.append(out_dir / "hw_fractions.png")
    fb = res.get("fbnet", {})
    if fb.get("devices"):
        plot_fractions(fb, out_dir / "fbnet_fractions.png",
                       title=f"FBNet (HW-NAS-Bench LUT, CIFAR-100 setting): hypervolume of the front of the first "
                             f"{fb['budget']} queries / exact true front's; FLOPs (max) x device latency (min); "
                             f"reference = medians of random architectures; {seeds} seeds")
        written.append(out_dir / "fbnet_fractions.png")
    if "overhead" in res:
        plot_overhead(res, out_dir / "overhead.png")
        written.append(out_dir / "overhead.png")
    return written
