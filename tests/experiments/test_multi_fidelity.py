"""Multi-fidelity search inside a run (``multi_fidelity:``): the schedule refused at validate with its key and line,
the promotion order on a hand-made set, every rung journaled, resume after a stop equal to an uninterrupted run,
and the process executor running each rung's stage in its workers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.experiments import run_experiment
from hwnas.experiments.config import load_experiment
from hwnas.objectives import Constraint, Objective, Trial, pareto_front, promotion_order

from .conftest import TINY_SPACE

NB201 = """\
name: mf
seed: 1
space: {{name: nb201}}
evaluators:
  - name: benchmark
    params:
      table: {data}/hw-nas-bench/nb201_cifar10_latency.csv
      columns: {{"latency_ms@pixel3": pixel3_latency}}
  - name: benchmark
    params:
      table: {data}/nas-bench-201/nb201_accuracy.csv
      columns: {{top1: cifar10_valid_12ep}}
      cheap: {cheap}
objectives:
  - {{metric: top1, direction: max}}
  - {{metric: "latency_ms@pixel3", direction: min}}
constraints:
  - {{metric: "latency_ms@pixel3", max: 14}}
strategy: {{name: evolution, params: {{population_size: 12, sample_size: 4}}}}
budget: {{batch_size: 8}}
multi_fidelity:
  evaluator: 1
  rungs:
    - {{fidelity: {{top1: cifar100_valid_12ep}}, cost: 1}}
    - {{fidelity: imagenet16_valid_12ep, cost: 4}}
    - {{fidelity: cifar10_valid_12ep, cost: 12}}
  promote: {promote}
  budget: {budget}
