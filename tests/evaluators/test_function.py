"""The ``function`` evaluator: a Python function scores architectures; rebuilt by import path in workers; the
same protocol checks and messages as the built-in evaluators (issue 46)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hwnas.errors import ConfigError
from hwnas.evaluation import EVALUATORS, EvalContext
from hwnas.experiments import load_experiment, run_experiment
from hwnas.search_spaces import SPACES
from hwnas.testing import scores


def experiment(root: Path, *evaluators: dict[str, Any], executor: dict[str, Any] | None = None,
               trials: int = 12) -> dict[str, Any]:
    """A random search over NB201 scored by function evaluators only."""
    return {
        "name": "fn", "seed": 1, "space": {"name": "nb201"}, "evaluators": list(evaluators),
        "objectives": [{"metric": "gene_sum", "direction": "max"}, {"metric": "nonzero", "direction": "min"}],
        "strategy": {"name": "random"}, "budget": {"trials": trials, "batch_size": 4},
        "executor": executor or {"name": "local"}, "export": {"enabled": False}, "output": {"root": str(root)},
    }


GENE_COUNT = {"name": "function", "params": {"callable": "hwnas.testing.scores:gene_count",
                                            "provides": ["gene_sum", "nonzero"]}}


def test_a_function_by_path_or_by_object_scores_every_trial_and_records_its_path(tmp_path):
    by_path = run_experiment(experiment(tmp_path, GENE_COUNT), run_dir=tmp_path / "path")
    as_object = {"name": "function", "params": {"callable": scores.gene_count, "provides": ["gene_sum", "nonzero"]}}
    by_object = run_experiment(experiment(tmp_path, as_object), run_dir=tmp_path / "object")
    for result in (by_path, by_object):
        assert all(t.status == "ok" and t.metrics == scores.gene_count(t.arch) for t in result.trials)
        saved = yaml.safe_load((result.run_dir / "config.yaml").read_text())["evaluators"][0]["params"]
        assert saved["callable"] == "hwnas.testing.scores:gene_count" and saved["cheap"] is True
    assert [t.arch for t in by_path.trials] == [t.arch for t in by_object.trials]


def test_keyword_arguments_the_space_and_the_built_module_are_passed_when_asked_for(tmp_path):
    space = SPACES.create("nb201")
    ctx = EvalContext(space=space, seed=0)
    weighted = EVALUATORS.create("function", {"callable": "hwnas.testing.scores:weighted_genes",
                                              "provides": ["weighted"], "kwargs": {"scale": 2.0}}, context=ctx)
    import numpy as np

    arch = space.sample(np.random.default_rng(0))
    assert weighted.evaluate([arch]) == [scores.weighted_genes(arch, scale=2.0, space=space)]
    pytest.importorskip("torch")
    params = EVALUATORS.create("function", {"callable": "hwnas.testing.scores:module_params",
                                            "provides": ["params_k"]}, context=ctx)
    got = params.evaluate([arch])[0]
    assert isinstance(got, dict) and got["params_k"] > 0


@pytest.mark.parametrize("callable_,message", [
    ("hwnas.testing.nowhere:f", r"evaluators\[0\]\.params\.callable: 'hwnas\.testing\.nowhere:f': cannot import "
                                r"'hwnas\.testing\.nowhere'"),
    ("hwnas.testing.scores:absent", r"evaluators\[0\]\.params\.callable: 'hwnas\.testing\.scores:absent': "
                                    r"'hwnas\.testing\.scores' has no 'absent'"),
    ("hwnas.testing.scores:CALLS", r"'hwnas\.testing\.scores:CALLS': is a dict, not a function"),
    ("gene_count", r"'gene_count': expected 'module:function'"),
    (lambda arch: {"gene_sum": 1.0}, r"cannot be rebuilt by import path \(a lambda, or a function defined inside "
                                     r"another\): define it at module level"),
])
def test_a_function_that_cannot_be_found_is_refused_at_build_naming_the_key(callable_, message, tmp_path):
    bad = {"name": "function", "params": {"callable": callable_, "provides": ["gene_sum", "nonzero"]}}
    with pytest.raises(ConfigError, match=message):
        run_experiment(experiment(tmp_path, bad))
    assert not (tmp_path / "fn").exists()


def test_the_yaml_form_is_validated_with_file_and_line(tmp_path):
    cfg = experiment(tmp_path, {"name": "function", "params": {"callable": "hwnas.testing.scores:gene_count",
                                                               "provides": []}})
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(ConfigError, match=r"exp\.yaml:\d+: evaluators\[0\]\.params\.provides: Tuple should have at "
                                          r"least 1 item"):
        load_experiment(path)


@pytest.mark.parametrize("fn,provides,error", [
    ("not_a_mapping", ["gene_sum"], "function: returned list for an architecture, not a mapping of metric -> value"),
    ("not_a_number", ["gene_sum"], "function: metric 'gene_sum' is 'fast', not a number"),
    ("misses_a_metric", ["gene_sum", "nonzero"], "function: returned no nonzero (a metric it provides)"),
])
def test_a_function_that_breaks_the_contract_fails_its_trials_with_the_builtins_message(fn, provides, error,
                                                                                        tmp_path):
    bad = {"name": "function", "params": {"callable": f"hwnas.testing.scores:{fn}", "provides": provides}}
    cfg = experiment(tmp_path, bad, trials=4)
    cfg["objectives"] = [{"metric": "gene_sum", "direction": "max"}]
    cfg["budget"]["max_failures_in_a_row"] = 0
    result = run_experiment(cfg)
    assert {t.status for t in result.trials} == {"failed"}
    assert all(t.error == error for t in result.trials), result.trials[0].error


def test_a_function_that_raises_fails_only_its_trials(tmp_path):
    cfg = experiment(tmp_path, {"name": "function", "params": {"callable": "hwnas.testing.scores:raises_on_odd",
                                                               "provides": ["gene_sum"]}}, trials=16)
    cfg["objectives"] = [{"metric": "gene_sum", "direction": "max"}]
    result = run_experiment(cfg)
    odd = [t for t in result.trials if sum(v for v in t.arch.genes.values() if isinstance(v, int)) % 2]
    assert odd and all(t.status == "failed" and "RuntimeError: odd gene sum" in (t.error or "") for t in odd)
    assert all(t.status == "ok" for t in result.trials if t not in odd)


@pytest.mark.slow
def test_an_expensive_function_is_rebuilt_by_import_path_in_worker_processes(tmp_path):
    expensive = {"name": "function", "params": {"callable": "hwnas.testing.scores:gene_count",
                                                "provides": ["gene_sum", "nonzero"], "cheap": False}}
    local = run_experiment(experiment(tmp_path, expensive), run_dir=tmp_path / "local")
    workers = run_experiment(experiment(tmp_path, expensive, executor={"name": "process", "workers": 2}),
                             run_dir=tmp_path / "process")
    assert [(t.arch, dict(t.metrics)) for t in workers.trials] == [(t.arch, dict(t.metrics)) for t in local.trials]


def test_an_edited_function_is_not_reused_on_resume(tmp_path, monkeypatch):
    run = run_experiment(experiment(tmp_path, GENE_COUNT, trials=4), run_dir=tmp_path / "run")
    fp = EVALUATORS.create("function", GENE_COUNT["params"], context=EvalContext(space=SPACES.create("nb201")))

    def edited(arch: Any) -> dict[str, float]:
        return {"gene_sum": 0.0, "nonzero": 0.0}

    monkeypatch.setattr(scores.gene_count, "__code__", edited.__code__)
    again = EVALUATORS.create("function", GENE_COUNT["params"], context=EvalContext(space=SPACES.create("nb201")))
    assert again.fingerprint() != fp.fingerprint()
    from hwnas.errors import RunDirectoryError

    with pytest.raises(RunDirectoryError, match="was evaluated under evaluator fingerprint"):
        run_experiment(resume=run.run_dir, overrides=["budget.trials=6"])
