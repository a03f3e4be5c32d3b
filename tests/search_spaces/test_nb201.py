from __future__ import annotations

import csv
import itertools
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.nb201 import EDGES, OPS, NB201Space, unique_str
from hwnas.testing import check_space, check_space_build

BEST = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_1x1~2|"


def _all_cells(space: NB201Space) -> list[Architecture]:
    return [space.from_ops(ops) for ops in itertools.product(range(len(OPS)), repeat=len(EDGES))]


def _calibrated_onnx_diff(model, input_shape, tmp_path: Path) -> tuple[float, float]:
    """(ONNX-vs-torch max abs diff, output spread over inputs) after BN statistics are set from random data.

    A freshly initialised NB201 network in eval mode shrinks its activations cell after cell (BN running
    statistics are still 0/1), so its output hardly depends on the input; calibrating BN makes the
    comparison meaningful.
    """
    import torch

    from hwnas.latency.onnx_export import export_onnx, onnx_max_abs_diff

    gen = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # cumulative average
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, *input_shape, generator=gen))
    model.eval()
    x = torch.randn(2, *input_shape, generator=gen)
    with torch.no_grad():
        y = model(x)
    path = export_onnx(model, input_shape, tmp_path / "m.onnx")
    return onnx_max_abs_diff(model, path, x[:1].numpy()), float((y[0] - y[1]).abs().max())


def test_registered_and_conformant():
    space = SPACES.get("nb201")()
    assert isinstance(space, NB201Space)
    check_space(space)
    assert check_space_build(space) < 1e-3


def test_isomorphism_classes_by_enumerating_all_15625():
    space = NB201Space()
    cells = _all_cells(space)
    assert len(cells) == space.size() == 15625
    canon = [space.canonicalize(a) for a in cells]
    assert len({c.arch_id for c in canon}) == 6466 == space.unique_size()
    for a, c in zip(cells[::7], canon[::7]):  # the representative is a member of the class, and a fixed point
        assert space.unique_str(c) == space.unique_str(a)
        assert space.canonicalize(c) == c
        assert space.ops_of(c) <= space.ops_of(a)  # the smallest gene tuple of the class


def test_representative_table_agrees_with_unique_str_on_every_cell():
    from hwnas.search_spaces import nb201

    first: dict[str, int] = {}
    expected = [first.setdefault(unique_str(nb201._ops(code)), code) for code in range(nb201.NUM_CELLS)]
    assert nb201._representatives().tolist() == expected


