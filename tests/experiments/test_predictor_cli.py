"""`nas predictor fit / evaluate`, the `predictor` evaluator in a real run, and `nas bench predictors`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hwnas.cli import main


@pytest.fixture()
def small_table(shared_data, tmp_path) -> Path:
    """The first 400 rows of NAS-Bench-201's accuracy table (a temporary copy, never committed)."""
    lines = (shared_data / "nas-bench-201" / "nb201_accuracy.csv").read_text().splitlines()[:401]
    path = tmp_path / "nb201_400.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _fit(table: Path, out: Path, *extra: str) -> int:
    return main(["predictor", "fit", "--table", str(table), "--space", "nb201", "--target", "cifar10_test_200ep",
                 "--predictor", "gbt", "--params", '{"n_estimators": 100}', "--features", "cell", "-o", str(out),
                 *extra])


def test_fit_records_how_it_was_judged_and_evaluate_reads_it(small_table, tmp_path, capsys):
    out = tmp_path / "gbt.json"
    assert _fit(small_table, out) == 0
    printed = capsys.readouterr().out
    assert "5-fold cross-validation: Kendall tau" in printed
    meta = json.loads(out.read_text())["meta"]
    assert meta["space"] == "nb201" and meta["features"] == "cell" and meta["n_features"] == 50
    assert meta["target"] == "cifar10_test_200ep" and meta["n_train"] == 400
    cv = meta["validation"]
    assert cv["folds"] == 5 and cv["n"] == 400
    assert 0.4 < cv["kendall_tau"] <= 1.0  # measured out of fold on real NAS-Bench-201 rows
    assert main(["predictor", "evaluate", str(out), "--table", str(small_table), "--space", "nb201"]) == 0
    assert "on 400 architectures (cifar10_test_200ep): Kendall tau" in capsys.readouterr().out
    # the same encoding of other networks (a wider stem): refused, naming the parameter
    assert main(["predictor", "evaluate", str(out), "--table", str(small_table), "--space", "nb201",
                 "--space-params", '{"channels": 32}']) == 2
    assert "fitted on nb201 networks with other parameters: channels 16 (this space has 32)" in \
        capsys.readouterr().err


def test_evaluate_saved_predictor_is_what_nas_predictor_evaluate_prints(small_table, tmp_path, capsys):
    from hwnas.errors import ConfigError
    from hwnas.experiments.runs import measured_data
    from hwnas.predictors.evaluate import evaluate_saved_predictor

    out = tmp_path / "gbt.json"
    assert _fit(small_table, out, "--folds", "0") == 0
    asked: list[str] = []

    def data_for(target: str):
        asked.append(target)
        return measured_data(target, table=small_table, space="nb201")

    ev = evaluate_saved_predictor(out, data_for)
    assert asked == ["cifar10_test_200ep"] and ev.target == "cifar10_test_200ep"  # the target it was fitted on
    assert ev.predictor == "gbt" and ev.features == "cell" and ev.n == ev.figures["n"] == 400
    capsys.readouterr()
    assert main(["predictor", "evaluate", str(out), "--table", str(small_table), "--space", "nb201"]) == 0
    assert (f"({ev.predictor} [{ev.features}]) on 400 architectures (cifar10_test_200ep): Kendall tau "
            f"{ev.figures['kendall_tau']:.3f}") in capsys.readouterr().out
    with pytest.raises(ConfigError, match=r"nb201_400\.csv is not JSON"):
        evaluate_saved_predictor(small_table, data_for)
    with pytest.raises(ConfigError, match=r"give either --run RUN_DIR \(repeatable\) or --table CSV"):
        measured_data("top1")
    assert len(asked) == 1  # a file that is not a predictor is refused before any data is read