executor: {executor}
export: {{enabled: false}}
output: {{root: {root}}}
"""


def _nb201(tmp_path: Path, data: Path, *, cheap: str = "false", promote: str = "0.5", budget: str = "400",
           executor: str = "{name: local}", name: str = "mf.yaml", **replace: str) -> Path:
    text = NB201.format(data=data, cheap=cheap, promote=promote, budget=budget, executor=executor,
                        root=tmp_path / "runs")
    for old, new in replace.items():
        assert old.replace("_", " ") in text or old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def _lines(run_dir: Path) -> list[dict]:
    """The journal, each line without its wall time, in (number, rung) order (completion order differs)."""
    out = []
    for line in (run_dir / "trials.jsonl").read_text().splitlines():
        d = json.loads(line)
        d.pop("cost_s")
        out.append(d)
    return sorted(out, key=lambda d: (d["number"], d["rung"]))


# -- the schedule at validate ------------------------------------------------------------------------------------


def _problems(path: Path) -> str:
    with pytest.raises(ConfigError) as exc:
        load_experiment(path)
    return str(exc.value)


def test_a_schedule_that_does_not_fit_is_refused_with_its_key_and_line(tmp_path, shared_data):
    budget = _problems(_nb201(tmp_path, shared_data, budget="20"))
    # one bracket: 8 x 1 + 4 x 4 + 2 x 12 = 48 > 20
    assert "mf.yaml:28: multi_fidelity.budget: 20 epochs does not pay for one bracket" in budget
    assert "8 x 1 + 4 x 4 + 2 x 12 = 48 epochs" in budget


@pytest.mark.parametrize("promote", ["0", "1", "1.5", "-0.2"])
def test_a_promotion_fraction_outside_0_1_is_refused(tmp_path, shared_data, promote):
    text = _problems(_nb201(tmp_path, shared_data, promote=promote))
    assert "mf.yaml:27: multi_fidelity.promote:" in text and "is not a fraction in (0, 1)" in text


def test_rungs_out_of_order_are_refused(tmp_path, shared_data):
    text = _problems(_nb201(tmp_path, shared_data, **{"cost: 4}": "cost: 0.5}"}))
    assert "multi_fidelity.rungs: " in text and "rungs[1].cost (0.5) is not above rungs[0].cost (1)" in text
    train = _problems(_train(tmp_path, rungs="[{fidelity: 3, cost: 1}, {fidelity: 2, cost: 2}]"))
    assert "rungs[1].fidelity (2) is not above rungs[0].fidelity (3)" in train


def test_a_fidelity_the_evaluator_does_not_offer_is_refused(tmp_path, shared_data):
    column = _problems(_nb201(tmp_path, shared_data, imagenet16_valid_12ep="cifar10_valid_3ep"))
    assert "mf.yaml:25: multi_fidelity.rungs[1].fidelity: benchmark: fidelity of metric 'top1': column " \
           "'cifar10_valid_3ep' is not in" in column
    lookup = _problems(_nb201(tmp_path, shared_data, **{"evaluator: 1": "evaluator: 0"}))
    assert "multi_fidelity.rungs[0].fidelity: benchmark: a fidelity sets metric 'top1', which it does not " \
           "provide" in lookup
    none = _problems(_train(tmp_path, evaluator="0"))
    assert "multi_fidelity.evaluator: evaluators[0] (complexity) offers no fidelities" in none
    epochs = _problems(_train(tmp_path, rungs="[{fidelity: 0.5, cost: 1}, {fidelity: 2, cost: 2}]"))
    assert "multi_fidelity.rungs[0].fidelity: train offers training epochs (a whole number, at least 1) as its " \
           "fidelity, not 0.5" in epochs


def test_budget_trials_follow_from_the_cost_budget(tmp_path, shared_data):
    exp = load_experiment(_nb201(tmp_path, shared_data))
    assert exp.config.budget.trials == 8 * 8  # 400 // 48 = 8 brackets of 8
    trials = {"budget: {batch_size: 8}": "budget: {batch_size: 8, trials: 9}"}
    wrong = _problems(_nb201(tmp_path, shared_data, **trials))
    assert "multi_fidelity.budget (8 brackets of 8: 64), not 9; leave budget.trials out" in wrong


def test_a_dict_or_typed_config_whose_trials_contradict_the_cost_budget_is_refused_by_key_path(tmp_path,
                                                                                               shared_data):
    """As the YAML file is: a dict, an ExperimentConfig (through create_run), and a config built without its
    source (build(cfg)), each named by the key path; nothing is written."""
    import yaml

    import hwnas
    from hwnas.experiments.config import ExperimentConfig, build
    from hwnas.experiments.config.schema import BudgetConfig

    data = yaml.safe_load(_nb201(tmp_path, shared_data).read_text())
    wrong = "budget.trials: with multi_fidelity the candidates follow from multi_fidelity.budget (8 brackets of 8: " \
            "64), not 9; leave budget.trials out"
    as_dict = {**data, "budget": {"batch_size": 8, "trials": 9}}
    with pytest.raises(ConfigError) as exc:
        hwnas.create_run(as_dict, run_dir=tmp_path / "dict")
    assert exc.value.problems == [f"config: {wrong} (a typed BudgetConfig: give that number)"]
    typed = ExperimentConfig.model_validate(data)
    assert typed.budget.trials == 64  # left out: filled in
    typed = typed.model_copy(update={"budget": BudgetConfig(trials=9, batch_size=8)})
    with pytest.raises(ConfigError, match=r"^config \(ExperimentConfig\): budget\.trials: with multi_fidelity .* 9"):
        hwnas.create_run(typed, run_dir=tmp_path / "typed")
    with pytest.raises(ConfigError, match=r"^budget\.trials: with multi_fidelity .* \(8 brackets of 8: 64\), not 9"):
        build(typed)  # no source to locate it by: the key path alone
    assert not (tmp_path / "dict").exists() and not (tmp_path / "typed").exists()
    # the right number, given, is accepted by each
    right = typed.model_copy(update={"budget": BudgetConfig(trials=64, batch_size=8)})
    assert build(right).config.budget.trials == 64
    assert hwnas.create_run({**data, "budget": {"batch_size": 8, "trials": 64}}, run_dir=tmp_path / "ok").budget == 64


# -- promotion ---------------------------------------------------------------------------------------------------


def _t(number: int, top1: float | None, lat: float, status: str = "ok") -> Trial:
    metrics = {"lat_ms": lat} if top1 is None else {"top1": top1, "lat_ms": lat}
    return Trial(number, Architecture("toy", {"g": number}), metrics, status)  # type: ignore[arg-type]


def test_promotion_is_feasible_first_then_rank_then_hypervolume_contribution():
    objectives = [Objective("top1", "max"), Objective("lat_ms", "min")]
    constraints = [Constraint("lat_ms", max=10.0)]
    trials = [
        _t(0, 70, 2),   # front 1: an end
        _t(1, 80, 5),   # front 1: in the middle, little of its own
        _t(2, 81, 6),   # front 1: in the middle, a sliver
        _t(3, 90, 9),   # front 1: the other end
        _t(4, 60, 4),   # front 2 (dominated by 1)
        _t(5, 85, 9.5),  # front 2 (dominated by 3)
        _t(6, 99, 12, "infeasible"),  # over the bound by 2
        _t(7, 95, 11, "infeasible"),  # over by 1
        _t(8, None, 3, "failed"),
    ]
    order = [t.number for t in promotion_order(trials, objectives, constraints)]
    assert set(order[:4]) == {0, 1, 2, 3} and set(order[4:6]) == {4, 5}
    assert order[6:] == [7, 6, 8]
    # within the first front: the two ends hold most of the hypervolume (the box extends a tenth of the range past
    # the worst values), the middle point 2 adds only a sliver (it sits just past point 1)
    assert order.index(2) == 3
    # and the order is that of the contributions, computed here independently of promotion_order
    from hwnas.objectives import hypervolume, objective_matrix

    pts = objective_matrix(trials[:6], objectives)
    ref = pts.max(axis=0) + 0.1 * (pts.max(axis=0) - pts.min(axis=0)) + 1e-9 * (1 + abs(pts.max(axis=0)))
    front = pts[:4]
    whole = hypervolume(front, ref)
    gains = {i: whole - hypervolume(front[[j for j in range(4) if j != i]], ref) for i in range(4)}
    assert order[:4] == sorted(gains, key=lambda i: (-gains[i], i))
    # a single objective: best value first
    single = promotion_order(trials[:6], [Objective("top1", "max")])
    assert [t.number for t in single] == [3, 5, 2, 1, 0, 4]


def test_the_front_holds_top_rung_trials_only():
    arch = Architecture("toy", {"g": 1})
    low = Trial(0, arch, {"top1": 99.0, "lat_ms": 1.0}, rung=0, rungs=2, rung_cost=1.0)
    top = Trial(1, Architecture("toy", {"g": 2}), {"top1": 50.0, "lat_ms": 5.0}, rung=1, rungs=2, rung_cost=12.0)
    objectives = [Objective("top1", "max"), Objective("lat_ms", "min")]
    assert pareto_front([low, top], objectives) == [top]
    assert low.partial and not top.partial
    again = Trial.from_dict(json.loads(top.to_json()))
    assert (again.rung, again.rungs, again.rung_cost) == (1, 2, 12.0)


# -- a run ---------------------------------------------------------------------------------------------------------


def test_a_run_promotes_by_the_schedule_and_journals_every_rung(tmp_path, shared_data):
    res = run_experiment(_nb201(tmp_path, shared_data))
    lines = _lines(res.run_dir)
    per_rung = [sum(d["rung"] == r for d in lines) for r in range(3)]
    # 8 brackets of 8 candidates; at most ceil(8 x 0.5) = 4 of each bracket reach rung 1, 2 reach rung 2 (fewer when
    # the latency bound leaves fewer feasible ones to promote)
    assert per_rung[0] == 64 and 0 < per_rung[1] <= 32 and 0 < per_rung[2] <= 16
    assert all(d["rungs"] == 3 and d["rung_cost"] == (1, 4, 12)[d["rung"]] for d in lines)
    cost = sum(d["rung_cost"] for d in lines)
    assert cost <= 400
    summary = json.loads((res.run_dir / "summary.json").read_text())
    mf = summary["multi_fidelity"]
    assert [r["evaluated"] for r in mf["rungs"]] == per_rung and mf["cost"] == cost and mf["unit"] == "epochs"
    assert summary["trials"]["ok"] + summary["trials"]["infeasible"] + summary["trials"]["failed"] == 64
    # only feasible candidates are promoted, and a promoted one kept its latency and got the next rung's top1
    by_key = {(d["number"], d["rung"]): d for d in lines}
    table = _column(shared_data, ("cifar100_valid_12ep", "imagenet16_valid_12ep", "cifar10_valid_12ep"))
    for (number, rung), d in by_key.items():
        if d["status"] == "infeasible" and rung == 0:  # over the latency bound: never scored for top1
            assert "top1" not in d["metrics"]
            continue
        assert math.isclose(d["metrics"]["top1"], table(d["arch"])[rung], rel_tol=1e-12)
        if rung:
            below = by_key[(number, rung - 1)]
            assert below["status"] == "ok"
            assert d["metrics"]["latency_ms@pixel3"] == below["metrics"]["latency_ms@pixel3"]
    # the front: top-rung trials only, with the 12-epoch CIFAR-10 validation accuracy
    front = json.loads((res.run_dir / "pareto.json").read_text())["front"]
    assert front and all(t["rung"] == 2 for t in front)
    top = {d["arch_id"] for d in lines if d["rung"] == 2 and d["status"] == "ok"}
    assert {t["arch_id"] for t in front} <= top


def _column(data: Path, columns: tuple[str, ...]):
    """A journal line's arch -> the columns of its NB201 row (through the space's string form, as the evaluator
    reads it)."""
    import csv

    from hwnas.search_spaces import SPACES

    space = SPACES.create("nb201", {"merge_isomorphic": False})
    with open(data / "nas-bench-201" / "nb201_accuracy.csv", newline="") as f:
        rows = {r["arch_str"]: tuple(float(r[c]) for c in columns) for r in csv.DictReader(f)}
    return lambda arch_dict: rows[space.to_str(Architecture.from_dict(arch_dict))]


@pytest.mark.parametrize("cut", [5, 23, 61, 100])
def test_resume_after_a_stop_equals_the_uninterrupted_run(tmp_path, shared_data, cut):
    """The journal cut after ``cut`` lines (mid-bracket, and between a bracket's rungs): the resumed run evaluates
    nothing journaled again and ends with the same journal as a run never stopped."""
    path = _nb201(tmp_path, shared_data)
    full = run_experiment(path, run_dir=tmp_path / "full")
    stopped = tmp_path / "stopped"
    run_experiment(path, run_dir=stopped)
    lines = (stopped / "trials.jsonl").read_text().splitlines(keepends=True)
    (stopped / "trials.jsonl").write_text("".join(lines[:cut]) + lines[cut][:40])  # and a torn line
    resumed = run_experiment(resume=stopped)
    assert resumed.reused == cut and resumed.evaluated == len(lines) - cut
    assert _lines(stopped) == _lines(full.run_dir)
    def front(run_dir: Path) -> list[tuple[str, dict]]:
        return [(t["arch_id"], t["metrics"]) for t in json.loads((run_dir / "pareto.json").read_text())["front"]]

    assert front(stopped) == front(full.run_dir)


# -- extending the cost budget -----------------------------------------------------------------------------------


def _raw(run_dir: Path) -> list[dict]:
    """The journal in its own order, each line without its wall time."""
    out = []
    for line in (run_dir / "trials.jsonl").read_text().splitlines():
        d = json.loads(line)
        d.pop("cost_s")
        out.append(d)
    return out


def test_extending_the_cost_budget_equals_a_fresh_run_with_the_larger_one(tmp_path, shared_data):
    """200 -> 300 on the command line's path, then 300 -> 400 through the Study: the journal's lines are never
    rewritten, nothing journaled is evaluated again, and the trials (every rung's) are those of a fresh 400 run."""
    import hwnas

    path = _nb201(tmp_path, shared_data, budget="200")
    first = run_experiment(path, run_dir=tmp_path / "ext")
    run = first.run_dir
    before = (run / "trials.jsonl").read_text()
    n200 = len(before.splitlines())
    second = run_experiment(resume=run, overrides=["multi_fidelity.budget=300"])  # nas run --resume --set ...
    after = (run / "trials.jsonl").read_text()
    assert after.startswith(before)  # the first lines byte for byte
    n300 = len(after.splitlines())
    assert (second.reused, second.evaluated) == (n200, n300 - n200) and n300 > n200
    study = hwnas.load_run(run)
    assert (study.cost_budget, study.budget) == (300, 48)  # 300 // 48 = 6 brackets of 8
    third = study.optimize(cost_budget=400, show_progress=False)
    assert (run / "trials.jsonl").read_text().startswith(after)
    n400 = len((run / "trials.jsonl").read_text().splitlines())
    assert (third.reused, third.evaluated) == (n300, n400 - n300)
    assert (study.cost_budget, study.budget) == (400, 64)

    fresh = run_experiment(path, overrides=["multi_fidelity.budget=400"], run_dir=tmp_path / "fresh")
    assert _raw(run) == _raw(fresh.run_dir)  # line for line, in the same order
    def front(run_dir: Path) -> list[tuple[int, str, dict]]:
        return [(t["number"], t["arch_id"], t["metrics"])
                for t in json.loads((run_dir / "pareto.json").read_text())["front"]]

    assert front(run) == front(fresh.run_dir)
    record = json.loads((run / "run.json").read_text())
    assert [(e["trials_before"], e["trials_after"], e["cost_budget_before"], e["cost_budget_after"])
            for e in record["extensions"]] == [(32, 48, 200, 300), (48, 64, 300, 400)]
    summary = json.loads((run / "summary.json").read_text())["multi_fidelity"]
    assert summary == json.loads((fresh.run_dir / "summary.json").read_text())["multi_fidelity"]


def test_a_smaller_cost_budget_or_another_change_of_the_schedule_is_refused_naming_the_key(tmp_path, shared_data):
    import hwnas
    from hwnas.errors import RunDirectoryError

    run = run_experiment(_nb201(tmp_path, shared_data, budget="200"), run_dir=tmp_path / "run").run_dir
    before = (run / "trials.jsonl").read_text()
    with pytest.raises(RunDirectoryError, match=r"multi_fidelity\.budget: 100 is smaller than the run's budget of "
                                                 r"200; a resume may only raise the budget"):
        run_experiment(resume=run, overrides=["multi_fidelity.budget=100"])
    with pytest.raises(ConfigError, match=r"--set budget\.trials: a multi-fidelity run's trials follow from its "
                                          r"multi_fidelity\.budget \(200 epochs: 32 trials\); extend it with --set "
                                          r"multi_fidelity\.budget=X"):
        run_experiment(resume=run, overrides=["budget.trials=40"])
    for change, key in (("multi_fidelity.promote=0.25", "multi_fidelity.promote"),
                        ("multi_fidelity.rungs.2.cost=16", r"multi_fidelity\.rungs\[2\]\.cost"),
                        ("budget.batch_size=4", r"budget\.batch_size")):
        with pytest.raises(ConfigError, match=rf"except to raise multi_fidelity\.budget \(it changes {key}\)"):
            run_experiment(resume=run, overrides=["multi_fidelity.budget=400", change])
    study = hwnas.load_run(run)
    with pytest.raises(ConfigError, match=r"cost_budget: 150 is smaller than the run's multi_fidelity\.budget of 200"):
        study.optimize(cost_budget=150)
    with pytest.raises(ConfigError, match=r"n_trials: a multi-fidelity run's trials follow from its cost budget "
                                          r"\(multi_fidelity\.budget = 200: 32 trials\); extend it with "
                                          r"optimize\(cost_budget=X\)"):
        study.optimize(n_trials=8)
    with pytest.raises(ConfigError, match="budget: a multi-fidelity run's trials follow"):
        study.optimize(budget=40)
    with pytest.raises(ConfigError, match=r"cost_budget: a positive number, not 'x'"):
        study.optimize(cost_budget="x")  # type: ignore[arg-type]
    assert (run / "trials.jsonl").read_text() == before
    assert yaml_budget(run) == (32, 200)


def yaml_budget(run: Path) -> tuple[int, float]:
    import yaml

    cfg = yaml.safe_load((run / "config.yaml").read_text())
    return cfg["budget"]["trials"], cfg["multi_fidelity"]["budget"]


def test_a_file_resume_extends_a_multi_fidelity_run_only_when_the_cost_budget_is_set(tmp_path, shared_data):
    from hwnas.errors import RunDirectoryError

    path = _nb201(tmp_path, shared_data, budget="200")
    run = run_experiment(path)
    extended = run_experiment(resume=path, overrides=["multi_fidelity.budget=300"])  # nas run --resume FILE --set
    assert extended.run_dir == run.run_dir and extended.reused == len(run.trials) and yaml_budget(run.run_dir) == \
        (48, 300)
    with pytest.raises(RunDirectoryError, match=r"differs from this config at budget\.trials, multi_fidelity\.budget; "
                                                r".* --set multi_fidelity\.budget=X"):
        run_experiment(resume=path)  # the file's cost budget (200) is not the run's any more


def test_cost_budget_is_refused_for_a_run_without_multi_fidelity(tmp_path, shared_data):
    import hwnas
    from hwnas.testing.experiments import nb201_benchmark_yaml

    path = tmp_path / "plain.yaml"
    path.write_text(nb201_benchmark_yaml(shared_data, trials=8))
    study = hwnas.create_run(path, run_dir=tmp_path / "plain")
    with pytest.raises(ConfigError, match=r"cost_budget: .* has no multi_fidelity block; its budget is trials"):
        study.optimize(cost_budget=100)


@pytest.mark.slow
def test_sigkilled_at_random_moments_and_resumed_a_run_ends_with_the_uninterrupted_journal(tmp_path, shared_data):
    """A real ``nas run`` in its own process, SIGKILLed at 5 random moments (a first-rung evaluator that sleeps
    makes the run last a few seconds), resumed after each and once more at the end: the journal holds the lines of
    an uninterrupted run (wall times and line order aside), none twice."""
    import subprocess

    import numpy as np

    from .test_kill_and_race import NAS, journal_lines, kill_at_random_moments

    slow = "  - name: fake\n    params: {sleep_s: 0.6}\nobjectives:"  # about 0.3 s per candidate, first rung only
    exp = _nb201(tmp_path, shared_data, budget="200", **{"objectives:": slow})  # 4 brackets of 8
    reference, run = tmp_path / "reference", tmp_path / "run"
    subprocess.run([*NAS, "run", str(exp), "--quiet", "--run-dir", str(reference)], check=True, capture_output=True,
                   timeout=600)
    kills, early, finished = kill_at_random_moments(exp, run, kills=5, rng=np.random.default_rng(7),
                                                    window=(0.5, 2.5))
    subprocess.run([*NAS, "run", "--resume", str(run), "--quiet"], check=True, capture_output=True, timeout=600)

    def lines(run_dir: Path) -> list[str]:
        out = []
        for d in journal_lines(run_dir):
            d.pop("cost_s")
            out.append(json.dumps(d, sort_keys=True))
        return sorted(out)

    got, want = lines(run), lines(reference)
    torn = (run / "trials.jsonl.torn").read_text().splitlines() if (run / "trials.jsonl.torn").exists() else []
    print(f"kills {kills} (and {early} before the run folder existed), finished before a kill {finished}, torn "
          f"lines set aside {len(torn)}, journal {len(got)} lines")
    assert kills == 5 or finished
    keys = [(d["number"], d["rung"]) for d in journal_lines(run)]
    assert len(keys) == len(set(keys)), "a rung of a trial was evaluated twice"
    assert got == want and {d["rung"] for d in journal_lines(run)} == {0, 1, 2}


def test_report_and_export_show_top_rung_trials_only_and_the_counts_per_rung(tmp_path, shared_data, capsys):
    """nas report (table, --all, --html) and nas export of a multi-fidelity run: the front and the exported models
    are top-rung trials, --top-k picks among top-rung trials only, and the counts per rung are printed."""
    import re

    from hwnas.cli import main

    run = run_experiment(_nb201(tmp_path, shared_data, budget="200"), run_dir=tmp_path / "run").run_dir
    lines = _lines(run)
    per_rung = [sum(d["rung"] == r for d in lines) for r in range(3)]
    cost = [sum(d["rung_cost"] for d in lines if d["rung"] == r) for r in range(3)]
    top = {d["number"] for d in lines if d["rung"] == 2}
    capsys.readouterr()

    assert main(["report", str(run)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps at the console's width
    counts = ", ".join(f"rung {r}: {per_rung[r]} ({cost[r]:g})" for r in range(3))
    assert f"multi-fidelity: {counts}; {sum(cost):g} epochs spent in all; the front is of the top rung only" in out
    assert "32 trials: " in out  # candidates, each once (the journal has more lines)
    shown = [int(n) for n in re.findall(r"│\s*(\d+) │ [0-9a-f]{16} │", out)]
    assert shown and set(shown) <= top and out.count(" 2 top ") == len(shown)

    assert main(["report", str(run), "--all"]) == 0
    every = capsys.readouterr().out
    assert len(re.findall(r"│\s*\d+ │ [0-9a-f]{16} │", every)) == len(lines)  # a row per rung evaluation

    assert main(["report", str(run), "--html", "--out", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert "32 of a budget of 32:" in " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert counts in page and 'data-key="rung"' in page
    ids = re.findall(r'<tr[^>]* id="(t-[^"]+)"', page)
    assert len(ids) == len(set(ids)) == len(lines)  # a row per line, each id once (a plot click finds one row)

    # nas export: the front's models, all top-rung; --top-k by latency picks among top-rung trials only, though a
    # candidate left at a lower rung has a lower latency
    out_dir = tmp_path / "front"
    assert main(["export", str(run), "--formats", "onnx", "--random-init", "--no-measure", "--no-simplify",
                 "--out", str(out_dir)]) == 0
    front = {t["arch_id"] for t in json.loads((run / "pareto.json").read_text())["front"]}
    written = {p.stem for p in out_dir.glob("*.onnx")}
    assert written == front and {json.loads((out_dir / f"{a}.json").read_text())["trial"] for a in written} <= top
    lat = "latency_ms@pixel3"
    fastest = sorted((d for d in lines if d["status"] == "ok" and d["rung"] == 2), key=lambda d: d["metrics"][lat])
    lower = [d for d in lines if d["status"] == "ok" and d["number"] not in top]
    assert min(d["metrics"][lat] for d in lower) < fastest[2]["metrics"][lat]  # so the test can fail
    k3 = tmp_path / "k3"
    assert main(["export", str(run), "--top-k", "3", "--by", lat, "--formats", "onnx", "--random-init",
                 "--no-measure", "--no-simplify", "--out", str(k3)]) == 0
    assert {p.stem for p in k3.glob("*.onnx")} == {d["arch_id"] for d in fastest[:3]}


@pytest.mark.slow
def test_the_process_executor_runs_each_rung_in_its_workers_and_equals_local(tmp_path, shared_data):
    local = run_experiment(_nb201(tmp_path, shared_data), run_dir=tmp_path / "local")
    proc = run_experiment(_nb201(tmp_path, shared_data, executor="{name: process, workers: 2}", name="p.yaml"),
                          run_dir=tmp_path / "proc")
    assert _lines(proc.run_dir) == _lines(local.run_dir)


TRAIN = """\
name: mftrain
seed: 3
""" + TINY_SPACE + """\
dataset: {name: digits, max_images: 240}
evaluators:
  - name: complexity
  - name: train
    params: {batch_size: 32, save_weights: false}
objectives:
  - {metric: top1, direction: max}
  - {metric: flops_m, direction: min}
strategy: {name: random}
budget: {batch_size: 4}
multi_fidelity:
  evaluator: EVALUATOR
  rungs: RUNGS
  promote: 0.5
  budget: 16
executor: EXECUTOR
export: {enabled: false}
output: {root: ROOT}
"""


def _train(tmp_path: Path, *, evaluator: str = "1", rungs: str = "[{fidelity: 1, cost: 1}, {fidelity: 2, cost: 2}]",
           executor: str = "{name: local}") -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(TRAIN.replace("EVALUATOR", evaluator).replace("RUNGS", rungs).replace("EXECUTOR", executor)
                    .replace("ROOT", str(tmp_path / "runs")))
    return path


@pytest.mark.slow
def test_epochs_as_the_fidelity_of_real_training_through_the_process_executor(tmp_path):
    """Digits, two rungs (1 and 2 epochs), 2 brackets of 4: trained in worker processes, each rung at its epochs;
    the same journal as the local executor's."""
    proc = run_experiment(_train(tmp_path, executor="{name: process, workers: 2}"), run_dir=tmp_path / "proc")
    lines = _lines(proc.run_dir)
    assert [sum(d["rung"] == r for d in lines) for r in (0, 1)] == [8, 4]
    assert sum(d["rung_cost"] for d in lines) == 16
    # one torch thread, as each worker has (process executor's threads: 1): more threads sum in another order
    local = run_experiment(_train(tmp_path, executor="{name: local, threads: 1}"), run_dir=tmp_path / "local")
    assert _lines(local.run_dir) == lines
    # two epochs are not one: the promoted candidates' top-1 changed between the rungs
    by_key = {(d["number"], d["rung"]): d["metrics"]["top1"] for d in lines}
    assert any(by_key[(n, 1)] != by_key[(n, 0)] for n, r in by_key if r == 1)


def test_the_example_file_validates_with_the_schedule_it_describes():
    exp = load_experiment(Path(__file__).resolve().parents[2] / "experiments" / "multi_fidelity_digits.yaml")
    mf = exp.config.multi_fidelity
    assert mf is not None and exp.fidelity_index == 1
    assert mf.bracket_counts(12) == [12, 3, 1] and mf.bracket_cost(12) == 27 and exp.config.budget.trials == 96
    assert [ev.recipe.epochs for ev, _ in exp.rung_evaluators] == [1, 3, 6]