def test_partition_matches_nats_bench_unique_string(shared_data):
    space = NB201Space()
    by_unique: dict[str, set[str]] = defaultdict(set)
    with open(shared_data / "nas-bench-201" / "nats_bench_200ep_test.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 15625
    for row in rows:
        arch = space.from_str(row["ArchitectureString"])
        assert space.unique_str(arch) == row["UniqueString"]
        by_unique[row["UniqueString"]].add(space.canonicalize(arch).arch_id)
    assert len(by_unique) == 6466
    assert all(len(ids) == 1 for ids in by_unique.values())  # one canonical id per published class


def test_dead_edges_and_commuting_sums_share_an_id():
    space = NB201Space()
    # node 1 is unused (e2_1 and e3_1 are none): whatever e1_0 holds, the cell is the same
    dead = [space.from_str(f"|{op}~0|+|nor_conv_3x3~0|none~1|+|skip_connect~0|none~1|nor_conv_1x1~2|") for op in OPS]
    assert len({space.canonicalize(a).arch_id for a in dead}) == 1
    assert space.canonicalize(dead[3]).genes["e1_0"] == 0  # the representative drops the dead op
    # node 1 = node 0 (skip): conv1x1 on edge 0->3 plus conv3x3 on 1->3 equals the swapped pair
    a = space.from_str("|skip_connect~0|+|none~0|none~1|+|nor_conv_1x1~0|nor_conv_3x3~1|none~2|")
    b = space.from_str("|skip_connect~0|+|none~0|none~1|+|nor_conv_3x3~0|nor_conv_1x1~1|none~2|")
    assert a != b and space.canonicalize(a) == space.canonicalize(b)
    # an op reading a zero node 1 is zero
    c = space.from_str("|none~0|+|none~0|nor_conv_3x3~1|+|skip_connect~0|avg_pool_3x3~1|nor_conv_1x1~2|")
    d = space.from_str("|none~0|+|none~0|none~1|+|skip_connect~0|none~1|nor_conv_1x1~2|")
    assert space.canonicalize(c) == space.canonicalize(d)
    # but a different live op is a different cell
    e = space.from_str("|none~0|+|none~0|none~1|+|skip_connect~0|none~1|nor_conv_3x3~2|")
    assert space.canonicalize(e) != space.canonicalize(d)


def test_unique_str_format():
    assert unique_str((0,) * 6) == "#+#+#"
    assert unique_str((1, 0, 0, 1, 0, 0)) == "#+#+0"
    assert NB201Space().unique_str(NB201Space().from_str(BEST)) == (
        "(((0)@nor_conv_3x3)@nor_conv_3x3+(0)@nor_conv_3x3)@nor_conv_1x1+((0)@nor_conv_3x3)@nor_conv_3x3+0"
    )


def test_string_round_trip_for_every_cell():
    space = NB201Space()
    for arch in _all_cells(space):
        text = space.to_str(arch)
        assert space.from_str(text) == arch
    assert space.to_str(space.from_str(BEST)) == BEST


def test_string_of_a_shared_sampled_cell_is_kept_and_stays_right():
    """Sampled cells are shared objects that keep their string after the first to_str; a cell built anew
    from the same genes, and the same cell under another space name, give the same string."""
    space = NB201Space()
    rng = np.random.default_rng(0)
    for arch in space.sample_many(rng, 50):
        first = space.to_str(arch)
        assert space.to_str(arch) is first
        assert space.to_str(Architecture(arch.space, dict(arch.genes))) == first
        assert space.from_str(first) == arch


def test_string_and_index_match_the_published_table(shared_data):
    space = NB201Space()
    table = shared_data / "nas-bench-201" / "nb201_accuracy.csv"
    with open(table, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        arch = space.from_str(row["arch_str"])
        assert space.to_str(arch) == row["arch_str"]
        assert space.index(arch, table) == int(row["index"])
    assert space.index(space.from_str(BEST), table) == 6111
    assert space.to_str(space.from_index(6111, table)) == BEST
    # the nats file has no index column: its row order is the index
    assert space.index(space.from_str(BEST), shared_data / "nas-bench-201" / "nats_bench_200ep_test.csv") == 6111


@pytest.mark.parametrize(
    "text, message",
    [
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|", r"expected 3 nodes separated by '\+', got 2"),
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|conv_5x5~1|+|skip_connect~0|none~1|none~2|",
         r"edge e2_1 \(1->2\) 'conv_5x5~1': unknown op 'conv_5x5'"),
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|+|skip_connect~0|none~1|none~2|", r"node 2 has 1 edge\(s\), expected 2"),
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|none~1|+|skip_connect~0|none~2|none~1|",
         r"edge e3_1 \(1->3\) 'none~2': input ~2 should be ~1"),
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|none~1|+|skip_connect~0|none|none~2|",
         r"edge e3_1 \(1->3\) 'none': expected op~1"),
        ("nor_conv_3x3~0|+|nor_conv_3x3~0|none~1|+|skip_connect~0|none~1|none~2|",
         r"node 1 'nor_conv_3x3~0\|' must look like"),
    ],
)
def test_bad_strings_name_the_edge(text, message):
    with pytest.raises(InvalidArchitecture, match=message):
        NB201Space().from_str(text)


def test_mutation_always_changes_the_class_and_is_seeded():
    space = NB201Space()
    archs = {space.canonicalize(a).arch_id: space.canonicalize(a) for a in _all_cells(space)}.values()
    assert len(archs) == 6466
    for arch in archs:  # every class, including the all-`none` cell
        child = space.mutate(arch, np.random.default_rng(5))
        assert child == space.mutate(arch, np.random.default_rng(5))
        assert space.canonicalize(child) == child and child.arch_id != arch.arch_id
        changed = sum(x != y for x, y in zip(space.ops_of(arch), space.ops_of(child)))
        assert changed >= 1


