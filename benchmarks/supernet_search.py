"""Supernet search against train-everything search at equal wall time, both fronts re-trained stand-alone.

Takes a `nas supernet train` file (its space and dataset) and runs two searches through the project's own runner
(:func:`hwnas.create_run`), the same strategy, seed, objectives (top-1 max, FLOPs min) and executor for both:

- **supernet**: every candidate is scored by the `supernet` evaluator (inherited weights, BatchNorm recalibrated)
  for ``--candidates`` candidates. Its cost is the supernet's training (as its folder recorded it, or as trained
  here) plus the search's wall time.
- **train**: every candidate is trained alone by the `train` evaluator (``--epochs`` of ``--optimizer`` at ``--lr``,
  the stand-alone recipe of ``benchmarks/supernet_ranking.py``), until the supernet search's whole cost is spent.
  Only the candidates finished by then count: the batch in progress at the deadline is finished but left out.

Each search's own front (by the scores it searched with) is then **re-trained stand-alone** with
``--rescore-seeds`` seeds (1000, 1001, ...; none of them the train search's own seed), and each member's
re-scored top-1 is the mean over them. Reported per search seed and arm: candidates scored, the cost, the front's
size, its best re-scored top-1, the best re-scored top-1 at or under each of ``--flops-fracs`` of the largest
subnet's FLOPs, and the hypervolume of the re-scored front (top-1 x FLOPs) in a box the harness sets from the
space alone: the smallest subnet's re-scored top-1 and the largest subnet's FLOPs (both computed here, the same for
every seed, never given to a strategy). The hypervolume is also given as a fraction of the front of both arms'
re-scored members together. For the supernet arm also the Kendall tau of inherited against re-scored top-1 on
its front. Top-1 is on the dataset's held-out split; no search reads the re-scoring.

Bad input is refused before any work, one ``error:`` line each: a file that does not load, a --checkpoint trained
on another space, resolution or dataset than the file's, numbers out of range, an --out that already holds a
result.

Writes ``supernet_search.json`` (after every seed) and ``supernet_search.png`` (the re-scored fronts) into --out,
and each search's run folder under ``--out/seedS/``.

    nas supernet train experiments/supernet_convnext.yaml --out runs/supernets/convnext_mnist
    python benchmarks/supernet_search.py experiments/supernet_convnext.yaml \\
        --checkpoint runs/supernets/convnext_mnist --seeds 0 1 2 --out runs/bench/supernet_search
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from supernet_ranking import _training_seconds, kendall, space_spec

ARMS = ("supernet", "train")
RESCORE_SEED = 1000

# -- re-scoring: the train evaluator with other seeds, in worker processes --------------------------------------

_WORKER: dict[str, Any] = {}


def _worker_init(space: dict[str, Any], dataset: dict[str, Any], recipe: dict[str, Any]) -> None:
    import torch

    torch.set_num_threads(1)
    _WORKER.update(space=space, dataset=dataset, recipe=recipe, evaluators={})


def _train_alone(arch: dict[str, Any], seed: int) -> float:
    """Stand-alone top-1 of ``arch`` trained with the `train` evaluator's recipe and experiment seed ``seed``."""
    from hwnas.architecture import Architecture
    from hwnas.data.datasets import DataSource
    from hwnas.evaluation import EVALUATORS, EvalContext
    from hwnas.experiments.config.schema import DataConfig
    from hwnas.search_spaces import SPACES

    evaluators = _WORKER["evaluators"]
    if seed not in evaluators:
        space = SPACES.create(_WORKER["space"]["name"], _WORKER["space"].get("params") or {})
        source = DataSource(DataConfig.model_validate(_WORKER["dataset"]))
        evaluators[seed] = EVALUATORS.create("train", {**_WORKER["recipe"], "save_weights": False},
                                             context=EvalContext(space=space, data=source, seed=seed))
    got = evaluators[seed].evaluate([Architecture.from_dict(arch)])[0]
    if isinstance(got, BaseException):
        raise got
    return float(got["top1"])


