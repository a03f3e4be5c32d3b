"""``nas bench strategies``: the column handling, the anytime curves, the hypervolume fractions and the command."""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from hwnas.architecture import Architecture
from hwnas.bench import strategies as sb
from hwnas.bench.journal import PARTIAL
from hwnas.errors import ConfigError, OutputExists
from hwnas.objectives import Trial, hypervolume, non_dominated
from hwnas.testing.bench import without_keys


@pytest.fixture(scope="module")
def nb201(shared_data: Path) -> sb.NB201Data:
    return sb.load_nb201(shared_data)


@pytest.mark.parametrize(("dataset", "expected"), [("cifar10", 94.37), ("cifar100", 72.28), ("imagenet16", 46.48)])
def test_ceiling_reproduces_the_published_best_by_12_epoch_validation(nb201: sb.NB201Data, dataset: str,
                                                                      expected: float) -> None:
    c = sb.ceiling(nb201, dataset)
    assert c.searched_column == f"{dataset}_valid_12ep" and c.reported_column == f"{dataset}_test_200ep"
    assert c.reported == pytest.approx(expected, abs=0.01)
    oracle = sb.ceiling(nb201, dataset, oracle=True)
    assert oracle.reported == oracle.best_reported == pytest.approx({"cifar10": 94.37, "cifar100": 73.51,
                                                                     "imagenet16": 47.31}[dataset], abs=0.01)