@pytest.mark.parametrize("merge", [True, False])
def test_mutation_draws_from_every_single_edge_change_that_changes_the_class(merge):
    """The definition, spelled out per call (what mutate computed before it kept each cell's options): per edge,
    per other op, the canonical child where its class differs, repeats kept; one draw of the same generator."""
    space = NB201Space(merge_isomorphic=merge)
    cells = _all_cells(space)
    for i in np.random.default_rng(0).choice(len(cells), size=300, replace=False):
        arch = space.canonicalize(cells[int(i)])
        ops = space.ops_of(arch)
        options = []
        for k in range(len(EDGES)):
            for op in range(len(OPS)):
                if op != ops[k]:
                    child = space.canonicalize(space.from_ops((*ops[:k], op, *ops[k + 1 :])))
                    if child.arch_id != arch.arch_id:
                        options.append(child)
        for seed in (1, 2):
            expected = options[int(np.random.default_rng(seed).integers(len(options)))]
            assert space.mutate(arch, np.random.default_rng(seed)) == expected
            assert space.mutate(cells[int(i)], np.random.default_rng(seed)) == expected  # not canonical yet: same


def test_layers_are_the_live_ops_of_every_cell():
    space = NB201Space()
    arch = space.from_str(BEST)
    keys = space.layers(arch)
    assert keys[0] == "nb201:stem:in3:out16:r32" and keys[-1] == "nb201:head:in64:cls10:r8"
    assert keys.count("nb201:nor_conv_3x3:c16:r32") == 5 * 4
    assert keys.count("nb201:nor_conv_1x1:c32:r16") == 5
    assert keys.count("nb201:skip_connect:c64:r8") == 5
    assert "nb201:resblock:in16:out32:r32:s2" in keys and "nb201:resblock:in32:out64:r16:s2" in keys
    assert keys.count("nb201:add:c16:r32") == 5 * 3  # node 2 adds two inputs, node 3 three
    assert len(keys) == 1 + 3 * 5 * (6 + 3) + 2 + 1
    # a dead op is neither listed nor built
    dead = space.from_str("|nor_conv_3x3~0|+|nor_conv_3x3~0|none~1|+|skip_connect~0|none~1|nor_conv_1x1~2|")
    assert space.layers(dead).count("nb201:nor_conv_3x3:c16:r32") == 5  # e2_0 only; e1_0 feeds nothing
    assert space.cell_ops(dead)[0] == "none"


def test_cell_plan_runs_each_parameter_free_op_once_per_value_and_skips_dead_nodes():
    from hwnas.search_spaces.nb201 import cell_plan

    # node 2 is the input (a skip), so both pools into node 3 pool the same tensor: one pool, one add
    plan = cell_plan(("none", "skip_connect", "none", "avg_pool_3x3", "none", "avg_pool_3x3"))
    assert plan.work == ["skip_connect", "avg_pool_3x3", "add"] and plan.live == (2, 3)
    assert plan.values["e3_0"] == plan.values["e3_2"]
    # two convolutions on one value have their own weights: both run
    plan = cell_plan(("nor_conv_3x3", "nor_conv_3x3", "none", "none", "none", "skip_connect"))
    assert plan.work == ["nor_conv_3x3", "skip_connect"] and plan.live == (2, 3)  # node 1 feeds nothing
    # a skip or a pool of a node without inputs adds zero: neither runs, nor does the addition
    for zero_term in ("skip_connect", "avg_pool_3x3"):
        plan = cell_plan(("none", "none", "none", "nor_conv_1x1", "none", zero_term))
        assert plan.work == ["nor_conv_1x1"] and set(plan.values) == {"e3_0"}
    plan = cell_plan(("avg_pool_3x3", "none", "none", "skip_connect", "avg_pool_3x3", "none"))  # pools of nonzeros run
    assert plan.work == ["avg_pool_3x3", "skip_connect", "avg_pool_3x3", "add"]
    # a zero is made (one multiply, shared) where a convolution reads it or the cell's output is zero
    plan = cell_plan(("none", "none", "none", "nor_conv_1x1", "none", "nor_conv_3x3"))
    assert plan.work == ["nor_conv_1x1", "zero", "nor_conv_3x3", "add"]
    assert cell_plan(("none", "none", "none", "none", "none", "avg_pool_3x3")).work == ["zero"]
    assert cell_plan(("none",) * 6).work == ["zero"]


