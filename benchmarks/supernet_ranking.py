"""Supernet ranking fidelity: inherited-weight top-1 against stand-alone training, on a recipe set and a held-out set.

Trains a supernet as a `nas supernet train` file says (or loads a finished one with --checkpoint) and draws two
disjoint sets of subnets: the **recipe set** (--seed; the largest and the smallest subnet, then --subnets in all),
on which recipe choices are made, and the **held-out set** (--heldout-seed, --subnets subnets, none of them in
the recipe set) that no choice is made on. Both are stratified by default: each gene's values appear equally
often in a set (each gene's column a shuffled, balanced list of its values), so the subnets spread over the whole
space rather than only its extremes (--sampling random: the supernet's own sampler). Each subnet is scored with
inherited weights (extracted, BatchNorm recalibrated on the file's ``calib_images`` training images: the
`supernet` evaluator's number) and trained alone from its seeded initialisation --standalone-seeds times with a
fixed recipe on the same train split; top-1 is on the dataset's held-out split. Reported for each set, separately:

- Kendall tau and Spearman rho of inherited top-1 against the reference (the mean stand-alone top-1 over seeds),
- the reference's own reliability, its **split-half tau** (the mean of the first half of the seeds against the
  mean of the other half; with 2 seeds, seed against seed): the ceiling any score can be judged against,
  and its spread over halvings of the seeds (every one, or 200 drawn): how much that ceiling owes to one split,
- the tau of the **free proxies** on the same subnets and data: the parameter count, FLOPs, and every zero-cost
  proxy of the `zero_cost` evaluator (synflow, snip, grad_norm, naswot, ntk_cond; sign as the proxy claims),
  the best one named (on the held-out set also the one that was best on the recipe set),
- with --also-checkpoint, an ensemble: the same file trained with other supernet seeds, the inherited top-1
  averaged over them, and each member's own tau (mean and standard deviation over the supernet seeds),
- with --finetune-epochs, the same ranking after fine-tuning each subnet's inherited weights,
- per value of --by-gene (default: a few-shot supernet's split gene), the gap and the tau within the group, and
  the tau the whole set would have were each group's mean gap known and taken off (it reads the reference: a
  ceiling for any per-group calibration, not a score),
- whether a score adds anything to FLOPs: the tau of a blend of each score (inherited top-1, params, each
  zero-cost proxy; standardised, log where positive) with FLOPs, its weight chosen on the recipe set and read
  on the held-out set at that weight,
- the wall time per subnet of either way of scoring, and what a search of --search-candidates candidates costs.

Bad input is refused before any work, one ``error:`` line per problem: a held-out set that overlaps the recipe
set (--subnets-file; the shared arch ids named) or is drawn with the recipe set's seed, a --checkpoint trained on
another dataset, split or resolution than the file's (both named), a subnet (from --subnets-file) that the
supernet cannot express (its gene and value named).

Writes ``supernet_ranking.json`` (and ``supernet_ranking.partial.json`` after every subnet) and
``supernet_ranking.png`` into --out.

    python benchmarks/supernet_ranking.py experiments/supernet_nb201.yaml --subnets 50 --standalone-seeds 4 \\
        --epochs 2 --lr 0.002 --threads 1 --out runs/bench/rank_nb201
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

SETS = ("recipe", "heldout")


def space_spec(cfg: Any, space: Any) -> dict[str, Any]:
    """The file's space with the input channels and classes its training took from the dataset, as a config."""
    params = dict(cfg.space.params)
    for key in ("in_chans", "num_classes"):
        if key in type(space.params).model_fields:
            params[key] = getattr(space.params, key)
    return {"name": cfg.space.name, "params": json.loads(json.dumps(params, default=list))}


def _training_seconds(run: Path) -> float:
    """The training time a finished `nas supernet train` folder (or its checkpoint/) recorded."""
    state = run / "checkpoint" / "state.json" if (run / "checkpoint").is_dir() else run / "state.json"
    return float(json.loads(state.read_text())["seconds"])


# -- stand-alone training: in this process, or in worker processes ---------------------------------------------

_WORKER: dict[str, Any] = {}


def _standalone_init(space: dict[str, Any], dataset: dict[str, Any], recipe: dict[str, Any], threads: int) -> None:
    """Load what every stand-alone training needs, once per process (a worker's, or this one's)."""
    import torch

    from hwnas.data.datasets import DataSource
    from hwnas.experiments.config.schema import DataConfig
    from hwnas.search_spaces import SPACES
    from hwnas.training.recipe import TrainRecipe

    torch.set_num_threads(threads)
    built = SPACES.create(space["name"], space.get("params") or {})
    _WORKER.update(space=built, data=DataSource(DataConfig.model_validate(dataset))(int(built.input_shape[-1])),
                   recipe=TrainRecipe.model_validate(recipe))