class Rescorer:
    """Stand-alone top-1 per (architecture, seed), each trained once (both arms and every search seed share it)."""

    def __init__(self, space: dict[str, Any], dataset: dict[str, Any], recipe: dict[str, Any], *, workers: int,
                 seeds: int) -> None:
        import multiprocessing

        self.seeds = [RESCORE_SEED + s for s in range(seeds)]
        self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_worker_init, initargs=(space, dataset, recipe))
        self.cache: dict[tuple[str, int], float] = {}
        self.seconds = 0.0
        self.trainings = 0

    def top1(self, archs: list[Any]) -> dict[str, float]:
        """Mean re-scored top-1 of each of ``archs`` (arch id to mean)."""
        todo = [(a, s) for a in archs for s in self.seeds if (a.arch_id, s) not in self.cache]
        t = time.perf_counter()
        futures = {(a.arch_id, s): self.pool.submit(_train_alone, a.to_dict(), s) for a, s in todo}
        for key, fut in futures.items():
            self.cache[key] = fut.result()
        if todo:
            self.seconds += time.perf_counter() - t
            self.trainings += len(todo)
        return {a.arch_id: float(np.mean([self.cache[(a.arch_id, s)] for s in self.seeds])) for a in archs}

    def runs(self, arch: Any) -> list[float]:
        return [self.cache[(arch.arch_id, s)] for s in self.seeds]

    def close(self) -> None:
        self.pool.shutdown()


# -- the two searches ------------------------------------------------------------------------------------------


def experiment(cfg: Any, space: Any, arm: str, *, args: argparse.Namespace, seed: int, checkpoint: Path,
               largest_flops: float) -> dict[str, Any]:
    """The experiment of one arm: the file's space and dataset, top-1 (max) and FLOPs (min, its run summary's
    reference the largest subnet's FLOPs: a property of the space; neither strategy reads a reference)."""
    scorer: dict[str, Any]
    if arm == "supernet":
        scorer = {"name": "supernet", "params": {"checkpoint": str(checkpoint.resolve()), "calib_images": 500,
                                                 "save_weights": False}}
        budget = {"trials": args.candidates, "batch_size": args.batch}
    else:
        scorer = {"name": "train", "params": {**recipe(args), "save_weights": False}}
        budget = {"trials": 100_000, "batch_size": args.batch}  # stopped by the clock (see run_arm)
    return {
        "name": f"supernet_search_{arm}",
        "seed": seed,
        "space": space_spec(cfg, space),
        "dataset": cfg.dataset.model_dump(mode="json"),
        "evaluators": [{"name": "complexity"}, scorer],
        "objectives": [{"metric": "top1", "direction": "max"}, {"metric": "flops_m", "direction": "min",
                                                                       "reference": largest_flops}],
        "strategy": {"name": args.strategy, "params": json.loads(args.strategy_params)},
        "budget": budget,
        "executor": {"name": "process", "workers": args.workers, "threads": 1},
    }


def recipe(args: argparse.Namespace) -> dict[str, Any]:
    return {"epochs": args.epochs, "lr": args.lr, "optimizer": args.optimizer, "batch_size": 64,
            "weight_decay": 0.01 if args.optimizer == "adamw" else 5e-5}


def run_arm(config: dict[str, Any], run_dir: Path, *, deadline_s: float | None) -> dict[str, Any]:
    """Run one search; with ``deadline_s``, stop it at that wall time and count only the trials finished by then."""
    import hwnas

    study = hwnas.create_run(config, run_dir=run_dir)
    finished: dict[int, float] = {}
    t0 = time.perf_counter()

    def clock(run: Any, trial: Any) -> None:
        finished[trial.number] = time.perf_counter() - t0
        if deadline_s is not None and finished[trial.number] >= deadline_s:
            run.stop("the supernet search's wall time is spent")

    study.optimize(callbacks=[clock], show_progress=False)
    wall = time.perf_counter() - t0
    trials = [t for t in study.trials if t.status == "ok"
              and (deadline_s is None or finished.get(t.number, float("inf")) <= deadline_s)]
    last = max((finished.get(t.number, 0.0) for t in trials), default=0.0)
    return {"study": study, "trials": trials, "wall_s": wall, "objectives": study.objectives, "last_counted_s": last}


# -- scoring the fronts ------------------------------------------------------------------------------------------


def rescored_front(front: list[Any], top1: dict[str, float]) -> dict[str, Any]:
    """The arm's own front (its trials), with each member's re-scored point (-top-1, FLOPs: both minimised)."""
    points = np.array([[-top1[t.arch.arch_id], t.metrics["flops_m"]] for t in front], dtype=float)
    return {"front": front, "points": points.reshape(len(front), 2)}


