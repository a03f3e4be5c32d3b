"""A constraint relative to the space's largest member: measured once per run, by the same evaluator, and kept."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hwnas.errors import ConfigError, RunDirectoryError
from hwnas.experiments import load_experiment, run_experiment
from hwnas.experiments.api import load_run
from hwnas.objectives import Constraint, Objective, reference_point
from hwnas.search_spaces import SPACES, SizedSpace

from .conftest import TINY_SPACE

YAML = """\
name: relative
seed: 1
""" + TINY_SPACE + """\
evaluators:
  - name: complexity
objectives:
  - {metric: flops_m, direction: min, reference: 100}
  - {metric: params_m, direction: min}
constraints:
  - {metric: params_m, max: 0.45, relative_to: largest}
strategy: random
budget: {trials: 12, batch_size: 4}
export: {enabled: false}
"""


def test_a_relative_bound_is_the_largest_members_value_measured_by_the_same_evaluator(tmp_path):
    path = tmp_path / "relative.yaml"
    path.write_text(YAML)
    exp = load_experiment(path)
    assert not exp.constraints[0].is_resolved
    assert exp.constraints[0].describe() == "params_m <= 0.45 x largest"
    res = run_experiment(path, run_dir=tmp_path / "run")
    largest = exp.space.largest()
    truth = exp.evaluators[0].evaluate([largest])[0]["params_m"]
    stored = json.loads((tmp_path / "run" / "references.json").read_text())
    assert stored["values"]["largest:params_m"] == {"arch": largest.to_dict(), "value": truth, "taken": [truth] * 3}
    bound = 0.45 * truth
    assert res.constraints[0].max == pytest.approx(bound) and res.constraints[0].reference_value == truth
    assert {t.status for t in res.trials} == {"ok", "infeasible"}
    for t in res.trials:
        assert (t.status == "ok") == (t.metrics["params_m"] <= bound)
    front = json.loads((tmp_path / "run" / "pareto.json").read_text())
    assert front["constraints"][0]["reference_value"] == truth
    assert front["hypervolume_reference"]["params_m"]["value"] == pytest.approx(bound)  # the resolved bound
    # the report and a resume use the stored value, never a new measurement
    again, _ = load_run(tmp_path / "run")
    assert again.constraints[0].max == pytest.approx(bound)
    before = (tmp_path / "run" / "references.json").read_bytes()
    journal = tmp_path / "run" / "trials.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:6]))  # as if killed after six trials
    resumed = run_experiment(resume=tmp_path / "run")
    assert (tmp_path / "run" / "references.json").read_bytes() == before
    assert resumed.reused == 6 and resumed.evaluated == 6 and resumed.constraints[0].max == pytest.approx(bound)
    stored["fingerprint"] = "another-machine"
    (tmp_path / "run" / "references.json").write_text(json.dumps(stored))
    journal.write_text("".join(lines[:6]))
    with pytest.raises(RunDirectoryError, match="references were measured under evaluator fingerprint"):
        run_experiment(resume=tmp_path / "run")
    (tmp_path / "run" / "references.json").unlink()  # lost: the six trials were judged against it
    with pytest.raises(RunDirectoryError, match=r"references\.json is missing, but the journal holds 6 trial\(s\) "
                                                r"judged against the reference it stored; restore it"):
        run_experiment(resume=tmp_path / "run")
    assert not (tmp_path / "run" / "references.json").exists()


def test_bad_relative_constraints_are_refused_by_name(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(YAML.replace("max: 0.45, relative_to: largest", "max: -0.5, relative_to: largest"))
    with pytest.raises(ConfigError, match="positive fraction"):
        load_experiment(path)
    path.write_text(YAML.replace("relative_to: largest", "relative_to: median"))
    with pytest.raises(ConfigError, match="relative_to"):
        load_experiment(path)
    unresolved = Constraint("latency_ms", max=0.5, relative_to="largest")
    with pytest.raises(ValueError, match="has not been measured yet"):
        unresolved.violation({"latency_ms": 1.0})
    ref = reference_point([Objective("latency_ms", "min")], [unresolved])
    assert ref.values == (None,) and "once the run measures its largest member" in ref.sources[0]
    resolved = unresolved.resolved(2.0)
    assert resolved.max == 1.0 and resolved.violation({"latency_ms": 1.5}) == pytest.approx(0.5)
    assert resolved.describe() == "latency_ms <= 1 (0.5 x largest's 2)"
    with pytest.raises(ValueError, match="finite positive reference"):
        unresolved.resolved(float("nan"))


@pytest.mark.parametrize("name", SPACES.names())
def test_every_space_names_its_largest_member_and_the_supernets_agree(name):
    from hwnas.supernet import SUPERNETS

    space = SPACES.get(name)()
    assert isinstance(space, SizedSpace)
    largest = space.largest()
    space.validate(largest)
    assert space.canonicalize(largest) == largest
    if name in SUPERNETS.names():
        small = {"ofa_mbv3": {"resolutions": [128, 160], "num_classes": 10}}.get(name, {})
        space = SPACES.get(name)(**small)
        import torch

        supernet = SUPERNETS.get(name)(space=space, generator=torch.Generator().manual_seed(0))
        assert supernet.largest() == space.largest()
    rng = np.random.default_rng(0)
    if name in ("mbv3", "ofa_mbv3", "fbnet", "nb201", "darts", "vit", "convnext"):
        import torch

        def count(arch):
            return sum(p.numel() for p in space.build(arch).parameters())

        torch.manual_seed(0)
        top = count(space.largest())
        assert all(count(space.sample(rng)) <= top for _ in range(5)), "a sampled member has more parameters"


def test_a_reference_that_cannot_be_evaluated_is_one_clear_error_before_any_trial(tmp_path):
    import hwnas.testing  # noqa: F401  (registers the fake evaluator)

    path = tmp_path / "fails.yaml"
    path.write_text(YAML.replace("  - name: complexity", "  - name: complexity\n  - {name: fake, params: {cheap: true, "
                                 "fail_fraction: 1.0}}")
                    .replace("{metric: params_m, max: 0.45, relative_to: largest}",
                             "{metric: fake_cost_ms, max: 0.5, relative_to: largest}"))
    with pytest.raises(ConfigError, match=r"constraints\[0\]: the largest member .* could not be evaluated for "
                                          "fake_cost_ms: EvaluationError"):
        run_experiment(path, run_dir=tmp_path / "run")
    assert not (tmp_path / "run" / "references.json").exists()
    journal = tmp_path / "run" / "trials.jsonl"
    assert not journal.exists() or not journal.read_text().strip()  # no trial ran