def _standalone_top1(arch: dict[str, Any], seed: int, s: int) -> tuple[float, float]:
    """(held-out top-1, seconds) of ``arch`` trained alone from scratch: stand-alone seed ``s`` of the benchmark's
    ``seed``."""
    import torch

    from hwnas.architecture import Architecture
    from hwnas.supernet.train import resize_for
    from hwnas.training.recipe import build_seeded, evaluate_top1, seed_for, train_model

    t = time.perf_counter()
    space, data = _WORKER["space"], _WORKER["data"]
    a = Architecture.from_dict(arch)
    x_tr = resize_for(space, a, torch.from_numpy(data.x_train)).numpy()
    x_va = resize_for(space, a, torch.from_numpy(data.x_val)).numpy()
    model = build_seeded(space, a, seed + 100 * s)
    gen = torch.Generator().manual_seed(seed_for(seed + 1 + 100 * s, a))
    train_model(model, x_tr, data.y_train, _WORKER["recipe"], generator=gen, name=a.arch_id)
    return evaluate_top1(model, x_va, data.y_val)[0], time.perf_counter() - t


class Standalone:
    """Every stand-alone training of the run, submitted at once to ``workers`` spawned processes of ``threads``
    threads each (workers 1: in this process, one after another). A result depends only on (subnet, seed), not on
    where or when it was trained."""

    def __init__(self, space: dict[str, Any], dataset: dict[str, Any], recipe: dict[str, Any], *, seed: int,
                 workers: int, threads: int) -> None:
        self.seed = seed
        self.pool = None
        self.futures: dict[tuple[str, int], Any] = {}
        if workers > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_standalone_init, initargs=(space, dataset, recipe, threads))
        else:
            _standalone_init(space, dataset, recipe, threads)

    def submit(self, arch: Any, seeds: range) -> None:
        if self.pool is not None:
            for s in seeds:
                self.futures[(arch.arch_id, s)] = self.pool.submit(_standalone_top1, arch.to_dict(), self.seed, s)

    def runs(self, arch: Any, seeds: range) -> list[tuple[float, float]]:
        """(top-1, seconds of its training) of ``arch`` for each of ``seeds`` (waiting for the workers, or training
        here)."""
        if self.pool is None:
            return [_standalone_top1(arch.to_dict(), self.seed, s) for s in seeds]
        return [self.futures.pop((arch.arch_id, s)).result() for s in seeds]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


# -- the subnet sets ----------------------------------------------------------------------------------------------


