"""An evaluator that raises, answers for the wrong number of architectures, or leaves out a metric it provides: the
trials it fails on are marked failed with a message naming it, the others go on, and the run ends normally."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hwnas.evaluation import EVALUATORS
from hwnas.experiments.api import run_experiment
from hwnas.experiments.executors import evaluate_batch, merge_result
from hwnas.testing.evaluators import FakeEvaluator

from ..experiments.conftest import TINY_SPACE


class Raising(FakeEvaluator):
    """Raises for the whole batch, and for every architecture whose id is odd."""

    def evaluate(self, archs: Any) -> Any:
        if len(archs) > 1 or int(archs[0].arch_id, 16) % 2:
            raise RuntimeError("boom")
        return super().evaluate(archs)


class Short(FakeEvaluator):
    """Answers for one architecture fewer than asked (none for a single one)."""

    def evaluate(self, archs: Any) -> Any:
        return super().evaluate(archs)[:-1]


class Forgetful(FakeEvaluator):
    """Leaves out one of the metrics it provides."""

    def evaluate(self, archs: Any) -> Any:
        return [{"fake_score": r["fake_score"]} for r in super().evaluate(archs)]


def _run(tmp_path: Path, name: str, cheap: bool) -> Any:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nseed: 0\n{TINY_SPACE}evaluators:\n"
                    f"  - {{name: {name}, params: {{cheap: {cheap}}}}}\n"
                    "objectives:\n  - {metric: fake_score, direction: max}\nstrategy: {name: random}\n"
                    "budget: {trials: 8, batch_size: 4}\nexport: {enabled: false}\n"
                    f"output: {{root: {tmp_path / 'runs'}}}\n")
    return run_experiment(path)


@pytest.mark.parametrize("cheap", [True, False], ids=["cheap", "expensive"])
def test_misbehaving_evaluators_fail_their_trials_not_the_run(tmp_path, monkeypatch, cheap):
    for name, cls in (("raising", Raising), ("short", Short), ("forgetful", Forgetful)):
        monkeypatch.setitem(EVALUATORS._items, name, cls)
    raising = _run(tmp_path, "raising", cheap)
    assert len(raising.trials) == 8 and raising.run_dir.joinpath("pareto.json").is_file()
    failed = [t for t in raising.trials if t.status == "failed"]
    assert failed and len(failed) < 8 and all(t.error == "raising: RuntimeError: boom" for t in failed)
    short = _run(tmp_path, "short", cheap)
    assert all(t.status == "failed" and "returned 0 results for 1 architecture" in t.error for t in short.trials)
    forgetful = _run(tmp_path, "forgetful", cheap)
    assert all(t.status == "failed" and t.error == "forgetful: returned no fake_cost_ms (a metric it provides)"
               for t in forgetful.trials)


def test_a_result_that_is_not_a_mapping_of_numbers_is_an_error_naming_the_evaluator():
    metrics: dict[str, float] = {}
    not_a_mapping = "returned float for an architecture, not a mapping of metric -> value"
    assert merge_result("ev", 0.5, metrics) == f"ev: {not_a_mapping}"
    assert merge_result("ev", {"a": "high"}, metrics) == "ev: metric 'a' is 'high', not a number"
    assert merge_result("ev", {"a": 1}, metrics, provides=("a", "b")) == "ev: returned no b (a metric it provides)"
    assert merge_result("ev", {"a": 1, "b": 2}, metrics, provides=("a", "b")) is None and metrics == {"a": 1, "b": 2}

    class Floats:
        provides = ("x",)

        def evaluate(self, archs: Any) -> list[float]:
            return [1.0 for _ in archs]

    out = evaluate_batch((("floats", Floats()),), ["a", "b"])  # type: ignore[list-item]
    assert [e for _, e, _ in out] == [f"floats: {not_a_mapping}"] * 2


class NoFingerprint(FakeEvaluator):
    """Returns None for its fingerprint and a bare string for provides."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.provides = "fake_score"  # type: ignore[assignment]

    def fingerprint(self) -> Any:
        return None


class NoParams:
    """An evaluator class without a Params model."""

    provides = ("x",)
    cheap = True


def test_an_evaluator_that_breaks_the_protocol_is_named_at_build(tmp_path, monkeypatch):
    from hwnas.errors import ConfigError
    from hwnas.experiments.config import build, parse_config
    from hwnas.experiments.config.yaml_io import loads_yaml

    monkeypatch.setitem(EVALUATORS._items, "nofp", NoFingerprint)
    monkeypatch.setitem(EVALUATORS._items, "noparams", NoParams)
    text = (f"name: p\n{TINY_SPACE}evaluators:\n  - nofp\n  - noparams\n"
            "objectives:\n  - {metric: fake_score, direction: max}\nstrategy: {name: random}\nbudget: {trials: 4}\n")
    with pytest.raises(ConfigError) as err:
        loaded = loads_yaml(text)
        build(parse_config(loaded), loaded=loaded)
    message = str(err.value)
    assert ("evaluators[0]: evaluator 'nofp' (tests.evaluators.test_misbehaving.NoFingerprint) breaks the "
            "Evaluator protocol: 'provides' must be a non-empty tuple of metric names, got 'fake_score'; "
            "fingerprint() must return a non-empty string, returned None") in message
    assert "evaluator 'noparams' (tests.evaluators.test_misbehaving.NoParams) has no Params model" in message
