"""The Python API of a run (issue 46): configs from Python, the study handle, extending a run's budget (Python and
CLI), callbacks, the trials' dataframe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import hwnas
from hwnas.errors import ConfigError, RunDirectoryError
from hwnas.experiments import run_experiment
from hwnas.experiments.callbacks import CallbackError
from hwnas.experiments.config import ExperimentConfig
from hwnas.experiments.report.summary import RunSummary
from hwnas.testing import scores
from hwnas.testing.experiments import nb201_benchmark_yaml

REPO = Path(__file__).resolve().parents[2]


def config(shared: Path, root: Path, *, trials: int = 30, name: str = "api", counted: bool = False,
           batch_size: int = 7) -> dict[str, Any]:
    """An NB201 search priced by the published tables (deterministic metrics), evolution (its proposals depend on
    what it was told), a batch size that does not divide the budgets (the last batch is cut short)."""
    cfg: dict[str, Any] = yaml.safe_load(nb201_benchmark_yaml(
        shared, name=name, strategy="evolution", params={"population_size": 8, "sample_size": 4}, trials=trials,
        batch_size=batch_size))
    cfg["objectives"][1]["reference"] = 40.0
    if counted:
        cfg["evaluators"].append({"name": "function", "params": {"callable": scores.counted,
                                                                 "provides": ["gene_sum", "nonzero"]}})
    cfg["output"] = {"root": str(root)}
    return cfg


def journal(run_dir: Path) -> bytes:
    return (run_dir / "trials.jsonl").read_bytes()


def without_costs(run_dir: Path) -> list[str]:
    """The journal's lines without their measured cost (seconds differ between runs; everything else must not)."""
    return [json.dumps({k: v for k, v in json.loads(line).items() if k != "cost_s"}, sort_keys=True)
            for line in journal(run_dir).decode().splitlines()]


# -- configuration from Python ---------------------------------------------------------------------------------


def test_a_dict_a_model_and_a_file_give_the_same_resolved_config(shared_data, tmp_path):
    cfg = config(shared_data, tmp_path, trials=5)
    from_dict = hwnas.create_run(cfg, run_dir=tmp_path / "dict")
    from_model = hwnas.create_run(ExperimentConfig.model_validate(cfg), run_dir=tmp_path / "model")
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(cfg))
    from_file = hwnas.create_run(tmp_path / "exp.yaml", run_dir=tmp_path / "file")
    texts = {(s.run_dir / "config.yaml").read_text() for s in (from_dict, from_model, from_file)}
    assert len(texts) == 1
    assert cfg["budget"]["trials"] == 5  # the caller's dict is not modified


@pytest.mark.parametrize("edit,expected", [
    (lambda c: c["budget"].update(trials="many"), r"^config: budget\.trials: Input should be a valid integer"),
    (lambda c: c["budget"].update(trails=3), r"^config: budget\.trails: unknown key; did you mean 'trials'\?"),
    (lambda c: c["evaluators"][0]["params"].update(colums={}),
     r"^config: evaluators\[0\]\.params\.colums: unknown key; did you mean 'columns'\?"),
    (lambda c: c.update(seed=-1), r"^config: seed: Input should be greater than or equal to 0"),
])
def test_a_wrong_key_or_type_in_a_dict_is_one_error_naming_its_key_path(edit, expected, shared_data, tmp_path):
    cfg = config(shared_data, tmp_path)
    edit(cfg)
    with pytest.raises(ConfigError, match=expected) as info:
        hwnas.create_run(cfg)
    assert len(info.value.problems) == 1
    assert not (tmp_path / "api").exists()  # nothing written


