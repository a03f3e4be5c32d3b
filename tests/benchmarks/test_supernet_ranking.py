"""The supernet ranking benchmark (benchmarks/supernet_ranking.py): its two subnet sets, its figures, its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from supernet_ranking import (
    BLEND_WEIGHTS,
    chosen_blends,
    flops_blends,
    kendall,
    main,
    proxy_taus,
    split_half_spread,
    split_half_tau,
    stratified_subnets,
    summarize_set,
)

from hwnas.search_spaces import SPACES

TINY = """\
supernet:
  name: tiny
  space: {{name: nb201, params: {{resolution: {res}, channels: 4, cells_per_stage: 1}}}}
  dataset: {dataset}
  phases: [{{phase: uniform, epochs: 1}}]
  batch_size: 32
  random_subnets: 1
  calib_images: 64
  device: cpu
"""


def _file(tmp_path: Path, name: str = "tiny.yaml", res: int = 8,
          dataset: str = "{name: digits, max_images: 240}") -> Path:
    path = tmp_path / name
    path.write_text(TINY.format(res=res, dataset=dataset))
    return path


def _errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(line.startswith("error: ") for line in err), err
    return err


def test_stratified_sets_give_every_gene_value_equally_often() -> None:
    space = SPACES.create("fbnet", {})
    start = [space.largest()]
    archs = stratified_subnets(space, 37, np.random.default_rng(3), start=start)
    assert len({a.arch_id for a in archs}) == 37 and archs[0] == space.canonicalize(start[0])
    for g in space.genes():  # 36 drawn over 9 values: 4 each (the start subnet adds one more of one value)
        counts = np.bincount([a.genes[g.name] for a in archs[1:]], minlength=len(g.choices))
        assert counts.min() == counts.max() == 4, (g.name, counts)
    again = stratified_subnets(space, 37, np.random.default_rng(3), start=start)
    assert [a.arch_id for a in again] == [a.arch_id for a in archs]
    other = stratified_subnets(space, 37, np.random.default_rng(4), start=start)
    assert [a.arch_id for a in other] != [a.arch_id for a in archs]


def test_split_half_tau_and_the_proxies_signs() -> None:
    rng = np.random.default_rng(0)
    truth = np.arange(12, dtype=float)
    runs = truth[:, None] + 0.01 * rng.standard_normal((12, 4))  # four seeds that agree on the order
    assert split_half_tau(runs) == pytest.approx(1.0)
    noisy = rng.standard_normal((12, 4))
    assert abs(split_half_tau(noisy) or 0.0) < 0.6
    assert split_half_tau(runs[:, :1]) is None
    rows = [{"params_m": t, "flops_m": -t, "zc_synflow": t, "zc_ntk_cond": -t} for t in truth]  # ntk_cond: lower is
    taus = proxy_taus(rows, truth)  # claimed better, so it is negated
    assert taus["params_m"] == pytest.approx(1.0) and taus["flops_m"] == pytest.approx(-1.0)
    assert taus["zc_synflow"] == pytest.approx(1.0) and taus["zc_ntk_cond"] == pytest.approx(1.0)
    assert taus["zc_snip"] is None  # not computed: left out, not zero


def test_a_blend_with_flops_finds_what_each_alone_misses_and_the_held_out_set_reads_the_recipe_sets_weight() -> None:
    rng = np.random.default_rng(2)
    size, skill = rng.standard_normal(40), rng.standard_normal(40)
    truth = size + skill  # the reference: half what FLOPs knows, half what the supernet knows
    rows = [{"flops_m": float(np.exp(a)), "inherited_top1": 0.9 + 0.01 * b, "params_m": float(np.exp(a)),
             "zc_naswot": float(b)} for a, b in zip(size, skill)]
    curves = flops_blends(rows, truth)
    inh = curves["inherited_top1"]
    assert inh[0] == pytest.approx(kendall(size, truth)) and inh[-1] == pytest.approx(kendall(skill, truth))
    best = chosen_blends(curves)["inherited_top1"]
    assert 0.3 <= float(best["weight"] or 0) <= 0.7
    assert float(best["kendall_tau"] or 0) > max(float(inh[0] or 0), float(inh[-1] or 0)) + 0.2
    assert max(t for t in curves["params_m"] if t is not None) == pytest.approx(inh[0])  # params = FLOPs: nothing added
    assert "zc_snip" not in curves  # not computed: left out
    at = chosen_blends(curves, {"inherited_top1": 0.1})["inherited_top1"]
    assert at == {"weight": 0.1, "kendall_tau": inh[BLEND_WEIGHTS.index(0.1)]}


def test_the_gene_groups_report_how_far_known_group_gaps_would_lift_the_ranking() -> None:
    rng = np.random.default_rng(3)
    ref = rng.uniform(0.85, 0.95, 24)
    w2 = np.repeat([16, 32, 64], 8)
    gap = {16: -0.05, 32: -0.02, 64: 0.0}  # the supernet scores each group lower by its own amount
    rows = [{"genes": {"w2": int(g)}, "inherited_top1": float(r + gap[int(g)]), "inherited_runs": [float(r)],
             "standalone_runs": [float(r), float(r)], "flops_m": 1.0 + i, "params_m": 1.0 + i}
            for i, (r, g) in enumerate(zip(ref, w2))]
    out = summarize_set(rows, members=1, finetune_seeds=0, gene="w2")
    groups = out["by_gene"]["groups"]
    assert [g["mean_gap_points"] for g in groups] == pytest.approx([-5.0, -2.0, 0.0])
    assert all(g["kendall_tau_within"] == pytest.approx(1.0) for g in groups)
    assert out["kendall_tau"] < 0.9 and out["by_gene"]["kendall_tau_if_group_gaps_known"] == pytest.approx(1.0)


def test_the_split_half_spread_covers_every_halving_of_few_seeds_and_draws_many_with_its_generator() -> None:
    rng = np.random.default_rng(1)
    truth = np.arange(10, dtype=float)
    runs = truth[:, None] + 3.0 * rng.standard_normal((10, 4))
    spread = split_half_spread(runs, np.random.default_rng(0))
    assert spread is not None and spread["halvings"] == 6  # 4 seeds: every choice of 2, each split seen twice
    by_hand = [kendall(runs[:, [a, b]].mean(1), runs[:, [s for s in range(4) if s not in (a, b)]].mean(1))
               for a, b in [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]]
    assert spread["mean"] == pytest.approx(np.mean(by_hand))
    assert min(by_hand) <= spread["p5"] <= spread["mean"] <= spread["p95"] <= max(by_hand)
    assert spread["p5"] < spread["p95"]  # these noisy seeds: the halving matters
    many = truth[:, None] + 3.0 * rng.standard_normal((10, 16))
    first = split_half_spread(many, np.random.default_rng(7))
    assert first is not None and first["halvings"] == 200
    assert first == split_half_spread(many, np.random.default_rng(7))
    assert first != split_half_spread(many, np.random.default_rng(8))
    assert split_half_spread(runs[:, :1], np.random.default_rng(0)) is None


def test_a_small_run_reports_both_sets_with_the_references_ceiling_and_the_free_proxies(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main([str(_file(tmp_path)), "--subnets", "4", "--standalone-seeds", "2", "--epochs", "1",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "supernet_ranking.json").read_text())
    recipe, heldout = summary["sets"]["recipe"], summary["sets"]["heldout"]
    assert recipe["subnets"] == heldout["subnets"] == 4
    assert not {r["arch_id"] for r in recipe["rows"]} & {r["arch_id"] for r in heldout["rows"]}
    for s in (recipe, heldout):
        assert s["standalone_seeds"] == 2 and "reference_split_half_tau" in s
        assert s["reference_split_half_spread"]["halvings"] == 2  # 2 seeds: seed 0 against 1, and 1 against 0
        assert set(s["proxies"]) == {"params_m", "flops_m", "zc_synflow", "zc_snip", "zc_grad_norm", "zc_naswot",
                                     "zc_ntk_cond"}
        assert all(len(r["standalone_runs"]) == 2 and r["params_m"] > 0 and r["flops_m"] > 0 for r in s["rows"])
    assert heldout["zero_cost_chosen_on_recipe"]["proxy"] == recipe["best_zero_cost"]["proxy"]
    assert "at_recipe_weights" not in recipe["flops_blend"]
    for key, chosen in heldout["flops_blend"]["at_recipe_weights"].items():  # the held-out set reads the recipe's
        assert chosen["weight"] == recipe["flops_blend"]["best"][key]["weight"]
    assert summary["calib_images"] == 64  # the file's, as the supernet evaluator would use it (not a fixed 500)
    assert (out / "supernet_ranking.png").is_file()


def test_worker_processes_and_a_reused_run_give_the_same_stand_alone_figures(tmp_path: Path) -> None:
    """Each stand-alone training depends on (subnet, seed) only: trained here, in two spawned workers, or taken
    from an earlier run with fewer seeds, every top-1 is the same number."""
    exp = _file(tmp_path)
    common = ["--subnets", "3", "--epochs", "1", "--no-proxies"]

    def runs(out: Path) -> dict[str, list[float]]:
        summary = json.loads((out / "supernet_ranking.json").read_text())
        assert summary["seconds"]["standalone_per_training"] > 0
        return {r["arch_id"]: r["standalone_runs"] for s in summary["sets"].values() for r in s["rows"]}

    assert main([str(exp), *common, "--standalone-seeds", "1", "--out", str(tmp_path / "one")]) == 0
    assert main([str(exp), *common, "--standalone-seeds", "2", "--out", str(tmp_path / "here")]) == 0
    assert main([str(exp), *common, "--standalone-seeds", "2", "--workers", "2", "--out", str(tmp_path / "workers"),
                 "--reuse-standalone", str(tmp_path / "one" / "supernet_ranking.json")]) == 0
    here, workers = runs(tmp_path / "here"), runs(tmp_path / "workers")
    assert here == workers and all(len(v) == 2 for v in here.values())
    assert {k: v[:1] for k, v in here.items()} == runs(tmp_path / "one")
    # every stand-alone top-1 reused: nothing was trained to time, and no training time is made up
    assert main([str(exp), *common, "--standalone-seeds", "1", "--out", str(tmp_path / "reused"),
                 "--reuse-standalone", str(tmp_path / "one" / "supernet_ranking.json")]) == 0
    reused = json.loads((tmp_path / "reused" / "supernet_ranking.json").read_text())
    assert reused["seconds"]["standalone_per_training"] is None and reused["search"]["training_each_s"] is None


def test_a_held_out_set_that_overlaps_the_recipe_set_is_refused_naming_the_subnets(tmp_path: Path, capsys) -> None:
    space = SPACES.create("nb201", {"resolution": 8, "channels": 4, "cells_per_stage": 1, "in_chans": 1})
    a, b, c, d = stratified_subnets(space, 4, np.random.default_rng(0))
    sets = tmp_path / "sets.json"
    sets.write_text(json.dumps({"recipe": [dict(a.genes), dict(b.genes), dict(c.genes)],
                                "heldout": [dict(c.genes), dict(d.genes), dict(a.genes)]}))
    out = tmp_path / "out"
    assert main([str(_file(tmp_path)), "--subnets-file", str(sets), "--out", str(out)]) == 2
    (err,) = _errors(capsys)
    assert "the held-out set overlaps the recipe set: 2 subnet(s) in both" in err
    assert c.arch_id in err and a.arch_id in err and b.arch_id not in err
    assert not out.exists()  # refused before any work
    # drawn sets are drawn apart; drawing both with one seed is refused
    assert main([str(_file(tmp_path)), "--subnets", "3", "--seed", "0", "--heldout-seed", "0", "--out", str(out)]) == 2
    assert _errors(capsys) == ["error: --heldout-seed 0 is also --seed: the held-out set would be drawn like the "
                               "recipe set (give it another seed)"]
    assert not out.exists()


def test_a_drawn_held_out_set_leaves_out_the_recipe_sets_subnets() -> None:
    space = SPACES.create("nb201", {"resolution": 8, "channels": 4, "cells_per_stage": 1, "in_chans": 1})
    recipe = stratified_subnets(space, 50, np.random.default_rng(0))
    free = stratified_subnets(space, 50, np.random.default_rng(1))
    assert {a.arch_id for a in free} & {a.arch_id for a in recipe}  # isomorphic cells merge: drawn alone they meet
    heldout = stratified_subnets(space, 50, np.random.default_rng(1), exclude=recipe)
    assert len(heldout) == 50 and not {a.arch_id for a in heldout} & {a.arch_id for a in recipe}


def test_a_subnet_the_supernet_cannot_express_is_refused_naming_gene_and_value(tmp_path: Path, capsys) -> None:
    space = SPACES.create("nb201", {"resolution": 8, "channels": 4, "cells_per_stage": 1, "in_chans": 1})
    a, b = stratified_subnets(space, 2, np.random.default_rng(0))
    sets = tmp_path / "sets.json"
    sets.write_text(json.dumps({"recipe": [dict(a.genes)], "heldout": [{**dict(b.genes), "e3_1": 7},
                                                                       {**dict(b.genes), "w9": 1}]}))
    assert main([str(_file(tmp_path)), "--subnets-file", str(sets), "--out", str(tmp_path / "out")]) == 2
    err = _errors(capsys)
    assert len(err) == 2
    assert f"{sets}: heldout[0]: gene 'e3_1' = 7: the supernet cannot express it" in err[0]
    assert "choices for e3_1: 0, 1, 2, 3, 4" in err[0]
    assert f"{sets}: heldout[1]: gene 'w9' is not a gene of the nb201 space" in err[1]
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_of_other_data_or_resolution_is_refused_naming_both(tmp_path: Path, capsys) -> None:
    import argparse

    from hwnas.cli.supernet import _load_config
    from hwnas.supernet.train import train_supernet

    ckpt = tmp_path / "sn"
    train_supernet(_load_config(argparse.Namespace(file=str(_file(tmp_path)), overrides=[])), ckpt)
    out = tmp_path / "out"
    other_data = _file(tmp_path, "mnist.yaml", dataset="{name: mnist5k}")
    assert main([str(other_data), "--checkpoint", str(ckpt), "--out", str(out)]) == 2
    (err,) = _errors(capsys)
    assert f"--checkpoint {ckpt}: the checkpoint was trained on digits (val_fraction 0.25, split_seed 0, max_images " \
           "240), the scoring data is mnist5k (val_fraction 0.25, split_seed 0)" in err
    other_res = _file(tmp_path, "res.yaml", res=12)
    assert main([str(other_res), "--checkpoint", str(ckpt), "--out", str(out)]) == 2
    (err,) = _errors(capsys)
    assert "resolution (checkpoint 8, here 12)" in err
    assert not out.exists()


def test_counts_below_one_are_refused_before_any_work(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main([str(_file(tmp_path)), "--subnets", "2", "--workers", "0", "--out", str(out)]) == 2
    err = _errors(capsys)
    assert any("--subnets must be at least 3, got 2" in e for e in err)
    assert any("--workers and --threads must be at least 1, got 0 and 1" in e for e in err)
    assert not out.exists()
