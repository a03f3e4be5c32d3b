"""Supernet ranking fidelity: inherited-weight top-1 against stand-alone training, over sampled subnets.

Trains a supernet as a `nas supernet train` file says (or loads a finished one with --checkpoint), draws N
distinct subnets with a seeded generator, scores each with inherited weights (extracted, BatchNorm
recalibrated: the `supernet` evaluator's number) and trains each alone from its seeded initialisation
with a fixed recipe on the same train split, then reports on the same held-out split:

- Kendall tau and Spearman rho between the two top-1 columns (the ranking the search relies on); with
  --standalone-seeds 2 or more, the stand-alone column is the mean over seeds and the tau between two
  seeds of stand-alone training is reported too: the ceiling any proxy can reach against this noise; with 4 or
  more, also the tau between the means of two halves of the seeds (how reliable the averaged reference is),
- with --finetune-epochs, the same ranking after fine-tuning each subnet's inherited weights (the supernet
  evaluator's finetune_epochs), once per --finetune-seeds,
- with --also-checkpoint, an ensemble: the same file trained with other supernet seeds, the inherited top-1
  averaged over them, and each member's own tau beside the ensemble's,
- the top-1 range of both columns,
- the wall time per subnet of either way of scoring, and what a search of --search-candidates
  candidates costs each way (the supernet's training included once).

Writes ``supernet_ranking.json`` and ``supernet_ranking.png`` (a scatter) into --out.

    python benchmarks/supernet_ranking.py experiments/supernet_mbv3.yaml --set supernet.dataset.name=mnist5k \\
        --subnets 30 --out runs/bench/supernet_mbv3
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np


def _training_seconds(run: Path) -> float:
    """The training time a finished `nas supernet train` folder recorded."""
    return float(json.loads((run / "checkpoint" / "state.json").read_text())["seconds"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="a supernet training YAML (its supernet: section)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--checkpoint", help="use this trained supernet instead of training one")
    ap.add_argument("--also-checkpoint", action="append", default=[], metavar="DIR",
                    help="an ensemble: also score with this supernet (the same file trained with another "
                         "supernet.seed; repeatable); the inherited top-1 is the mean over all of them, and each "
                         "one's own tau is reported too (the supernet evaluator's ensemble parameter)")
    ap.add_argument("--subnets", type=int, default=30)
    ap.add_argument("--epochs", type=int, default=5, help="stand-alone training epochs per subnet")
    ap.add_argument("--standalone-seeds", type=int, default=1, help="train each subnet alone with this many seeds")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--reuse-standalone", metavar="JSON", help="take the stand-alone top-1 of subnets already trained "
                    "by an earlier run with the same recipe (its supernet_ranking.json), by arch_id; seeds beyond the "
                    "earlier run's are trained here")
    ap.add_argument("--finetune-epochs", type=int, default=0,
                    help="also score each subnet after fine-tuning its inherited weights this many epochs (the "
                         "supernet evaluator's finetune_epochs), and report that ranking beside the inherited one")
    ap.add_argument("--finetune-lr", type=float, default=0.02)
    ap.add_argument("--finetune-optimizer", choices=("sgd", "adamw"), default="sgd")
    ap.add_argument("--finetune-seeds", type=int, default=1,
                    help="fine-tune each subnet this many times (seeds 0..N-1); the ranking of each is reported")
    ap.add_argument("--by-gene", metavar="GENE", help="also report, per value of this gene, the mean gap between "
                    "inherited and stand-alone top-1 and the tau within the group (default: a few-shot supernet's "
                    "split gene)")
    ap.add_argument("--search-candidates", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="runs/bench/supernet_ranking")
    args = ap.parse_args(argv)

    import torch
    from scipy.stats import kendalltau, spearmanr

    from hwnas.cli.supernet import _load_config
    from hwnas.supernet.checkpoint import load_supernet
    from hwnas.supernet.train import finetune_subnet, inherited_subnet, resize_for, score_subnet, train_supernet
    from hwnas.training.recipe import TrainRecipe, build_seeded, evaluate_top1, seed_for, train_model

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = _load_config(argparse.Namespace(file=args.file, overrides=args.overrides))
    t0 = time.perf_counter()
    if args.checkpoint:
        ckpt = Path(args.checkpoint)
        train_s = _training_seconds(ckpt)
    else:
        ckpt = out / "supernet"
        result = train_supernet(cfg, ckpt, on_epoch=lambda r: print(
            f"  {r['phase']} epoch {r['epoch']}: largest {100 * r['largest_top1']:.2f} smallest "
            f"{100 * r['smallest_top1']:.2f}", flush=True))
        train_s = result.seconds
    print(f"supernet: {ckpt} ({train_s:.0f} s of training)")
    supernet = load_supernet(ckpt).eval()
    space = supernet.space
    members = []  # the ensemble's other supernets
    for extra in args.also_checkpoint:
        members.append(load_supernet(extra, space=space).eval())
        train_s += _training_seconds(Path(extra))
        print(f"  ensemble member: {extra}")
    from hwnas.data.datasets import DataSource

    data = DataSource(cfg.dataset)(int(space.input_shape[-1]))
    rng = np.random.default_rng(args.seed)
    archs: list[Any] = []
    last = supernet.phases[-1]
    for arch in [supernet.largest(), supernet.smallest(last)]:
        archs.append(arch)
    while len(archs) < args.subnets:
        a = supernet.sample_subnet(rng, last)
        if all(a != b for b in archs):
            archs.append(a)
    recipe = TrainRecipe(epochs=args.epochs, lr=args.lr, optimizer=args.optimizer, batch_size=64,
                         weight_decay=0.01 if args.optimizer == "adamw" else 5e-5)
    rows = []
    inherit_s = alone_s = finetune_s = 0.0
    reused: dict[str, Any] = {}
    if args.reuse_standalone:
        earlier = json.loads(Path(args.reuse_standalone).read_text())
        if earlier["standalone_recipe"] != recipe.model_dump() or earlier.get("seed", 0) != args.seed:
            raise SystemExit(f"{args.reuse_standalone}: another stand-alone recipe or --seed")
        reused = {r["arch_id"]: r for r in earlier["rows"]}
        alone_s = earlier["seconds"]["standalone_per_subnet"] * len(archs)
    for i, arch in enumerate(archs):
        t = time.perf_counter()
        inherited_runs = [score_subnet(net, arch, data, calib_images=500)[0] for net in [supernet, *members]]
        inh = float(np.mean(inherited_runs))
        inherit_s += time.perf_counter() - t
        x_tr = resize_for(space, arch, torch.from_numpy(data.x_train)).numpy()
        x_va = resize_for(space, arch, torch.from_numpy(data.x_val)).numpy()
        tuned = []
        for s in range(args.finetune_seeds if args.finetune_epochs else 0):
            t = time.perf_counter()
            module = inherited_subnet(supernet, arch, data.x_train, calib_images=500)
            finetune_subnet(module, space, arch, data, epochs=args.finetune_epochs, lr=args.finetune_lr,
                            optimizer=args.finetune_optimizer, seed=s)
            tuned.append(evaluate_top1(module, x_va, data.y_val)[0])
            finetune_s += time.perf_counter() - t
        t = time.perf_counter()
        earlier_runs = reused[arch.arch_id]["standalone_runs"] if arch.arch_id in reused else []
        alone_runs = list(earlier_runs)[:args.standalone_seeds]
        trained_here = args.standalone_seeds - len(alone_runs)
        for s in range(len(alone_runs), args.standalone_seeds):
            model = build_seeded(space, arch, args.seed + 100 * s)
            gen = torch.Generator().manual_seed(seed_for(args.seed + 1 + 100 * s, arch))
            train_model(model, x_tr, data.y_train, recipe, generator=gen, name=arch.arch_id)
            alone_runs.append(evaluate_top1(model, x_va, data.y_val)[0])
        alone = float(np.mean(alone_runs))
        if arch.arch_id not in reused:
            alone_s += (time.perf_counter() - t) / max(trained_here, 1)
        params = int(reused[arch.arch_id]["params"]) if arch.arch_id in reused else sum(
            p.numel() for p in model.parameters())
        rows.append({"arch_id": arch.arch_id, "genes": dict(arch.genes), "inherited_top1": inh,
                     "inherited_runs": inherited_runs,
                     "standalone_top1": alone,
                     "standalone_runs": alone_runs, "params": params, "finetuned_top1": tuned})
        print(f"  [{i + 1}/{len(archs)}] {arch.arch_id} inherited {100 * inh:.2f}"
              + (f"  fine-tuned {' '.join(f'{100 * a:.2f}' for a in tuned)}" if tuned else "")
              + f"  alone {' '.join(f'{100 * a:.2f}' for a in alone_runs)}  params {params}", flush=True)
    inh_a = np.array([r["inherited_top1"] for r in rows])
    alone_a = np.array([r["standalone_top1"] for r in rows])
    tau = float(kendalltau(inh_a, alone_a).statistic)
    rho = float(spearmanr(inh_a, alone_a).statistic)
    n = len(rows)
    params_a = np.array([r["params"] for r in rows])
    tau_params = float(kendalltau(params_a, alone_a).statistic)
    tau_members = [float(kendalltau([r["inherited_runs"][k] for r in rows], alone_a).statistic)
                   for k in range(len(members) + 1)] if members else None
    tau_seeds = None
    if args.standalone_seeds >= 2:
        tau_seeds = float(kendalltau([r["standalone_runs"][0] for r in rows],
                                     [r["standalone_runs"][1] for r in rows]).statistic)
    tau_halves = tau_first_two = None
    if args.standalone_seeds >= 4:  # the reference's reliability: the mean of half the seeds against the other half's
        runs_a = np.array([r["standalone_runs"] for r in rows])
        half = args.standalone_seeds // 2
        tau_halves = float(kendalltau(runs_a[:, :half].mean(1), runs_a[:, half:2 * half].mean(1)).statistic)
        tau_first_two = float(kendalltau(inh_a, runs_a[:, :2].mean(1)).statistic)
    per_inherit, per_alone = inherit_s / n, alone_s / n
    finetuned = None
    if args.finetune_epochs:
        taus = [float(kendalltau([r["finetuned_top1"][s] for r in rows], alone_a).statistic)
                for s in range(args.finetune_seeds)]
        finetuned = {"epochs": args.finetune_epochs, "lr": args.finetune_lr, "optimizer": args.finetune_optimizer,
                     "kendall_tau_per_seed": taus, "kendall_tau_mean": float(np.mean(taus)),
                     "seconds_per_subnet": finetune_s / (n * args.finetune_seeds)}
    by_gene = None
    gene = getattr(supernet, "gene", None) or args.by_gene
    if gene:  # per value of one gene (a few-shot supernet's split gene): the bias and the ranking inside the group
        by_gene = {"gene": gene, "groups": []}
        values = np.array([r["genes"][gene] for r in rows])
        for v in sorted(set(values.tolist())):
            m = values == v
            by_gene["groups"].append({
                "value": v, "subnets": int(m.sum()), "mean_gap_points": float(100 * (inh_a[m] - alone_a[m]).mean()),
                "kendall_tau_within": float(kendalltau(inh_a[m], alone_a[m]).statistic) if m.sum() > 2 else None})
        by_gene["spearman_with_gene"] = {"inherited": float(spearmanr(values, inh_a).statistic),
                                         "standalone": float(spearmanr(values, alone_a).statistic)}
    summary = {
        "space": space.name, "space_params": json.loads(json.dumps(space.params.model_dump(), default=list)),
        "dataset": cfg.dataset.model_dump(), "split": "held-out (dataset val split)",
        "subnets": n, "kendall_tau": tau, "spearman_rho": rho, "kendall_tau_params_baseline": tau_params,
        "ensemble": {"checkpoints": [str(ckpt), *args.also_checkpoint], "kendall_tau_per_supernet": tau_members}
        if members else None,
        "kendall_tau_seed_vs_seed": tau_seeds,
        "kendall_tau_half_vs_half": tau_halves, "kendall_tau_vs_first_two_seeds": tau_first_two, "seed": args.seed,
        "by_gene": by_gene, "standalone_seeds": args.standalone_seeds, "finetuned": finetuned,
        "inherited_top1": {"min": float(inh_a.min()), "median": float(np.median(inh_a)), "max": float(inh_a.max())},
        "standalone_top1": {"min": float(alone_a.min()), "median": float(np.median(alone_a)),
                            "max": float(alone_a.max())},
        "standalone_recipe": recipe.model_dump(),
        "seconds": {"supernet_training": train_s, "inherited_per_subnet": per_inherit,
                    "standalone_per_subnet": per_alone},
        "search": {"candidates": args.search_candidates,
                   "with_supernet_s": train_s + args.search_candidates * per_inherit,
                   "training_each_s": args.search_candidates * per_alone,
                   "note": "scoring times measured here per subnet, times the candidates"},
        "rows": rows, "wall_s": time.perf_counter() - t0,
    }
    (out / "supernet_ranking.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"\n{space.name} on {cfg.dataset.name} (held-out split), {n} subnets: Kendall tau {tau:.3f}, "
          f"Spearman {rho:.3f}; parameter count's tau {tau_params:.3f}"
          + (f"; stand-alone seed vs seed tau {tau_seeds:.3f}" if tau_seeds is not None else "")
          + (f"; mean of {args.standalone_seeds // 2} seeds vs the other {args.standalone_seeds // 2}: tau "
             f"{tau_halves:.3f}; against the first two seeds' mean: tau {tau_first_two:.3f}"
             if tau_halves is not None and tau_first_two is not None else ""))
    if tau_members:
        print(f"  ensemble of {len(tau_members)} supernets (inherited top-1 averaged); each alone: Kendall tau "
              + " / ".join(f"{t:.3f}" for t in tau_members))
    if finetuned:
        print(f"  fine-tuned {args.finetune_epochs} epoch(s) ({args.finetune_optimizer}, lr {args.finetune_lr}) before "
              f"scoring: Kendall tau {' '.join(f'{t:.3f}' for t in finetuned['kendall_tau_per_seed'])} (mean "
              f"{finetuned['kendall_tau_mean']:.3f}; {finetuned['seconds_per_subnet']:.2f} s per subnet)")
    if by_gene:
        print(f"  by {gene}: " + "; ".join(
            f"{g['value']}: {g['subnets']} subnets, inherited - alone {g['mean_gap_points']:+.2f} points"
            + (f", tau within {g['kendall_tau_within']:.2f}" if g["kendall_tau_within"] is not None else "")
            for g in by_gene["groups"]) + f"; Spearman with {gene}: inherited "
            f"{by_gene['spearman_with_gene']['inherited']:.2f}, stand-alone "
            f"{by_gene['spearman_with_gene']['standalone']:.2f}")
    print(f"  inherited top-1   {100 * inh_a.min():.2f} .. {100 * np.median(inh_a):.2f} .. {100 * inh_a.max():.2f}"
          f"  ({per_inherit:.2f} s per subnet)")
    print(f"  stand-alone top-1 {100 * alone_a.min():.2f} .. {100 * np.median(alone_a):.2f} .. "
          f"{100 * alone_a.max():.2f}  ({per_alone:.2f} s per subnet and seed, {args.epochs} epochs, mean of "
          f"{args.standalone_seeds} seed(s))")
    print(f"  search of {args.search_candidates}: supernet {summary['search']['with_supernet_s']:.0f} s (training "
          f"included) vs training each {summary['search']['training_each_s']:.0f} s")
    _plot(out / "supernet_ranking.png", inh_a, alone_a, f"{space.name} supernet on {cfg.dataset.name}, {n} subnets "
          f"(held-out top-1): Kendall tau {tau:.2f}")
    return 0


def _plot(path: Path, inh: np.ndarray, alone: np.ndarray, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.4))
    ax.scatter(100 * alone, 100 * inh, s=14)
    ax.set_xlabel("stand-alone trained top-1 (%)")
    ax.set_ylabel("inherited-weight top-1 (%), BN recalibrated")
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
