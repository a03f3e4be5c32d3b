"""int8 on the CPU: graphs statically quantised (QDQ) by onnxruntime, timed like fp32, named as int8."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch.nn as nn

from hwnas.evaluation import EVALUATORS, EvalContext
from hwnas.latency.backends import BACKENDS
from hwnas.latency.measure import MeasureProtocol
from hwnas.latency.tables import LatencyTable, LatencyTableError, profile_space, validate_table
from hwnas.search_spaces.nb201 import NB201Space

FAST = MeasureProtocol(warmup=2, repeats=5)


def test_the_int8_graph_is_quantised_and_its_context_says_so(tmp_path):
    backend = BACKENDS.get("onnxruntime")(precision="int8")
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 1))
    path = backend.convert(model, (3, 16, 16), tmp_path, "m")
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]  # the fp32 intermediate is removed
    stats, _ = backend.profile(path, (3, 16, 16), FAST)
    assert stats.median_ms > 0
    assert backend.context("cpu").precision == "int8"
    with pytest.raises(ValueError, match="int8 is measured on the cpu provider"):
        BACKENDS.get("onnxruntime")(provider="cuda", precision="int8")


def test_an_int8_table_profiles_validates_and_names_its_metric(tmp_path):
    space = NB201Space(cells_per_stage=1, channels=8, resolution=16)
    backend = BACKENDS.get("onnxruntime")(precision="int8")
    out = tmp_path / "int8.json"
    rep = profile_space(space, backend, device="here", out=out, protocol=FAST, in_context=True)
    assert rep.failed == 0 and rep.table.context.precision == "int8"
    table = LatencyTable.load(out)
    with pytest.raises(LatencyTableError, match="precision: 'int8' != 'fp32'"):  # an fp32 validation is refused
        validate_table(table, space, BACKENDS.get("onnxruntime")(), n=6, rng=np.random.default_rng(0), protocol=FAST)
    figures = validate_table(table, space, backend, n=6, rng=np.random.default_rng(0), protocol=FAST)
    assert figures["networks"] == 6
    ev = EVALUATORS.get("latency_table")(context=EvalContext(space=space), table=str(out))
    assert ev.provides == ("latency_ms@here-int8",)
    assert ev.evaluate([space.sample(np.random.default_rng(1))])[0]["latency_ms@here-int8"] > 0


def test_ort_latency_measures_the_int8_network_under_an_int8_name():

    space = NB201Space(cells_per_stage=1, channels=8, resolution=16)
    ctx = EvalContext(space=space)
    ev = EVALUATORS.get("ort_latency")(context=ctx, precision="int8", warmup=1, repeats=3)
    assert ev.provides[0] == "latency_ms@int8"
    assert EVALUATORS.get("ort_latency")(context=ctx, precision="int8", device="pi").provides[0] == "latency_ms@pi-int8"
    assert ev.evaluate([space.sample(np.random.default_rng(0))])[0]["latency_ms@int8"] > 0


def test_quantising_units_writes_no_onnxruntime_warnings(tmp_path, capfd):
    """onnxruntime's sessions warn (in C++, on stderr) of each initializer the quantiser's pre-processing drops: a
    ViT's in-context units did, one line per unit, through a whole profile."""
    from hwnas.search_spaces.vit import ViTSpace

    space = ViTSpace(embed_dims=[64], depths=[4], num_heads=[2], mlp_ratios=[2.0], patch_sizes=[8])
    rep = profile_space(space, BACKENDS.get("onnxruntime")(precision="int8"), device="here", out=tmp_path / "t.json",
                        protocol=MeasureProtocol(warmup=1, repeats=2), in_context=True)
    assert rep.failed == 0 and rep.table.entries
    assert "W:onnxruntime" not in capfd.readouterr().err


def _pool_layout(backend, module, shape, tmp_path) -> int:
    """``channels_last`` of the int8 pool in onnxruntime's optimised graph of ``module``."""
    import onnx
    import onnxruntime as ort

    path = backend.convert(module, shape, tmp_path, "m")
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    pools = [n for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node if n.op_type == "QLinearAveragePool"]
    assert len(pools) == 1
    return next(a.i for a in pools[0].attribute if a.name == "channels_last")


def test_between_mode_runs_an_int8_pool_in_the_layout_it_has_inside_a_network(tmp_path):
    """Behind a producer only, onnxruntime runs the quantised pool channels-first (its output leaves the graph);
    with a consumer behind it too, channels-last, as between a network's quantised convolutions."""
    from hwnas.latency.tables.profile import Carrier

    space = NB201Space(cells_per_stage=1, channels=8, resolution=16)
    backend = BACKENDS.get("onnxruntime")(precision="int8")
    module, shape = space.build_layer("nb201:avg_pool_3x3:c8:r16")
    shape = tuple(shape)
    assert _pool_layout(backend, Carrier.chain(module, shape), shape, tmp_path) == 0
    assert _pool_layout(backend, Carrier.chain(module, shape, shape), shape, tmp_path) == 1


def test_between_mode_profiles_every_unit_including_those_that_change_shape(tmp_path):
    from hwnas.latency.tables.profile import Carrier

    space = NB201Space(cells_per_stage=1, channels=8, resolution=16)
    resblock, shape = space.build_layer("nb201:resblock:in8:out16:r16:s2")
    assert Carrier.output_shape(resblock, tuple(shape)) == (16, 8, 8)
    head, shape = space.build_layer("nb201:head:in32:cls10:r4")
    assert Carrier.output_shape(head, tuple(shape)) == (10,)  # the consumer of a vector is an identity
    backend = BACKENDS.get("onnxruntime")(precision="int8")
    rep = profile_space(space, backend, device="here", out=tmp_path / "t.json", protocol=FAST, in_context="between")
    assert rep.failed == 0 and set(rep.table.entries) == set(space.all_layers())
    assert rep.table.protocol["mode"] == "between"
    assert all(e.median_ms >= 0 for e in rep.table.entries.values())
    with pytest.raises(LatencyTableError, match="measurement protocol"):  # not resumed in another mode
        profile_space(space, backend, device="here", out=tmp_path / "t.json", protocol=FAST, in_context=True)
    with pytest.raises(ValueError, match="unknown in-context mode 'beside'"):
        profile_space(space, backend, device="here", out=tmp_path / "u.json", protocol=FAST, in_context="beside")


def test_the_carriers_are_timed_afresh_in_every_round(tmp_path, monkeypatch):
    """One noisy baseline must shift one round of its shape's units, not all of them."""
    from dataclasses import replace

    import hwnas.latency.tables.profile as profile

    timed: list[tuple[int, ...]] = []
    real = profile.measure_network

    def counting(backend, module, shape, protocol, *, workdir, name):
        if name.startswith("carrier"):
            timed.append(tuple(shape))
        return real(backend, module, shape, protocol, workdir=workdir, name=name)

    monkeypatch.setattr(profile, "measure_network", counting)
    space = NB201Space(cells_per_stage=1, channels=8, resolution=16)
    shapes = {tuple(space.build_layer(k)[1]) for k in space.all_layers()}
    profile_space(space, BACKENDS.get("onnxruntime")(), device="here", out=tmp_path / "t.json",
                  protocol=replace(FAST, rounds=2), in_context=True)
    assert sorted(timed) == sorted(list(shapes) * 2)