def test_fit_refusals_leave_files_alone(small_table, tmp_path, capsys):
    out = tmp_path / "gbt.json"
    out.write_text("keep")
    assert _fit(small_table, out) == 2
    assert "exists; not replacing it" in capsys.readouterr().err
    assert out.read_text() == "keep"
    assert main(["predictor", "fit", "--table", str(small_table), "--space", "nb201", "--target", "nope",
                 "-o", str(tmp_path / "x.json")]) == 2
    assert "no column 'nope'" in capsys.readouterr().err
    assert main(["predictor", "fit", "--table", str(small_table), "--space", "fbnet", "--target",
                 "cifar10_test_200ep", "-o", str(tmp_path / "x.json")]) == 2
    assert f"{small_table}:2:" in capsys.readouterr().err
    tiny = tmp_path / "tiny.csv"
    tiny.write_text("\n".join(small_table.read_text().splitlines()[:6]) + "\n")
    assert main(["predictor", "fit", "--table", str(tiny), "--space", "nb201", "--target", "cifar10_test_200ep",
                 "--predictor", "gbt", "--folds", "0", "-o", str(tmp_path / "x.json")]) == 2
    assert "it needs at least 8" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def _experiment(tmp_path: Path, shared: Path, predictor: Path, space: str = "nb201") -> Path:
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(f"""
name: with_predictor
seed: 0
space: {{name: {space}}}
evaluators:
  - name: predictor
    params: {{file: "{predictor}", metric: top1_pred}}
  - name: benchmark
    params:
      table: "{shared / 'help-latency' / 'nb201_latency.csv'}"
      columns: {{"latency_ms@pixel3": pixel3}}
objectives:
  - {{metric: top1_pred, direction: max}}
  - {{metric: "latency_ms@pixel3", direction: min, reference: 40}}
strategy: {{name: random}}
budget: {{trials: 40, batch_size: 10}}
export: {{enabled: false}}
""")
    return cfg


def test_predictor_evaluator_in_a_run_and_resume(small_table, shared_data, tmp_path):
    from hwnas.experiments import run_experiment
    from hwnas.experiments.journal import read_trials
    from hwnas.predictors import featurize, load_predictor
    from hwnas.search_spaces import SPACES

    pred_file = tmp_path / "gbt.json"
    assert _fit(small_table, pred_file, "--folds", "0") == 0
    run_dir = tmp_path / "run"
    result = run_experiment(_experiment(tmp_path, shared_data, pred_file), run_dir=run_dir)
    trials = read_trials(run_dir)
    assert len(trials) == 40 and all(t.status == "ok" for t in trials)
    space = SPACES.create("nb201", {"merge_isomorphic": False})
    expected = load_predictor(pred_file).predict(featurize(space, [t.arch for t in trials], "cell"))
    np.testing.assert_allclose([t.metrics["top1_pred"] for t in trials], expected)
    assert result.front
    # a journal of predicted values is itself training data for `nas predictor fit --run`
    out = tmp_path / "from_run.json"
    assert main(["predictor", "fit", "--run", str(run_dir), "--target", "latency_ms@pixel3", "--predictor", "gbt",
                 "--params", '{"n_estimators": 50}', "--features", "cell", "--folds", "4", "-o", str(out)]) == 0
    meta = json.loads(out.read_text())["meta"]
    assert meta["n_train"] == 40 and meta["sources"] == [str(run_dir.resolve())]


def test_predictor_of_another_space_does_not_build(small_table, shared_data, tmp_path, capsys):
    pred_file = tmp_path / "gbt.json"
    assert _fit(small_table, pred_file, "--folds", "0") == 0
    cfg = _experiment(tmp_path, shared_data, pred_file, space="fbnet")
    assert main(["validate", str(cfg)]) == 2
    assert "fitted on space 'nb201', not 'fbnet'" in capsys.readouterr().err