def test_cell_computes_every_edge_as_written_though_it_skips_dead_and_zero_work():
    """The cell's output equals the cell as written (every edge run, ``none`` as zeros), trained BatchNorm
    statistics included, for cells with zero nodes, dead nodes and shared pools."""
    import torch

    from hwnas.search_spaces.nb201_modules import NB201Cell

    rng = np.random.default_rng(0)
    cells = [tuple(int(v) for v in rng.integers(0, len(OPS), 6)) for _ in range(150)]
    cells += [(0, 0, 0, 2, 0, 1), (0, 0, 0, 2, 0, 2), (0, 0, 0, 0, 0, 4), (0, 1, 0, 0, 0, 4), (0,) * 6]
    x = torch.randn(2, 4, 6, 6, generator=torch.Generator().manual_seed(0))
    for ops in cells:
        cell = NB201Cell([OPS[o] for o in ops], EDGES, 4)
        cell.train()
        cell(x)  # running statistics of their own
        cell.eval()
        nodes = [x]
        for to in (1, 2, 3):
            total = torch.zeros_like(x)
            for name, t, frm in EDGES:
                if t == to and name in cell.edges:
                    total = total + cell.edges[name](nodes[frm])
            nodes.append(total)
        with torch.no_grad():
            assert torch.allclose(cell(x), nodes[3], atol=1e-5), ops


def test_layers_count_the_ops_onnxruntime_runs(tmp_path):
    """The units layers() lists per cell are the pools and convolutions left in onnxruntime's optimised graph."""
    import onnx
    import onnxruntime as ort

    from hwnas.latency.onnx_export import export_onnx

    space = NB201Space(cells_per_stage=1, resolution=16, merge_isomorphic=False)
    # pools of one value (through skips), a dead node, a zero node
    for cell in ("|skip_connect~0|+|avg_pool_3x3~0|avg_pool_3x3~1|+|skip_connect~0|skip_connect~1|avg_pool_3x3~2|",
                 "|nor_conv_3x3~0|+|none~0|none~1|+|avg_pool_3x3~0|none~1|avg_pool_3x3~2|",
                 "|none~0|+|skip_connect~0|none~1|+|avg_pool_3x3~0|none~1|avg_pool_3x3~2|"):
        arch = space.from_str(cell)
        keys = space.layers(arch)
        path = export_onnx(space.build(arch).eval(), (3, 16, 16), tmp_path / "net.onnx")
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = str(tmp_path / "opt.onnx")
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        ops = [n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node]
        pools = sum(k.split(":")[1] == "avg_pool_3x3" for k in keys)
        convs = sum(k.split(":")[1].startswith("nor_conv") for k in keys)
        assert ops.count("AveragePool") == pools + 2, cell  # + the two residual reductions' shortcut pools
        # + the stem, the reductions' three convs and the final BatchNorm (run as a depthwise 1x1 convolution)
        assert ops.count("Conv") == convs + 1 + 2 * 3 + 1, cell


def test_final_batchnorm_is_a_batchnorm_that_evaluates_as_a_depthwise_convolution():
    """The same parameters, statistics and outputs as nn.BatchNorm2d, trained and in eval; only the graph differs."""
    import copy

    import torch

    from hwnas.search_spaces.nb201_modules import DepthwiseBatchNorm2d

    torch.manual_seed(0)
    bn = DepthwiseBatchNorm2d(6)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    plain = torch.nn.BatchNorm2d(6)
    plain.load_state_dict(bn.state_dict())
    assert list(plain.state_dict()) == list(bn.state_dict())
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(4, 6, 5, 5, generator=gen) * 3 + 1
        assert torch.allclose(bn(x), plain(x), atol=1e-5)
    for name, value in plain.state_dict().items():
        assert torch.allclose(bn.state_dict()[name].float(), value.float(), atol=1e-6), name
    bn.eval(), plain.eval()
    x = torch.randn(2, 6, 5, 5, generator=gen)
    assert torch.allclose(bn(x), plain(x), atol=1e-5)
    assert not torch.allclose(bn(x), x, atol=1e-2), "the statistics should make it more than an identity"
    no_stats, plain_no_stats = (cls(6, track_running_stats=False).eval()
                                for cls in (DepthwiseBatchNorm2d, torch.nn.BatchNorm2d))
    plain_no_stats.load_state_dict(copy.deepcopy(no_stats.state_dict()))
    assert torch.allclose(no_stats(x), plain_no_stats(x), atol=1e-5)  # no running statistics: batch statistics