def test_a_source_that_is_not_a_config_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="not a list"):
        hwnas.create_run([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="keys are strings"):
        hwnas.create_run({1: "x"})  # type: ignore[dict-item]


# -- the study handle and extending a run ----------------------------------------------------------------------


def test_extending_twice_reuses_the_journal_and_ends_where_a_fresh_run_of_that_budget_does(shared_data, tmp_path):
    scores.CALLS.clear()
    study = hwnas.create_run(config(shared_data, tmp_path, trials=30, counted=True), run_dir=tmp_path / "ext")
    first = study.optimize()
    assert (first.evaluated, first.reused, len(study.trials)) == (30, 0, 30)
    after_30 = journal(study.run_dir)
    second = study.optimize(n_trials=12)
    assert (second.evaluated, second.reused, study.budget) == (12, 30, 42)
    assert journal(study.run_dir).startswith(after_30)  # the first 30 lines byte for byte
    after_42 = journal(study.run_dir)
    third = study.optimize(budget=50)
    assert (third.evaluated, third.reused, len(study.trials)) == (8, 42, 50)
    assert journal(study.run_dir).startswith(after_42)
    assert set(scores.CALLS.values()) == {1}  # no architecture was scored twice

    fresh = run_experiment(config(shared_data, tmp_path, trials=50, counted=True), run_dir=tmp_path / "fresh")
    assert without_costs(study.run_dir) == without_costs(fresh.run_dir)  # the same trials, numbers, metrics
    assert [t.arch for t in study.best_trials] == [t.arch for t in fresh.front]

    record = json.loads((study.run_dir / "run.json").read_text())
    assert [(e["trials_before"], e["trials_after"]) for e in record["extensions"]] == [(30, 42), (42, 50)]
    assert yaml.safe_load((study.run_dir / "config.yaml").read_text())["budget"]["trials"] == 50
    summary = study.summary
    assert isinstance(summary, RunSummary) and summary.trials.total == 50
    assert summary.search is not None and summary.search.evaluated == 8 and summary.search.reused == 42


def test_load_run_picks_up_a_run_and_extends_it_in_another_process(shared_data, tmp_path):
    study = hwnas.create_run(config(shared_data, tmp_path, trials=20), run_dir=tmp_path / "run")
    study.optimize()
    code = ("import sys, hwnas; s = hwnas.load_run(sys.argv[1]); r = s.optimize(n_trials=9, show_progress=False); "
            "print(r.evaluated, r.reused, len(s.trials))")
    out = subprocess.run([sys.executable, "-c", code, str(study.run_dir)], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout.split()
    assert out == ["9", "20", "29"]
    fresh = run_experiment(config(shared_data, tmp_path, trials=29), run_dir=tmp_path / "fresh")
    assert without_costs(study.run_dir) == without_costs(fresh.run_dir)


def test_a_smaller_budget_or_another_change_is_refused_naming_it(shared_data, tmp_path):
    study = hwnas.create_run(config(shared_data, tmp_path, trials=10), run_dir=tmp_path / "run")
    study.optimize()
    before = journal(study.run_dir)
    with pytest.raises(ConfigError, match="budget: 8 is smaller than the run's budget of 10"):
        study.optimize(budget=8)
    with pytest.raises(ConfigError, match="n_trials: a positive number of trials, not 0"):
        study.optimize(n_trials=0)
    with pytest.raises(RunDirectoryError, match=r"budget\.trials: 8 is smaller than the run's budget of 10"):
        run_experiment(resume=study.run_dir, overrides=["budget.trials=8"])
    with pytest.raises(ConfigError, match=r"except to raise budget\.trials \(it changes seed, strategy\.params"):
        run_experiment(resume=study.run_dir, overrides=["budget.trials=20", "seed=4",
                                                        "strategy.params.sample_size=2"])
    # a Python user is told the Python spelling too, not only the command line's
    with pytest.raises(RunDirectoryError, match=r"holds a run already; use --resume .* \(Python: hwnas\.load_run\("):
        hwnas.create_run(config(shared_data, tmp_path, trials=10), run_dir=study.run_dir)
    with pytest.raises(ConfigError, match=r"an override \(--set, or overrides= in Python\) cannot change a run"):
        run_experiment(resume=study.run_dir, overrides=["seed=4"])
    assert journal(study.run_dir) == before


def test_a_file_resume_extends_only_when_the_budget_is_set(shared_data, tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(config(shared_data, tmp_path / "runs", trials=10)))
    run = run_experiment(path)
    with pytest.raises(RunDirectoryError, match=r"differs from this config at budget\.trials"):
        run_experiment(resume=_bigger(path, 15))  # the file's budget differs: a resume, not an extension
    extended = run_experiment(resume=path, overrides=["budget.trials=15"])
    assert extended.run_dir == run.run_dir and (extended.evaluated, extended.reused) == (5, 10)


def _bigger(path: Path, trials: int) -> Path:
    cfg = yaml.safe_load(path.read_text())
    cfg["budget"]["trials"] = trials
    out = path.with_name("bigger.yaml")
    out.write_text(yaml.safe_dump(cfg))
    return out


def test_the_cli_extends_a_run_and_refuses_other_changes(shared_data, tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(config(shared_data, tmp_path / "runs", trials=10)))

    def nas(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hwnas.cli", *args], capture_output=True, text=True, cwd=REPO)

    assert nas("run", str(path), "--quiet", "--run-dir", str(tmp_path / "run")).returncode == 0
    before = journal(tmp_path / "run")
    done = nas("run", "--resume", str(tmp_path / "run"), "--set", "budget.trials=16", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "6 evaluated now, 10 reused from the journal" in " ".join(done.stdout.split())
    assert journal(tmp_path / "run").startswith(before) and len(journal(tmp_path / "run").splitlines()) == 16
    refused = nas("run", "--resume", str(tmp_path / "run"), "--set", "budget.trials=20", "--set", "seed=1")
    assert refused.returncode != 0 and "it changes seed" in refused.stderr
    smaller = nas("run", "--resume", str(tmp_path / "run"), "--set", "budget.trials=12")
    assert smaller.returncode != 0 and "12 is smaller than the run's budget of 16" in smaller.stderr
    assert nas("report", str(tmp_path / "run")).returncode == 0


def test_an_interrupted_extension_leaves_a_run_that_resumes(shared_data, tmp_path):
    """The record took the new budget but config.yaml was not rewritten (a crash between the two writes)."""
    study = hwnas.create_run(config(shared_data, tmp_path, trials=10), run_dir=tmp_path / "run")
    study.optimize()
    old = (study.run_dir / "config.yaml").read_text()
    study.optimize(n_trials=5)
    (study.run_dir / "config.yaml").write_text(old)  # as if the last write had not happened
    again = hwnas.load_run(study.run_dir).optimize(n_trials=2)  # 10 + 2: the journal's 15 stay, 12 are asked
    assert again.evaluated == 0 and len(again.trials) == 12


# -- callbacks -------------------------------------------------------------------------------------------------


def test_callbacks_see_each_new_trial_and_batch_and_can_stop_the_search(shared_data, tmp_path):
    study = hwnas.create_run(config(shared_data, tmp_path, trials=40), run_dir=tmp_path / "run")
    seen: list[int] = []
    batches: list[list[int]] = []

    def on_trial(s: Any, trial: Any) -> None:
        assert s is study and trial.number in {t.number for t in s.trials}  # the study sees it already
        seen.append(trial.number)
        if len(s.trials) >= 15:
            s.stop("15 trials are enough for now")

    result = study.optimize(callbacks=[on_trial], batch_callbacks=[lambda s, ts: batches.append(
        [t.number for t in ts])])
    assert seen == list(range(len(seen))) and 15 <= len(seen) < 15 + 7  # stopped after the batch in progress
    assert [n for b in batches for n in b] == seen
    assert result.stopped_early == "15 trials are enough for now"
    assert study.summary.stopped_early == "15 trials are enough for now"
    first = len(seen)
    rest = study.optimize(callbacks=[lambda s, t: seen.append(t.number)])
    assert (rest.reused, rest.evaluated) == (first, 40 - first)
    assert len(study.trials) == 40 and seen == list(range(40))  # each trial announced once
    fresh = run_experiment(config(shared_data, tmp_path, trials=40), run_dir=tmp_path / "fresh")
    assert without_costs(study.run_dir) == without_costs(fresh.run_dir)


def test_a_callback_that_raises_stops_the_run_cleanly_and_a_resume_continues(shared_data, tmp_path):
    study = hwnas.create_run(config(shared_data, tmp_path, trials=30), run_dir=tmp_path / "run")

    def picky(s: Any, trial: Any) -> None:
        if trial.number == 11:
            raise ValueError("trial 11 is not welcome")

    with pytest.raises(CallbackError, match=r"^callback (tests\.experiments\.)?test_study\.test_a_callback_that_"
                                            r"raises_stops_the_run_cleanly_and_a_resume_continues\.<locals>\.picky "
                                            r"raised ValueError: trial 11 is not welcome; the run stopped") as info:
        study.optimize(callbacks=[picky])
    assert info.value.run_dir == study.run_dir
    numbers = [json.loads(line)["number"] for line in journal(study.run_dir).splitlines()]
    assert numbers == list(range(12))  # every trial finished before it, and trial 11 itself, are journaled
    assert not (study.run_dir / ".lock").read_text()  # the lock is released
    resumed = study.optimize()
    assert (resumed.reused, resumed.evaluated) == (12, 18)
    fresh = run_experiment(config(shared_data, tmp_path, trials=30), run_dir=tmp_path / "fresh")
    assert without_costs(study.run_dir) == without_costs(fresh.run_dir)


def test_callback_objects_get_start_trial_batch_end_and_error(shared_data, tmp_path):
    events: list[str] = []

    class Recorder:
        def on_start(self, run: Any) -> None:
            events.append(f"start {run.budget}")

        def on_trial(self, run: Any, trial: Any) -> None:
            events.append("trial")

        def on_batch(self, run: Any, trials: Any) -> None:
            events.append(f"batch {len(trials)}")

        def on_end(self, run: Any, result: Any) -> None:
            events.append(f"end {len(result.trials)}")

        def on_error(self, run: Any, error: BaseException) -> None:
            events.append(f"error {type(error).__name__}")

    result = run_experiment(config(shared_data, tmp_path, trials=10), callbacks=[Recorder()])
    assert events == ["start 10", *["trial"] * 7, "batch 7", *["trial"] * 3, "batch 3", "end 10"]
    events.clear()
    boom = Recorder()
    boom.on_trial = lambda run, trial: (_ for _ in ()).throw(KeyError("x"))  # type: ignore[method-assign]
    with pytest.raises(CallbackError):
        run_experiment(resume=result.run_dir, overrides=["budget.trials=12"], callbacks=[boom])
    assert events == ["start 12", "error CallbackError"]


# -- the dataframe ---------------------------------------------------------------------------------------------


def test_trials_dataframe_has_a_row_per_trial_with_metrics_genes_status_and_timings(shared_data, tmp_path):
    pytest.importorskip("pandas")
    study = hwnas.create_run(config(shared_data, tmp_path, trials=12), run_dir=tmp_path / "run")
    study.optimize()
    df = study.trials_dataframe()
    trials = study.trials
    assert len(df) == 12 and list(df["number"]) == [t.number for t in trials]
    assert list(df.columns[:6]) == ["number", "arch_id", "status", "on_front", "cost_s", "error"]
    assert list(df["top1"]) == [t.metrics["top1"] for t in trials]
    assert list(df["latency_ms@pixel3"]) == [t.metrics["latency_ms@pixel3"] for t in trials]
    genes = [c for c in df.columns if c.startswith("gene.")]
    assert genes == sorted(f"gene.{g}" for g in trials[0].arch.genes)
    assert all(df.loc[k, f"gene.{g}"] == v for k, t in enumerate(trials) for g, v in t.arch.genes.items())
    assert set(df.loc[df["on_front"], "number"]) == {t.number for t in study.best_trials}
    assert (df["cost_s"] >= 0).all() and set(df["status"]) <= {"ok", "infeasible", "failed"}


def test_a_metric_named_like_a_column_of_the_dataframe_keeps_both(shared_data, tmp_path):
    pytest.importorskip("pandas")
    cfg = config(shared_data, tmp_path, trials=4)
    # a second column of the accuracy table under the names of two fixed columns and of a gene column
    cfg["evaluators"][1]["params"]["columns"].update({"status": "cifar10_valid_12ep", "number": "cifar100_valid_12ep",
                                                      "gene.edge": "imagenet16_valid_12ep"})
    study = hwnas.create_run(cfg, run_dir=tmp_path / "run")
    study.optimize()
    df = study.trials_dataframe()
    trials = study.trials
    assert list(df["status"]) == [t.status for t in trials] and list(df["number"]) == [t.number for t in trials]
    assert list(df["metric.status"]) == [t.metrics["status"] for t in trials]
    assert list(df["metric.number"]) == [t.metrics["number"] for t in trials]
    assert list(df["metric.gene.edge"]) == [t.metrics["gene.edge"] for t in trials]
    assert len(set(df.columns)) == len(df.columns)


def test_a_missing_optional_dependency_is_one_line_naming_the_extra(tmp_path):
    code = ("import sys; sys.modules['pandas'] = None; sys.modules['plotly'] = None\n"
            "from hwnas.extras import require, MissingExtra\n"
            "for mod, extra in (('pandas', 'pandas'), ('plotly.graph_objects', 'plotly')):\n"
            "    try: require(mod, extra, 'X')\n"
            "    except MissingExtra as e: print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.splitlines() == ['X needs pandas, which is not installed: pip install "hwnas[pandas]"',
                                'X needs plotly, which is not installed: pip install "hwnas[plotly]"']


def test_import_hwnas_stays_cheap_and_names_the_api():
    code = ("import sys, hwnas; heavy = sorted(m for m in ('torch', 'pydantic', 'yaml', 'pandas', 'plotly', 'mlflow', "
            "'sklearn', 'rich', 'hwnas.experiments') if m in sys.modules); print(heavy); "
            "print(all(getattr(hwnas, n).__doc__ for n in ('create_run', 'load_run', 'run_experiment', 'Study', "
            "'Architecture', 'ExperimentConfig', 'CallbackError')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split("\n")[:2] == ["[]", "True"]


def test_report_as_text_and_as_a_page_and_the_repr(shared_data, tmp_path):
    study = hwnas.create_run(config(shared_data, tmp_path, trials=8), run_dir=tmp_path / "run")
    assert repr(study) == f"Study({str(study.run_dir)!r}, budget=8, trials=0)"
    study.optimize()
    text = study.report()
    assert isinstance(text, str) and "Pareto front" in text and "8 trials: " in text
    page = study.report(html=True)
    assert page == study.run_dir / "report.html" and "<html" in Path(page).read_text()
    with pytest.raises(hwnas.HwnasError, match="stop\\(\\) stops a search in progress"):
        study.stop()


def test_an_optuna_search_extends_with_its_study_database(shared_data, tmp_path):
    """The Optuna strategy keeps RUN_DIR/optuna.db tied to the run's config hash: an extension changes the hash, and
    the study written under the earlier one is still the run's."""
    pytest.importorskip("optuna")
    cfg = config(shared_data, tmp_path, trials=12)
    cfg["strategy"] = {"name": "optuna", "params": {"sampler": "tpe"}}
    study = hwnas.create_run(cfg, run_dir=tmp_path / "run")
    study.optimize()
    extended = study.optimize(n_trials=6)
    assert (extended.evaluated, extended.reused) == (6, 12)
    study.optimize(n_trials=2)  # twice: the hash of the first extension is an earlier one too
    cfg["budget"]["trials"] = 20
    fresh = run_experiment(cfg, run_dir=tmp_path / "fresh")
    assert without_costs(study.run_dir) == without_costs(fresh.run_dir)
