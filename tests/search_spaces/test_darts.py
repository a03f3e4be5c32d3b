from __future__ import annotations

import itertools

import numpy as np
import pytest
from pydantic import ValidationError

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.darts import DARTS_V2, PRIMITIVES, DartsSpace, Genotype
from hwnas.testing import check_space, check_space_build

# The genotype the DARTS search code prints (a namedtuple whose concat is a range), from the PC-DARTS code.
PC_DARTS_CIFAR = (
    "Genotype(normal=[('sep_conv_3x3', 1), ('skip_connect', 0), ('sep_conv_3x3', 0), ('dil_conv_3x3', 1), "
    "('sep_conv_5x5', 0), ('sep_conv_3x3', 1), ('avg_pool_3x3', 0), ('dil_conv_3x3', 1)], normal_concat=range(2, 6), "
    "reduce=[('sep_conv_5x5', 1), ('max_pool_3x3', 0), ('sep_conv_5x5', 1), ('sep_conv_5x5', 2), ('sep_conv_3x3', 0), "
    "('sep_conv_3x3', 3), ('sep_conv_3x3', 1), ('sep_conv_3x3', 2)], reduce_concat=range(2, 6))"
)


def _brute_force_count(space: DartsSpace) -> int:
    """Canonical architectures among every assignment of every gene (invalid ones skipped)."""
    genes = space.genes()
    seen = set()
    for values in itertools.product(*(g.choices for g in genes)):
        try:
            seen.add(space.canonicalize(Architecture("darts", dict(zip([g.name for g in genes], values)))).arch_id)
        except InvalidArchitecture:
            continue
    return len(seen)


def test_registered_and_conformant():
    assert SPACES.get("darts") is DartsSpace
    check_space(DartsSpace())


def test_build_exports_and_matches_onnxruntime():
    space = DartsSpace(cells=3, init_channels=8)
    arch = space.sample(np.random.default_rng(7))
    assert check_space_build(space, arch) < 1e-3


def test_darts_v2_text_round_trips_exactly():
    assert Genotype.parse(DARTS_V2).format() == DARTS_V2
    assert Genotype.parse(PC_DARTS_CIFAR).format() == PC_DARTS_CIFAR
    space = DartsSpace()
    arch = space.from_genotype(DARTS_V2)
    assert space.to_genotype(arch, concat_style="list").format() == DARTS_V2
    assert space.to_genotype(arch).format() == DARTS_V2.replace("[2, 3, 4, 5]", "range(2, 6)")
    assert space.to_genotype(space.from_genotype(PC_DARTS_CIFAR)).format() == PC_DARTS_CIFAR
    # the canonical form prints and parses back to itself
    canon = space.canonicalize(arch)
    assert space.from_genotype(str(space.to_genotype(canon))) == canon


def test_darts_v2_genes_follow_darts_numbering():
    arch = DartsSpace().from_genotype(DARTS_V2)
    # normal node 3 (state 5): ('skip_connect', 0), ('dil_conv_3x3', 2)
    assert arch.genes["normal_n3_in0"] == 0 and arch.genes["normal_n3_op0"] == PRIMITIVES.index("skip_connect")
    assert arch.genes["normal_n3_in1"] == 2 and arch.genes["normal_n3_op1"] == PRIMITIVES.index("dil_conv_3x3")


def test_parser_tolerates_layout_and_quotes():
    text = DARTS_V2.replace("'", '"').replace(", ", ",\n    ").replace("Genotype(", "Genotype(\n  ")
    assert Genotype.parse(text) == Genotype.parse(DARTS_V2)