def stratified_subnets(space: Any, n: int, rng: np.random.Generator, *, start: Sequence[Any] = (),
                       exclude: Sequence[Any] = ()) -> list[Any]:
    """``n`` distinct canonical architectures of ``space`` (``start`` first), the rest drawn so that every gene's
    values appear equally often: each gene's column is a balanced list of its values (each value n/k times, the
    remainder drawn without repeats), shuffled independently of the other genes'. Duplicates after
    canonicalisation, and members of ``exclude`` (the other set), are replaced by further stratified draws.

    Raises:
        ValueError: The space has fewer than ``n`` distinct members reachable this way (after 100 rounds).
    """
    from hwnas.architecture import Architecture

    genes = space.genes()
    out: dict[str, Any] = {}
    banned = {space.canonicalize(a).arch_id for a in exclude}
    for a in start:
        a = space.canonicalize(a)
        out.setdefault(a.arch_id, a)
    for _ in range(100):
        need = n - len(out)
        if need <= 0:
            break
        columns = {}
        for g in genes:
            k = len(g.choices)
            values = list(g.choices) * (need // k) + list(rng.choice(g.choices, size=need % k, replace=False))
            columns[g.name] = [values[i] for i in rng.permutation(need)]
        for i in range(need):
            a = space.canonicalize(Architecture(space.name, {g.name: int(columns[g.name][i]) for g in genes}))
            if a.arch_id not in banned:
                out.setdefault(a.arch_id, a)
    if len(out) < n:
        raise ValueError(f"only {len(out)} distinct subnets found, {n} asked for")
    return list(out.values())[:n]


def random_subnets(supernet: Any, n: int, rng: np.random.Generator, *, start: Sequence[Any] = (),
                   exclude: Sequence[Any] = ()) -> list[Any]:
    """``n`` distinct subnets: ``start``, then the supernet's own sampler in its last phase (members of ``exclude``
    drawn again)."""
    out: dict[str, Any] = {}
    banned = {supernet.space.canonicalize(a).arch_id for a in exclude}
    for a in start:
        out.setdefault(supernet.space.canonicalize(a).arch_id, supernet.space.canonicalize(a))
    while len(out) < n:
        a = supernet.space.canonicalize(supernet.sample_subnet(rng, supernet.phases[-1]))
        if a.arch_id not in banned:
            out.setdefault(a.arch_id, a)
    return list(out.values())


def read_subnet_file(path: str | Path, space: Any) -> tuple[dict[str, list[Any]], list[str]]:
    """The two sets of a ``--subnets-file``: JSON ``{"recipe": [{gene: value, ...}, ...], "heldout": [...]}``.

    Returns:
        (set name -> canonical architectures, problems): every subnet the supernet cannot express is a problem
        naming the file, the set, the subnet's position, the gene and the value.
    """
    from hwnas.architecture import Architecture

    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        return {}, [f"{p}: cannot read the subnet sets ({' '.join(str(exc).split())[:200]})"]
    if not isinstance(data, dict) or set(data) != set(SETS) or not all(isinstance(data[s], list) for s in SETS):
        return {}, [f"{p}: expected {{\"recipe\": [subnets], \"heldout\": [subnets]}}, each subnet a "
                    "{gene: value} object"]
    sets: dict[str, list[Any]] = {}
    problems: list[str] = []
    for name in SETS:
        sets[name] = []
        for i, genes in enumerate(data[name]):
            where = f"{p}: {name}[{i}]"
            if not isinstance(genes, dict):
                problems.append(f"{where}: a subnet is a {{gene: value}} object, got {type(genes).__name__}")
                continue
            problem = expressible(space, genes)
            if problem:
                problems.append(f"{where}: {problem}")
                continue
            sets[name].append(space.canonicalize(Architecture(space.name, genes)))
    return sets, problems


def expressible(space: Any, genes: dict[str, Any]) -> str | None:
    """Why the supernet over ``space`` cannot express a subnet with these genes (a gene it has not, a value outside
    the gene's choices, a gene missing), or None."""
    from hwnas.architecture import Architecture
    from hwnas.errors import HwnasError

    known = {g.name: g for g in space.genes()}
    for name, value in genes.items():
        if name not in known:
            return f"gene {name!r} is not a gene of the {space.name} space (its genes: {', '.join(list(known)[:8])}...)"
        g = known[name]
        if value not in g.choices and value != g.inactive:
            return (f"gene {name!r} = {value!r}: the supernet cannot express it (the {space.name} space's choices "
                    f"for {name}: {', '.join(map(str, g.choices))})")
    missing = [n for n in known if n not in genes]
    if missing:
        return f"gene {missing[0]!r} is missing"
    try:
        space.validate(Architecture(space.name, genes))
    except (HwnasError, ValueError, TypeError) as exc:
        return " ".join(str(exc).split())[:300]
    return None


def overlap_problems(sets: dict[str, list[Any]]) -> list[str]:
    """The held-out set's subnets that are also in the recipe set (arch ids named), as one problem."""
    recipe = {a.arch_id for a in sets["recipe"]}
    shared = [a.arch_id for a in sets["heldout"] if a.arch_id in recipe]
    if not shared:
        return []
    return [f"the held-out set overlaps the recipe set: {len(shared)} subnet(s) in both ({', '.join(shared[:6])}"
            f"{', ...' if len(shared) > 6 else ''}); a held-out subnet must be one no recipe choice was made on "
            "(another --heldout-seed, or other subnets in --subnets-file)"]


# -- the figures --------------------------------------------------------------------------------------------------


def kendall(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall tau-b of two columns, NaNs left out (None when fewer than 3 pairs remain or it is undefined)."""
    from scipy.stats import kendalltau

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3:
        return None
    tau = float(kendalltau(x[keep], y[keep]).statistic)
    return tau if np.isfinite(tau) else None


def split_half_tau(runs: np.ndarray) -> float | None:
    """The reference's reliability: tau between the mean of the first half of the seeds and the mean of the other
    half (``runs``: subnets x seeds; with 2 seeds, seed against seed; None with fewer than 2)."""
    k = runs.shape[1]
    if k < 2:
        return None
    half = k // 2
    return kendall(runs[:, :half].mean(1), runs[:, half:2 * half].mean(1))


def split_half_spread(runs: np.ndarray, rng: np.random.Generator, *, halvings: int = 200) -> dict[str, Any] | None:
    """How much the split-half tau depends on which seeds form each half: the tau of every halving of the seeds
    into two halves of ``k // 2`` (all of them where there are at most ``2 * halvings``, else ``halvings`` drawn
    with ``rng``), their mean and 5th / 95th percentiles (None with fewer than 2 seeds)."""
    from itertools import combinations
    from math import comb

    k = runs.shape[1]
    if k < 2:
        return None
    half = k // 2
    if comb(k, half) <= 2 * halvings:
        firsts = [list(c) for c in combinations(range(k), half)]
    else:
        firsts = [list(rng.permutation(k)[:half]) for _ in range(halvings)]
    taus = []
    for first in firsts:
        other = [s for s in range(k) if s not in first][:half]
        t = kendall(runs[:, first].mean(1), runs[:, other].mean(1))
        if t is not None:
            taus.append(t)
    if not taus:
        return None
    return {"halvings": len(taus), "mean": float(np.mean(taus)), "p5": float(np.percentile(taus, 5)),
            "p95": float(np.percentile(taus, 95))}


def proxy_taus(rows: list[dict[str, Any]], reference: np.ndarray) -> dict[str, float | None]:
    """Kendall tau of each free proxy against the reference: params, FLOPs, each zero-cost proxy (its sign as the
    proxy claims: a lower-is-better proxy is negated)."""
    from hwnas.predictors.zero_cost import HIGHER_IS_BETTER

    out: dict[str, float | None] = {}
    for key in ("params_m", "flops_m"):
        out[key] = kendall([r.get(key, np.nan) for r in rows], reference)
    for proxy, higher in HIGHER_IS_BETTER.items():
        key = f"zc_{proxy}"
        sign = 1.0 if higher else -1.0
        out[key] = kendall([sign * r.get(key, np.nan) for r in rows], reference)
    return out


BLEND_WEIGHTS = tuple(round(0.05 * i, 2) for i in range(21))


def _blend_scale(values: Sequence[float], sign: float) -> np.ndarray | None:
    """A score put on a common scale for blending: its log where every value is positive (sizes and most proxies
    grow multiplicatively), its sign as the score claims, then standardised over the set. None when it cannot be
    (a missing value, or every value the same)."""
    v = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(v)):
        return None
    v = sign * (np.log(v) if np.all(v > 0) else v)
    sd = v.std()
    return None if sd == 0 else (v - v.mean()) / sd


def flops_blends(rows: list[dict[str, Any]], reference: np.ndarray) -> dict[str, list[float | None]]:
    """Does a score add anything to FLOPs? For inherited top-1, the parameter count and each zero-cost proxy: the
    Kendall tau against the reference of ``a * score + (1 - a) * FLOPs`` (both on the scale of ``_blend_scale``)
    for every weight ``a`` of BLEND_WEIGHTS (``a = 0``: FLOPs alone; ``a = 1``: the score alone). The weight is a
    recipe choice: made on the recipe set, read on the held-out set at that weight."""
    from hwnas.predictors.zero_cost import HIGHER_IS_BETTER

    flops = _blend_scale([r.get("flops_m", np.nan) for r in rows], 1.0)
    if flops is None:
        return {}
    scores = {"inherited_top1": 1.0, "params_m": 1.0, **{f"zc_{p}": 1.0 if h else -1.0
                                                           for p, h in HIGHER_IS_BETTER.items()}}
    out: dict[str, list[float | None]] = {}
    for key, sign in scores.items():
        x = _blend_scale([r.get(key, np.nan) for r in rows], sign)
        if x is None:
            continue
        out[key] = [kendall(a * x + (1 - a) * flops, reference) for a in BLEND_WEIGHTS]
    return out


def chosen_blends(curves: dict[str, list[float | None]], weights: dict[str, float] | None = None
                  ) -> dict[str, dict[str, float | None]]:
    """Per score, the blend weight and its tau: the best weight of these curves (the recipe set; of equal taus the
    larger weight), or, given ``weights`` (chosen on the recipe set), the tau at those weights (the held-out set)."""
    out: dict[str, dict[str, float | None]] = {}
    for key, taus in curves.items():
        if weights is None:
            ok = [(t, i) for i, t in enumerate(taus) if t is not None]
            if not ok:
                continue
            i = max(ok)[1]
        elif key in weights:
            i = BLEND_WEIGHTS.index(weights[key])
        else:
            continue
        out[key] = {"weight": BLEND_WEIGHTS[i], "kendall_tau": taus[i]}
    return out


def best_zero_cost(taus: dict[str, float | None]) -> tuple[str | None, float | None]:
    """The zero-cost proxy with the highest tau, and its tau."""
    zc = {k: v for k, v in taus.items() if k.startswith("zc_") and v is not None}
    if not zc:
        return None, None
    key = max(zc, key=lambda k: zc[k])
    return key, zc[key]


def summarize_set(rows: list[dict[str, Any]], *, members: int, finetune_seeds: int, gene: str | None,
                  chosen_proxy: str | None = None, spread_seed: int = 0,
                  blend_weights: dict[str, float] | None = None) -> dict[str, Any]:
    """Every figure of one set (see the module docstring)."""
    from scipy.stats import spearmanr

    inh = np.array([r["inherited_top1"] for r in rows])
    runs = np.array([r["standalone_runs"] for r in rows])
    ref = runs.mean(1)
    taus = proxy_taus(rows, ref)
    best_key, best_tau = best_zero_cost(taus)
    out: dict[str, Any] = {
        "subnets": len(rows), "standalone_seeds": int(runs.shape[1]),
        "kendall_tau": kendall(inh, ref), "spearman_rho": float(spearmanr(inh, ref).statistic),
        "reference_split_half_tau": split_half_tau(runs),
        "reference_split_half_spread": split_half_spread(runs, np.random.default_rng(spread_seed)),
        "reference_seed_vs_seed_tau": kendall(runs[:, 0], runs[:, 1]) if runs.shape[1] >= 2 else None,
        "kendall_tau_vs_first_half": kendall(inh, runs[:, :max(runs.shape[1] // 2, 1)].mean(1)),
        "proxies": taus, "best_zero_cost": {"proxy": best_key, "kendall_tau": best_tau},
        "inherited_top1": {"min": float(inh.min()), "median": float(np.median(inh)), "max": float(inh.max())},
        "standalone_top1": {"min": float(ref.min()), "median": float(np.median(ref)), "max": float(ref.max())},
    }
    if chosen_proxy is not None:
        out["zero_cost_chosen_on_recipe"] = {"proxy": chosen_proxy, "kendall_tau": taus.get(chosen_proxy)}
    curves = flops_blends(rows, ref)
    out["flops_blend"] = {"weights": list(BLEND_WEIGHTS), "kendall_tau": curves,
                          "best": chosen_blends(curves),
                          **({"at_recipe_weights": chosen_blends(curves, blend_weights)} if blend_weights else {})}
    if members > 1:
        per = [kendall([r["inherited_runs"][k] for r in rows], ref) for k in range(members)]
        vals = [t for t in per if t is not None]
        out["ensemble"] = {"kendall_tau_per_supernet": per, "mean": float(np.mean(vals)) if vals else None,
                           "std": float(np.std(vals, ddof=1)) if len(vals) > 1 else None}
    if finetune_seeds:
        per = [kendall([r["finetuned_top1"][s] for r in rows], ref) for s in range(finetune_seeds)]
        out["finetuned_kendall_tau_per_seed"] = per
    if gene:
        values = np.array([r["genes"][gene] for r in rows])
        groups = []
        # a diagnostic, not a score: it reads the reference. How far the ranking would go if each group's mean gap
        # to the reference were known and taken off: what a per-group calibration could reach at best.
        shifted = inh.copy()
        for v in sorted(set(values.tolist())):
            m = values == v
            gap = (inh[m] - ref[m]).mean()
            shifted[m] -= gap
            groups.append({"value": v, "subnets": int(m.sum()), "mean_gap_points": float(100 * gap),
                           "kendall_tau_within": kendall(inh[m], ref[m]) if m.sum() > 2 else None})
        out["by_gene"] = {"gene": gene, "groups": groups, "kendall_tau_if_group_gaps_known": kendall(shifted, ref)}
    return out


def _fmt(t: float | None) -> str:
    return "  -  " if t is None else f"{t:.3f}"


# -- the run ------------------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="a supernet training YAML (its supernet: section)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--checkpoint", help="use this trained supernet instead of training one (it must have been trained "
                    "on the file's dataset, split and resolution)")
    ap.add_argument("--also-checkpoint", action="append", default=[], metavar="DIR",
                    help="an ensemble: also score with this supernet (the same file trained with another "
                         "supernet.seed; repeatable); the inherited top-1 is the mean over all of them, and each "
                         "one's own tau is reported too (the supernet evaluator's ensemble parameter)")
    ap.add_argument("--subnets", type=int, default=50, help="subnets in each of the two sets (default 50)")
    ap.add_argument("--sampling", choices=("stratified", "random"), default="stratified",
                    help="stratified: each gene's values equally often in a set (default); random: the supernet's "
                         "sampler")
    ap.add_argument("--subnets-file", metavar="JSON", help="the two sets given: {\"recipe\": [{gene: value}, ...], "
                    "\"heldout\": [...]} (instead of drawing them)")
    ap.add_argument("--epochs", type=int, default=5, help="stand-alone training epochs per subnet")
    ap.add_argument("--standalone-seeds", type=int, default=4,
                    help="train each subnet alone with this many seeds (default 4; the split-half tau needs 2 or more)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--reuse-standalone", metavar="JSON", help="take the stand-alone top-1 of subnets already trained "
                    "by an earlier run with the same recipe and --seed (its supernet_ranking.json), by arch_id; seeds "
                    "beyond the earlier run's are trained here")
    ap.add_argument("--no-proxies", action="store_true", help="skip the zero-cost proxies (params and FLOPs stay)")
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
    ap.add_argument("--seed", type=int, default=0, help="draws the recipe set; the stand-alone trainings' seeds "
                    "and the zero-cost batch derive from it")
    ap.add_argument("--heldout-seed", type=int, default=None, help="draws the held-out set (default --seed + 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of this process and of each worker")
    ap.add_argument("--workers", type=int, default=1, help="train the subnets alone in this many processes at once "
                    "(default 1: in this one); every result is the same whatever the count")
    ap.add_argument("--out", default="runs/bench/supernet_ranking")
    return ap


def prepare(args: argparse.Namespace) -> tuple[Any, Any, Any, list[Any], dict[str, list[Any]]]:
    """Everything checked before any work: (config, space, supernet or None, ensemble members, the two sets).

    Raises:
        ConfigError: every problem found (a file that does not load, a checkpoint of another space, resolution or
            dataset, a subnet the supernet cannot express, overlapping sets).
    """
    from hwnas.cli.supernet import _load_config
    from hwnas.errors import ConfigError
    from hwnas.supernet.checkpoint import check_trained_on, load_supernet
    from hwnas.supernet.train import build_parts

    cfg = _load_config(argparse.Namespace(file=args.file, overrides=args.overrides))
    problems: list[str] = []
    if args.subnets < 3:
        problems.append(f"--subnets must be at least 3, got {args.subnets}")
    if args.workers < 1 or args.threads < 1:
        problems.append(f"--workers and --threads must be at least 1, got {args.workers} and {args.threads}")
    if args.standalone_seeds < 1:
        problems.append(f"--standalone-seeds must be at least 1, got {args.standalone_seeds}")
    if args.also_checkpoint and not args.checkpoint:
        problems.append("--also-checkpoint needs --checkpoint (the ensemble's first member)")
    if problems:
        raise ConfigError(problems)
    space, supernet, _, _ = build_parts(cfg)  # the space as training this file builds it
    members: list[Any] = []
    if args.checkpoint:
        checkpoints = [("--checkpoint", args.checkpoint), *(("--also-checkpoint", p) for p in args.also_checkpoint)]
        for label, path in checkpoints:
            try:
                net = load_supernet(path, space=space).eval()  # another space or resolution: refused, named
                check_trained_on(path, cfg.dataset, f"{label} {path}")
                members.append(net)
            except ConfigError as exc:
                problems.extend(q if q.startswith(label) else f"{label} {path}: {q}" for q in exc.problems)
        if problems:
            raise ConfigError(problems)
        supernet = members[0]
    heldout_seed = args.seed + 1 if args.heldout_seed is None else args.heldout_seed
    if heldout_seed == args.seed and not args.subnets_file:
        raise ConfigError(f"--heldout-seed {heldout_seed} is also --seed: the held-out set would be drawn like the "
                          "recipe set (give it another seed)")
    if args.subnets_file:
        sets, problems = read_subnet_file(args.subnets_file, space)
        if problems:
            raise ConfigError(problems)
    else:
        extremes = [supernet.largest(), supernet.smallest(supernet.phases[-1])]
        sets = {}
        for name, seed, start in (("recipe", args.seed, extremes), ("heldout", heldout_seed, [])):
            rng = np.random.default_rng(seed)
            taken = sets.get("recipe", [])  # the held-out set is drawn apart from the recipe set
            sets[name] = (stratified_subnets(space, args.subnets, rng, start=start, exclude=taken)
                          if args.sampling == "stratified"
                          else random_subnets(supernet, args.subnets, rng, start=start, exclude=taken))
    problems = overlap_problems(sets)
    if problems:
        raise ConfigError(problems)
    return cfg, space, (supernet if args.checkpoint else None), members[1:], sets


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from hwnas.errors import HwnasError

    try:
        cfg, space, loaded, members, sets = prepare(args)
    except HwnasError as exc:
        for p in getattr(exc, "problems", [str(exc)]):
            print(f"error: {p}", file=sys.stderr)
        return 2
    return run(args, cfg, space, loaded, members, sets)


def run(args: argparse.Namespace, cfg: Any, space: Any, loaded: Any, members: list[Any],
        sets: dict[str, list[Any]]) -> int:
    import torch

    from hwnas.data.datasets import DataSource
    from hwnas.evaluation import EVALUATORS, EvalContext
    from hwnas.predictors.zero_cost import HIGHER_IS_BETTER
    from hwnas.supernet.checkpoint import load_supernet
    from hwnas.supernet.train import finetune_subnet, inherited_subnet, resize_for, score_subnet, train_supernet
    from hwnas.training.recipe import TrainRecipe, evaluate_top1

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if loaded is not None:
        ckpt = Path(args.checkpoint)
        supernet = loaded
        train_s = _training_seconds(ckpt)
    else:
        ckpt = out / "supernet"
        result = train_supernet(cfg, ckpt, on_epoch=lambda r: print(
            f"  {r['phase']} epoch {r['epoch']}: largest {100 * r['largest_top1']:.2f} smallest "
            f"{100 * r['smallest_top1']:.2f}", flush=True))
        train_s = result.seconds
        supernet = load_supernet(ckpt, space=space).eval()
    print(f"supernet: {ckpt} ({train_s:.0f} s of training)")
    for extra in args.also_checkpoint:
        train_s += _training_seconds(Path(extra))
        print(f"  ensemble member: {extra}")
    nets = [supernet, *members]
    source = DataSource(cfg.dataset)
    data = source(int(space.input_shape[-1]))
    ctx = EvalContext(space=space, data=source, seed=args.seed)
    complexity = EVALUATORS.create("complexity", {}, context=ctx)
    zero_cost = {} if args.no_proxies else {
        p: EVALUATORS.create("zero_cost", {"proxies": [p]}, context=ctx) for p in HIGHER_IS_BETTER}
    recipe = TrainRecipe(epochs=args.epochs, lr=args.lr, optimizer=args.optimizer, batch_size=64,
                         weight_decay=0.01 if args.optimizer == "adamw" else 5e-5)
    reused: dict[str, Any] = {}
    if args.reuse_standalone:
        earlier = json.loads(Path(args.reuse_standalone).read_text())
        if earlier["standalone_recipe"] != recipe.model_dump() or earlier.get("seed", 0) != args.seed:
            print(f"error: {args.reuse_standalone}: another stand-alone recipe or --seed", file=sys.stderr)
            return 2
        earlier_rows = earlier.get("rows") or [r for s in earlier.get("sets", {}).values() for r in s["rows"]]
        reused = {r["arch_id"]: r for r in earlier_rows}
    gene = getattr(supernet, "gene", None) or args.by_gene
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in SETS}
    timing = {"inherited": 0.0, "standalone": 0.0, "standalone_trainings": 0, "proxies": 0.0, "finetune": 0.0}
    total = sum(len(v) for v in sets.values())
    done = 0
    alone = Standalone(space_spec(cfg, space), cfg.dataset.model_dump(mode="json"), recipe.model_dump(),
                       seed=args.seed, workers=args.workers, threads=args.threads)
    todo = {}  # arch id: (the stand-alone runs reused, the seeds still to train)
    for arch in (a for name in SETS for a in sets[name]):
        earlier = list(reused[arch.arch_id]["standalone_runs"])[:args.standalone_seeds] \
            if arch.arch_id in reused else []
        todo[arch.arch_id] = (earlier, range(len(earlier), args.standalone_seeds))
        alone.submit(arch, todo[arch.arch_id][1])
    try:
        for name in SETS:
            for arch in sets[name]:
                t = time.perf_counter()
                inherited_runs = [score_subnet(net, arch, data, calib_images=cfg.calib_images)[0] for net in nets]
                timing["inherited"] += time.perf_counter() - t
                tuned = []
                for s in range(args.finetune_seeds if args.finetune_epochs else 0):
                    t = time.perf_counter()
                    module = inherited_subnet(supernet, arch, data.x_train, calib_images=cfg.calib_images)
                    x_va = resize_for(space, arch, torch.from_numpy(data.x_val)).numpy()
                    finetune_subnet(module, space, arch, data, epochs=args.finetune_epochs, lr=args.finetune_lr,
                                    optimizer=args.finetune_optimizer, seed=s)
                    tuned.append(evaluate_top1(module, x_va, data.y_val)[0])
                    timing["finetune"] += time.perf_counter() - t
                t = time.perf_counter()
                free: dict[str, float] = {}
                got = complexity.evaluate([arch])[0]
                free.update({k: float(v) for k, v in got.items()} if isinstance(got, dict) else {})
                for zc in zero_cost.values():
                    got = zc.evaluate([arch])[0]
                    free.update({k: float(v) for k, v in got.items()} if isinstance(got, dict) else {})
                timing["proxies"] += time.perf_counter() - t
                earlier, seeds = todo[arch.arch_id]
                trained = alone.runs(arch, seeds)
                alone_runs = earlier + [top1 for top1, _ in trained]
                timing["standalone_trainings"] += len(trained)
                timing["standalone"] += sum(sec for _, sec in trained)  # each training's own time, where it ran
                row = {"arch_id": arch.arch_id, "genes": dict(arch.genes),
                       "inherited_top1": float(np.mean(inherited_runs)), "inherited_runs": inherited_runs,
                       "standalone_top1": float(np.mean(alone_runs)), "standalone_runs": alone_runs,
                       "finetuned_top1": tuned, **free}
                rows[name].append(row)
                done += 1
                print(f"  [{done}/{total}] {name} {arch.arch_id} inherited {100 * row['inherited_top1']:.2f}"
                      + (f"  fine-tuned {' '.join(f'{100 * a:.2f}' for a in tuned)}" if tuned else "")
                      + f"  alone {' '.join(f'{100 * a:.2f}' for a in alone_runs)}  params_m "
                        f"{free.get('params_m', float('nan')):.4f}", flush=True)
                (out / "supernet_ranking.partial.json").write_text(json.dumps(
                    {"seed": args.seed, "standalone_recipe": recipe.model_dump(),
                     "sets": {k: {"rows": v} for k, v in rows.items()}}, default=str))
    finally:
        alone.close()
    n = total
    per_inherit = timing["inherited"] / n
    # None when every stand-alone top-1 was reused: nothing was trained here to time
    per_alone = timing["standalone"] / timing["standalone_trainings"] if timing["standalone_trainings"] else None
    summaries: dict[str, Any] = {}
    chosen = None
    weights: dict[str, float] | None = None
    for name in SETS:
        summaries[name] = summarize_set(rows[name], members=len(nets), gene=gene,
                                        finetune_seeds=args.finetune_seeds if args.finetune_epochs else 0,
                                        chosen_proxy=chosen, spread_seed=args.seed, blend_weights=weights)
        summaries[name]["rows"] = rows[name]
        if name == "recipe":
            chosen = summaries[name]["best_zero_cost"]["proxy"]
            weights = {k: v["weight"] for k, v in summaries[name]["flops_blend"]["best"].items()}
    heldout_seed = args.seed + 1 if args.heldout_seed is None else args.heldout_seed
    summary = {
        "space": space.name, "space_params": json.loads(json.dumps(space.params.model_dump(), default=list)),
        "dataset": cfg.dataset.model_dump(mode="json"), "split": "the dataset's held-out split",
        "sampling": "subnets file" if args.subnets_file else args.sampling, "seed": args.seed,
        "heldout_seed": None if args.subnets_file else heldout_seed,
        "checkpoints": [str(ckpt), *args.also_checkpoint], "standalone_seeds": args.standalone_seeds,
        "standalone_recipe": recipe.model_dump(), "workers": args.workers, "threads": args.threads,
        "calib_images": cfg.calib_images, "sets": summaries,
        "seconds": {"supernet_training": train_s, "inherited_per_subnet": per_inherit,
                    "standalone_per_training": per_alone, "proxies_per_subnet": timing["proxies"] / n,
                    "finetune_per_subnet": timing["finetune"] / n if args.finetune_epochs else None},
        "search": {"candidates": args.search_candidates,
                   "with_supernet_s": train_s + args.search_candidates * per_inherit,
                   "training_each_s": None if per_alone is None else args.search_candidates * per_alone,
                   "note": "scoring times measured here per subnet, times the candidates (one stand-alone seed)"},
        "wall_s": time.perf_counter() - t0,
    }
    (out / "supernet_ranking.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"\n{space.name} on {cfg.dataset.name} (held-out split), supernet {train_s:.0f} s of training"
          f"{f' ({len(nets)} supernets, inherited top-1 averaged)' if len(nets) > 1 else ''}; stand-alone "
          f"{args.epochs} epochs x {args.standalone_seeds} seeds, "
          + ("every training reused" if per_alone is None else f"{per_alone:.1f} s per training"))
    print(f"{'set':8s} {'subnets':>7s} {'ref split-half':>14s} {'tau inherited':>13s} {'tau params':>10s} "
          f"{'tau FLOPs':>9s}  best zero-cost tau")
    for name in SETS:
        s = summaries[name]
        best = s["best_zero_cost"]
        line = (f"{name:8s} {s['subnets']:7d} {_fmt(s['reference_split_half_tau']):>14s} {_fmt(s['kendall_tau']):>13s} "
                f"{_fmt(s['proxies']['params_m']):>10s} {_fmt(s['proxies']['flops_m']):>9s}  "
                f"{_fmt(best['kendall_tau'])} ({best['proxy']})")
        if "zero_cost_chosen_on_recipe" in s and s["zero_cost_chosen_on_recipe"]["proxy"]:
            line += f"; the recipe set's best, {s['zero_cost_chosen_on_recipe']['proxy']}: " \
                    f"{_fmt(s['zero_cost_chosen_on_recipe']['kendall_tau'])}"
        print(line)
        spread = s["reference_split_half_spread"]
        if spread:
            print(f"  {name}: reference split-half over {spread['halvings']} halvings of the seeds: mean "
                  f"{_fmt(spread['mean'])} (5-95 % {_fmt(spread['p5'])} .. {_fmt(spread['p95'])})")
        if "ensemble" in s:
            e = s["ensemble"]
            print(f"  {name}: each supernet alone: tau " + " / ".join(_fmt(t) for t in e["kendall_tau_per_supernet"])
                  + f" (mean {_fmt(e['mean'])} +- {_fmt(e['std'])})")
        blend = s["flops_blend"].get("at_recipe_weights") or s["flops_blend"]["best"]
        if "inherited_top1" in blend:
            free = {k: v for k, v in blend.items() if k != "inherited_top1" and v["kendall_tau"] is not None}
            top = max(free, key=lambda k: free[k]["kendall_tau"] or 0.0) if free else None
            where = "the recipe set's weights" if "at_recipe_weights" in s["flops_blend"] else "its best weights"
            print(f"  {name}: blended with FLOPs, at {where}: inherited (a={blend['inherited_top1']['weight']:.2f}) "
                  f"{_fmt(blend['inherited_top1']['kendall_tau'])}"
                  + (f"; the best free score, {top} (a={free[top]['weight']:.2f}), {_fmt(free[top]['kendall_tau'])}"
                     if top else ""))
        if "by_gene" in s:
            g = s["by_gene"]
            print(f"  {name}: by {g['gene']}: tau within " + " / ".join(
                f"{grp['value']}: {_fmt(grp['kendall_tau_within'])}" for grp in g["groups"])
                + "; mean gap (points) " + " / ".join(f"{grp['mean_gap_points']:+.2f}" for grp in g["groups"])
                + f"; tau were each group's gap known {_fmt(g['kendall_tau_if_group_gaps_known'])}")
        if "finetuned_kendall_tau_per_seed" in s:
            print(f"  {name}: fine-tuned {args.finetune_epochs} epoch(s): tau "
                  + " ".join(_fmt(t) for t in s["finetuned_kendall_tau_per_seed"]))
        print(f"  {name}: inherited top-1 {100 * s['inherited_top1']['min']:.2f} .. "
              f"{100 * s['inherited_top1']['median']:.2f} .. {100 * s['inherited_top1']['max']:.2f}; stand-alone "
              f"{100 * s['standalone_top1']['min']:.2f} .. {100 * s['standalone_top1']['median']:.2f} .. "
              f"{100 * s['standalone_top1']['max']:.2f}; zero-cost: "
              + ", ".join(f"{k[3:]} {_fmt(v)}" for k, v in s["proxies"].items() if k.startswith("zc_")))
    print(f"  scoring {per_inherit:.2f} s per subnet; search of {args.search_candidates}: supernet "
          f"{summary['search']['with_supernet_s']:.0f} s (training included) vs training each "
          + ("(not timed: every training reused)" if per_alone is None
             else f"{summary['search']['training_each_s']:.0f} s"))
    _plot(out / "supernet_ranking.png", summaries, f"{space.name} supernet on {cfg.dataset.name}")
    return 0


def _plot(path: Path, summaries: dict[str, Any], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.4))
    for name, s in summaries.items():
        alone = [100 * r["standalone_top1"] for r in s["rows"]]
        inh = [100 * r["inherited_top1"] for r in s["rows"]]
        ax.scatter(alone, inh, s=14, label=f"{name} set: tau {_fmt(s['kendall_tau'])}")
    ax.set_xlabel("stand-alone trained top-1 (%), mean over seeds")
    ax.set_ylabel("inherited-weight top-1 (%), BN recalibrated")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