def test_an_int8_network_keeps_its_last_stage_channels_last(tmp_path):
    """A BatchNorm after a pool cannot fold: at int8 onnxruntime kept it as a float op and ran the last stage's
    pools channels-first (2.2x as slow at 64 channels, 16x16). As a depthwise convolution it is quantised too."""
    import onnx
    import onnxruntime as ort

    from hwnas.latency.onnx_export import export_onnx, quantize_int8

    space = NB201Space(cells_per_stage=2, resolution=32, merge_isomorphic=False)
    arch = space.from_str("|none~0|+|none~0|none~1|+|avg_pool_3x3~0|none~1|none~2|")  # one pool per cell
    fp32 = export_onnx(space.build(arch), (3, 32, 32), tmp_path / "n.onnx")
    q = quantize_int8(fp32, tmp_path / "q.onnx", (3, 32, 32))
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(str(q), so, providers=["CPUExecutionProvider"])
    nodes = onnx.load(str(tmp_path / "opt.onnx")).graph.node
    pools = [n for n in nodes if n.op_type == "QLinearAveragePool"]
    assert len(pools) == 3 * 2 + 2, "every cell's pool and the reductions' shortcut pools run quantised"
    layouts = [next((a.i for a in n.attribute if a.name == "channels_last"), 0) for n in pools]
    assert layouts == [1] * len(pools)
    assert "BatchNormalization" not in [n.op_type for n in nodes]


def test_build_follows_params_and_exports(tmp_path):
    import torch

    space = NB201Space(num_classes=100, channels=8, cells_per_stage=2, resolution=16)
    arch = space.from_str(BEST)
    model = space.build(arch)
    assert model(torch.zeros(2, 3, 16, 16)).shape == (2, 100)
    assert sum(type(m).__name__ == "NB201Cell" for m in model.modules()) == 3 * 2
    assert model.classifier.in_features == 32
    largest = NB201Space().from_ops((3,) * 6)  # every edge a 3x3 conv: the most compute
    diff, spread = _calibrated_onnx_diff(NB201Space().build(largest), (3, 32, 32), tmp_path)
    assert spread > 1e-3, "the calibrated network's output should depend on its input"
    assert diff < 1e-4


def test_all_none_cell_builds_to_a_constant_but_valid_network():
    import torch

    space = NB201Space(cells_per_stage=1)
    arch = space.from_ops((0,) * 6)
    assert space.canonicalize(arch) == arch
    y = space.build(arch).eval()(torch.randn(2, 3, 32, 32))
    assert torch.isfinite(y).all() and y.shape == (2, 10)


def test_index_table_problems_are_named(tmp_path):
    space = NB201Space()
    arch = space.from_str(BEST)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        space.index(arch, tmp_path / "none.csv")
    (tmp_path / "t.csv").write_text("index,pixel3\n0,1.0\n")
    with pytest.raises(
        ValueError, match=r"no arch string column \(arch_str or ArchitectureString\); its columns are: index, pixel3"
    ):
        space.index(arch, tmp_path / "t.csv")
    (tmp_path / "u.csv").write_text(f"index,arch_str\n7,{BEST}\n")
    assert space.index(arch, tmp_path / "u.csv") == 7
    with pytest.raises(InvalidArchitecture, match="is not in the index table"):
        space.index(space.from_ops((0,) * 6), tmp_path / "u.csv")


def test_resolution_must_be_a_multiple_of_4():
    with pytest.raises(ValueError, match="multiple of 4"):
        NB201Space(resolution=30)
