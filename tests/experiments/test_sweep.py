"""``nas sweep``: experiments as Ray Tune trials on a real local Ray instance (no mocks), an interrupted sweep
restored with Tune's restore, and sweep files that name keys the experiment does not have."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hwnas.errors import ConfigError
from hwnas.experiments.sweep import check_params, flat_keys, load_sweep, overrides_of

from .conftest import TINY_SPACE

pytestmark = pytest.mark.xdist_group("ray")  # one Ray instance at a time (see addopts in pyproject.toml)

BASE = """\
name: tinyc
seed: 3
""" + TINY_SPACE + """\
evaluators:
  - name: complexity
objectives:
  - {metric: params_m, direction: min, reference: 0.05}
  - {metric: flops_m, direction: min, reference: 1.0}
strategy: {name: random}
budget: {trials: 12, batch_size: 2}
export: {enabled: false}
"""


def _files(tmp_path: Path, params: str, extra: str = "") -> Path:
    (tmp_path / "base.yaml").write_text(BASE)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"name: s\nbase: base.yaml\nparams:\n{params}\nmax_concurrent: 1\n"
                     f"output: {{root: {tmp_path / 'out'}}}\n{extra}")
    return sweep


def _nas(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hwnas.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_a_swept_key_the_experiment_lacks_is_named_with_the_closest(tmp_path):
    sweep = _files(tmp_path, "  budget.trails: {grid: [4, 6]}")
    cfg, base = load_sweep(sweep)
    with pytest.raises(ConfigError, match=r"params\.budget\.trails: not a key of the experiment base\.yaml; "
                                          r"closest: budget\.trials"):
        check_params(cfg, base, sweep)
    proc = _nas("sweep", str(sweep))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and err.strip().count("\n") == 0 and "budget.trials" in err
    assert not (tmp_path / "out" / "s").exists() or not (tmp_path / "out" / "s" / "tune").exists()


def test_flat_keys_and_overrides():
    assert flat_keys({"seed": 0, "budget": {"trials": 3}, "evaluators": [{"name": "x"}]}) == [
        "seed", "budget", "budget.trials", "evaluators", "evaluators.0", "evaluators.0.name"]
    assert overrides_of({"seed": 2, "strategy.params.kind": "a b", "x": [1, 2]}) == [
        "seed=2", 'strategy.params.kind="a b"', "x=[1, 2]"]


def test_an_unknown_distribution_is_refused(tmp_path):
    sweep = _files(tmp_path, "  seed: {normal: [0, 1]}")
    cfg, base = load_sweep(sweep)
    with pytest.raises(ConfigError, match=r"params\.seed: give one of grid, choice"):
        check_params(cfg, base, sweep)


@pytest.mark.slow
def test_a_sweep_runs_each_trial_as_a_run_and_resumes_after_ctrl_c(tmp_path):
    sweep = _files(tmp_path, "  seed: {grid: [0, 1, 2]}")
    out = tmp_path / "out" / "s"
    proc = _nas("sweep", str(sweep))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not list((out / "runs").glob("*/summary.json")):
        time.sleep(0.5)
    finished_first = {p.parent: p.parent.joinpath("trials.jsonl").read_bytes()
                      for p in (out / "runs").glob("*/summary.json")}
    assert finished_first, "no trial finished: the interruption proves nothing"
    proc.send_signal(signal.SIGINT)  # Ctrl-C: Tune saves its state and stops
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and f"continue with nas sweep {sweep} --resume" in err, err[-2000:]
    done_before = len(list((out / "runs").glob("*/summary.json")))
    started = (out / "sweep.yaml").read_bytes()
    # a resume of an edited sweep file is refused, naming the key; the record of the sweep is not replaced
    sweep.write_text(sweep.read_text().replace("grid: [0, 1, 2]", "grid: [0, 1, 2, 3]"))
    edited = _nas("sweep", str(sweep), "--resume")
    _, err = edited.communicate(timeout=120)
    assert edited.returncode == 2 and "differs from the sweep it resumes" in err and "params.seed.grid" in err
    assert (out / "sweep.yaml").read_bytes() == started
    sweep.write_bytes(started)

    again = _nas("sweep", str(sweep), "--resume")
    stdout, stderr = again.communicate(timeout=600)
    assert again.returncode == 0, stderr[-3000:]
    rows = json.loads((out / "results.json").read_text())
    assert sorted(r["seed"] for r in rows) == [0, 1, 2] and all(r["status"] == "done" for r in rows)
    assert all(r["trials"] == 12 and r["hypervolume"] > 0 for r in rows)
    for run_dir, journal in finished_first.items():  # finished runs were not evaluated again
        assert run_dir.joinpath("trials.jsonl").read_bytes() == journal
    for run_dir in (out / "runs").iterdir():  # every run complete, nothing evaluated twice
        lines = [json.loads(x) for x in run_dir.joinpath("trials.jsonl").read_text().splitlines()]
        assert len(lines) == 12 and len({x["arch_id"] for x in lines}) == 12
    assert done_before < 3, "the sweep had finished before Ctrl-C: the resume proves nothing"
    assert len(list((out / "runs").iterdir())) == 3
    assert (out / "fronts.png").stat().st_size > 10_000 and (out / "results.csv").is_file()
    assert "sweep s: 3 trials" in stdout


@pytest.mark.slow
def test_optuna_search_with_asha_runs_every_sample(tmp_path):
    """Tune's OptunaSearch proposes the parameters, ASHA may stop runs whose hypervolume lags at a milestone; every
    sample ends as a run that is done or stopped early, with its parameters from the declared choices."""
    sweep = _files(tmp_path, "  seed: {choice: [0, 1, 2, 3, 4]}\n  strategy.name: {choice: [random, evolution]}",
                   extra="search: {name: optuna, num_samples: 4, seed: 0}\n"
                         "scheduler: {name: asha, grace_period: 2, reduction_factor: 2}\n")
    proc = _nas("sweep", str(sweep))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    rows = json.loads((tmp_path / "out" / "s" / "results.json").read_text())
    assert len(rows) == 4
    assert all(r["seed"] in range(5) and r["strategy.name"] in ("random", "evolution") for r in rows)
    assert all(r["status"] in ("done", "stopped early") for r in rows)
    for r in rows:  # what a run reported is what it journaled; a finished run wrote its outputs, a stopped one not
        run = tmp_path / "out" / "s" / "runs" / r["trial"]
        assert len(run.joinpath("trials.jsonl").read_text().splitlines()) == r["trials"]
        assert run.joinpath("summary.json").is_file() == (r["status"] == "done")


def test_the_shipped_sweep_names_keys_of_its_experiment():
    sweep = Path(__file__).resolve().parents[2] / "experiments" / "sweep_quickstart.yaml"
    cfg, base = load_sweep(sweep)
    assert base.name == "quickstart.yaml" and set(cfg.params) == {"seed", "constraints.0.max"}
    check_params(cfg, base, sweep)  # raises, naming the key, if the experiment lost one


def test_bad_values_and_bad_sweep_files_are_refused_before_anything_starts(tmp_path):
    sweep = _files(tmp_path, "  budget.trials: {grid: [abc, 4]}")
    cfg, base = load_sweep(sweep)
    with pytest.raises(ConfigError, match=r'params\.budget\.trials\.grid\[0\] = "abc": .*budget\.trials'):
        check_params(cfg, base, sweep)
    sweep = _files(tmp_path, "  seed: {randint: [5, 1]}")
    cfg, base = load_sweep(sweep)
    with pytest.raises(ConfigError, match=r"params\.seed\.randint: low 5 must be below high 1"):
        check_params(cfg, base, sweep)
    sweep = _files(tmp_path, "  budget.batch_size: {choice: [2, 0]}")
    cfg, base = load_sweep(sweep)
    with pytest.raises(ConfigError, match=r"params\.budget\.batch_size\.choice\[1\] = 0: .*batch_size"):
        check_params(cfg, base, sweep)
    sweep = _files(tmp_path, "  budget.trials: {uniform: [4, 8]}")  # ends are integers, the values between not
    cfg, base = load_sweep(sweep)
    with pytest.raises(ConfigError, match=r"params\.budget\.trials\.uniform \(a value between\) = 5\.48: .*randint"):
        check_params(cfg, base, sweep)
    sweep = _files(tmp_path, "  seed: {grid: [0, 1]}", extra="max_concurent: 1\n")
    line = sweep.read_text().splitlines().index("max_concurent: 1") + 1
    with pytest.raises(ConfigError, match=rf"sweep\.yaml:{line}: max_concurent: unknown key; did you mean "
                                          r"'max_concurrent'"):
        load_sweep(sweep)
    with pytest.raises(ConfigError, match=r"not a sweep file \(no base:\); it looks like an experiment file"):
        load_sweep(tmp_path / "base.yaml")


@pytest.mark.slow
def test_resources_no_node_offers_are_refused_instead_of_waiting_forever(tmp_path):
    sweep = _files(tmp_path, "  seed: {grid: [0]}", extra="resources_per_trial: {CPU: 1, GPU: 1}\n")
    proc = _nas("sweep", str(sweep))
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 2 and "no node of the cluster offers them" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "s" / "tune").exists()