def arm_figures(front: dict[str, Any], box: tuple[float, float], flops_caps: list[float],
                top1: dict[str, float]) -> dict[str, Any]:
    from hwnas.objectives import hypervolume

    pts = front["points"]
    members = front["front"]
    out: dict[str, Any] = {
        "front_size": len(members),
        "best_top1": float(-pts[:, 0].min()) if len(pts) else None,
        "hypervolume": hypervolume(pts, [-box[0], box[1]]) if len(pts) else 0.0,
        "best_top1_under": {},
        "members": [{"arch_id": t.arch.arch_id, "genes": dict(t.arch.genes), "search_top1": t.metrics["top1"],
                     "rescored_top1": top1[t.arch.arch_id], "flops_m": t.metrics["flops_m"]} for t in members],
    }
    for cap in sorted(flops_caps):
        ok = [-p[0] for p in pts if p[1] <= cap]
        out["best_top1_under"][f"{cap:.4g}"] = float(max(ok)) if ok else None
    return out


# -- the command -----------------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="a supernet training YAML (its supernet: section: space and dataset)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--checkpoint", help="a trained supernet of this file (default: train one into --out; its "
                                         "training time is counted either way)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0], help="search seeds (each runs both arms)")
    ap.add_argument("--candidates", type=int, default=300, help="candidates of the supernet search (default 300)")
    ap.add_argument("--batch", type=int, default=20, help="candidates per batch, both arms (default 20)")
    ap.add_argument("--strategy", default="nsga2")
    ap.add_argument("--strategy-params", default='{"pop_size": 20}', metavar="JSON")
    ap.add_argument("--epochs", type=int, default=5, help="stand-alone training epochs (the train arm and the "
                                                          "re-scoring)")
    ap.add_argument("--lr", type=float, default=0.002)
    ap.add_argument("--optimizer", choices=("sgd", "adamw"), default="adamw")
    ap.add_argument("--rescore-seeds", type=int, default=2, help="stand-alone seeds of each re-scored front member")
    ap.add_argument("--flops-fracs", type=float, nargs="+", default=[0.25, 0.5],
                    help="report the best re-scored top-1 at or under these fractions of the largest subnet's FLOPs")
    ap.add_argument("--workers", type=int, default=2, help="worker processes of both searches and the re-scoring")
    ap.add_argument("--out", default="runs/bench/supernet_search")
    return ap


def prepare(args: argparse.Namespace) -> tuple[Any, Any, Path | None]:
    """Everything checked before any work: (config, space, checkpoint or None).

    Raises:
        ConfigError: every problem found.
    """
    from hwnas.cli.supernet import _load_config
    from hwnas.errors import ConfigError
    from hwnas.supernet.checkpoint import check_trained_on, load_supernet
    from hwnas.supernet.train import build_parts

    problems: list[str] = []
    for flag, value, least in (("--candidates", args.candidates, 2), ("--batch", args.batch, 1),
                               ("--epochs", args.epochs, 1), ("--rescore-seeds", args.rescore_seeds, 1),
                               ("--workers", args.workers, 1)):
        if value < least:
            problems.append(f"{flag} must be at least {least}, got {value}")
    if len(set(args.seeds)) != len(args.seeds):
        problems.append(f"--seeds: a seed given twice ({' '.join(map(str, args.seeds))})")
    if any(s >= RESCORE_SEED for s in args.seeds):
        problems.append(f"--seeds must be under {RESCORE_SEED} (the re-scoring's seeds start there)")
    bad = [f for f in args.flops_fracs if not 0 < f <= 1]
    if bad:
        problems.append(f"--flops-fracs must lie in (0, 1], got {bad[0]}")
    try:
        params = json.loads(args.strategy_params)
        if not isinstance(params, dict):
            problems.append(f"--strategy-params: a JSON object, not {args.strategy_params!r}")
    except json.JSONDecodeError as exc:
        problems.append(f"--strategy-params: not JSON ({exc.msg} at column {exc.colno})")
    out = Path(args.out)
    if (out / "supernet_search.json").exists() or any((out / f"seed{s}").exists() for s in args.seeds):
        problems.append(f"--out {out}: already holds a result (give another folder; nothing there is overwritten)")
    cfg = _load_config(argparse.Namespace(file=args.file, overrides=args.overrides))
    if problems:
        raise ConfigError(problems)
    space, _, _, _ = build_parts(cfg)
    checkpoint = None
    if args.checkpoint:
        checkpoint = Path(args.checkpoint)
        load_supernet(checkpoint, space=space)  # another space or resolution: refused, named
        check_trained_on(checkpoint, cfg.dataset, f"--checkpoint {checkpoint}")
    return cfg, space, checkpoint


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from hwnas.errors import HwnasError

    try:
        cfg, space, checkpoint = prepare(args)
    except HwnasError as exc:
        for p in getattr(exc, "problems", [str(exc)]):
            print(f"error: {p}", file=sys.stderr)
        return 2
    return run(args, cfg, space, checkpoint)


