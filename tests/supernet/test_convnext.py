"""The ConvNeXt supernet: conformance, elastic kernel / width / depth / MLP ratio, per-mixer weights, phases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, InvalidArchitecture
from hwnas.search_spaces import SPACES
from hwnas.supernet import SUPERNETS, TrainableSupernet
from hwnas.testing import check_supernet

SMALL: dict[str, Any] = dict(
    resolution=16, stem_stride=2, num_classes=5, kernels=(3, 5, 7), mlp_ratios=(2, 3), layer_scale_init=1.0,
    stages=[{"widths": (8, 16), "depths": (1, 2)}, {"widths": (16, 24), "depths": (1, 2)}],
)
BOTH = {**SMALL, "mixers": ("dw", "inception")}
DW, INCEPTION = 0, 1


def make(params: dict[str, Any] | None = None, seed: int = 0) -> Any:
    space = SPACES.create("convnext", SMALL if params is None else params)
    return SUPERNETS.create("convnext", {}, space=space, generator=torch.Generator().manual_seed(seed))


def arch(w: tuple[int, int] = (8, 16), d: tuple[int, int] = (2, 2), k: int = 7, e: int = 2, m: int = DW,
         **override: int) -> Architecture:
    """An architecture of the small spaces: the same kernel / ratio / mixer in every active block."""
    genes: dict[str, int] = {}
    for s in range(2):
        genes[f"w{s}"], genes[f"d{s}"] = w[s], d[s]
        for b in range(2):
            on = b < d[s]
            genes[f"k{s}_{b}"], genes[f"e{s}_{b}"], genes[f"m{s}_{b}"] = (k, e, m) if on else (0, 0, 0)
    genes.update(override)
    return Architecture("convnext", genes)


def x_batch(n: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 3, 16, 16, generator=torch.Generator().manual_seed(seed))


# -- conformance ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("params", "seeds"),
                         [(SMALL, (0, 1)), (BOTH, (2, 3, 4)), ({**SMALL, "mixers": ("inception",)}, (5,))],
                         ids=["dw", "both", "inc"])
def test_conformance_suite(params, seeds):
    for seed in seeds:
        supernet = make(params, seed=seed)
        assert isinstance(supernet, TrainableSupernet)
        check_supernet(supernet, np.random.default_rng(seed), n_archs=5, batch=2)


def test_conformance_default_space():
    space = SPACES.create("convnext", {"mixers": ("dw", "inception")})
    supernet = SUPERNETS.create("convnext", {}, space=space, generator=torch.Generator().manual_seed(0))
    check_supernet(supernet, np.random.default_rng(0), n_archs=2, batch=2)


@pytest.mark.parametrize("params", [SMALL, BOTH], ids=["dw", "both"])
def test_largest_and_smallest_extract_exactly(params):
    supernet = make(params).eval()
    x = x_batch()
    archs = [supernet.largest()] + [supernet.smallest(p) for p in supernet.phases]
    with torch.no_grad():
        for a in archs:
            supernet.space.validate(a)
            assert torch.allclose(supernet.extract(a)(x), supernet(x, a), atol=1e-5, rtol=1e-4)


# -- initialisation and determinism --------------------------------------------------------------------


def test_same_seed_same_weights_and_global_rng_untouched():
    before = torch.random.get_rng_state()
    a, b, c = make(BOTH, seed=3), make(BOTH, seed=3), make(BOTH, seed=4)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys() == sc.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa)
    a.extract(a.largest())
    a.eval()(x_batch(), a.smallest("width"))
    assert torch.equal(torch.random.get_rng_state(), before), "the supernet consumed the global torch RNG"


@pytest.mark.parametrize("ls", [1e-6, 0.5, None])
def test_initialised_like_timm_convnext(ls):
    supernet = make({**BOTH, "layer_scale_init": ls})
    for name, p in supernet.named_parameters():
        if name.endswith("gamma"):
            assert ls is not None and torch.all(p == ls), name
        elif name.endswith(".bias"):
            assert torch.all(p == 0), name
        elif p.dim() == 1:  # norm weights
            assert torch.all(p == 1), name
        else:  # conv / linear weights: truncated normal, std 0.02
            if p.numel() > 50:
                assert 0.015 < float(p.detach().std()) < 0.025, name
            assert float(p.detach().abs().max()) <= 2.0, name
    has_gamma = any(n.endswith("gamma") for n, _ in supernet.named_parameters())
    assert has_gamma == (ls is not None)


# -- elastic kernel: centre crop ------------------------------------------------------------------------


def test_kernel_is_centre_crop_of_the_largest():
    supernet = make().eval()
    x = x_batch()
    small, large = arch(k=7, k0_0=3), arch(k=7)
    stored = supernet.stages[0].blocks[0]["dw"].conv_dw.weight
    extracted = supernet.extract(small).stages[0][0].conv_dw.weight
    assert extracted.shape == (8, 1, 3, 3)
    assert torch.equal(extracted, stored[:8, :, 2:5, 2:5])
    with torch.no_grad():
        out_small, out_large = supernet(x, small), supernet(x, large)
        ring = torch.ones_like(stored)
        ring[:, :, 2:5, 2:5] = 0  # everything outside the centre 3x3
        stored.add_(ring * torch.randn(stored.shape, generator=torch.Generator().manual_seed(1)))
        assert torch.allclose(supernet(x, small), out_small, atol=1e-6), "the 3x3 kernel reads outside the centre"
        assert not torch.allclose(supernet(x, large), out_large, atol=1e-4), "the 7x7 kernel ignores its border"


def test_inception_band_is_centre_crop_along_its_long_axis():
    supernet = make(BOTH).eval()
    x = x_batch()
    small, large = arch(k=7, m=INCEPTION, k0_0=3), arch(k=7, m=INCEPTION)
    tm = supernet.stages[0].blocks[0]["inception"].token_mixer
    assert tm.dwconv_w.weight.shape == (2, 1, 1, 7) and tm.dwconv_h.weight.shape == (2, 1, 7, 1)  # GC = int(16/8)
    ext = supernet.extract(small).stages[0][0].token_mixer  # width 8: gc = 1
    assert ext.split_indexes == (5, 1, 1, 1)
    assert torch.equal(ext.dwconv_w.weight, tm.dwconv_w.weight[:1, :, :, 2:5])
    assert torch.equal(ext.dwconv_h.weight, tm.dwconv_h.weight[:1, :, 2:5, :])
    assert torch.equal(ext.dwconv_hw.weight, tm.dwconv_hw.weight[:1])
    with torch.no_grad():
        out_small, out_large = supernet(x, small), supernet(x, large)
        g = torch.Generator().manual_seed(2)
        tm.dwconv_w.weight[..., [0, 1, 5, 6]] += 10 * torch.randn(2, 1, 1, 4, generator=g)
        tm.dwconv_h.weight[:, :, [0, 1, 5, 6], :] += 10 * torch.randn(2, 1, 4, 1, generator=g)
        assert torch.allclose(supernet(x, small), out_small, atol=1e-6), "a length-3 band reads beyond its centre"
        assert not torch.allclose(supernet(x, large), out_large, atol=1e-5), "a length-7 band ignores its ends"


def test_inception_branch_mapping_uses_leading_filters_of_each_bank():
    """Width 16 (gc 2): channels 10-11 / 12-13 / 14-15 use filters 0-1 of the hw / w / h banks; 0-9 identity."""
    supernet = make(BOTH).eval()
    block = supernet.stages[0].blocks[0]["inception"]
    a = arch(w=(16, 16), k=7, m=INCEPTION)
    t = supernet._block_tensors(block, INCEPTION, 16, 7, 2, "stages.0.blocks.0")
    x = torch.randn(1, 16, 6, 6)
    tm = block.token_mixer
    expected = torch.cat([
        x[:, :10],
        F.conv2d(x[:, 10:12], tm.dwconv_hw.weight[:2], tm.dwconv_hw.bias[:2], padding=1, groups=2),
        F.conv2d(x[:, 12:14], tm.dwconv_w.weight[:2], tm.dwconv_w.bias[:2], padding=(0, 3), groups=2),
        F.conv2d(x[:, 14:16], tm.dwconv_h.weight[:2], tm.dwconv_h.bias[:2], padding=(3, 0), groups=2),
    ], dim=1)
    extracted = supernet.extract(a).stages[0][0].token_mixer
    assert extracted.split_indexes == (10, 2, 2, 2)
    with torch.no_grad():
        assert torch.allclose(extracted(x), expected, atol=1e-6)
    assert t["token_mixer.dwconv_hw.weight"].shape[0] == 2


# -- elastic width / MLP ratio / depth / mixer -----------------------------------------------------------


def _leading(p: torch.Tensor, sizes: list[int | None]) -> torch.Tensor:
    """Mask of the block of ``p`` at the leading ``sizes`` (None: the whole dimension)."""
    mask = torch.zeros_like(p, dtype=torch.bool)
    mask[tuple(slice(None) if n is None else slice(0, n) for n in sizes)] = True
    return mask


def _used_extents(name: str, w: tuple[int, int], e: int, gc: tuple[int, int]) -> list[int | None]:
    """The leading extents a subnet of widths ``w``, ratio ``e`` (kernel 7, full depth) uses of weight ``name``."""
    if name.startswith("stem."):
        return [w[0]]
    if name.startswith("head.3.weight"):
        return [None, w[1]]
    if name.startswith("head.3.bias"):
        return [None]
    if name.startswith("head."):
        return [w[1]]
    if ".downsample.0." in name:
        return [w[0]]
    if name == "stages.1.downsample.1.weight":
        return [w[1], w[0]]
    if name == "stages.1.downsample.1.bias":
        return [w[1]]
    s = int(name.split(".")[1])
    width, hidden = w[s], e * w[s]
    if ".mlp.fc1.weight" in name:
        return [hidden, width]
    if ".mlp.fc1.bias" in name:
        return [hidden]
    if ".mlp.fc2.weight" in name:
        return [width, hidden]
    if ".token_mixer." in name:
        return [gc[s]]
    if name.endswith("num_batches_tracked"):
        return []
    return [width]  # conv_dw, norms, mlp.fc2.bias, gamma


@pytest.mark.parametrize("mixer", [DW, INCEPTION], ids=["dw", "inception"])
def test_weights_beyond_the_leading_width_do_not_matter(mixer):
    supernet = make(BOTH).eval()
    x = x_batch()
    w, e, gc = (8, 16), 2, (1, 2)
    a = arch(w=w, e=e, m=mixer)
    used_mixer = "dw" if mixer == DW else "inception"
    with torch.no_grad():
        out = supernet(x, a)
        g = torch.Generator().manual_seed(5)
        state = supernet.state_dict()
        for name, p in state.items():
            if not p.is_floating_point() or f".{'inception' if mixer == DW else 'dw'}." in name:
                continue  # the other mixer's weights: see test_mixers_have_separate_weights
            assert used_mixer in name or ".blocks." not in name
            beyond = ~_leading(p, _used_extents(name, w, e, gc))
            p.add_(beyond * (torch.randn(p.shape, generator=g).abs() + 0.5))  # stays a valid running_var
        assert torch.allclose(supernet(x, a), out, atol=1e-6), "a narrow subnet reads weights beyond its width"
        # control: the same perturbation everywhere changes the output
        for name, p in state.items():
            if p.is_floating_point() and ".blocks." in name and "gamma" in name:
                p.add_(1.0)
        assert not torch.allclose(supernet(x, a), out, atol=1e-4)
        # and the wider architecture does see the perturbed region
        assert not torch.allclose(supernet(x, arch(w=(16, 24), e=3, m=mixer)),
                                  make(BOTH).eval()(x, arch(w=(16, 24), e=3, m=mixer)), atol=1e-4)


def test_mlp_ratio_uses_leading_hidden_units():
    supernet = make().eval()
    x = x_batch()
    a2, a3 = arch(e=3, e0_0=2), arch(e=3)
    fc1 = supernet.stages[0].blocks[0]["dw"].mlp.fc1
    extracted = supernet.extract(a2).stages[0][0].mlp
    assert extracted.fc1.weight.shape == (16, 8)
    assert torch.equal(extracted.fc1.weight, fc1.weight[:16, :8])
    with torch.no_grad():
        o2, o3 = supernet(x, a2), supernet(x, a3)
        fc1.bias[16:] += 3.0  # hidden units 16..23 only exist at ratio 3
        assert torch.allclose(supernet(x, a2), o2, atol=1e-6)
        assert not torch.allclose(supernet(x, a3), o3, atol=1e-4)


def test_depth_runs_the_first_blocks():
    supernet = make().eval()
    x = x_batch()
    shallow, deep = arch(d=(1, 2)), arch(d=(2, 2))
    assert len(supernet.extract(shallow).stages[0]) == 1 and len(supernet.extract(deep).stages[0]) == 2
    with torch.no_grad():
        o1, o2 = supernet(x, shallow), supernet(x, deep)
        assert not torch.allclose(o1, o2, atol=1e-4)
        supernet.stages[0].blocks[1]["dw"].gamma.add_(1.0)
        assert torch.allclose(supernet(x, shallow), o1, atol=1e-6), "a depth-1 stage runs its second block"
        assert not torch.allclose(supernet(x, deep), o2, atol=1e-4)


def test_mixers_have_separate_weights():
    supernet = make(BOTH).eval()
    x = x_batch()
    dw, inc = arch(m=DW), arch(m=INCEPTION)
    with torch.no_grad():
        o_dw, o_inc = supernet(x, dw), supernet(x, inc)
        assert not torch.allclose(o_dw, o_inc, atol=1e-4)
        for p in supernet.stages[0].blocks[0]["inception"].parameters():
            p.add_(0.5)
        assert torch.allclose(supernet(x, dw), o_dw, atol=1e-6)
        assert not torch.allclose(supernet(x, inc), o_inc, atol=1e-4)


def test_batchnorm_updates_only_the_active_slice():
    supernet = make(BOTH).train()
    bn = supernet.stages[0].blocks[0]["inception"].norm
    mean, var = bn.running_mean.clone(), bn.running_var.clone()
    supernet(x_batch(4) + 1.0, arch(w=(8, 16), m=INCEPTION))
    assert not torch.equal(bn.running_mean[:8], mean[:8]) and not torch.equal(bn.running_var[:8], var[:8])
    assert torch.equal(bn.running_mean[8:], mean[8:]) and torch.equal(bn.running_var[8:], var[8:])
    assert int(bn.num_batches_tracked) == 1


# -- phases -----------------------------------------------------------------------------------------------


def test_phases_largest_and_smallest():
    supernet = make(BOTH)
    assert supernet.phases == ("largest", "kernel", "depth", "width")
    big = supernet.largest()
    supernet.space.validate(big)
    assert big == arch(w=(16, 24), d=(2, 2), k=7, e=3, m=DW)
    expected = {
        "largest": arch(w=(16, 24), d=(2, 2), k=7, e=3, m=INCEPTION),
        "kernel": arch(w=(16, 24), d=(2, 2), k=3, e=3, m=INCEPTION),
        "depth": arch(w=(16, 24), d=(1, 1), k=3, e=3, m=INCEPTION),
        "width": arch(w=(8, 16), d=(1, 1), k=3, e=2, m=INCEPTION),
    }
    for phase, a in expected.items():
        supernet.begin_phase(phase)
        assert supernet.smallest(phase) == supernet.space.canonicalize(a), phase
    assert make().smallest("width") == make().space.canonicalize(arch(w=(8, 16), d=(1, 1), k=3, e=2, m=DW))
    with pytest.raises(ConfigError, match="expand"):
        supernet.sample_subnet(np.random.default_rng(0), "expand")
    with pytest.raises(ConfigError, match="phase"):
        supernet.begin_phase("nope")


def _stage_importance(supernet: Any, s: int) -> torch.Tensor:
    if s + 1 < len(supernet.stages):
        norm, reader = supernet.stages[s + 1].downsample
        return norm.weight.abs() * reader.weight.abs().sum((0, 2, 3))
    return supernet.head[1].weight.abs() * supernet.head[3].weight.abs().sum(0)


def _hidden_importance(supernet: Any) -> list[torch.Tensor]:
    return [block.mlp.fc2.weight.abs().reshape(block.mlp.fc2.weight.shape[0], block.mlp.fc2.weight.shape[1], -1
                                               ).sum((0, 2))
            for stage in supernet.stages for choices in stage.blocks for block in choices.values()]


def _descending(t: torch.Tensor) -> bool:
    return bool((t[:-1] >= t[1:]).all())


@pytest.mark.parametrize("params", [SMALL, BOTH], ids=["dw", "both"])
def test_width_phase_sorts_channels_keeping_the_largest_network(params):
    supernet = make(params).eval()
    with torch.no_grad():  # norms away from their init, so that the importance uses them
        for module in supernet.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(7))
    big = supernet.largest()
    narrow = arch(w=(8, 16), d=(2, 1), k=5, e=2, m=INCEPTION if params is BOTH else DW)
    x = x_batch()
    with torch.no_grad():
        before_big, before_narrow = supernet(x, big), supernet(x, narrow)
    hidden_before = _hidden_importance(supernet)
    stage_before = [_stage_importance(supernet, s) for s in range(2)]
    assert not all(_descending(t) for t in hidden_before + stage_before), "already sorted: vacuous test"
    for phase in ("largest", "kernel", "depth"):
        supernet.begin_phase(phase)
    with torch.no_grad():
        assert torch.equal(supernet(x, narrow), before_narrow), "a phase before width moved channels"
    supernet.begin_phase("width")
    with torch.no_grad():
        after_big, after_narrow = supernet(x, big), supernet(x, narrow)
    assert torch.allclose(after_big, before_big, atol=1e-5, rtol=1e-4), float((after_big - before_big).abs().max())
    assert not torch.allclose(after_narrow, before_narrow, atol=1e-5, rtol=1e-4)  # the tolerance the largest meets
    for imp, imp_before in zip(_hidden_importance(supernet), hidden_before):
        assert _descending(imp), "MLP hidden channels are not sorted by importance"
        assert torch.allclose(imp.sort(descending=True).values, imp_before.sort(descending=True).values)
    for s in range(2):
        imp = _stage_importance(supernet, s)
        if params is BOTH:  # InceptionNeXt splits channels by position: stage channels stay where they are
            assert torch.equal(imp, stage_before[s])
        else:
            assert _descending(imp), f"stage {s}'s channels are not sorted by importance"
    with torch.no_grad():
        assert torch.allclose(supernet.extract(narrow)(x), after_narrow, atol=1e-5, rtol=1e-4)
        supernet.sort_channels()  # sorting sorted channels changes nothing
        assert torch.equal(supernet(x, narrow), after_narrow)


def _per_width(params: dict[str, Any], seed: int = 0) -> Any:
    space = SPACES.create("convnext", params)
    return SUPERNETS.create("convnext", {"norm_per_width": True}, space=space,
                            generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("params", [SMALL, BOTH], ids=["dw", "both"])
def test_norms_per_width_conform_and_start_the_width_phase_as_the_shared_slices(params):
    supernet = _per_width(params).eval()
    # stem, 2 dw block norms and the next stage's downsampling norm per narrower stage-0 width; likewise stage 1
    # with the head's norm instead of a downsampling one: (1 + 2 + 1) + (2 + 1) slots of weight and bias each
    assert len(supernet.width_norms) == 2 * 7
    check_supernet(supernet, np.random.default_rng(3), n_archs=5, batch=2)
    shared = make(params).eval()
    with torch.no_grad():  # the shared sets trained away from their init; the narrower ones untouched so far
        for module in [*supernet.modules(), *shared.modules()]:
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(7))
                module.bias.uniform_(-0.2, 0.2, generator=torch.Generator().manual_seed(8))
    narrow = arch(w=(8, 16), d=(2, 2), k=5, e=2, m=DW)
    x = x_batch()
    with torch.no_grad():
        assert not torch.allclose(supernet(x, narrow), shared(x, narrow))  # its own (still initial) norms
        assert torch.allclose(supernet(x, supernet.largest()), shared(x, shared.largest()))
    for phase in supernet.phases:
        supernet.begin_phase(phase)
        shared.begin_phase(phase)
    with torch.no_grad():  # after the sort, each narrower set is the leading slice of the largest: as shared
        assert torch.allclose(supernet(x, narrow), shared(x, narrow), atol=1e-6)
        supernet.width_norms["head_1__w16__bias"].add_(1.0)  # ... and from then on its own
        assert not torch.allclose(supernet(x, narrow), shared(x, narrow), atol=1e-6)
        assert torch.allclose(supernet.extract(narrow)(x), supernet(x, narrow), atol=1e-5, rtol=1e-4)
        assert torch.allclose(supernet(x, supernet.largest()), shared(x, shared.largest()), atol=1e-5)


def test_sample_subnet_respects_the_phase():
    supernet = make(BOTH)
    rng = np.random.default_rng(0)
    unlocks = {"largest": set(), "kernel": {"k"}, "depth": {"k", "d"}, "width": {"k", "d", "w", "e"}}
    largest = supernet.largest().genes
    for phase, unlocked in unlocks.items():
        seen: dict[str, set[int]] = {}
        for _ in range(40):
            a = supernet.sample_subnet(rng, phase)
            supernet.space.validate(a)
            g = a.genes
            for name, value in g.items():
                s, _, b = name[1:].partition("_")
                if b and int(b) >= int(g[f"d{s}"]):  # type: ignore[call-overload]
                    assert value == 0, (phase, name)  # a block beyond the stage's depth
                    continue
                seen.setdefault(name, set()).add(int(value))  # type: ignore[call-overload]
                if name[0] not in unlocked and name[0] != "m":
                    assert value == largest[name], (phase, name)
        for dim in ("k", "d", "w", "e"):
            varied = any(len(v) > 1 for name, v in seen.items() if name[0] == dim)
            assert varied == (dim in unlocked), (phase, dim)
        assert all(v == {DW, INCEPTION} for name, v in seen.items() if name[0] == "m"), "mixers drawn in every phase"
    a1 = [supernet.sample_subnet(np.random.default_rng(7), "width") for _ in range(3)]
    a2 = [supernet.sample_subnet(np.random.default_rng(7), "width") for _ in range(3)]
    assert a1 == a2


# -- training ---------------------------------------------------------------------------------------------


def test_sgd_reduces_the_largest_subnets_loss():
    torch.manual_seed(0)
    supernet = make(BOTH).train()
    a = supernet.largest()
    x = x_batch(8, seed=3)
    y = torch.arange(8) % 5
    opt = torch.optim.SGD(supernet.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = F.cross_entropy(supernet(x, a), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.7 * losses[0], losses


# -- errors -----------------------------------------------------------------------------------------------


def test_errors():
    supernet = make()
    with pytest.raises(InvalidArchitecture, match="k0_0"):
        supernet(x_batch(), arch(k0_0=9))
    with pytest.raises(InvalidArchitecture, match="w1"):
        supernet.extract(arch(w=(8, 32)))
    with pytest.raises(InvalidArchitecture, match="m0_0"):
        supernet(x_batch(), arch(m=INCEPTION))  # "inception" is not a mixer of this space
    with pytest.raises(InvalidArchitecture, match="mobilenet"):
        supernet(x_batch(), Architecture("mobilenet", dict(arch().genes)))
    other = SPACES.create(SPACES.names()[0] if SPACES.names()[0] != "convnext" else SPACES.names()[1], {})
    with pytest.raises(ConfigError, match="ConvNeXtSpace"):
        SUPERNETS.create("convnext", {}, space=other, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ConfigError):
        SUPERNETS.create("convnext", {"width_mult": 2}, space=supernet.space,
                         generator=torch.Generator().manual_seed(0))
