"""Judge accuracy predictors on NAS-Bench-201: ``nas bench predictors``.

Protocol (as NASLib's predictor study, White et al. 2021): for each dataset (CIFAR-10, CIFAR-100,
ImageNet16-120; the 200-epoch test accuracy of NAS-Bench-201 / NATS-Bench), each training size N and
each seed s, the 15,625 cells are shuffled with ``np.random.default_rng(s)``; a predictor is fitted on
the first N cells (features of each cell as written, see :mod:`hwnas.predictors.features`) and scored
on **all the other cells**: Kendall tau, Spearman rho, and the precision of its top 5 % (the share of
the cells it ranks in the top 5 % of the rest that are truly there). The baseline is the FLOPs proxy
(no fitting: FLOPs of the CIFAR network, more is better), scored on the same held-out cells.

FLOPs of a NAS-Bench-201 network depend only on how many 1x1 and 3x3 convolutions its cell has (every
edge of a cell sees the same channels and resolution, and a dead convolution still runs), so each of the
28 count pairs is counted once with torch's FlopCounterMode on a built network.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.bench.journal import BenchJournal
from hwnas.bench.strategies import DATASETS, NB201_CELLS, load_nb201, machine, nb201_space
from hwnas.errors import ConfigError
from hwnas.predictors.metrics import rank_scores

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from hwnas.architecture import Architecture
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.search_spaces.nb201 import NB201Space

#: Predictors judged by default, with the feature set each reads.
DEFAULT_PREDICTORS: dict[str, str] = {"gbt": "cell", "mlp": "cell", "gp": "cell", "ensemble": "cell"}
DEFAULT_SIZES: tuple[int, ...] = (20, 50, 100, 200, 1000)


@dataclass
class PredictorBenchConfig:
    """What ``nas bench predictors`` measures."""

    data_dir: Path
    predictors: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PREDICTORS))
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    datasets: list[str] = field(default_factory=lambda: list(DATASETS))
    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
    seeds: int = 10
    max_gp_size: int = 1000

    def __post_init__(self) -> None:
        from hwnas.predictors import PREDICTORS, check_pairing

        for name, feats in self.predictors.items():
            if name not in PREDICTORS:
                raise ConfigError(f"unknown predictor {name!r}; known: {', '.join(PREDICTORS.names())}")
            check_pairing(name, feats)
            PREDICTORS.validate_params(name, self.params.get(name))
        for name in self.params:
            if name not in self.predictors:
                raise ConfigError(f"--params names {name!r}, which is not among the predictors judged")
        for d in self.datasets:
            if d not in DATASETS:
                raise ConfigError(f"unknown dataset {d!r} (datasets: {', '.join(DATASETS)})")
        if not self.sizes or min(self.sizes) < 3 or max(self.sizes) >= NB201_CELLS:
            raise ConfigError(f"training sizes must lie in 3..{NB201_CELLS - 1}, got {self.sizes}")
        if self.seeds < 1:
            raise ConfigError(f"seeds must be >= 1, got {self.seeds}")

    def to_dict(self) -> dict[str, object]:
        """Every option that decides the figures (a resumed bench must have the same)."""
        return {"data_dir": str(self.data_dir), "predictors": self.predictors, "params": self.params,
                "datasets": self.datasets, "sizes": sorted(self.sizes), "seeds": self.seeds,
                "seed_rule": "np.random.default_rng(seed), seed 0..N-1", "max_gp_size": self.max_gp_size}


# -- scores -----------------------------------------------------------------------------------------------
def summarise(values: Sequence[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if a.size > 1 else 0.0, "n": int(a.size)}


# -- the NAS-Bench-201 cells ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def nb201_cells() -> tuple[NB201Space, list[Architecture]]:
    """(the unmerged space, every cell as an Architecture, indexed by cell code)."""
    from hwnas.search_spaces.nb201 import _ops

    space = nb201_space(merge=False)
    return space, [space.from_ops(_ops(code)) for code in range(NB201_CELLS)]


def nb201_flops_m() -> np.ndarray:
    """MFLOPs of every cell's CIFAR-10 network (FlopCounterMode, a multiply-add is 2 FLOPs), by cell code.

    The network runs only the convolutions that reach the cell's output (:func:`~hwnas.search_spaces.nb201.cell_plan`),
    so FLOPs depend on how many live 1x1 and 3x3 convolutions a cell has, and linearly: each stage halves the
    resolution and doubles the channels, so one live convolution of a kind costs the same in every cell. Three
    networks are counted (no convolution, one 1x1, one 3x3) and every pair follows; counting all 28 pairs' networks
    instead agrees to 1e-13 MFLOPs (2026-11-28), and the test suite checks cells against whole networks counted."""
    from hwnas.search_spaces.nb201 import cell_plan

    space, archs = nb201_cells()
    work = [cell_plan(space.cell_ops(a)).work for a in archs]
    n1 = np.array([w.count("nor_conv_1x1") for w in work])
    n3 = np.array([w.count("nor_conv_3x3") for w in work])
    # skips elsewhere: no FLOPs counted for them
    base, one_1x1, one_3x3 = (count_flops_m(space, space.from_ops(genes))
                              for genes in ([1] * 6, [2] + [1] * 5, [3] + [1] * 5))
    per_pair = {(a, b): base + a * (one_1x1 - base) + b * (one_3x3 - base)
                for a, b in set(zip(n1.tolist(), n3.tolist()))}
    return np.array([per_pair[(a, b)] for a, b in zip(n1.tolist(), n3.tolist())])


def count_flops_m(space: SearchSpace, arch: Architecture) -> float:
    """MFLOPs of ``space.build(arch)`` at batch 1 (torch's FlopCounterMode)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model = space.build(arch).eval()
    x = torch.zeros(1, *space.input_shape_of(arch))
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(x)
    return float(counter.get_total_flops()) / 1e6


# -- the bench --------------------------------------------------------------------------------------------
def run_predictor_bench(cfg: PredictorBenchConfig, *, progress: Progress | None = None,
                        say: Callable[[str], None] = print, journal: BenchJournal | None = None) -> dict[str, Any]:
    """Every (dataset, size, seed, predictor) fit and scored, plus the FLOPs baseline; JSON-safe results.

    Args:
        journal: Where the results so far are kept after every training size of every dataset (and what an
            interrupted bench of the same configuration left to reuse: its finished sizes are not fitted again);
            None keeps nothing until the end.
    """
    from hwnas.predictors import PREDICTORS, featurize

    t0 = time.perf_counter()
    data = load_nb201(cfg.data_dir)
    space, archs = nb201_cells()
    features = {f: featurize(space, archs, f) for f in sorted(set(cfg.predictors.values()))}
    say(f"features: {', '.join(f'{f} ({m.shape[1]} columns)' for f, m in features.items())}")
    flops = nb201_flops_m()

    def fitted(n: int) -> list[str]:
        """The predictors fitted at training size ``n`` (the Gaussian process only up to ``max_gp_size``)."""
        return [name for name in cfg.predictors if not (name == "gp" and n > cfg.max_gp_size)]

    fits = sum(len(fitted(n)) for _ in cfg.datasets for n in cfg.sizes) * cfg.seeds
    task = progress.add_task("predictors", total=fits, status="") if progress is not None else None
    raw: dict[str, Any] = {}
    out: dict[str, Any] = {
        "config": cfg.to_dict(),
        "protocol": ("NAS-Bench-201, 15,625 cells; per seed s: shuffle with default_rng(s), fit on the first N, "
                     "score on all the rest (200-epoch test accuracy); mean ± std over seeds"),
        "datasets": {d: DATASETS[d][2] for d in cfg.datasets}, "sizes": sorted(cfg.sizes), "seeds": cfg.seeds,
        "predictors": cfg.predictors, "params": cfg.params, "max_gp_size": cfg.max_gp_size,
        "files": data.files, "machine": machine(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": raw,
    }
    if journal is not None:
        journal.results = out
        if journal.prior:
            out["resumed_from"] = {"created": journal.prior.get("created"), "machine": journal.prior.get("machine")}
    for dataset in cfg.datasets:
        y = np.asarray(data.accuracy[DATASETS[dataset][2]], dtype=float)
        for n in sorted(cfg.sizes):
            before = journal.entry(("runs", dataset, str(n))) if journal is not None else {}
            if all(len(before.get(name, ())) == cfg.seeds for name in ["flops", *fitted(n)]):
                raw.setdefault(dataset, {})[str(n)] = dict(before)  # finished by the interrupted bench
                assert journal is not None
                journal.reused += 1
                if progress is not None and task is not None:
                    progress.update(task, advance=cfg.seeds * len(fitted(n)), status=f"{dataset} N={n} reused")
                continue
            cell: dict[str, list[Any]] = {}
            for seed in range(cfg.seeds):
                perm = np.random.default_rng(seed).permutation(NB201_CELLS)
                train, test = perm[:n], perm[n:]
                cell.setdefault("flops", []).append(rank_scores(flops[test], y[test]))
                for name in fitted(n):
                    X = features[cfg.predictors[name]]
                    start = time.perf_counter()
                    model = PREDICTORS.create(name, cfg.params.get(name), rng=np.random.default_rng(seed))
                    model.fit(X[train], y[train])
                    fit_s = time.perf_counter() - start
                    start = time.perf_counter()
                    pred = np.asarray(model.predict(X[test]))
                    predict_s = time.perf_counter() - start
                    per_s = test.size / predict_s if predict_s > 0 else None
                    cell.setdefault(name, []).append({**rank_scores(pred, y[test]), "fit_s": fit_s,
                                                      "predict_per_s": per_s})
                    if progress is not None and task is not None:
                        progress.update(task, advance=1, status=f"{dataset} N={n} seed {seed} {name}")
            raw.setdefault(dataset, {})[str(n)] = cell
            if journal is not None:
                journal.save()
    summary: dict[str, Any] = {}
    for dataset, by_n in raw.items():
        for n, by_name in by_n.items():
            for name, rows in by_name.items():
                stats = summary.setdefault(dataset, {}).setdefault(n, {}).setdefault(name, {})
                for key in ("kendall_tau", "spearman_rho", "top5_precision", "fit_s"):
                    if key in rows[0]:
                        stats[key] = summarise([r[key] for r in rows])
    out["summary"] = summary
    out["wall_s"] = time.perf_counter() - t0
    return out


# -- report -----------------------------------------------------------------------------------------------
def report_table(res: Mapping[str, Any], dataset: str, metric: str = "kendall_tau") -> Table:
    from rich.table import Table

    names = ["flops", *res["predictors"]]
    title = (f"{DATASETS[dataset][0]} ({res['datasets'][dataset]}): {metric} on the held-out cells, "
             f"mean ± std over {res['seeds']} seeds")
    table = Table(title=title)
    table.add_column("N train", justify="right")
    for name in names:
        label = name if name == "flops" else f"{name} [{res['predictors'][name]}]"
        table.add_column(label, justify="right")
    by_n = res["summary"].get(dataset, {})
    for n in res["sizes"]:
        row = [str(n)]
        for name in names:
            s = by_n.get(str(n), {}).get(name, {}).get(metric)
            row.append("—" if s is None else f"{s['mean']:.3f} ± {s['std']:.3f}")
        table.add_row(*row)
    return table


def print_report(res: Mapping[str, Any], console: Console) -> None:
    for dataset in res["datasets"]:
        for metric in ("kendall_tau", "spearman_rho", "top5_precision"):
            console.print(report_table(res, dataset, metric))


def plot(res: Mapping[str, Any], path: Path) -> None:
    """Kendall tau against training size, one panel per dataset, a line (±std band) per predictor."""
    from hwnas.bench.strategies import _pyplot, _save

    plt = _pyplot()
    datasets = list(res["datasets"])
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        by_n = res["summary"].get(dataset, {})
        for name in ["flops", *res["predictors"]]:
            xs, m, s = [], [], []
            for n in res["sizes"]:
                stat = by_n.get(str(n), {}).get(name, {}).get("kendall_tau")
                if stat is not None:
                    xs.append(n)
                    m.append(stat["mean"])
                    s.append(stat["std"])
            if not xs:
                continue
            ma, sa = np.array(m), np.array(s)
            ax.plot(xs, ma, marker="o", label=name, linestyle="--" if name == "flops" else "-")
            ax.fill_between(xs, ma - sa, ma + sa, alpha=0.15)
        ax.set_xscale("log")
        ax.set_xlabel("training architectures N")
        ax.set_ylabel("Kendall τ on the held-out cells")
        ax.set_title(f"{DATASETS[dataset][0]}, 200-epoch test")
        ax.grid(alpha=0.3)
    axes[0][0].legend()
    fig.suptitle(f"NAS-Bench-201 predictors, mean ± std over {res['seeds']} seeds")
    fig.tight_layout()
    _save(fig, path)


def write_outputs(res: Mapping[str, Any], out_dir: Path) -> list[Path]:
    import json

    from hwnas.fileio import atomic_write

    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "results.json", out_dir / "kendall_tau.png"]
    atomic_write(written[0], json.dumps(res, indent=1, allow_nan=False))
    plot(res, written[1])
    return written