def test_the_tables_are_keyed_by_cell_so_every_row_is_where_its_arch_string_says(nb201: sb.NB201Data,
                                                                                  shared_data: Path) -> None:
    space = sb.nb201_space(merge=False)
    row = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
    code = sb.nb201_code(space, space.from_str(row))
    assert nb201.accuracy["cifar10_test_200ep"][code] == pytest.approx(93.66)  # row 1 of nb201_accuracy.csv
    for code in range(0, 15625, 31):  # the fast string parser agrees with the space's
        text = space.to_str(space.from_ops([(code // 5 ** (5 - k)) % 5 for k in range(6)]))
        assert sb.arch_str_code(text) == code == sb.nb201_code(space, space.from_str(text))
    with pytest.raises(ValueError, match="edge"):
        sb.arch_str_code("|conv~0|+|none~0|none~1|+|none~0|none~1|none~2|")
    assert nb201.latency["1080ti_1"].shape == (15625,)
    assert {"pixel3", "samsung_a50", "gold_6240", "titan_rtx_1", "1080ti_1"} <= set(nb201.devices)


def test_random_search_anytime_curve_is_non_decreasing_for_every_seed(nb201: sb.NB201Data) -> None:
    search = nb201.accuracy["cifar10_valid_12ep"]
    report = nb201.accuracy["cifar10_test_200ep"]
    for seed in range(5):
        c = sb.run_accuracy("random", None, "cifar10", seed, 200, data=nb201)
        assert c.n_queries == 200 and len(set(c.codes.tolist())) == 200  # distinct queries
        assert np.all(np.diff(c.searched) >= 0)
        assert c.searched[-1] == search[c.codes].max()
        first_best = c.codes[int(np.argmax(search[c.codes]))]  # argmax: the first on ties
        assert c.reported[-1] == report[first_best]
        values = c.at([25, 50, 100, 200], "searched")
        assert values == sorted(values)
        oracle = sb.run_accuracy("random", None, "cifar10", seed, 200, data=nb201, oracle=True)
        assert np.all(np.diff(oracle.reported) >= 0)  # searched on what is reported: never goes down
    again = sb.run_accuracy("random", None, "cifar10", 3, 200, data=nb201)
    assert np.array_equal(again.codes, sb.run_accuracy("random", None, "cifar10", 3, 200, data=nb201).codes)


def test_a_run_that_stops_short_keeps_its_last_value() -> None:
    curve = sb.anytime(np.array([2, 0, 1]), np.array([1.0, 3.0, 2.0]), np.array([10.0, 30.0, 20.0]))
    assert curve.searched.tolist() == [2.0, 2.0, 3.0]
    assert curve.reported.tolist() == [20.0, 20.0, 30.0]
    assert curve.at([1, 3, 10]) == [20.0, 30.0, 30.0]


class TellMeEverything:
    """An 'oracle strategy': asks every member of the space, in order."""

    def __init__(self, space: object) -> None:
        self.members, _ = space.distribution()  # type: ignore[attr-defined]
        self.next = 0

    def ask(self, n: int) -> list[Architecture]:
        out = self.members[self.next : self.next + n]
        self.next += len(out)
        return out

    def tell(self, trials: Sequence[Trial]) -> None:
        pass


def test_hypervolume_fraction_is_one_for_the_whole_space_and_below_for_random_search(nb201: sb.NB201Data) -> None:
    problem = sb.hardware_problem(nb201, "pixel3")
    assert problem.reference.tolist() == [-float(np.median(nb201.accuracy["cifar10_valid_12ep"])),
                                          float(np.median(nb201.latency["pixel3"]))]
    assert sb.hardware_fraction(problem, np.arange(15625)) == [1.0]
    space = sb.nb201_space(merge=False)
    codes: list[int] = []

    def evaluate(archs: Sequence[Architecture]) -> list[dict[str, float]]:
        codes.extend(sb.nb201_code(space, a) for a in archs)
        return [{} for _ in archs]

    res = sb.drive(TellMeEverything(space), space, 15625, 500, evaluate)
    assert len(res.trials) == 15625 and sorted(codes) == list(range(15625))
    assert sb.hardware_fraction(problem, codes) == [1.0]
    assert sb.hardware_fraction(problem, codes, [0, 15625]) == [0.0, 1.0]
    for seed in range(3):
        run = sb.run_hardware("random", None, problem, seed, [50, 300])
        assert run.n_queries == 300
        assert 0 < run.fractions[0] <= run.fractions[1] < 1


def test_drive_tells_every_slot_and_numbers_trials_in_the_order_first_asked() -> None:
    space = sb.nb201_space(merge=True)
    members, _ = space.distribution()
    told: list[list[int]] = []

    class Repeats:
        def __init__(self) -> None:
            self.k = 0

        def ask(self, n: int) -> list[Architecture]:
            k = 2 * self.k  # two new ones, a repeat inside the batch and one across batches
            self.k += 1
            return [members[k], members[k + 1], members[k], members[0]]

        def tell(self, trials: Sequence[Trial]) -> None:
            told.append([t.number for t in trials])

    res = sb.drive(Repeats(), space, 3, 4, lambda archs: [{"top1": 0.0} for _ in archs])
    assert [t.arch for t in res.trials] == members[:3]
    assert told == [[0, 1, 0, 0]]  # the second batch passes the budget: not told, as the runner does


def test_fbnet_true_front_is_the_brute_force_front_on_a_small_additive_problem() -> None:
    rng = np.random.default_rng(4)
    flops, cost = rng.uniform(0, 10, size=(4, 3)), rng.uniform(0, 5, size=(4, 3))
    tables = sb.FBNetTables(flops, 1.5, {"dev": cost}, {"dev": 0.25}, "synthetic")
    problem = sb.fbnet_problem(tables, "dev", samples=2000)
    every = np.array([[-(1.5 + sum(flops[i, o] for i, o in enumerate(ops))), 0.25 + sum(cost[i, o] for i, o in
                                                                                       enumerate(ops))]
                      for ops in itertools.product(range(3), repeat=4)])
    front = np.unique(every[non_dominated(every)].round(9), axis=0)
    assert problem.points.shape == front.shape and np.allclose(problem.points, front, rtol=0, atol=1e-8)
    assert problem.true_hv == pytest.approx(hypervolume(every, problem.reference.tolist()))
    assert problem.fraction(every) == pytest.approx(1.0)


def test_summarise() -> None:
    s = sb.summarise([1.0, 2.0, 3.0, 4.0])
    assert s["mean"] == 2.5 and s["std"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    assert (s["q25"], s["median"], s["q75"], s["n"]) == (1.75, 2.5, 3.25, 4)
    assert sb.summarise([5.0])["std"] == 0.0


def test_missing_data_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(sb.BenchDataMissing, match=r"nb201_accuracy\.csv"):
        sb.load_nb201(tmp_path)


# -- the command ---------------------------------------------------------------------------------------
def _args(argv: list[str]) -> argparse.Namespace:
    from hwnas.cli.bench import add_parser

    parser = argparse.ArgumentParser(prog="nas")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


QUICK = ["bench", "strategies", "--strategies", "random,evolution", "--seeds", "2", "--budgets", "25,50",
         "--hw-budget", "50", "--devices", "pixel3"]


def test_cli_writes_the_json_and_the_plots_and_refuses_to_overwrite(tmp_path: Path, shared_data: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from hwnas.cli.bench import cmd_bench

    out = tmp_path / "bench"
    argv = [*QUICK, "--fbnet-devices=", "--data", str(shared_data), "--out", str(out), "--quiet"]
    assert cmd_bench(_args(argv)) == 0
    assert {p.name for p in out.iterdir()} == {"results.json", "anytime.png", "hw_fractions.png"}
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["strategies"] == ["random", "evolution"] and res["config"]["seeds"] == 2
    c10 = res["accuracy"]["cifar10"]
    assert c10["ceiling"]["reported"] == pytest.approx(94.37, abs=0.01)
    assert [r["seed"] for r in c10["runs"]["random"]] == [0, 1]
    assert set(c10["summary"]["evolution"]) == {"25", "50"}
    assert len(c10["curve"]["random"]["mean"]) == 50
    pixel3 = res["hardware"]["devices"]["pixel3"]
    assert 0 < pixel3["summary"]["random"]["50"]["median"] < 1
    assert res["fbnet"] == {"skipped": "no --fbnet-devices"}
    printed = capsys.readouterr().out
    assert "CIFAR-10" in printed and "94.37" in printed and "pixel3" in printed
    before = (out / "results.json").read_bytes()
    with pytest.raises(OutputExists, match=r"not empty.*--force"):
        cmd_bench(_args(argv))
    assert (out / "results.json").read_bytes() == before
    assert cmd_bench(_args([*argv, "--force", "--seeds", "1"])) == 0
    assert json.loads((out / "results.json").read_text())["config"]["seeds"] == 1


def test_cli_checks_options_before_running(tmp_path: Path, shared_data: Path) -> None:
    from hwnas.cli.bench import cmd_bench

    base = ["bench", "strategies", "--data", str(shared_data), "--out", str(tmp_path / "o"), "--quiet"]
    with pytest.raises(ConfigError, match=r"unknown strategy 'randm'.*random"):
        cmd_bench(_args([*base, "--strategies", "randm"]))
    with pytest.raises(ConfigError, match="population_size"):
        cmd_bench(_args([*base, "--strategies", "evolution", "--params", 'evolution:{"population_size": 1}']))
    with pytest.raises(ConfigError, match="expected NAME:JSON"):
        cmd_bench(_args([*base, "--params", "evolution"]))
    with pytest.raises(ConfigError, match="no latency column 'pixel4'"):
        cmd_bench(_args([*base, "--strategies", "random", "--devices", "pixel4", "--seeds", "1", "--datasets="]))
    with pytest.raises(sb.BenchDataMissing, match=r"nb201_accuracy\.csv"):
        cmd_bench(_args([*base, "--data", str(tmp_path / "nowhere")]))
    assert not (tmp_path / "o").exists()


def test_nas_bench_strategies_through_main_once_wired(tmp_path: Path, shared_data: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from hwnas import cli

    if "bench" not in getattr(cli, "COMMANDS", {}):
        pytest.skip("nas bench is not wired into hwnas.cli yet")
    out = tmp_path / "b"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    argv = [*QUICK, "--fbnet-devices=", "--data", str(shared_data), "--out", str(out), "--quiet"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not empty" in err[0] and "--force" in err[0]


@pytest.mark.slow
def test_cli_fbnet_section(tmp_path: Path, shared_data: Path) -> None:
    """FBNet against its exact true front (reads the HW-NAS-Bench table and counts FLOPs with torch: ~10 s)."""
    from hwnas.cli.bench import cmd_bench

    if sb.fbnet_devices(shared_data) is None:
        pytest.skip("no HW-NAS-Bench FBNet table")
    out = tmp_path / "bench"
    argv = ["bench", "strategies", "--strategies", "random,nsga2", "--seeds", "2", "--datasets=", "--devices=",
            "--fbnet-devices", "pixel3", "--fbnet-budget", "100", "--budgets", "50", "--overhead",
            "--overhead-candidates", "200", "--data", str(shared_data), "--out", str(out), "--quiet"]
    assert cmd_bench(_args(argv)) == 0
    assert {p.name for p in out.iterdir()} == {"results.json", "fbnet_fractions.png", "overhead.png"}
    res = json.loads((out / "results.json").read_text())
    fb = res["fbnet"]["devices"]["pixel3"]
    assert fb["objectives"] == ["flops_m", "latency_ms@pixel3"]
    assert all(0 <= r["fractions"]["100"] < 1 for runs in fb["runs"].values() for r in runs)
    assert res["overhead"]["strategies"]["random"]["candidates"] == 200


def test_help_states_the_library_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _args(["bench", "strategies", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    cfg = sb.BenchConfig(data_dir=Path("."), strategies=["random"])
    for option, value in (("--seeds", cfg.seeds), ("--budgets", ",".join(map(str, cfg.budgets))),
                          ("--hw-budget", cfg.hw_budget), ("--devices", ",".join(cfg.devices)),
                          ("--fbnet-devices", ",".join(cfg.fbnet_devices)), ("--fbnet-budget", cfg.fbnet_budget),
                          ("--batch", cfg.batch), ("--overhead-candidates", cfg.overhead_candidates),
                          ("--overhead-max-s", f"{cfg.overhead_max_s:g}")):
        assert f"(default {value}" in text, option
    assert cfg.datasets == ["cifar10", "cifar100", "imagenet16"] and cfg.hw_dataset == "cifar10"


def test_a_strategy_that_raises_is_recorded_as_failed_and_the_bench_goes_on(
        shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from hwnas.strategies import STRATEGIES
    from hwnas.strategies.random_search import RandomSearch

    class Broken(RandomSearch):
        """Fails at its second tell."""

        told = 0

        def tell(self, trials: Sequence[Trial]) -> None:
            self.told += 1
            if self.told == 2:
                raise ValueError("input points must have at least 2 columns")
            super().tell(trials)

    monkeypatch.setitem(STRATEGIES._items, "broken", Broken)
    cfg = sb.BenchConfig(data_dir=shared_data, strategies=["random", "broken"], seeds=2, budgets=[20],
                         datasets=["cifar10"], devices=["pixel3"], hw_budget=20, fbnet_devices=[])
    notes: list[str] = []
    res = sb.run_bench(cfg, say=notes.append)
    assert res["accuracy"]["cifar10"]["runs"]["broken"] == [
        {"seed": s, "error": "ValueError: input points must have at least 2 columns"} for s in (0, 1)]
    assert res["accuracy"]["cifar10"]["summary"]["broken"]["20"] == {"n": 0}
    assert res["accuracy"]["cifar10"]["summary"]["random"]["20"]["n"] == 2
    assert res["hardware"]["devices"]["pixel3"]["summary"]["broken"]["20"] == {"n": 0}
    assert sum("error: broken seed" in n for n in notes) == 4
    console = Console(record=True, width=200)
    sb.print_report(res, console)
    assert "failed" in console.export_text()
    assert {p.name for p in sb.write_outputs(res, tmp_path)} == {"results.json", "anytime.png", "hw_fractions.png"}


def test_a_reference_given_to_a_strategy_is_checked_against_the_problem_but_never_derived_from_it(
        shared_data: Path, nb201: sb.NB201Data) -> None:
    problem = sb.hardware_problem(nb201, "pixel3")
    acc, lat = -problem.points[:, 0], problem.points[:, 1]
    base = {"data_dir": shared_data, "strategies": ["bayes_opt"], "seeds": 1, "budgets": [10], "datasets": [],
            "devices": ["pixel3"], "hw_budget": 10, "fbnet_devices": []}

    def params(reference: object) -> dict[str, object]:
        return sb.BenchConfig(**base, hw_params={"bayes_opt": {"reference": reference}}).params_for(  # type: ignore[arg-type]
            "bayes_opt", problem)

    assert params([70.0, 10.0])["reference"] == [70.0, 10.0]  # the user's numbers, as given
    with pytest.raises(ConfigError, match=r"--hw-params bayes_opt: reference \[70\.0\]: needs 2 numbers, one per "
                                          r"objective \(top1, latency_ms@pixel3\)"):
        params([70.0])
    with pytest.raises(ConfigError, match=rf"latency_ms@pixel3 0\.001 lies outside its range on nb201:cifar10:pixel3 "
                                          rf"\({lat.min():g} to {lat.max():g}\)"):
        params([70.0, 0.001])  # faster than any cell: nothing could lie inside
    with pytest.raises(ConfigError, match=r"top1 150 lies outside its range"):
        params([150.0, 10.0])
    with pytest.raises(ConfigError, match=r"top1 needs a finite number, not 'high'"):
        params(["high", 10.0])
    assert acc.max() > 70.0 and lat.max() > 10.0  # the accepted reference above lies inside both ranges
    # without a reference the strategy gets none from the bench (its own, from its first trials)
    assert "reference" not in sb.BenchConfig(**base).params_for("bayes_opt", problem)  # type: ignore[arg-type]


def test_hw_params_fill_placeholders_and_a_strategy_that_cannot_be_built_is_not_run(
        shared_data: Path, nb201: sb.NB201Data, monkeypatch: pytest.MonkeyPatch) -> None:
    from hwnas.strategies import STRATEGIES
    from hwnas.strategies.base import StrategyParams
    from hwnas.strategies.random_search import RandomSearch

    class NeedsParams(StrategyParams):
        latency: str | None = None
        target: float | None = None

    class NeedsTarget(RandomSearch):
        """Needs a latency metric and target with two objectives (as MnasNet's reward does)."""

        Params = NeedsParams

        def __init__(self, *, latency: str | None = None, target: float | None = None, **kwargs: object) -> None:
            super().__init__(**kwargs)  # type: ignore[arg-type]
            if len(self.objectives) > 1 and (latency != self.objectives[1].metric or target is None):
                raise ValueError("two objectives need latency and target")

    monkeypatch.setitem(STRATEGIES._items, "needs", NeedsTarget)
    problem = sb.hardware_problem(nb201, "pixel3")
    filled = sb.fill_placeholders({"latency": "{latency}", "x": ["{accuracy}", "{other}", 3], "target": 9.5}, problem)
    assert filled == {"latency": "latency_ms@pixel3", "x": ["top1", "{other}", 3], "target": 9.5}
    base = {"data_dir": shared_data, "strategies": ["needs"], "seeds": 1, "budgets": [10], "datasets": ["cifar10"],
            "devices": ["pixel3"], "hw_budget": 10, "fbnet_devices": []}
    notes: list[str] = []
    res = sb.run_bench(sb.BenchConfig(**base), say=notes.append)  # type: ignore[arg-type]
    assert res["accuracy"]["cifar10"]["summary"]["needs"]["10"]["n"] == 1  # one objective: built
    pixel3 = res["hardware"]["devices"]["pixel3"]
    assert pixel3["runs"]["needs"] == [] and "two objectives need" in pixel3["not_run"]["needs"]
    assert notes == ["skipped: needs on pixel3: it cannot be built with these parameters (give them with "
                     "--hw-params): ValueError: two objectives need latency and target"]
    cfg = sb.BenchConfig(**base, hw_params={"needs": {"latency": "{latency}", "target": 9.5}})  # type: ignore[arg-type]
    res = sb.run_bench(cfg, say=notes.append)
    assert res["hardware"]["devices"]["pixel3"]["summary"]["needs"]["10"]["n"] == 1
    assert res["config"]["hw_params_given"] == {"needs": {"latency": "{latency}", "target": 9.5}}
    # the placeholders that gave a strategy the bench's scoring box (the table's medians) are refused, named
    for removed in ("{latency_reference}", "{accuracy_reference}"):
        with pytest.raises(ConfigError, match=r"--hw-params needs: \{(accuracy|latency)_reference\} no longer exist: "
                                              r"they gave the strategy the bench's scoring box"):
            sb.BenchConfig(**base, hw_params={"needs": {"x": [3, {"target": removed}]}}).check()  # type: ignore[arg-type]
    # a bad --hw-params value is refused when the bench is configured, as --params are, not after the accuracy part
    with pytest.raises(ConfigError, match=r"--hw-params needs: .*target"):
        sb.BenchConfig(**base, hw_params={"needs": {"target": "far"}}).check()  # type: ignore[arg-type]


@pytest.mark.parametrize("lookup", [True, False])
def test_the_device_column_is_a_lookup_for_strategies_that_take_one(nb201: sb.NB201Data, lookup: bool,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from hwnas.strategies import STRATEGIES
    from hwnas.strategies.base import LookupMixin
    from hwnas.strategies.random_search import RandomSearch

    priced: list[tuple[Architecture, float]] = []

    class Pricing(LookupMixin, RandomSearch):  # random search that prices what it asks, when it can
        def ask(self, n: int) -> list[Architecture]:
            archs = super().ask(n)
            if self.lookup is not None:
                priced.extend((a, row["latency_ms@pixel3"]) for a, row in zip(archs, self.lookup(archs)))
            return archs

    monkeypatch.setitem(STRATEGIES._items, "pricing", Pricing)
    problem = sb.hardware_problem(nb201, "pixel3")
    run = sb.run_hardware("pricing", None, problem, 0, [30], lookup=lookup)
    assert run.n_queries == 30
    if not lookup:
        assert priced == []
        return
    space = sb.nb201_space(merge=False)
    assert len(priced) == 30
    assert [ms for _, ms in priced] == [float(nb201.latency["pixel3"][sb.nb201_code(space, a)]) for a, _ in priced]


KILLED = ["bench", "strategies", "--strategies", "random,evolution,local_search", "--seeds", "3", "--budgets", "50,100",
          "--datasets", "cifar10", "--hw-budget", "300", "--devices", "pixel3", "--fbnet-devices=", "--quiet"]


def _nas(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hwnas.cli", *argv], capture_output=True, text=True,
                          timeout=timeout)


def _figures(res: dict) -> object:
    """The results without what timing and the clock decide (ask + tell seconds, wall times, dates, the machine)."""
    return without_keys(res, {"ask_tell_s", "wall_s", "created", "machine", "command",
                              "command_wall_s_before_writing", "resumed_from"})


@pytest.mark.slow
def test_a_bench_killed_midway_keeps_what_it_finished_and_resume_equals_the_uninterrupted_bench(
        tmp_path: Path, shared_data: Path) -> None:
    """SIGKILL once the first strategies are kept: results.partial.json holds them whole; a plain rerun is refused
    naming --resume, a resume with other options names them, and --resume ends with the figures of a bench that
    was never interrupted (timings aside), running only what was missing."""
    argv = [*KILLED, "--data", str(shared_data)]
    whole = tmp_path / "whole"
    assert _nas(*argv, "--out", str(whole)).returncode == 0
    assert not (whole / PARTIAL).exists()  # results.json holds everything; the partial file is gone

    cut = tmp_path / "cut"
    proc = subprocess.Popen([sys.executable, "-m", "hwnas.cli", *argv, "--out", str(cut)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = cut / PARTIAL
    deadline = time.monotonic() + 240
    while not partial.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert partial.exists() and not (cut / "results.json").exists(), "the kill came after the bench ended"
    kept = json.loads(partial.read_text())  # whole: written atomically
    assert kept["accuracy"]["cifar10"]["runs"]["random"]

    refused = _nas(*argv, "--out", str(cut))
    assert refused.returncode == 2 and "--resume" in refused.stderr and "Traceback" not in refused.stderr
    other = _nas(*[("2" if a == "3" else a) for a in argv], "--out", str(cut), "--resume")
    assert other.returncode == 2 and "seeds: 3 then, 2 now" in other.stderr and "Traceback" not in other.stderr
    assert partial.read_bytes() == json.dumps(kept, indent=1).encode() + b"\n"  # refusals touch nothing

    resumed = _nas(*argv, "--out", str(cut), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "reused from the interrupted bench" in resumed.stdout
    assert not partial.exists()
    a = json.loads((whole / "results.json").read_text())
    b = json.loads((cut / "results.json").read_text())
    assert b["resumed_from"]["created"] == kept["created"]
    assert _figures(b) == _figures(a)


def test_resume_without_an_interrupted_bench_is_one_clear_error(tmp_path: Path, shared_data: Path) -> None:
    from hwnas.cli.bench import cmd_bench

    argv = [*QUICK, "--fbnet-devices=", "--data", str(shared_data), "--out", str(tmp_path / "none"), "--quiet"]
    with pytest.raises(ConfigError, match=r"--resume: no interrupted bench in .*results\.partial\.json"):
        cmd_bench(_args([*argv, "--resume"]))
    assert not (tmp_path / "none").exists()
    assert cmd_bench(_args(argv)) == 0
    with pytest.raises(ConfigError, match=r"--resume: the bench in .* finished \(results\.json\)"):
        cmd_bench(_args([*argv, "--resume"]))
    with pytest.raises(SystemExit):  # argparse: --force and --resume are exclusive
        _args([*argv, "--resume", "--force"])
