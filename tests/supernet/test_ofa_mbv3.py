"""The once-for-all MobileNetV3 supernets: ``ofa_mbv3`` (small resolutions, 10 classes) and ``mbv3`` (defaults)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hwnas.supernet.ofa_mbv3 as ofa_supernet
from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, InvalidArchitecture, InvalidParams
from hwnas.search_spaces import SPACES
from hwnas.supernet import SUPERNETS, TrainableSupernet
from hwnas.testing import check_supernet
from hwnas.testing.supernet import randomize_batch_norms

OFA_PARAMS = {"resolutions": (32, 40), "num_classes": 10}


def ofa_space(**params):
    return SPACES.get("ofa_mbv3")(**{**OFA_PARAMS, **params})


def mbv3_space(**params):
    return SPACES.get("mbv3")(**params)


def make(space, seed: int = 0, **params):
    return SUPERNETS.create(space.name, params, space=space, generator=torch.Generator().manual_seed(seed))


def blocks_of(supernet) -> list[ofa_supernet.ElasticMBConv]:
    return [b for stage in supernet.stages for b in stage]


def perturb_kernel_transforms(supernet, seed: int = 1, scale: float = 0.3) -> None:
    """Move every kernel-transformation matrix away from the identity (so a plain crop is wrong)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for block in blocks_of(supernet):
            for m in block.kernel_transforms.values():
                m.add_(scale * torch.randn(m.shape, generator=g))


def input_for(space, arch, batch: int = 2, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn((batch, *space.input_shape_of(arch)), generator=g)


def assert_extract_matches(supernet, arch, batch: int = 2) -> None:
    supernet.eval()
    x = input_for(supernet.space, arch, batch)
    with torch.no_grad():
        want = supernet(x, arch)
        got = supernet.extract(arch)(x)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-4), float((got - want).abs().max())


# -- conformance ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "params"), [(0, {"in_chans": 3}), (1, {"in_chans": 1, "width_mult": 1.2})])
def test_ofa_passes_the_suite(seed, params):
    supernet = make(ofa_space(**params), seed=seed)
    assert isinstance(supernet, TrainableSupernet)
    assert supernet.num_classes == 10
    perturb_kernel_transforms(supernet, seed=seed)  # extraction must carry the transformed kernels, not crops
    check_supernet(supernet, np.random.default_rng(seed), n_archs=4, batch=2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mbv3_passes_the_suite(seed):
    supernet = make(mbv3_space(), seed=seed)
    assert isinstance(supernet, TrainableSupernet)
    perturb_kernel_transforms(supernet, seed=seed)
    check_supernet(supernet, np.random.default_rng(seed), n_archs=5, batch=3)


def test_mbv3_with_other_choices_passes_the_suite():
    """Unsorted kernels with a gap (7 -> 3 directly: a 9x9 matrix), other expand ratios, one-block stages."""
    space = mbv3_space(kernels=(7, 3), expand_ratios=(2, 6, 4), in_chans=1, num_classes=5, stem_channels=16,
                       stages=[{"channels": 16, "stride": 1, "depths": (1, 2), "act": "relu", "se": True},
                               {"channels": 24, "stride": 2, "depths": (1, 2, 3)}])
    supernet = make(space)
    assert set(blocks_of(supernet)[0].kernel_transforms) == {"7to3"}
    perturb_kernel_transforms(supernet)
    check_supernet(supernet, np.random.default_rng(3), n_archs=5, batch=2)


@pytest.mark.parametrize("which", ["ofa", "mbv3"])
def test_largest_and_smallest_extract_exactly(which):
    space = ofa_space(in_chans=1) if which == "ofa" else mbv3_space()
    supernet = make(space)
    perturb_kernel_transforms(supernet)
    randomize_batch_norms(supernet)
    archs = [supernet.largest(), *(supernet.smallest(p) for p in supernet.phases)]
    if which == "ofa":  # the largest network at the small resolution, the smallest at the large one
        archs += [supernet.largest().replace(r=32), supernet.smallest("expand").replace(r=40)]
    for arch in archs:
        assert_extract_matches(supernet, arch)


def test_extract_leaves_global_rng_alone_and_returns_eval_module():
    supernet = make(mbv3_space())
    state = torch.random.get_rng_state()
    module = supernet.extract(supernet.largest())
    assert torch.equal(torch.random.get_rng_state(), state)
    assert not module.training


# -- initialisation -------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["ofa", "mbv3"])
def test_same_seed_same_weights_and_global_rng_untouched(which):
    space = ofa_space() if which == "ofa" else mbv3_space()
    state = torch.random.get_rng_state()
    a, b, c = make(space, seed=5), make(space, seed=5), make(space, seed=6)
    assert torch.equal(torch.random.get_rng_state(), state), "construction consumed the global RNG"
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys() == sc.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa)
    for block in blocks_of(a):  # kernel transforms start as the identity
        for m in block.kernel_transforms.values():
            assert torch.equal(m, torch.eye(m.shape[0]))


