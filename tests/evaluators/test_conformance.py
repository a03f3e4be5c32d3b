"""Every registered evaluator passes the shipped Evaluator conformance suite (hwnas.testing.check_evaluator)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import hwnas.testing  # noqa: F401  (registers "fake")
from hwnas.data import DataConfig, DataSource
from hwnas.evaluation import EVALUATORS, EvalContext
from hwnas.search_spaces import SPACES
from hwnas.testing import check_evaluator

TINY_MBV3 = {"resolution": 8, "head_channels": 8, "in_chans": 1, "num_classes": 10,
             "stages": [{"channels": 4, "stride": 1, "depths": [1]}, {"channels": 8, "stride": 2, "depths": [1]}]}


def _case(name: str, tmp_path: Path, request: Any) -> tuple[Any, dict[str, Any], bool, Path | None]:
    """(space, params, deterministic, artifacts_dir) for one evaluator."""
    if name in ("complexity", "ort_latency", "train", "memory", "zero_cost"):
        space = SPACES.create("mbv3", TINY_MBV3)
        params = {"complexity": {}, "ort_latency": {"warmup": 1, "repeats": 5},
                  "train": {"epochs": 1, "batch_size": 32}, "memory": {},
                  "zero_cost": {"proxies": ["synflow", "snip", "grad_norm", "naswot", "ntk_cond"], "batch_size": 16,
                                "ntk_batch": 8}}[name]
        return space, params, name != "ort_latency", tmp_path
    if name == "fake":
        return SPACES.create("nb201"), {"fail_fraction": 0.3}, True, None
    if name == "function":
        return SPACES.create("nb201"), {"callable": "hwnas.testing.scores:gene_count",
                                        "provides": ["gene_sum", "nonzero"]}, True, None
    if name == "supernet":
        from hwnas.supernet.train import SupernetTrainConfig, train_supernet

        cfg = SupernetTrainConfig.model_validate({
            "space": {"name": "mbv3", "params": TINY_MBV3}, "dataset": {"name": "digits", "max_images": 120},
            "phases": [{"phase": "expand", "epochs": 1}], "batch_size": 32, "calib_images": 32, "device": "cpu"})
        train_supernet(cfg, tmp_path / "supernet")
        return (SPACES.create("mbv3", TINY_MBV3), {"checkpoint": str(tmp_path / "supernet"), "calib_images": 32},
                True, tmp_path)
    shared = request.getfixturevalue("shared_data")  # skips with its reason when the data is absent
    if name == "benchmark":
        return SPACES.create("nb201"), {"table": str(shared / "nas-bench-201" / "nb201_accuracy.csv"),
                                        "columns": {"top1": "cifar10_test_200ep"}}, True, None
    if name == "latency_table":
        from hwnas.latency.published import hw_nas_bench_fbnet_table

        space = SPACES.create("fbnet")
        table = tmp_path / "pixel3.json"
        hw_nas_bench_fbnet_table(shared / "hw-nas-bench" / "fbnet_lut.json", space=space,
                                 metric="pixel3_latency").save(table)
        return space, {"table": str(table)}, True, None
    if name == "latency_model":
        import numpy as np

        from hwnas.latency.fewshot import fit_fewshot, save_model
        from hwnas.latency.published import hw_nas_bench_fbnet_table
        from hwnas.latency.tables.model import TableLatencyModel

        space = SPACES.create("fbnet")
        lut = shared / "hw-nas-bench" / "fbnet_lut.json"
        known = [hw_nas_bench_fbnet_table(lut, space=space, metric=m) for m in ("pixel3_latency", "edgegpu_latency")]
        new = TableLatencyModel(table=hw_nas_bench_fbnet_table(lut, space=space, metric="raspi4_latency"), space=space)
        archs = [space.sample(np.random.default_rng(i)) for i in range(12)]
        model = fit_fewshot(space, list(zip(archs, new.predict_ms(archs))), known, device="raspi4",
                            rng=np.random.default_rng(0), source_samples=200)
        save_model(model, tmp_path / "raspi4.json")
        return space, {"model": str(tmp_path / "raspi4.json")}, True, None
    if name == "predictor":
        from hwnas.predictors.fit import fit_predictor, from_table

        space = SPACES.create("nb201")
        data = from_table(space, shared / "nas-bench-201" / "nb201_accuracy.csv", "cifar10_test_200ep")
        data.archs, data.y = data.archs[:300], data.y[:300]
        model = fit_predictor(data, "gbt", {"n_estimators": 50}, features="cell", folds=0, seed=0)
        model.save(tmp_path / "gbt.json")
        return space, {"file": str(tmp_path / "gbt.json"), "metric": "top1"}, True, None
    pytest.fail(f"evaluator {name!r} is registered but has no conformance case here: add one")


@pytest.mark.parametrize("name", EVALUATORS.names())
def test_evaluator_conformance(name, tmp_path, request):
    space, params, deterministic, artifacts = _case(name, tmp_path, request)
    data = DataSource(DataConfig(name="digits", max_images=120)) if name in ("train", "zero_cost", "supernet") else None
    cls = EVALUATORS.get(name)
    resolved = cls.Params.model_validate(params).model_dump(mode="json")

    def factory() -> Any:
        context = EvalContext(space=space, data=data, artifacts_dir=artifacts, seed=1)
        return EVALUATORS.create(name, resolved, context=context)

    check_evaluator(factory, space, n=2 if name == "train" else 4, deterministic=deterministic,
                    params=resolved, params_model=cls.Params)


def test_the_suite_catches_an_evaluator_that_returns_too_few_results():
    space = SPACES.create("nb201")

    class Short:
        provides = ("x",)
        cheap = True

        def fingerprint(self) -> str:
            return "short"

        def evaluate(self, archs):
            return [{"x": 1.0}]

    with pytest.raises(AssertionError, match="one result per architecture"):
        check_evaluator(Short, space)


def test_the_suite_catches_an_evaluator_whose_batch_differs_from_single_calls():
    space = SPACES.create("nb201")

    class Stateful:
        provides = ("x",)
        cheap = True

        def __init__(self) -> None:
            self.calls = 0

        def fingerprint(self) -> str:
            return "stateful"

        def evaluate(self, archs):
            self.calls += 1
            return [{"x": float(self.calls)} for _ in archs]

    with pytest.raises(AssertionError, match="batched and single evaluation give different numbers"):
        check_evaluator(Stateful, space)



def test_ort_latency_times_networks_side_by_side_in_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``measure_rounds``: each network converted once, every one timed in each round, the artifacts removed."""
    import tempfile

    import numpy as np

    space = SPACES.create("mbv3", TINY_MBV3)
    ev = EVALUATORS.create("ort_latency", {"warmup": 1, "repeats": 5}, context=EvalContext(space=space))
    archs = [space.sample(np.random.default_rng(i)) for i in range(2)] + [space.largest()]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the evaluator's scratch folder goes
    convert, converted = ev.backend.convert, []
    monkeypatch.setattr(ev.backend, "convert", lambda *a, **k: converted.append(a[-1]) or convert(*a, **k))
    rounds = ev.measure_rounds(archs, 3)
    assert len(rounds) == 3 and all(len(row) == 3 and all(ms > 0 for ms in row) for row in rounds)
    assert len(converted) == 3  # once each, not once per round
    assert not list(tmp_path.glob("hwnas-ort-*"))  # its artifacts are gone