def run(args: argparse.Namespace, cfg: Any, space: Any, checkpoint: Path | None) -> int:
    import logging

    from hwnas.evaluation import EVALUATORS, EvalContext
    from hwnas.objectives import hypervolume, pareto_front
    from hwnas.supernet.checkpoint import load_supernet
    from hwnas.supernet.train import train_supernet

    logging.getLogger("hwnas").setLevel(logging.WARNING)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    if checkpoint is None:
        checkpoint = out / "supernet"
        print(f"training the supernet into {checkpoint} ...", flush=True)
        train_s = train_supernet(cfg, checkpoint).seconds
    else:
        train_s = _training_seconds(checkpoint)
    print(f"supernet: {checkpoint}, {train_s:.0f} s of training (counted in the supernet search's cost)")
    supernet = load_supernet(checkpoint, space=space)
    largest, smallest = supernet.largest(), supernet.smallest(supernet.phases[-1])
    flops = EVALUATORS.create("complexity", {}, context=EvalContext(space=space)).evaluate([largest])[0]
    assert isinstance(flops, dict)
    largest_flops = float(flops["flops_m"])
    caps = [f * largest_flops for f in args.flops_fracs]
    rescorer = Rescorer(space_spec(cfg, space), cfg.dataset.model_dump(mode="json"), recipe(args),
                        workers=args.workers, seeds=args.rescore_seeds)
    smallest_top1 = rescorer.top1([smallest])[smallest.arch_id]
    box = (smallest_top1, largest_flops)
    print(f"scoring box (from the space): top-1 {100 * box[0]:.2f} % (the smallest subnet re-scored), FLOPs "
          f"{box[1]:.3f} M (the largest subnet)", flush=True)
    summary: dict[str, Any] = {
        "file": args.file, "overrides": args.overrides, "checkpoint": str(checkpoint), "space": cfg.space.name,
        "dataset": cfg.dataset.model_dump(mode="json"), "split": "the dataset's held-out split",
        "strategy": args.strategy, "strategy_params": json.loads(args.strategy_params),
        "candidates": args.candidates, "batch": args.batch, "recipe": recipe(args),
        "rescore_seeds": rescorer.seeds, "box": {"top1": box[0], "flops_m": box[1]},
        "flops_caps_m": caps, "supernet_training_s": train_s,
        "machine": f"{platform.node()} {platform.processor() or platform.machine()}",
        "started": started.isoformat(timespec="seconds"), "seeds": {},
    }
    try:
        for seed in args.seeds:
            result: dict[str, Any] = {}
            sup = run_arm(experiment(cfg, space, "supernet", args=args, seed=seed, checkpoint=checkpoint,
                                     largest_flops=largest_flops),
                          out / f"seed{seed}" / "supernet", deadline_s=None)
            cost = train_s + sup["wall_s"]
            print(f"seed {seed}: supernet search: {len(sup['trials'])} candidates in {sup['wall_s']:.0f} s "
                  f"(+ {train_s:.0f} s of supernet training = {cost:.0f} s)", flush=True)
            alone = run_arm(experiment(cfg, space, "train", args=args, seed=seed, checkpoint=checkpoint,
                                       largest_flops=largest_flops),
                            out / f"seed{seed}" / "train", deadline_s=cost)
            print(f"seed {seed}: train search: {len(alone['trials'])} candidates finished in {cost:.0f} s "
                  f"({alone['wall_s']:.0f} s with the batch in progress)", flush=True)
            arms = {"supernet": sup, "train": alone}
            fronts = {}
            for name, arm in arms.items():
                members = pareto_front(arm["trials"], arm["objectives"])
                top1 = rescorer.top1([t.arch for t in members])
                fronts[name] = rescored_front(members, top1)
                result[name] = {"candidates": len(arm["trials"]),
                                "cost_s": cost,
                                "search_wall_s": arm["wall_s"], "last_counted_s": arm["last_counted_s"],
                                **arm_figures(fronts[name], box, caps, top1)}
                if name == "supernet":
                    result[name]["kendall_tau_inherited_vs_rescored"] = kendall(
                        [t.metrics["top1"] for t in members], [top1[t.arch.arch_id] for t in members])
            union = np.vstack([f["points"] for f in fronts.values() if len(f["points"])])
            both = hypervolume(union, [-box[0], box[1]])
            for name in ARMS:
                result[name]["hypervolume_fraction_of_both"] = result[name]["hypervolume"] / both if both else None
            summary["seeds"][str(seed)] = result
            summary["rescoring"] = {"trainings": rescorer.trainings, "seconds": rescorer.seconds}
            (out / "supernet_search.json").write_text(json.dumps(summary, indent=1, default=str))
            _print_seed(seed, result, caps)
    finally:
        rescorer.close()
    summary["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    (out / "supernet_search.json").write_text(json.dumps(summary, indent=1, default=str))
    _print_totals(summary)
    _plot(out / "supernet_search.png", summary)
    return 0


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def _print_seed(seed: int, result: dict[str, Any], caps: list[float]) -> None:
    print(f"seed {seed}: {'arm':8s} {'scored':>6s} {'front':>5s} {'best top-1':>10s} "
          + " ".join(f"{'<= ' + format(c, '.3g') + ' MF':>11s}" for c in caps) + f" {'HV':>8s} {'HV/both':>7s}")
    for name in ARMS:
        r = result[name]
        print(f"         {name:8s} {r['candidates']:6d} {r['front_size']:5d} {_pct(r['best_top1']):>10s} "
              + " ".join(f"{_pct(v):>11s}" for v in r["best_top1_under"].values())
              + f" {r['hypervolume']:8.4f} {r['hypervolume_fraction_of_both'] or 0:7.3f}")
    tau = result["supernet"].get("kendall_tau_inherited_vs_rescored")
    print(f"         supernet front: tau(inherited, re-scored) {'-' if tau is None else f'{tau:.3f}'}", flush=True)


def _print_totals(summary: dict[str, Any]) -> None:
    seeds = list(summary["seeds"].values())
    if not seeds:
        return
    print(f"\n{summary['space']} on {summary['dataset']['name']}, {len(seeds)} search seed(s), mean (min .. max):")
    for name in ARMS:
        for key in ("best_top1", "hypervolume_fraction_of_both"):
            vals = [s[name][key] for s in seeds if s[name][key] is not None]
            if vals:
                print(f"  {name:8s} {key:28s} {np.mean(vals):.4f} ({min(vals):.4f} .. {max(vals):.4f})")


def _plot(path: Path, summary: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = summary["seeds"]
    fig, axes = plt.subplots(1, len(seeds), figsize=(4.5 * len(seeds), 4), squeeze=False)
    for ax, (seed, result) in zip(axes[0], seeds.items(), strict=True):
        for name, marker in (("supernet", "o"), ("train", "s")):
            members = sorted(result[name]["members"], key=lambda m: m["flops_m"])
            ax.plot([m["flops_m"] for m in members], [100 * m["rescored_top1"] for m in members], marker,
                    label=f"{name} ({result[name]['candidates']} scored)", alpha=0.8)
        ax.set_xlabel("FLOPs (M)")
        ax.set_ylabel("re-scored top-1 (%), held-out split")
        ax.set_title(f"search seed {seed}")
        ax.legend(fontsize=8)
    fig.suptitle(f"{summary['space']} on {summary['dataset']['name']}: supernet vs train-everything search at equal "
                 f"wall time ({summary['machine']}, {summary['started'][:10]}); fronts re-trained, "
                 f"{len(summary['rescore_seeds'])} seeds", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