# -- elastic kernel -------------------------------------------------------------------------------


def test_kernel_transform_identity_is_a_centre_crop_and_learned_matrices_change_it():
    supernet = make(mbv3_space())
    block = blocks_of(supernet)[0]
    mid = block.max_mid
    full = block.conv_dw.weight[:mid].detach()
    assert block.kernels == (3, 5, 7)
    assert {k: tuple(m.shape) for k, m in block.kernel_transforms.items()} == {"7to5": (25, 25), "5to3": (9, 9)}
    with torch.no_grad():
        assert torch.equal(block.effective_kernel(7, mid), full)
        assert torch.equal(block.effective_kernel(5, mid), full[:, :, 1:6, 1:6])
        assert torch.equal(block.effective_kernel(3, mid), full[:, :, 2:5, 2:5])
        # only 5 -> 3 changed: the 3x3 kernel changes, the 5x5 does not
        block.kernel_transforms["5to3"].add_(0.1 * torch.randn(9, 9, generator=torch.Generator().manual_seed(0)))
        k3 = block.effective_kernel(3, mid).clone()
        assert not torch.allclose(k3, full[:, :, 2:5, 2:5])
        assert torch.equal(block.effective_kernel(5, mid), full[:, :, 1:6, 1:6])
        expected3 = (full[:, :, 2:5, 2:5].reshape(mid, 9) @ block.kernel_transforms["5to3"].T).reshape(mid, 1, 3, 3)
        assert torch.allclose(k3, expected3, atol=1e-6)
        # 7 -> 5 changes both smaller kernels (the chain 7 -> 5 -> 3)
        block.kernel_transforms["7to5"].add_(0.1 * torch.randn(25, 25, generator=torch.Generator().manual_seed(1)))
        assert not torch.allclose(block.effective_kernel(5, mid), full[:, :, 1:6, 1:6])
        assert not torch.allclose(block.effective_kernel(3, mid), k3)
        assert torch.equal(block.effective_kernel(7, mid), full)


def test_kernel_transform_changes_forward_of_small_kernels_only():
    supernet = make(mbv3_space()).eval()
    big = supernet.largest()
    small = big.replace(k0_0=3)
    x = input_for(supernet.space, big, 4)
    with torch.no_grad():
        before_big, before_small = supernet(x, big), supernet(x, small)
        blocks_of(supernet)[0].kernel_transforms["5to3"].mul_(-1.0)
        assert torch.equal(supernet(x, big), before_big)
        assert not torch.allclose(supernet(x, small), before_small)
    assert_extract_matches(supernet, small)