def test_swapped_inputs_share_one_id():
    space = DartsSpace()
    arch = space.from_genotype(DARTS_V2)
    # normal node 2 lists ('sep_conv_3x3', 1) before ('skip_connect', 0): canonical order swaps it
    assert arch.genes["normal_n2_in0"] == 1
    canon = space.canonicalize(arch)
    assert canon.genes["normal_n2_in0"] == 0 and canon.genes["normal_n2_op0"] == PRIMITIVES.index("skip_connect")
    swapped = arch.replace(normal_n2_in0=0, normal_n2_op0=arch.genes["normal_n2_op1"],
                           normal_n2_in1=1, normal_n2_op1=arch.genes["normal_n2_op0"])
    assert swapped != arch
    assert space.canonicalize(swapped).arch_id == canon.arch_id
    swapped_text = DARTS_V2.replace("('sep_conv_3x3', 1), ('skip_connect', 0)",
                                    "('skip_connect', 0), ('sep_conv_3x3', 1)")
    assert swapped_text != DARTS_V2
    assert space.canonicalize(space.from_genotype(swapped_text)).arch_id == canon.arch_id


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("('dil_conv_3x3', 2)", "('dil_conv_3x3', 7)"),
         r"normal\[7\] \(node 3, state 5\): input 7 is out of range \(0\.\.4\)"),
        (("('max_pool_3x3', 0), ('max_pool_3x3', 1)", "('conv_9x9', 0), ('max_pool_3x3', 1)"),
         r"reduce\[0\] \(node 0, state 2\): unknown op 'conv_9x9'"),
        (("('skip_connect', 0), ('dil_conv_3x3', 2)", "('none', 0), ('dil_conv_3x3', 2)"),
         r"normal\[6\].*'none' is not a member"),
        (("('skip_connect', 0), ('dil_conv_3x3', 2)", "('skip_connect', 2), ('dil_conv_3x3', 2)"),
         r"normal node 3 \(state 5\) takes input 2 twice"),
        (("normal_concat=[2, 3, 4, 5]", "normal_concat=[4, 5]"), r"normal_concat=\[4, 5\]"),
        ((", ('skip_connect', 0), ('dil_conv_3x3', 2)]", "]"), r"normal has 6 entries; this space has 4 nodes x 2 = 8"),
        (("normal_concat", "normal_concatt"), r"unknown field 'normal_concatt' at position \d+"),
        (("('sep_conv_3x3', 0)", "('sep_conv_3x3', __import__('os'))"), r"expected an integer at position \d+"),
        (("Genotype(", "Genotype(normal=[], "), r"field 'normal' given twice"),
        ((")", ")x"), r"expected ','"),
    ],
)
def test_bad_genotype_text_says_what_and_where(edit, message):
    old, new = edit
    text = DARTS_V2.replace(old, new, 1)
    assert text != DARTS_V2
    with pytest.raises(InvalidArchitecture, match=message):
        DartsSpace().from_genotype(text)


def test_unterminated_or_foreign_text_is_rejected():
    with pytest.raises(InvalidArchitecture, match="at the end of the text"):
        Genotype.parse(DARTS_V2[:-1])
    with pytest.raises(InvalidArchitecture, match="expected 'Genotype'"):
        Genotype.parse("Net(normal=[])")
    with pytest.raises(InvalidArchitecture, match="unexpected character ';'"):
        Genotype.parse("Genotype(normal=[]);")


def test_equal_inputs_are_not_members():
    space = DartsSpace()
    arch = space.sample(np.random.default_rng(0))
    bad = arch.replace(reduce_n1_in0=1, reduce_n1_in1=1)
    with pytest.raises(InvalidArchitecture, match=r"reduce node 1 .* takes input 1 twice"):
        space.validate(bad)


@pytest.mark.parametrize(("params", "expected"), [
    ({"nodes": 1, "ops": ["max_pool_3x3", "skip_connect", "sep_conv_3x3"]}, 81),  # per cell: 1 pair x 3^2 ops
    ({"nodes": 2, "ops": ["sep_conv_5x5"]}, 9),  # per cell: 1 x 3 input pairs
])
def test_size_matches_brute_force_count(params, expected):
    space = DartsSpace(**params)
    assert space.size() == expected
    assert _brute_force_count(space) == expected


