"""The mixed-operation cell supernets of the NAS-Bench-201 and DARTS spaces (hwnas.supernet.cells)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hwnas.supernet.cells
from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, InvalidArchitecture
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.darts import PRIMITIVES
from hwnas.search_spaces.nb201 import OPS
from hwnas.supernet import SUPERNETS, RelaxedSupernet, Supernet, TrainableSupernet, one_hot_weights
from hwnas.supernet.cells import DartsSupernet, NB201Supernet, channel_shuffle, partial_channel_edge
from hwnas.testing import check_supernet

NB201_SMALL = dict(resolution=8, channels=4, cells_per_stage=1, num_classes=10)
DARTS_SMALL = dict(resolution=16, cells=3, init_channels=4, nodes=2)


def nb201(seed: int = 0, params: dict[str, Any] | None = None, **space_params: Any) -> NB201Supernet:
    space = SPACES.get("nb201")(**{**NB201_SMALL, **space_params})
    return SUPERNETS.create("nb201", params or {}, space=space, generator=torch.Generator().manual_seed(seed))


def darts(seed: int = 0, params: dict[str, Any] | None = None, **space_params: Any) -> DartsSupernet:
    space = SPACES.get("darts")(**{**DARTS_SMALL, **space_params})
    return SUPERNETS.create("darts", params or {}, space=space, generator=torch.Generator().manual_seed(seed))


MAKERS: dict[str, Callable[..., Any]] = {"nb201": nb201, "darts": darts}


def batch(supernet: Any, n: int = 4, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, *supernet.space.input_shape, generator=gen)


def uniform_weights(space: Any) -> dict[str, torch.Tensor]:
    return {g.name: torch.full((len(g.choices),), 1.0 / len(g.choices), requires_grad=True) for g in space.genes()}


def check_member(supernet: Any, arch: Architecture, x: torch.Tensor) -> None:
    """forward == extract()(x) == one-hot forward_relaxed for one given architecture (eval mode)."""
    supernet.eval()
    with torch.no_grad():
        out = supernet(x, arch)
        relaxed = supernet.forward_relaxed(x, one_hot_weights(supernet.space, arch))
        assert torch.equal(relaxed, out)  # the one-hot relaxation is the single path, bit for bit
        if supernet.k == 1:
            torch.testing.assert_close(supernet.extract(arch)(x), out, atol=1e-5, rtol=1e-4)


# -- registration and conformance -------------------------------------------------------------------------------


def test_registered_and_implements_the_protocols():
    assert SUPERNETS.get("nb201") is NB201Supernet and SUPERNETS.get("darts") is DartsSupernet
    for sn in (nb201(), darts()):
        assert isinstance(sn, Supernet) and isinstance(sn, RelaxedSupernet) and isinstance(sn, TrainableSupernet)
        assert sn.phases == ("uniform",) and sn.num_classes == 10
    assert hwnas.supernet.cells.NB201Supernet.space_name == "nb201"


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("merge", [True, False])
def test_nb201_conformance(seed, merge):
    check_supernet(nb201(seed, merge_isomorphic=merge), np.random.default_rng(seed), n_archs=4, batch=3)


@pytest.mark.parametrize(("seed", "space_params"), [
    (0, {}),
    (1, {"nodes": 4}),
    (2, {"init_channels": 6, "ops": ("skip_connect", "avg_pool_3x3", "dil_conv_3x3")}),
])
def test_darts_conformance(seed, space_params):
    check_supernet(darts(seed, **space_params), np.random.default_rng(seed), n_archs=4, batch=3)


@pytest.mark.parametrize("name", ["nb201", "darts"])
def test_largest_and_smallest_are_members_that_extract_and_relax_faithfully(name):
    sn = MAKERS[name]()
    x = batch(sn)
    for arch in (sn.largest(), sn.smallest("uniform")):
        sn.space.validate(arch)
        assert sn.space.canonicalize(arch) == arch
        check_member(sn, arch, x)


def test_nb201_largest_is_all_3x3_and_smallest_all_skip():
    sn = nb201()
    assert sn.space.cell_ops(sn.largest()) == ("nor_conv_3x3",) * 6
    assert sn.space.cell_ops(sn.smallest("uniform")) == ("skip_connect",) * 6


@pytest.mark.parametrize("name", ["nb201", "darts"])
def test_largest_and_smallest_bound_sampled_members_by_parameters(name):
    sn = MAKERS[name]()

    def params(arch: Architecture) -> int:
        return sum(p.numel() for p in sn.extract(arch).parameters())

    big, small = params(sn.largest()), params(sn.smallest("uniform"))
    rng = np.random.default_rng(0)
    sampled = [params(sn.sample_subnet(rng, "uniform")) for _ in range(8)]
    assert small <= min(sampled) and max(sampled) <= big and small < big


def test_darts_largest_and_smallest_ops():
    sn = darts(nodes=4)
    big, small = sn.largest().genes, sn.smallest("uniform").genes
    assert {v for k, v in big.items() if "_op" in k} == {PRIMITIVES.index("sep_conv_5x5")}
    assert {v for k, v in small.items() if "_op" in k} == {PRIMITIVES.index("max_pool_3x3")}
    assert [big[f"normal_n{i}_in1"] for i in range(4)] == [1, 2, 3, 4]  # a chain: node i reads node i - 1
    assert {v for k, v in small.items() if "_in" in k} == {0, 1}
    # DARTS's dil_conv_5x5 (one depthwise 5x5 + one pointwise) has fewer weights than sep_conv_3x3 (two of each)
    convs = darts(ops=("sep_conv_3x3", "dil_conv_5x5"))
    assert {v for k, v in convs.smallest("uniform").genes.items() if "_op" in k} == {PRIMITIVES.index("dil_conv_5x5")}
    assert {v for k, v in convs.largest().genes.items() if "_op" in k} == {PRIMITIVES.index("sep_conv_3x3")}


# -- determinism -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nb201", "darts"])
def test_same_seed_same_weights_and_the_global_rng_is_untouched(name):
    state = torch.random.get_rng_state()
    a, b, c = MAKERS[name](0), MAKERS[name](0), MAKERS[name](1)
    a.extract(a.largest())
    assert torch.equal(torch.random.get_rng_state(), state), "construction or extract() consumed the global RNG"
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys() == sc.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa if sa[k].is_floating_point())


# -- single path and relaxation ---------------------------------------------------------------------------------


def count_calls(modules: dict[str, torch.nn.Module]) -> tuple[dict[str, int], list[Any]]:
    counts = dict.fromkeys(modules, 0)
    handles = []
    for key, m in modules.items():
        def hook(_m: Any, _i: Any, _o: Any, key: str = key) -> None:
            counts[key] += 1
        handles.append(m.register_forward_hook(hook))
    return counts, handles


def test_nb201_single_path_runs_only_the_chosen_ops_and_relaxation_skips_zero_weights():
    sn = nb201().eval()
    cell = sn.cells[0]
    modules = {f"{e}/{op}": cell.op(e, op) for e in cell.edges for op in cell.edges[e]}
    counts, handles = count_calls(modules)
    arch = sn.space.canonicalize(sn.space.from_ops((3, 2, 4, 1, 0, 3)))
    ops = sn.space.cell_ops(arch)
    x = batch(sn)
    try:
        with torch.no_grad():
            sn(x, arch)
            chosen = {f"{e}/{op}" for e, op in zip(["e1_0", "e2_0", "e2_1", "e3_0", "e3_1", "e3_2"], ops)}
            assert {k for k, v in counts.items() if v} == chosen - {k for k in chosen if k.endswith("none")}
            assert all(v == 1 for k, v in counts.items() if k in chosen and not k.endswith("none"))
            counts.update(dict.fromkeys(counts, 0))
            sn.forward_relaxed(x, one_hot_weights(sn.space, arch))
            assert {k for k, v in counts.items() if v} == chosen - {k for k in chosen if k.endswith("none")}
            counts.update(dict.fromkeys(counts, 0))
            sn.forward_relaxed(x, uniform_weights(sn.space))
            assert all(v == 1 for v in counts.values())  # every op of every edge, once
    finally:
        for h in handles:
            h.remove()


def test_nb201_all_none_cell_is_zero_and_node_semantics_match_the_space():
    sn = nb201().eval()
    x = batch(sn)
    none = sn.space.from_ops((0,) * 6)
    check_member(sn, none, x)
    with torch.no_grad():
        out = sn(x, none)
    assert torch.allclose(out, out[:1].expand_as(out)), "an all-none cell network cannot depend on its input"


def shift_batchnorm(sn: Any) -> Any:
    """BatchNorm biases 0.1: a convolution of an all-zero node is then not zero."""
    with torch.no_grad():
        for m in sn.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.bias.fill_(0.1)
    return sn.eval()


def test_nb201_forward_uses_the_canonical_cell():
    sn = shift_batchnorm(nb201())
    x = batch(sn)
    # e1_0 = none makes node 1 zero, so e2_1 / e3_1 read zero and do not matter: one isomorphism class
    a = sn.space.from_ops((0, 3, 2, 3, 4, 1))
    b = sn.space.from_ops((0, 3, 0, 3, 0, 1))
    assert sn.space.canonicalize(a) == sn.space.canonicalize(b)
    with torch.no_grad():
        assert torch.equal(sn(x, a), sn(x, b))
        torch.testing.assert_close(sn.extract(a)(x), sn(x, a), atol=1e-5, rtol=1e-4)
    unmerged = shift_batchnorm(nb201(merge_isomorphic=False))
    with torch.no_grad():
        assert not torch.equal(unmerged(x, a), unmerged(x, b))  # every cell as written
        torch.testing.assert_close(unmerged.extract(a)(x), unmerged(x, a), atol=1e-5, rtol=1e-4)


def test_nb201_relaxation_is_the_weighted_sum_over_an_edges_ops():
    # a single cell whose output node reads only edge e3_0 (all else none): the mixture on e3_0 is exactly
    # w * op_a(x) + (1 - w) * op_b(x) at the cell output; check on the cell by comparing against the two members
    sn = nb201().eval()
    x = batch(sn)
    conv, pool = OPS.index("nor_conv_3x3"), OPS.index("avg_pool_3x3")
    base = {g.name: torch.eye(5)[0] for g in sn.space.genes()}  # every edge none
    with torch.no_grad():
        feats = {}
        for op in (conv, pool):
            w = dict(base, e3_0=torch.eye(5)[op])
            feats[op] = _first_cell_output(sn, x, w)
        mix = dict(base, e3_0=0.3 * torch.eye(5)[conv] + 0.7 * torch.eye(5)[pool])
        torch.testing.assert_close(_first_cell_output(sn, x, mix), 0.3 * feats[conv] + 0.7 * feats[pool])


def _first_cell_output(sn: NB201Supernet, x: torch.Tensor, weights: dict[str, torch.Tensor]) -> torch.Tensor:
    """The output of the first cell under ``weights`` (captured with a forward hook on lastact's input chain)."""
    captured: list[torch.Tensor] = []
    layer = sn.cells[1]  # the first reduction block reads the first cell's output
    handle = layer.register_forward_hook(lambda _m, inputs, _o: captured.append(inputs[0]))
    try:
        sn.forward_relaxed(x, weights)
    finally:
        handle.remove()
    return captured[0]


def test_nb201_soft_weights_get_gradients_except_none():
    sn = nb201().train()
    w = uniform_weights(sn.space)
    sn.forward_relaxed(batch(sn), w).square().mean().backward()
    for g in sn.space.genes():
        grad = w[g.name].grad
        assert grad is not None and bool(torch.isfinite(grad).all())
        assert grad[OPS.index("none")] == 0  # the zero op: a gradient only through the strategy's softmax
        assert bool((grad[1:] != 0).all()), g.name


def test_darts_single_path_and_relaxation_use_the_shared_edge_modules():
    sn = darts(nodes=4).eval()
    arch = sn.space.sample(np.random.default_rng(3))
    cell = sn.cells[0]  # a normal cell
    modules = {f"{e}/{op}": cell.op(e, op) for e in cell.edges for op in cell.edges[e]}
    counts, handles = count_calls(modules)
    x = batch(sn)
    chosen = {f"n{i}_s{arch.genes[f'normal_n{i}_in{j}']}/{PRIMITIVES[arch.genes[f'normal_n{i}_op{j}']]}"
              for i in range(4) for j in range(2)}
    try:
        with torch.no_grad():
            sn(x, arch)
            assert {k for k, v in counts.items() if v} == chosen
            counts.update(dict.fromkeys(counts, 0))
            sn.forward_relaxed(x, one_hot_weights(sn.space, arch))
            assert {k for k, v in counts.items() if v} == chosen
            counts.update(dict.fromkeys(counts, 0))
            sn.forward_relaxed(x, uniform_weights(sn.space))
            assert all(v == 1 for v in counts.values())  # each (node, state, op) once, shared by the two slots
    finally:
        for h in handles:
            h.remove()


def test_darts_one_hot_of_swapped_slots_and_all_soft_weights_get_gradients():
    sn = darts().eval()
    x = batch(sn)
    arch = sn.space.canonicalize(sn.space.sample(np.random.default_rng(1)))
    genes = dict(arch.genes)
    for a, b in (("in0", "in1"), ("op0", "op1")):
        genes["normal_n1_" + a], genes["normal_n1_" + b] = genes["normal_n1_" + b], genes["normal_n1_" + a]
    swapped = Architecture("darts", genes)
    weights = {g.name: torch.eye(len(g.choices))[g.choices.index(swapped.genes[g.name])] for g in sn.space.genes()}
    with torch.no_grad():
        out = sn(x, arch)
        assert torch.equal(sn(x, swapped), out)
        torch.testing.assert_close(sn.forward_relaxed(x, weights), out)
    sn.train()
    w = uniform_weights(sn.space)
    sn.forward_relaxed(x, w).square().mean().backward()
    assert all(w[g.name].grad is not None and bool((w[g.name].grad != 0).any()) for g in sn.space.genes())


def test_darts_relaxation_mixes_the_inputs_of_a_slot():
    # slot weights split over two inputs with one op: node = 0.5 * op(s_a) + 0.5 * op(s_b) + the other slot
    sn = darts().eval()
    x = batch(sn)
    arch = sn.space.canonicalize(sn.space.sample(np.random.default_rng(2)))
    base = one_hot_weights(sn.space, arch)
    op = PRIMITIVES.index("avg_pool_3x3")
    gene_op = next(g for g in sn.space.genes() if g.name == "normal_n1_op0")
    outs = {}
    with torch.no_grad():
        for states in ((0,), (2,), (0, 2)):
            w = dict(base)
            w["normal_n1_in0"] = sum(torch.eye(3)[s] for s in states) / len(states)
            w["normal_n1_op0"] = torch.eye(len(gene_op.choices))[gene_op.choices.index(op)]
            w["normal_n1_in1"] = torch.eye(3)[1]
            outs[states] = _darts_cell_output(sn, x, w)
        torch.testing.assert_close(outs[(0, 2)], 0.5 * outs[(0,)] + 0.5 * outs[(2,)], atol=1e-6, rtol=1e-5)


def _darts_cell_output(sn: DartsSupernet, x: torch.Tensor, weights: dict[str, torch.Tensor]) -> torch.Tensor:
    """Node 1 of the first (normal) cell: the second half of its output channels."""
    captured: list[torch.Tensor] = []
    handle = sn.cells[1].preprocess1.register_forward_hook(lambda _m, inputs, _o: captured.append(inputs[0]))
    try:
        sn.forward_relaxed(x, weights)
    finally:
        handle.remove()
    return captured[0][:, sn.cells[0].c:]


@pytest.mark.parametrize("name", ["nb201", "darts"])
def test_train_mode_updates_only_the_chosen_ops_batchnorm(name):
    sn = MAKERS[name]().train()
    arch = sn.largest() if name == "nb201" else sn.smallest("uniform")  # nb201: all 3x3; darts: pools only
    before = {k: v.clone() for k, v in sn.state_dict().items() if "running_mean" in k}
    sn(batch(sn), arch)
    changed = {k for k, v in sn.state_dict().items() if k in before and not torch.equal(v, before[k])}
    if name == "nb201":
        assert any("nor_conv_3x3" in k for k in changed)
        assert not any("nor_conv_1x1" in k for k in changed)
    else:
        assert any("preprocess" in k for k in changed)
        assert not any(".edges." in k for k in changed)  # pooling edges have no BatchNorm; no conv edge ran


def test_relaxed_weights_are_checked():
    sn = nb201()
    w = uniform_weights(sn.space)
    del w["e3_2"]
    with pytest.raises(ValueError, match="e3_2"):
        sn.forward_relaxed(batch(sn), w)
    w = uniform_weights(sn.space)
    w["e1_0"] = torch.ones(3) / 3
    with pytest.raises(ValueError, match="e1_0"):
        sn.forward_relaxed(batch(sn), w)


# -- partial channels ---------------------------------------------------------------------------------------------


def test_channel_shuffle_and_partial_edge():
    x = torch.arange(8.0).view(1, 8, 1, 1).expand(2, 8, 2, 2).contiguous()
    assert channel_shuffle(x, 2)[0, :, 0, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    seen = []

    def op(h: torch.Tensor) -> torch.Tensor:
        seen.append(h.shape[1])
        return -h

    y = partial_channel_edge(x, 4, 1, op)
    assert seen == [2] and y.shape == x.shape
    assert y[0, :, 0, 0].tolist() == [-0.0, 2, 4, 6, -1, 3, 5, 7]  # groups of 2: [op(x[:2]), x[2:]] shuffled
    z = partial_channel_edge(x, 4, 2, lambda h: None, torch.tensor(0.5))
    # zeros for the op, bypass max-pooled to 1x1 and halved: [0, 0, 1, 1.5, 2, 2.5, 3, 3.5] shuffled
    assert z.shape == (2, 8, 1, 1) and z[0, :, 0, 0].tolist() == [0, 1, 2, 3, 0, 1.5, 2.5, 3.5]


@pytest.mark.parametrize(("name", "k", "space_params"), [
    ("nb201", 2, {}), ("nb201", 4, {"channels": 8}),
    ("darts", 2, {}), ("darts", 4, {"init_channels": 8, "nodes": 4}),
])
def test_partial_channels(name, k, space_params):
    full = MAKERS[name](0, **space_params)
    part = MAKERS[name](0, {"partial_channels": k}, **space_params)
    assert part.k == k
    x = batch(part)
    rng = np.random.default_rng(k)
    # shapes, and one-hot relaxation == the partial single path
    for arch in (part.largest(), part.smallest("uniform"), *(part.space.sample(rng) for _ in range(3))):
        check_member(part, arch, x)
        assert part(x, arch).shape == (x.shape[0], 10)
    # edge modules are built at C / K channels
    convs = [m for n, m in part.named_modules() if isinstance(m, torch.nn.Conv2d) and "edges" in n]
    full_convs = [m for n, m in full.named_modules() if isinstance(m, torch.nn.Conv2d) and "edges" in n]
    assert max(m.in_channels for m in convs) * k == max(m.in_channels for m in full_convs)
    n_part, n_full = (sum(p.numel() for p in s.parameters()) for s in (part, full))
    assert n_part < n_full
    # the relaxed pass saves far fewer activations for backward
    saved = {}
    for key, sn in (("part", part), ("full", full)):
        sn.train()
        total = 0

        def pack(t: torch.Tensor) -> torch.Tensor:
            nonlocal total
            total += t.numel() * t.element_size()
            return t

        w = uniform_weights(sn.space)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = sn.forward_relaxed(x, w)
        saved[key] = total
        out.square().mean().backward()
        if key == "part":  # gradients reach the relaxation weights and the shared weights
            grads = [w[g.name].grad for g in sn.space.genes() if w[g.name].grad is not None]
            assert any(bool((g != 0).any()) for g in grads) and all(bool(torch.isfinite(g).all()) for g in grads)
            assert any(p.grad is not None and bool((p.grad != 0).any()) for p in sn.parameters())
    assert saved["part"] < 0.75 * saved["full"], saved
    with pytest.raises(ConfigError, match="partial_channels"):
        part.extract(part.largest())


def test_partial_channels_must_divide_the_channels():
    with pytest.raises(ConfigError, match="partial_channels=3"):
        nb201(params={"partial_channels": 3})
    with pytest.raises(ConfigError, match="partial_channels=3"):
        darts(params={"partial_channels": 3})
    assert darts(params={"partial_channels": 4}).cells[-1].op("n0_s0", "skip_connect").conv_1.in_channels == 4
    with pytest.raises(ConfigError):
        nb201(params={"partial_channels": 0})


@pytest.mark.parametrize(("name", "small", "channels"), [("nb201", NB201_SMALL, "channels"),
                                                          ("darts", DARTS_SMALL, "init_channels")])
def test_space_problems_say_what_the_constructor_refuses_without_building_anything(name, small, channels):
    """The one check of a supernet's parameters against its space: what ``nas validate`` reads for a one-shot
    strategy's ``supernet:`` block, and what every constructor raises (through bind_space)."""
    from hwnas.supernet.base import space_problems

    space = SPACES.get(name)(**small)
    cls = SUPERNETS.get(name)
    said = space_problems(cls, space, SUPERNETS.validate_params(name, {"partial_channels": 3}))
    assert said == {"partial_channels": f"{name} supernet: partial_channels=3 must divide the space's {channels}=4"}
    with pytest.raises(ConfigError, match=f"^{said['partial_channels']}$"):
        SUPERNETS.create(name, {"partial_channels": 3}, space=space, generator=torch.Generator().manual_seed(0))
    assert space_problems(cls, space, SUPERNETS.validate_params(name, {"partial_channels": 2})) == {}
    assert space_problems(SUPERNETS.get("mbv3"), SPACES.get("mbv3")(), SUPERNETS.validate_params("mbv3", {})) == {}


def test_partial_channel_edges_pass_the_bypassed_channels():
    # with K > 1 a `none` edge still carries the bypassed channels: the all-none nb201 cell depends on its input
    sn = nb201(0, {"partial_channels": 2}).eval()
    x = batch(sn)
    with torch.no_grad():
        out = sn(x, sn.space.from_ops((0,) * 6))
    assert not torch.allclose(out, out[:1].expand_as(out))


# -- training behaviour, phases, errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nb201", "darts"])
def test_sgd_reduces_the_loss_of_the_largest_subnet(name):
    sn = MAKERS[name]().train()
    arch = sn.largest()
    x = batch(sn, n=8)
    y = torch.arange(8) % 10
    opt = torch.optim.SGD(sn.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = F.cross_entropy(sn(x, arch), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.7 * losses[0], losses


@pytest.mark.parametrize("name", ["nb201", "darts"])
def test_phase_sampling(name):
    sn = MAKERS[name]()
    samples = [sn.sample_subnet(np.random.default_rng(7), "uniform") for _ in range(2)]
    assert samples[0] == samples[1]  # every random choice from rng
    rng, ref = np.random.default_rng(3), np.random.default_rng(3)
    drawn = [sn.sample_subnet(rng, "uniform") for _ in range(20)]
    assert drawn == [sn.space.sample(ref) for _ in range(20)]  # uniform SPOS: the space's own sample
    assert len(set(drawn)) > 10
    for a in drawn:
        sn.space.validate(a)
    sn.begin_phase("uniform")
    for call in (lambda: sn.sample_subnet(rng, "kernel"), lambda: sn.smallest("depth"), lambda: sn.begin_phase("x")):
        with pytest.raises(ConfigError, match="phase"):
            call()


@pytest.mark.parametrize(("name", "gene", "value"), [
    ("nb201", "e2_1", 9),
    ("darts", "normal_n0_op1", PRIMITIVES.index("none")),
    ("darts", "reduce_n1_in0", 7),
])
def test_invalid_gene_raises_naming_it(name, gene, value):
    sn = MAKERS[name]()
    arch = sn.largest().replace(**{gene: value})
    x = batch(sn)
    for call in (lambda: sn(x, arch), lambda: sn.extract(arch)):
        with pytest.raises(InvalidArchitecture, match=gene):
            call()


@pytest.mark.parametrize("name", ["nb201", "darts"])
def test_wrong_space_architecture_and_space_are_refused(name):
    sn = MAKERS[name]()
    other = MAKERS["darts" if name == "nb201" else "nb201"]()
    with pytest.raises(InvalidArchitecture, match="space"):
        sn(batch(sn), other.largest())
    with pytest.raises(ConfigError, match=name):
        SUPERNETS.create(name, {}, space=other.space, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ConfigError):
        SUPERNETS.create(name, {"unknown": 1}, space=sn.space, generator=torch.Generator().manual_seed(0))