def test_kernel_transforms_receive_gradients():
    supernet = make(mbv3_space()).train()
    arch = supernet.largest().replace(k0_0=3, k1_0=5)
    blocks = blocks_of(supernet)
    F.cross_entropy(supernet(input_for(supernet.space, arch, 4), arch), torch.tensor([0, 1, 2, 3])).backward()
    assert blocks[0].kernel_transforms["5to3"].grad is not None
    assert blocks[0].kernel_transforms["5to3"].grad.abs().sum() > 0
    assert blocks[0].kernel_transforms["7to5"].grad.abs().sum() > 0
    stage1 = supernet.stages[1][0]
    assert stage1.kernel_transforms["7to5"].grad.abs().sum() > 0
    assert stage1.kernel_transforms["5to3"].grad is None  # 5x5 does not use 5 -> 3


# -- elastic expand ratio and channel sorting ------------------------------------------------------


@pytest.mark.parametrize("which", ["ofa", "mbv3"])
def test_sorting_channels_keeps_the_largest_network_and_changes_narrow_ones(which):
    space = ofa_space() if which == "ofa" else mbv3_space()
    supernet = make(space).eval()
    perturb_kernel_transforms(supernet)
    randomize_batch_norms(supernet)
    big = supernet.largest()
    narrow = supernet.smallest("expand").replace(**({"r": 40} if which == "ofa" else {}))
    x_big, x_narrow = input_for(space, big, 3), input_for(space, narrow, 3)
    with torch.no_grad():
        before_big, before_narrow = supernet(x_big, big), supernet(x_narrow, narrow)
    importance_before = [b.conv_pwl.weight.abs().sum((0, 2, 3)) for b in blocks_of(supernet)]
    assert any(not bool((imp[:-1] >= imp[1:]).all()) for imp in importance_before), "already sorted: vacuous test"
    supernet.begin_phase("expand")
    with torch.no_grad():
        after_big, after_narrow = supernet(x_big, big), supernet(x_narrow, narrow)
    assert torch.allclose(after_big, before_big, atol=1e-5, rtol=1e-4), float((after_big - before_big).abs().max())
    assert not torch.allclose(after_narrow, before_narrow, atol=1e-3)
    for block, imp_before in zip(blocks_of(supernet), importance_before):
        imp = block.conv_pwl.weight.abs().sum((0, 2, 3))
        assert bool((imp[:-1] >= imp[1:]).all()), "expanded channels are not sorted by importance"
        assert torch.allclose(imp.sort(descending=True).values, imp_before.sort(descending=True).values)
        if block.se_conv_expand is not None:
            rd_imp = block.se_conv_expand.weight.abs().sum((0, 2, 3))
            assert bool((rd_imp[:-1] >= rd_imp[1:]).all()), "squeeze-excite channels are not sorted"
    assert_extract_matches(supernet, narrow)
    # sorting again changes nothing
    state = copy.deepcopy(supernet.state_dict())
    supernet.begin_phase("expand")
    assert all(torch.equal(v, state[k]) for k, v in supernet.state_dict().items())


def test_other_phases_do_not_touch_weights():
    supernet = make(mbv3_space())
    state = copy.deepcopy(supernet.state_dict())
    for phase in ("largest", "kernel", "depth"):
        supernet.begin_phase(phase)
    assert all(torch.equal(v, state[k]) for k, v in supernet.state_dict().items())
    with pytest.raises(ConfigError, match="unknown phase"):
        supernet.begin_phase("width")


def test_expand_uses_the_leading_channels_and_se_widths_of_build():
    for space in (ofa_space(), mbv3_space()):
        supernet = make(space)
        arch = supernet.smallest("expand")
        built = space.build(arch)
        stage_blocks = [b for b in built.blocks if hasattr(b, "conv_pwl")]
        used = [blk for s, stage in enumerate(supernet.stages) for blk in list(stage)[: arch.genes[f"d{s}"]]]
        assert len(used) == len(stage_blocks)
        for mine, theirs in zip(used, stage_blocks):
            e = min(mine.mids)
            assert mine.mids[e] == theirs.conv_pw.out_channels
            if mine.se_conv_reduce is not None:
                assert mine.se_reduce_width(mine.mids[e]) == theirs.se.conv_reduce.out_channels
                assert mine.se_conv_reduce.out_channels == mine.se_reduce_width(mine.max_mid)


