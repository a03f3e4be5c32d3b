"""The runner with fake evaluators, on both executors: out-of-order completion, killed workers, journal rules."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel

import hwnas.testing  # noqa: F401  (registers the "fake" evaluator)
from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, RunDirectoryError
from hwnas.experiments import load_experiment, run_experiment
from hwnas.experiments.executors import (
    ComponentSpec,
    ExecutorError,
    Pipeline,
    PipelineSpec,
    Task,
    check_rebuildable,
    evaluate_batch,
    rebuild_evaluators,
)
from hwnas.experiments.executors.local import LocalExecutor
from hwnas.experiments.executors.process import ProcessExecutor
from hwnas.experiments.runner import Runner
from hwnas.search_spaces import SPACES

FAKE = """\
name: fake
seed: 5
space: {{name: nb201}}
evaluators:
  - {{name: fake, params: {{cheap: true, prefix: c}}}}
  - {{name: fake, params: {{{expensive}}}}}
objectives:
  - {{metric: fake_score, direction: max}}
  - {{metric: c_cost_ms, direction: min}}
constraints:
  - {{metric: c_cost_ms, max: {cmax}}}
strategy: {{name: evolution, params: {{population_size: 6, sample_size: 3}}}}
budget: {{trials: {trials}, batch_size: 6}}
executor: {executor}
export: {{enabled: false}}
output: {{root: {root}}}
"""


def _yaml(tmp_path: Path, *, expensive: str = "", executor: str = "{name: local}", trials: int = 18,
          cmax: float = 100.0) -> Path:
    path = tmp_path / "fake.yaml"
    path.write_text(FAKE.format(expensive=expensive, executor=executor, trials=trials, cmax=cmax,
                                root=tmp_path / "runs"))
    return path


def _journal(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]


def _summary(trials) -> list[tuple]:
    return [(t.number, t.arch.arch_id, t.status, sorted((k, repr(v)) for k, v in t.metrics.items())) for t in trials]


@pytest.mark.slow
def test_process_executor_gives_the_local_run_out_of_order(tmp_path):
    """Two workers, evaluations of different lengths: results arrive out of order, yet trials, numbers,
    metrics and the strategy's path equal the local run's."""
    local = run_experiment(_yaml(tmp_path, expensive="sleep_s: 0.2, fail_fraction: 0.3, nan_fraction: 0.2", cmax=5.5),
                           run_dir=tmp_path / "local")
    proc = run_experiment(_yaml(tmp_path, expensive="sleep_s: 0.2, fail_fraction: 0.3, nan_fraction: 0.2", cmax=5.5,
                                executor="{name: process, workers: 2}"), run_dir=tmp_path / "proc")
    assert _summary(local.trials) == _summary(proc.trials)
    statuses = {t.status for t in local.trials}
    assert {"ok", "failed", "infeasible"} <= statuses, statuses
    numbers = [row["number"] for row in _journal(tmp_path / "proc")]
    assert sorted(numbers) == list(range(18))
    assert numbers != sorted(numbers), "expected out-of-order completion with two workers and varied sleeps"
    for t in proc.trials:
        if t.status == "infeasible":  # never sent to the expensive evaluator
            assert "fake_score" not in t.metrics


@pytest.mark.slow
def test_executor_yields_in_completion_order(tmp_path):
    """A long evaluation submitted first finishes after three short ones submitted after it."""
    from hwnas.evaluation import EVALUATORS, EvalContext
    from hwnas.testing.evaluators import _unit

    space = SPACES.create("nb201")
    pool = [space.canonicalize(space.sample(np.random.default_rng(i))) for i in range(200)]
    long = next(a for a in pool if _unit(a, "sleep") > 0.75)
    short = [a for a in pool if _unit(a, "sleep") < 0.05][:3]
    params = {"sleep_s": 4.0}
    fp = EVALUATORS.create("fake", params, context=EvalContext(space=space)).fingerprint()
    spec = PipelineSpec(space=ComponentSpec("nb201", space.params.model_dump(mode="json"), "hwnas.search_spaces.nb201"),
                        dataset=None, artifacts_dir=None, seed=0,
                        evaluators=(ComponentSpec("fake", params, "hwnas.testing.evaluators"),),
                        names=("fake",), fingerprints=(fp,))
    ex = ProcessExecutor(workers=2)
    ex.start(Pipeline(spec=spec))
    try:
        ex.submit([Task(i, a) for i, a in enumerate([long, *short])])
        keys = [o.key for o in ex.as_completed()]
    finally:
        ex.close()
    assert sorted(keys) == [0, 1, 2, 3] and keys[-1] == 0, keys


@pytest.mark.slow
def test_a_worker_killed_by_sigkill_is_replaced_and_its_evaluation_retried(tmp_path):
    marks = tmp_path / "killed"
    run = run_experiment(_yaml(tmp_path, expensive=f"kill_fraction: 0.3, kill_once_dir: {marks}",
                               executor="{name: process, workers: 2}"), run_dir=tmp_path / "run")
    killed = {p.name for p in marks.iterdir()}
    assert killed, "no worker was killed: the test proves nothing"
    assert all(t.status == "ok" for t in run.trials)  # every killed evaluation succeeded on its retry
    rows = _journal(tmp_path / "run")
    assert len(rows) == 18 and len({r["arch_id"] for r in rows}) == 18  # nothing lost, nothing twice
    local = run_experiment(_yaml(tmp_path), run_dir=tmp_path / "local")
    assert _summary(local.trials) == _summary(run.trials)


@pytest.mark.slow
def test_an_evaluation_that_kills_every_worker_fails_after_one_retry(tmp_path):
    run = run_experiment(_yaml(tmp_path, expensive="kill_fraction: 0.2", executor="{name: process, workers: 2}",
                               trials=12), run_dir=tmp_path / "run")
    failed = [t for t in run.trials if t.status == "failed"]
    assert failed and len(run.trials) == 12
    sig = int(signal.SIGKILL)
    assert all(f"worker process died (signal {sig}) in 2 attempt(s)" in t.error for t in failed)
    assert all(t.status == "ok" for t in run.trials if t not in failed)


def test_bad_executor_sections_are_named(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_experiment(_yaml(tmp_path, executor="{name: proces}"))
    assert "executor.name: unknown executor 'proces'; did you mean 'process'?" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_experiment(_yaml(tmp_path, executor="{name: process, workers: 0}"))
    assert ":14: executor.workers: Input should be greater than or equal to 1" in str(e.value)


def test_params_that_cannot_reach_a_worker_are_named():
    class Odd(BaseModel):
        when: object = None

    check_rebuildable(ComponentSpec("x", {"when": 3}, "m"), Odd, "evaluators[1] (x)")
    with pytest.raises(ConfigError, match=r"evaluators\[1\] \(x\): its params cannot be rebuilt in a worker"):
        check_rebuildable(ComponentSpec("x", {"when": {1, 2}}, "m"), Odd, "evaluators[1] (x)")
    with pytest.raises(ConfigError, match=r"evaluators\[1\] \(x\): params when change when sent to a worker"):
        check_rebuildable(ComponentSpec("x", {"when": (1, 2)}, "m"), Odd, "evaluators[1] (x)")


def test_a_worker_whose_evaluator_rebuilds_differently_stops_the_run():
    space = SPACES.create("nb201")
    spec = PipelineSpec(space=ComponentSpec("nb201", space.params.model_dump(mode="json"), "hwnas.search_spaces.nb201"),
                        dataset=None, artifacts_dir=None, seed=0,
                        evaluators=(ComponentSpec("fake", {}, "hwnas.testing.evaluators"),),
                        names=("evaluators[1] (fake)",), fingerprints=("fake:000000000000",))
    with pytest.raises(ExecutorError, match=r"evaluators\[1\] \(fake\): rebuilt in a worker process it has"):
        rebuild_evaluators(spec)
    ex = ProcessExecutor(workers=1)
    ex.start(Pipeline(spec=spec))
    ex.submit([Task(0, space.sample(np.random.default_rng(0)))])
    with pytest.raises(ExecutorError, match="rebuilt in a worker process"):
        list(ex.as_completed())
    assert ex.worker_pids == []


class _Constant:
    """A strategy that keeps proposing the same architecture (for the stale-batch stop)."""

    def __init__(self, arch: Architecture) -> None:
        self.arch = arch

    def ask(self, n: int) -> list[Architecture]:
        return [self.arch] * n

    def tell(self, trials) -> None:
        pass


def test_a_strategy_that_only_repeats_itself_stops_the_run(tmp_path):
    exp = load_experiment(_yaml(tmp_path))
    exp.make_strategy = lambda run_dir=None: _Constant(exp.space.sample(np.random.default_rng(1)))  # type: ignore[method-assign]
    (tmp_path / "r").mkdir()
    result = Runner(experiment=exp, run_dir=tmp_path / "r").run()
    assert len(result.trials) == 1
    assert "for 50 batches the strategy found no architecture it had not evaluated" in result.stopped_early


def test_trials_are_on_disk_before_the_strategy_is_told(tmp_path):
    exp = load_experiment(_yaml(tmp_path))
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    real = exp.make_strategy
    seen_on_disk: list[bool] = []

    def spy(run_dir=None):
        strategy = real(run_dir)
        tell = strategy.tell

        def checked_tell(trials):
            on_disk = {r["arch_id"] for r in _journal(run_dir)}
            seen_on_disk.append(all(t.arch.arch_id in on_disk for t in trials))
            tell(trials)

        strategy.tell = checked_tell
        return strategy

    exp.make_strategy = spy  # type: ignore[method-assign]
    Runner(experiment=exp, run_dir=run_dir).run()
    assert seen_on_disk and all(seen_on_disk)


def test_resuming_under_another_evaluator_fingerprint_is_refused(tmp_path):
    run = run_experiment(_yaml(tmp_path, trials=6), run_dir=tmp_path / "r")
    journal = run.run_dir / "trials.jsonl"
    rows = _journal(run.run_dir)
    rows[0]["fingerprint"] = "0" * 16
    journal.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = journal.read_bytes()
    with pytest.raises(RunDirectoryError, match="evaluated under evaluator fingerprint 0000000000000000"):
        run_experiment(resume=run.run_dir)
    assert journal.read_bytes() == before


class _Lookup:
    """An instant evaluator over a dict; counts its calls and can fail one architecture or a whole call."""

    provides = ("v",)
    cheap = False

    def __init__(self, table: dict[str, float], *, raise_on: str | None = None, short: bool = False,
                 instant: bool = True) -> None:
        self.table, self.raise_on, self.short, self.instant = table, raise_on, short, instant
        self.calls: list[int] = []

    def fingerprint(self) -> str:
        return "lookup"

    def evaluate(self, archs):
        self.calls.append(len(archs))
        if self.raise_on is not None and any(a.arch_id == self.raise_on for a in archs):
            raise ValueError("no row")  # for the whole call, as a careless evaluator would
        out = [{"v": self.table[a.arch_id]} if a.arch_id in self.table else KeyError(a.arch_id) for a in archs]
        return out[:-1] if self.short and len(archs) > 1 else out


def _archs(n: int) -> list[Architecture]:
    space = SPACES.create("nb201")
    rng = np.random.default_rng(3)
    out: dict[str, Architecture] = {}
    while len(out) < n:
        a = space.sample(rng)
        out[a.arch_id] = a
    return list(out.values())


def _outcomes(evaluators, archs) -> dict[int, tuple]:
    ex = LocalExecutor()
    spec = PipelineSpec(space=ComponentSpec("nb201", {}, "hwnas.search_spaces"), dataset=None, artifacts_dir=None,
                        seed=0, evaluators=(), names=(), fingerprints=())
    ex.start(Pipeline(spec=spec, evaluators=evaluators))
    ex.submit([Task(k, a) for k, a in enumerate(archs)])
    return {o.key: (o.metrics, o.error) for o in ex.as_completed()}


def test_local_executor_evaluates_an_instant_chain_in_one_call_per_evaluator():
    """A chain of instant evaluators: one call each for all queued tasks, the same outcomes as one at a time,
    and the second evaluator is not asked about what the first failed."""
    archs = _archs(8)
    first = {a.arch_id: float(k) for k, a in enumerate(archs) if k != 2}  # no row for architecture 2
    second = {a.arch_id: -float(k) for k, a in enumerate(archs)}
    a, b = _Lookup(first), _Lookup(second)
    batched = _outcomes([("a", a), ("b", b)], archs)
    assert a.calls == [8] and b.calls == [7]
    slow_a, slow_b = _Lookup(first, instant=False), _Lookup(second, instant=False)
    one_by_one = _outcomes([("a", slow_a), ("b", slow_b)], archs)
    assert slow_a.calls == [1] * 8
    assert batched == one_by_one
    assert batched[2][1] is not None and batched[2][1].startswith("a: KeyError")
    assert batched[5] == ({"v": -5.0}, None)


def test_evaluate_batch_falls_back_to_one_call_each_when_a_call_raises_or_comes_back_short():
    archs = _archs(5)
    table = {a.arch_id: float(k) for k, a in enumerate(archs)}
    careless = _Lookup(table, raise_on=archs[3].arch_id)
    results = evaluate_batch([("t", careless)], archs)
    assert careless.calls == [5, 1, 1, 1, 1, 1]
    assert [e for _, e, _ in results] == [None, None, None, "t: ValueError: no row", None]
    assert results[4][0] == {"v": 4.0}
    short = _Lookup(table, short=True)
    results = evaluate_batch([("t", short)], archs)
    assert short.calls == [5, 1, 1, 1, 1, 1]
    assert [m for m, _, _ in results] == [{"v": float(k)} for k in range(5)]