def test_bench_predictors_reproduces_the_flops_baseline(shared_data, tmp_path, capsys):
    out = tmp_path / "bench"
    rc = main(["bench", "predictors", "--predictors", "gbt:cell", "--params", 'gbt:{"n_estimators": 60}',
               "--datasets", "cifar10", "--sizes", "50", "--seeds", "2", "--data", str(shared_data),
               "--out", str(out), "--quiet"])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    row = res["summary"]["cifar10"]["50"]
    # the published FLOPs baseline on NAS-Bench-201 CIFAR-10 is a Spearman rank correlation of about 0.75
    assert 0.70 < row["flops"]["spearman_rho"]["mean"] < 0.80
    assert row["gbt"]["kendall_tau"]["n"] == 2
    assert 0.3 < row["gbt"]["kendall_tau"]["mean"] < 1.0
    assert (out / "kendall_tau.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "kendall_tau" in printed and "top5_precision" in printed and "N train" in printed


def test_nb201_flops_depend_only_on_the_convolution_counts():
    """The bench counts FLOPs once per (1x1, 3x3) count pair; check that against whole networks counted directly."""
    from hwnas.bench.predictors import count_flops_m, nb201_cells, nb201_flops_m

    flops = nb201_flops_m()
    space, archs = nb201_cells()
    for code in np.random.default_rng(0).choice(len(archs), 4, replace=False):
        assert count_flops_m(space, archs[code]) == pytest.approx(flops[code], rel=1e-9)


def test_list_shows_the_predictors_and_their_parameters(capsys):
    assert main(["list", "predictors", "-v"]) == 0
    out = capsys.readouterr().out
    for name in ("ensemble", "gbt", "gp", "mlp"):
        assert f"  {name} " in out
    assert "target = rank" in out


def _refit_experiment(tmp_path: Path, shared: Path, predictor: Path, trials: int, refit: str) -> Path:
    cfg = tmp_path / "refit.yaml"
    cfg.write_text(f"""
name: refit
seed: 0
space: {{name: nb201}}
evaluators:
  - name: predictor
    params: {{file: "{predictor}", metric: top1_pred, {refit}}}
  - name: benchmark
    params:
      table: "{shared / 'nas-bench-201' / 'nb201_accuracy.csv'}"
      columns: {{top1: cifar10_test_200ep}}
      cheap: false
objectives:
  - {{metric: top1, direction: max}}
  - {{metric: top1_pred, direction: max}}
strategy: {{name: random}}
budget: {{trials: {trials}, batch_size: 10}}
export: {{enabled: false}}
""")
    return cfg


def test_predictor_evaluator_refits_on_the_runs_own_trials_and_resumes_alike(small_table, shared_data, tmp_path):
    from hwnas.experiments import run_experiment
    from hwnas.experiments.journal import read_trials
    from hwnas.predictors import PREDICTORS, featurize, load_predictor
    from hwnas.search_spaces import SPACES

    pred_file = tmp_path / "gbt.json"
    assert _fit(small_table, pred_file, "--folds", "0") == 0
    refit = "refit_every: 10, refit_on: top1"
    straight = tmp_path / "straight"
    run_experiment(_refit_experiment(tmp_path, shared_data, pred_file, 40, refit), run_dir=straight)
    trials = read_trials(straight)
    assert [t.number for t in trials] == list(range(40))
    space = SPACES.create("nb201", {"merge_isomorphic": False})
    pred = np.array([t.metrics["top1_pred"] for t in trials])
    # the first batch is answered by the file; the second by a gbt of the file's parameters fitted on the first
    # batch's measured top1 with the experiment seed (refit 0)
    from_file = load_predictor(pred_file)
    np.testing.assert_allclose(pred[:10], from_file.predict(featurize(space, [t.arch for t in trials[:10]], "cell")))
    refit0 = PREDICTORS.create("gbt", from_file.params.model_dump(), rng=np.random.default_rng([0, 0]))
    refit0.fit(featurize(space, [t.arch for t in trials[:10]], "cell"), [t.metrics["top1"] for t in trials[:10]])
    second = featurize(space, [t.arch for t in trials[10:20]], "cell")
    np.testing.assert_allclose(pred[10:20], refit0.predict(second))
    assert not np.allclose(pred[10:20], from_file.predict(second))
    # a run cut after 25 journaled trials and resumed: the journal replays through the evaluator, same answers
    cut = tmp_path / "cut"
    run_experiment(_refit_experiment(tmp_path, shared_data, pred_file, 40, refit), run_dir=cut)
    lines = (cut / "trials.jsonl").read_text().splitlines(keepends=True)
    (cut / "trials.jsonl").write_text("".join(lines[:25]))
    result = run_experiment(resume=cut)
    assert result.reused == 25 and result.evaluated == 15
    again = read_trials(cut)
    assert [t.arch.arch_id for t in again] == [t.arch.arch_id for t in trials]
    np.testing.assert_allclose([t.metrics["top1_pred"] for t in again], pred)


@pytest.mark.parametrize(("refit", "message"), [
    ("refit_every: 10, refit_on: top1_pred", "refit_on and metric are both 'top1_pred'"),  # a name of its own
    ("refit_every: 2, refit_on: top5", "evaluators[0].params.refit_on: no evaluator provides 'top5'"),
])
def test_a_refit_on_a_metric_it_cannot_learn_from_is_refused(small_table, shared_data, tmp_path, capsys, refit,
                                                             message):
    pred_file = tmp_path / "gbt.json"
    assert _fit(small_table, pred_file, "--folds", "0") == 0
    cfg = _refit_experiment(tmp_path, shared_data, pred_file, 20, refit)
    assert main(["validate", str(cfg)]) == 2
    assert message in capsys.readouterr().err


def test_gin_with_another_feature_set_is_refused_before_any_work(small_table, tmp_path, capsys):
    out = tmp_path / "g.json"
    assert main(["predictor", "fit", "--table", str(small_table), "--space", "nb201", "--target",
                 "cifar10_test_200ep", "--predictor", "gin", "--features", "cell", "-o", str(out)]) == 2
    assert "gin reads the 'graph' feature set only, not 'cell'" in capsys.readouterr().err and not out.exists()
    assert main(["bench", "predictors", "--predictors", "gin:encode", "--datasets", "cifar10", "--sizes", "20",
                 "--seeds", "1", "--out", str(tmp_path / "b")]) == 2
    assert "gin reads the 'graph' feature set only, not 'encode'" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("folds", [5, 0])
def test_predictions_that_are_not_numbers_are_an_error_naming_the_predictor_and_fold(small_table, tmp_path, capsys,
                                                                                    folds):
    """Targets too far apart to compute with (finite, but their spread overflows) make NaN predictions: the fold
    that made them (or the final fit) is named, instead of "tau nan" and exit 0, and nothing is written."""
    from hwnas.errors import ConfigError
    from hwnas.predictors.fit import cross_validate

    lines = small_table.read_text().splitlines()[:31]
    header = lines[0].split(",")
    at = header.index("cifar10_test_200ep")
    rows = [line.split(",") for line in lines[1:]]
    for k, row in enumerate(rows):
        row[at] = "1.7e308" if k % 2 else "-1.7e308"
    huge = tmp_path / "huge.csv"
    huge.write_text("\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n")
    out = tmp_path / "p.json"
    assert _fit(huge, out, "--folds", str(folds)) == 2
    where = "gbt predictor, cross-validation fold 1 of 5" if folds else "gbt predictor fitted on every row"
    err = capsys.readouterr().err
    assert f"error: {where}: the predictor's predictions are not numbers for" in err, err
    assert "the targets span -1.7e+308 to 1.7e+308" in err and "Traceback" not in err
    assert not out.exists()
    if folds:  # the library call says the same
        X = np.eye(30)
        y = np.array([1.7e308 if k % 2 else -1.7e308 for k in range(30)])
        with pytest.raises(ConfigError, match=r"gbt predictor, cross-validation fold 1 of 3: .* not numbers for 10 of "
                                              "10 architectures"):
            cross_validate("gbt", {"n_estimators": 5}, X, y, folds=3, seed=0)


KILLED_PREDICTORS = ["bench", "predictors", "--predictors", "gbt:cell", "--params", 'gbt:{"n_estimators": 40}',
                     "--datasets", "cifar10", "--sizes", "20,40,80", "--seeds", "2", "--quiet"]


def _timeless(res: dict) -> object:
    """The results without what timing and the clock decide (fit and predict times, wall time, dates, machine)."""
    from hwnas.testing.bench import without_keys

    return without_keys(res, {"fit_s", "predict_per_s", "wall_s", "created", "machine", "command", "resumed_from"})


@pytest.mark.slow
def test_bench_predictors_killed_midway_keeps_finished_sizes_and_resume_equals_the_uninterrupted_bench(
        shared_data, tmp_path):
    """SIGKILL once a training size is kept: results.partial.json holds it whole; a plain rerun is refused naming
    --resume, a resume with other options names them, and --resume ends with the figures of a bench that was never
    interrupted (timings aside), fitting only the sizes that were missing."""
    import signal
    import subprocess
    import sys
    import time

    from hwnas.bench.journal import PARTIAL

    def nas(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hwnas.cli", *argv], capture_output=True, text=True, timeout=600)

    argv = [*KILLED_PREDICTORS, "--data", str(shared_data)]
    whole = tmp_path / "whole"
    done = nas(*argv, "--out", str(whole))
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (whole / PARTIAL).exists()  # results.json holds everything; the partial file is gone

    cut = tmp_path / "cut"
    proc = subprocess.Popen([sys.executable, "-m", "hwnas.cli", *argv, "--out", str(cut)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = cut / PARTIAL
    deadline = time.monotonic() + 400
    while not partial.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert partial.exists() and not (cut / "results.json").exists(), "the kill came after the bench ended"
    kept = json.loads(partial.read_text())  # whole: written atomically
    assert list(kept["runs"]["cifar10"]) in (["20"], ["20", "40"])
    assert len(kept["runs"]["cifar10"]["20"]["gbt"]) == 2

    refused = nas(*argv, "--out", str(cut))
    assert refused.returncode == 2 and "--resume" in refused.stderr and "Traceback" not in refused.stderr
    other = nas(*[("3" if a == "2" else a) for a in argv], "--out", str(cut), "--resume")
    assert other.returncode == 2 and "seeds: 2 then, 3 now" in other.stderr and "Traceback" not in other.stderr
    assert json.loads(partial.read_text()) == kept  # refusals touch nothing

    resumed = nas(*argv, "--out", str(cut), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "training sizes reused from the interrupted bench" in resumed.stdout
    assert not partial.exists()
    a = json.loads((whole / "results.json").read_text())
    b = json.loads((cut / "results.json").read_text())
    assert b["resumed_from"]["created"] == kept["created"]
    assert _timeless(b) == _timeless(a)


def test_bench_predictors_resume_without_an_interrupted_bench_is_one_clear_error(shared_data, tmp_path, capsys):
    out = tmp_path / "none"
    argv = [*KILLED_PREDICTORS, "--data", str(shared_data), "--out", str(out)]
    assert main([*argv, "--resume"]) == 2
    assert "--resume: no interrupted bench in" in capsys.readouterr().err
    assert not out.exists()
    (out / "results.json").parent.mkdir()
    (out / "results.json").write_text("{}")
    assert main([*argv, "--resume"]) == 2
    assert "finished (results.json); nothing to resume" in capsys.readouterr().err
    assert (out / "results.json").read_text() == "{}"


@pytest.mark.slow
def test_bench_predictors_interrupted_says_where_the_finished_sizes_are_and_how_to_go_on(shared_data, tmp_path):
    """Ctrl-C (SIGINT) once a training size is kept: exit 130, and stderr names results.partial.json and --resume."""
    import signal
    import subprocess
    import sys
    import time

    from hwnas.bench.journal import PARTIAL

    out = tmp_path / "cut"
    # as from a terminal: SIGINT not ignored. A child inherits an ignored SIGINT (Python then installs no
    # KeyboardInterrupt handler), and the whole suite ignores it when it was started as a background job of a
    # non-interactive shell (`.ci/run > log &`: POSIX shells start such jobs so), which failed this test twice
    proc = subprocess.Popen([sys.executable, "-m", "hwnas.cli", *KILLED_PREDICTORS, "--data", str(shared_data),
                             "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 400
    while not (out / PARTIAL).exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert not (out / "results.json").exists(), "the interruption came after the bench ended"
    assert proc.returncode == 130, err[-2000:]
    assert f"finished so far are kept in {out / PARTIAL}: the same command with --resume goes on" in err
    assert "training sizes" in err and "Traceback" not in err