def test_train_mode_updates_only_the_active_slice_of_batch_norm_statistics():
    supernet = make(mbv3_space()).train()
    arch = supernet.smallest("expand")
    block = blocks_of(supernet)[0]
    mid = block.mids[min(block.mids)]
    assert mid < block.max_mid
    before_mean, before_var = block.bn1.running_mean.clone(), block.bn1.running_var.clone()
    with torch.no_grad():
        supernet(input_for(supernet.space, arch, 4), arch)
    assert not torch.equal(block.bn1.running_mean[:mid], before_mean[:mid])
    assert not torch.equal(block.bn1.running_var[:mid], before_var[:mid])
    assert torch.equal(block.bn1.running_mean[mid:], before_mean[mid:])
    assert torch.equal(block.bn1.running_var[mid:], before_var[mid:])


# -- elastic depth ----------------------------------------------------------------------------------


def test_depth_uses_the_first_blocks_of_each_stage():
    supernet = make(mbv3_space()).train()
    arch = supernet.smallest("depth")  # depth 1 everywhere, kernels and expand largest
    assert all(arch.genes[f"d{s}"] == 1 for s in range(4))
    F.cross_entropy(supernet(input_for(supernet.space, arch, 4), arch), torch.tensor([0, 1, 2, 3])).backward()
    for stage in supernet.stages:
        assert stage[0].conv_pw.weight.grad is not None and stage[0].conv_pw.weight.grad.abs().sum() > 0
        for deeper in list(stage)[1:]:
            assert all(p.grad is None for p in deeper.parameters())
    supernet.eval()
    x = input_for(supernet.space, arch, 2)
    deeper_arch = supernet.largest().replace(d3=1)
    with torch.no_grad():
        out = supernet(x, arch)
        assert not torch.allclose(out, supernet(x, supernet.largest()))
        supernet.stages[0][2].conv_pw.weight.mul_(3.0)  # an unused block's weights do not matter
        assert torch.equal(supernet(x, arch), out)
        assert torch.isfinite(supernet(x, deeper_arch)).all()


# -- phases and sampling ------------------------------------------------------------------------------


def kinds_of(name: str) -> str:
    if name == "r":
        return "resolution"
    if name.startswith("d"):
        return "depth"
    return "kernel" if name.startswith("k") else "expand"


@pytest.mark.parametrize("which", ["ofa", "mbv3"])
def test_sampling_respects_the_phase(which):
    space = ofa_space(resolutions=(32, 36, 40)) if which == "ofa" else mbv3_space()
    supernet = make(space)
    assert supernet.phases == ("largest", "kernel", "depth", "expand")
    genes = {g.name: g for g in space.genes()}
    largest = supernet.largest()
    space.validate(largest)
    assert all(v == max(genes[k].choices) for k, v in largest.genes.items())
    unlocked = {"largest": {"resolution"}, "kernel": {"resolution", "kernel"},
                "depth": {"resolution", "kernel", "depth"}, "expand": {"resolution", "kernel", "depth", "expand"}}
    for phase in supernet.phases:
        smallest = supernet.smallest(phase)
        space.validate(smallest)
        assert smallest == space.canonicalize(smallest)
        rng = np.random.default_rng(0)
        archs = [supernet.sample_subnet(rng, phase) for _ in range(40)]
        for arch in archs:
            space.validate(arch)
        for name, gene in genes.items():
            kind = kinds_of(name)
            active = [a.genes[name] for a in archs if a.genes[name] != gene.inactive or gene.inactive is None]
            if kind in unlocked[phase]:
                assert len(set(active)) > 1, f"{phase}: {name} never varies"
                if smallest.genes[name] != 0:
                    assert smallest.genes[name] == min(gene.choices), f"{phase}: smallest {name}"
            else:
                assert set(active) == {max(gene.choices)}, f"{phase}: {name} is not held at its largest"
                if smallest.genes[name] != 0:
                    assert smallest.genes[name] == max(gene.choices)
        # same rng seed, same draws
        again = [supernet.sample_subnet(np.random.default_rng(0), phase) for _ in range(1)]
        assert again[0] == archs[0]
    with pytest.raises(ConfigError, match="unknown phase"):
        supernet.sample_subnet(np.random.default_rng(0), "everything")
    with pytest.raises(ConfigError, match="unknown phase"):
        supernet.smallest("width")