def test_full_space_size():
    # per cell prod_i C(i+2, 2) * 7^2 = 180 * 7^8; two cells (NAS-Bench-301 quotes ~10^18)
    assert DartsSpace().size() == (180 * 7**8) ** 2 == 1_076_746_950_455_072_400


def test_sample_is_uniform_over_input_pairs():
    space = DartsSpace()
    rng = np.random.default_rng(3)
    pairs = [tuple(sorted((a.genes["normal_n2_in0"], a.genes["normal_n2_in1"])))
             for a in (space.sample(rng) for _ in range(3000))]
    counts = np.array([pairs.count(p) for p in itertools.combinations(range(4), 2)])
    assert counts.sum() == 3000 and counts.min() > 400  # 6 pairs, 500 expected each


def test_mutate_always_moves_and_single_member_space_refuses():
    space = DartsSpace(nodes=2, ops=["skip_connect", "sep_conv_3x3"])
    rng = np.random.default_rng(5)
    arch = space.sample(rng)
    for _ in range(200):
        child = space.mutate(arch, rng)
        assert child != arch and space.canonicalize(child) == child
        arch = child
    tiny = DartsSpace(nodes=1, ops=["skip_connect"])
    assert tiny.size() == 1
    with pytest.raises(InvalidArchitecture, match="single architecture"):
        tiny.mutate(tiny.sample(rng), rng)


def test_crossover_keeps_nodes_whole():
    space = DartsSpace()
    rng = np.random.default_rng(11)
    a, b = space.sample(rng), space.sample(rng)
    for seed in range(20):
        child = space.crossover(a, b, np.random.default_rng(seed))
        for cell in ("normal", "reduce"):
            for i in range(4):
                node = {k: v for k, v in child.genes.items() if k.startswith(f"{cell}_n{i}_")}
                assert node in ({k: a.genes[k] for k in node}, {k: b.genes[k] for k in node})


def test_layers_follow_the_genes_and_build_matches_them():
    space = DartsSpace(cells=3, init_channels=8)
    arch = space.canonicalize(space.from_genotype(DARTS_V2))
    keys = space.layers(arch)
    assert keys[0] == "darts_stem:i3:o24:k3:r32" and keys[-1] == "darts_head:i128:cls10:r8"
    # 3 cells: normal, reduce (1/3), reduce (2/3); 2 preprocess + 8 ops each, less the ops that repeat one on the
    # same state (one tensor): the normal cell's second skip of c_{k-2}; per reduction cell one max pool of
    # c_{k-2}, two of c_{k-1} and two skips of node 0
    assert len(keys) == 2 + 3 * 10 - (1 + 2 * 5)
    reduce_ops = [k for k in keys if ":c16:" in k and k.startswith("darts_op")]
    assert reduce_ops.count("darts_op:max_pool_3x3:c16:s2:r32") == 2 and len(reduce_ops) == 3
    assert "darts_op:max_pool_3x3:c16:s2:r32" in keys  # first reduction: channels doubled, stride 2 on c_{k-1}
    assert "darts_op:skip_connect:c16:s1:r16" in keys  # reduce edge from an intermediate node: stride 1, halved res
    assert "darts_fr:i32:o32:r32" in keys  # the cell after a reduction: factorized reduce of c_{k-2} (4 x 8 ch)
    changed = arch.replace(normal_n0_op0=PRIMITIVES.index("sep_conv_5x5"))
    assert space.layers(changed) != keys and "darts_op:sep_conv_5x5:c8:s1:r32" in space.layers(changed)

    model = space.build(arch)
    assert len(model.cells) == 3 and sum(len(c.ops) for c in model.cells) == 24
    assert [c.c for c in model.cells] == [8, 16, 32]


