from __future__ import annotations

from pathlib import Path

import pytest

from hwnas.errors import ConfigError
from hwnas.experiments import load_experiment
from hwnas.experiments.config.yaml_io import apply_override, loads_yaml

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "exp.yaml"
    p.write_text(text)
    return p


def test_quickstart_validates():
    exp = load_experiment(REPO / "experiments" / "quickstart.yaml")
    assert exp.space.input_shape == (1, 32, 32)  # digits is grey: in_chans comes from the dataset
    assert exp.metric_providers()["latency_ms"] == "ort_latency"
    resolved = exp.resolved()
    assert resolved["evaluators"][2]["params"]["epochs"] == 3 and resolved["space"]["params"]["num_classes"] == 10


def test_every_problem_is_reported_at_once_with_path_and_line(tiny_yaml, tmp_path):
    text = tiny_yaml.read_text()
    text = text.replace("seed: 3", "seed: three").replace("  trials: 10", "  trails: 10")
    text = text.replace("    params: {epochs: 1, batch_size: 32}", "    params: {epochs: -1, batch_size: 32}")
    with pytest.raises(ConfigError) as info:
        load_experiment(_write(tmp_path, text))
    msgs = info.value.problems
    assert any(m.startswith(f"{tmp_path / 'exp.yaml'}:2: seed:") for m in msgs), msgs
    assert any("budget.trails: unknown key; did you mean 'trials'?" in m for m in msgs), msgs
    # the misspelt key's suggestion stands for the "budget.trials: Field required" it causes
    assert not any("budget.trials: Field required" in m for m in msgs), msgs
    assert len(msgs) == 2  # component params are checked after the file's own shape


def test_component_params_are_checked_with_their_path(tiny_yaml, tmp_path):
    text = tiny_yaml.read_text().replace("{epochs: 1, batch_size: 32}", "{epochs: -1, batchsize: 32}")
    with pytest.raises(ConfigError) as info:
        load_experiment(_write(tmp_path, text))
    msgs = info.value.problems
    assert any(":17: evaluators[1].params.epochs: Input should be greater than or equal to 1" in m for m in msgs), msgs
    assert any("evaluators[1].params.batchsize: unknown key; did you mean 'batch_size'?" in m for m in msgs), msgs


def test_unknown_component_suggests_close_names(tiny_yaml, tmp_path):
    text = tiny_yaml.read_text().replace("name: nsga2", "name: nsga")
    with pytest.raises(ConfigError, match=r"strategy.name: unknown strategy 'nsga'; did you mean 'nsga3', 'nsga2'"):
        load_experiment(_write(tmp_path, text))


def test_constraint_on_a_metric_nobody_provides(tiny_yaml, tmp_path):
    text = tiny_yaml.read_text().replace("{metric: params_m, max: 0.05}", "{metric: latency_ms, max: 1.0}")
    with pytest.raises(ConfigError, match=r"constraints\[0\].metric: no evaluator provides 'latency_ms'"):
        load_experiment(_write(tmp_path, text))


def test_missing_dataset_path(tiny_yaml, tmp_path):
    text = tiny_yaml.read_text().replace("  name: digits\n", f"  name: image_folder\n  path: {tmp_path / 'nope'}\n")
    with pytest.raises(ConfigError, match=r"dataset.path: .*nope does not exist"):
        load_experiment(_write(tmp_path, text))


def test_duplicate_keys_are_rejected_with_both_lines(tmp_path):
    with pytest.raises(ConfigError, match=r"exp.yaml:3: duplicate key 'seed' \(first at line 2\)"):
        load_experiment(_write(tmp_path, "name: a\nseed: 1\nseed: 2\n"))


def test_wrong_top_level_type_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="a mapping"):
        load_experiment(_write(tmp_path, "- 1\n- 2\n"))
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_experiment(_write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(ConfigError, match="no such file"):
        load_experiment(tmp_path / "missing.yaml")


def test_two_evaluators_providing_one_metric(tiny_yaml, tmp_path):
    text = tiny_yaml.read_text().replace("  - name: complexity\n", "  - name: complexity\n  - name: complexity\n")
    with pytest.raises(ConfigError, match="'params_m' is provided by 2 evaluators"):
        load_experiment(_write(tmp_path, text))


def test_set_overrides(tiny_yaml):
    exp = load_experiment(tiny_yaml, ["budget.trials=3", "evaluators.1.params.epochs=2", "strategy=random"])
    assert exp.config.budget.trials == 3
    assert exp.resolved()["evaluators"][1]["params"]["epochs"] == 2
    assert exp.config.strategy.name == "random"


def test_override_errors():
    data = loads_yaml("a: {b: [1, 2]}\n").data
    apply_override(data, "a.b.1=5")
    assert data == {"a": {"b": [1, 5]}}
    apply_override(data, "c.d=x")
    assert data["c"] == {"d": "x"}
    for bad, msg in (("nokey", "KEY=VALUE"), ("a.b.7=1", "out of range"), ("a.b.x=1", "list index")):
        with pytest.raises(ConfigError, match=msg):
            apply_override(data, bad)


def test_where_names_the_override_that_renamed_a_component():
    text = "space: {name: mbv3, params: {width: 2}}\nstrategy: {name: random, params: {pop: 3}}\n"
    loaded = loads_yaml(text, source="exp.yaml", overrides=["space.name=nb201"])
    assert loaded.where(("space", "params", "width")) == "exp.yaml:1 with --set space.name=nb201"
    assert loaded.where(("strategy", "params", "pop")) == "exp.yaml:2"  # another component: not its rename
    assert loaded.where(("space", "name")) == "--set space.name=nb201"