def test_ofa_largest_has_the_largest_resolution():
    supernet = make(ofa_space())
    assert supernet.largest().genes["r"] == 40
    assert supernet.smallest("largest").genes["r"] == 32


# -- training ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["ofa", "mbv3"])
def test_sgd_reduces_the_loss_of_the_largest_network(which):
    space = ofa_space(resolutions=(32,), drop_rate=0.0) if which == "ofa" else mbv3_space()
    supernet = make(space).train()
    arch = supernet.largest()
    g = torch.Generator().manual_seed(0)
    x = torch.randn((8, *space.input_shape_of(arch)), generator=g)
    y = torch.randint(supernet.num_classes, (8,), generator=g)
    opt = torch.optim.SGD(supernet.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = F.cross_entropy(supernet(x, arch), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.8 * losses[0], losses


def test_ofa_train_mode_matches_the_built_network_including_dropout():
    space = ofa_space(drop_rate=0.3, in_chans=1)
    supernet = make(space)
    perturb_kernel_transforms(supernet)
    rng = np.random.default_rng(4)
    arch = supernet.sample_subnet(rng, "expand")
    module = supernet.extract(arch).train()
    supernet.train()
    x = input_for(space, arch, 3)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        out_super = supernet(x, arch)
        torch.manual_seed(11)
        out_module = module(x)
        torch.manual_seed(12)
        out_other = supernet(x, arch)
    assert torch.allclose(out_super, out_module, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(out_super, out_other), "dropout is not applied in train mode"
    supernet.eval()
    with torch.no_grad():
        assert torch.equal(supernet(x, arch), supernet(x, arch))


# -- errors ----------------------------------------------------------------------------------------------


def test_invalid_architectures_name_the_gene():
    supernet = make(ofa_space())
    arch = supernet.largest()
    x = input_for(supernet.space, arch)
    with pytest.raises(InvalidArchitecture, match="ks0"):
        supernet(x, arch.replace(ks0=4))
    with pytest.raises(InvalidArchitecture, match="e3"):
        supernet.extract(arch.replace(e3=5))
    with pytest.raises(InvalidArchitecture, match="r=64"):
        supernet(x, arch.replace(r=64))
    other = make(mbv3_space())
    with pytest.raises(InvalidArchitecture, match="mbv3"):
        supernet(x, other.largest())
    with pytest.raises(InvalidArchitecture, match="k1_0"):
        other(input_for(other.space, other.largest()), other.largest().replace(k1_0=9))
    with pytest.raises(InvalidArchitecture, match="ofa_mbv3"):
        other.extract(arch)
    with pytest.raises(InvalidArchitecture):
        other(x, Architecture("mbv3", {"d0": 1}))


def test_wrong_space_or_params_are_refused():
    with pytest.raises(ConfigError, match=r"ofa_mbv3.*MobileNetV3Space|MobileNetV3Space.*ofa_mbv3"):
        SUPERNETS.create("ofa_mbv3", {}, space=mbv3_space(), generator=torch.Generator().manual_seed(0))
    with pytest.raises(ConfigError, match="mbv3"):
        SUPERNETS.create("mbv3", {}, space=ofa_space(), generator=torch.Generator().manual_seed(0))
    with pytest.raises(InvalidParams):
        SUPERNETS.create("mbv3", {"width": 2}, space=mbv3_space(), generator=torch.Generator().manual_seed(0))
    assert SUPERNETS.get("ofa_mbv3") is ofa_supernet.OFAMobileNetV3Supernet
    assert SUPERNETS.get("mbv3") is ofa_supernet.MobileNetV3Supernet
    assert ofa_supernet.OFAMobileNetV3Supernet.space_name == "ofa_mbv3"
    assert ofa_supernet.MobileNetV3Supernet.space_name == "mbv3"


# -- the relaxation (ProxylessNAS) ----------------------------------------------------------------


def _count_block_calls(monkeypatch) -> list[int]:
    calls = [0]
    original = ofa_supernet.ElasticMBConv.forward

    def counting(self, x, kernel, expand):
        calls[0] += 1
        return original(self, x, kernel, expand)

    monkeypatch.setattr(ofa_supernet.ElasticMBConv, "forward", counting)
    return calls


@pytest.mark.parametrize("which", ["ofa", "mbv3"])
def test_binarised_weights_run_one_path_and_soft_weights_run_every_pair(which, monkeypatch):
    from hwnas.supernet import RelaxedSupernet, one_hot_weights

    space = ofa_space() if which == "ofa" else mbv3_space()
    sn = make(space).eval()
    assert isinstance(sn, RelaxedSupernet)
    arch = space.sample(np.random.default_rng(3))
    calls = _count_block_calls(monkeypatch)
    with torch.no_grad():
        sn.forward_relaxed(input_for(space, arch), one_hot_weights(space, arch))
    depths = [int(v) for k, v in space.canonicalize(arch).genes.items() if k.startswith("d")]
    assert calls[0] == sum(depths)  # one block per active position: the memory of one path
    calls[0] = 0
    uniform = {g.name: torch.full((len(g.choices),), 1.0 / len(g.choices)) for g in space.genes()}
    with torch.no_grad():
        sn.forward_relaxed(input_for(space, arch), uniform)
    blocks = sum(len(stage) for stage in sn.stages)
    kernels = len(next(g for g in space.genes() if g.name.startswith("k")).choices)
    expands = len(next(g for g in space.genes() if g.name.startswith("e")).choices)
    resolutions = len(OFA_PARAMS["resolutions"]) if which == "ofa" else 1
    assert calls[0] == blocks * kernels * expands * resolutions


def test_relaxed_resolution_is_a_mixture_over_resized_inputs():
    from hwnas.supernet import one_hot_weights

    space = ofa_space()
    sn = make(space).eval()
    arch = space.canonicalize(Architecture(space.name, {**space.sample(np.random.default_rng(0)).genes, "r": 40}))
    x = input_for(space, arch)  # 40 x 40
    small = Architecture(space.name, {**arch.genes, "r": 32})
    mixed = one_hot_weights(space, arch)
    mixed["r"] = torch.tensor([0.25, 0.75])
    with torch.no_grad():
        got = sn.forward_relaxed(x, mixed)
        want = 0.75 * sn(x, arch) + 0.25 * sn(F.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False),
                                                 small)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)


def test_relaxed_weights_with_a_missing_or_misshapen_gene_are_refused():
    space = mbv3_space()
    sn = make(space)
    x = torch.randn(2, *space.input_shape)
    uniform = {g.name: torch.full((len(g.choices),), 1.0 / len(g.choices)) for g in space.genes()}
    with pytest.raises(ValueError, match="lack gene 'd0'"):
        sn.forward_relaxed(x, {k: v for k, v in uniform.items() if k != "d0"})
    with pytest.raises(ValueError, match="weights of gene 'd0' have shape"):
        sn.forward_relaxed(x, {**uniform, "d0": torch.ones(7)})