def test_a_cell_computes_a_repeated_parameter_free_op_once_and_its_output_is_unchanged():
    import torch

    from hwnas.search_spaces.darts import shared_edges

    edges = [("max_pool_3x3", 0, 2), ("max_pool_3x3", 1, 2), ("max_pool_3x3", 0, 2), ("sep_conv_3x3", 1, 2),
             ("skip_connect", 2, 1), ("sep_conv_3x3", 1, 2), ("skip_connect", 2, 1), ("sep_conv_3x3", 1, 2)]
    assert shared_edges(edges) == [None, None, 0, None, None, None, 4, None]  # convolutions have their own weights
    space = DartsSpace(cells=3, init_channels=8)
    model = space.build(space.canonicalize(space.from_genotype(DARTS_V2))).eval()
    cell = model.cells[1]
    s0, s1 = torch.randn(1, 24, 32, 32), torch.randn(1, 32, 32, 32)  # the stem's output, the first cell's
    with torch.no_grad():  # every edge run on its own, as written, gives the same output
        states = [cell.preprocess0(s0), cell.preprocess1(s1)]
        for k in range(0, len(cell.ops), 2):
            states.append(cell.ops[k](states[cell.inputs[k]]) + cell.ops[k + 1](states[cell.inputs[k + 1]]))
        assert torch.equal(cell(s0, s1), torch.cat(states[2:], dim=1))
    assert any(first is not None for first in cell.shared)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_factorized_reduce_normalises_each_half_as_one_batchnorm_over_both_would(momentum):
    """Each half's BatchNorm (with its half of the parameters and statistics) is the BatchNorm over the
    concatenation: the same outputs and running statistics, trained and in eval; only the exported graph differs."""
    import copy

    import torch

    from hwnas.search_spaces.darts import _torch_modules

    torch.manual_seed(0)
    fr = _torch_modules().FactorizedReduce(8, 16)
    fr.bn.momentum = momentum
    with torch.no_grad():
        fr.bn.weight.uniform_(0.5, 1.5)
        fr.bn.bias.uniform_(-0.5, 0.5)
    whole = copy.deepcopy(fr.bn)

    def reference(x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        return whole(torch.cat([fr.conv_1(x), fr.conv_2(x[:, :, 1:, 1:])], dim=1))

    gen = torch.Generator().manual_seed(1)
    fr.train(), whole.train()
    for _ in range(3):
        x = torch.randn(4, 8, 10, 10, generator=gen)
        assert torch.allclose(fr(x), reference(x), atol=1e-5)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert torch.allclose(getattr(fr.bn, name).float(), getattr(whole, name).float(), atol=1e-6), name
    fr.eval(), whole.eval()
    x = torch.randn(2, 8, 10, 10, generator=gen)
    assert torch.allclose(fr(x), reference(x), atol=1e-5)


def test_an_int8_network_keeps_no_float_batchnorm_for_onnxruntime_to_run_channels_first(tmp_path):
    """A BatchNorm after a Concat cannot fold into a convolution: at int8 it stayed a float op in the quantised
    graph, and the pools behind it ran channels-first. Split per half, every BatchNorm folds."""
    import onnx
    import onnxruntime as ort

    from hwnas.latency.onnx_export import export_onnx, quantize_int8

    space = DartsSpace(cells=3, init_channels=8, resolution=16)
    arch = space.canonicalize(space.from_genotype(PC_DARTS_CIFAR))  # a reduction cell's stride-2 skip is one too
    fp32 = export_onnx(space.build(arch), space.input_shape, tmp_path / "n.onnx")
    q = quantize_int8(fp32, tmp_path / "q.onnx", space.input_shape)
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(str(q), so, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node]
    assert {"Concat", "QLinearConcat"} & set(ops), "the network has no FactorizedReduce"
    assert "BatchNormalization" not in ops


def test_params_are_checked():
    with pytest.raises(ValidationError, match="'none' is not a member"):
        DartsSpace(ops=["none", "skip_connect"])
    with pytest.raises(ValidationError, match="unknown operation 'conv_1x1'"):
        DartsSpace(ops=["conv_1x1"])
    with pytest.raises(ValidationError, match="multiple of 4"):
        DartsSpace(resolution=30)
    with pytest.raises(ValidationError, match="extra"):
        DartsSpace(layers=8)
