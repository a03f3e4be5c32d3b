"""The AutoFormer-style ViT supernet: conformance, weight entanglement by behaviour, phases, training."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, InvalidArchitecture, InvalidParams
from hwnas.search_spaces.vit import ViTSpace
from hwnas.supernet import SUPERNETS, TrainableSupernet
from hwnas.supernet.vit import ViTSupernet
from hwnas.testing import check_supernet

SMALL = {
    "resolution": 16, "num_classes": 5, "patch_sizes": (4, 8), "embed_dims": (16, 24, 32), "depths": (1, 2, 3),
    "num_heads": (2, 4), "mlp_ratios": (2.0, 3.0),
}
M = 32  # largest embedding dimension of SMALL


def make(seed: int = 0, params: dict[str, Any] | None = None, **space: Any) -> ViTSupernet:
    sp = ViTSpace(**{**SMALL, **space})
    supernet = SUPERNETS.create("vit", params or {}, space=sp, generator=torch.Generator().manual_seed(seed))
    assert isinstance(supernet, ViTSupernet)
    return supernet.eval()


def arch(patch: int = 4, embed: int = 32, depth: int = 3, heads: int | list[int] = 4,
         mlp: int | list[int] = 30) -> Architecture:
    hs = heads if isinstance(heads, list) else [heads] * depth
    ms = mlp if isinstance(mlp, list) else [mlp] * depth
    genes: dict[str, int] = {"patch": patch, "embed": embed, "depth": depth}
    for i in range(3):
        genes[f"heads{i}"] = hs[i] if i < depth else 0
        genes[f"mlp{i}"] = ms[i] if i < depth else 0
    return Architecture("vit", genes)


def batch(patch_res: int = 16, n: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 3, patch_res, patch_res, generator=torch.Generator().manual_seed(seed))


def out(supernet: ViTSupernet, a: Architecture, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return supernet(x, a)


def perturbed(supernet: ViTSupernet, name: str, index: Any) -> ViTSupernet:
    """The supernet with ``state_dict()[name][index]`` shifted by random noise (in place; returned for chaining).

    Noise, not a constant: a constant added across a row of a layer fed by a LayerNorm (whose outputs sum
    to zero over the active dims) would change nothing.
    """
    with torch.no_grad():
        target = supernet.state_dict()[name][index]
        target += torch.randn(target.shape, generator=torch.Generator().manual_seed(5))
    return supernet


# -- conformance -------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_passes_the_suite(seed):
    supernet = make(seed)
    assert isinstance(supernet, TrainableSupernet)
    check_supernet(supernet, np.random.default_rng(seed), n_archs=4, batch=2)


def test_extract_equals_forward_for_largest_smallest_and_mixed():
    supernet = make(3)
    x = batch()
    mixed = arch(patch=8, embed=24, depth=3, heads=[2, 4, 2], mlp=[30, 20, 30])
    for a in (supernet.largest(), supernet.smallest("uniform"), mixed):
        module = supernet.extract(a)
        assert type(module) is type(supernet.space.build(a))
        assert not module.training
        assert set(module.state_dict()) == set(supernet.space.build(a).state_dict())
        with torch.no_grad():
            torch.testing.assert_close(module(x), supernet(x, a), atol=1e-5, rtol=1e-4)


def test_train_mode_output_equals_eval_mode():  # no dropout, no batch statistics
    supernet = make()
    x, a = batch(), arch(embed=24, heads=2)
    ev = out(supernet, a, x)
    supernet.train()
    torch.testing.assert_close(out(supernet, a, x), ev)


# -- construction and determinism --------------------------------------------------------------------


def test_same_seed_same_weights_different_seed_different_and_global_rng_untouched():
    state = torch.random.get_rng_state()
    a, b, c = make(0), make(0), make(1)
    assert torch.equal(torch.random.get_rng_state(), state), "construction consumed the global RNG"
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys() == sc.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa)
    a.extract(a.largest())
    assert torch.equal(torch.random.get_rng_state(), state), "extract consumed the global RNG"


def test_shapes_and_timm_like_init():
    supernet = make(0)
    sd = supernet.state_dict()
    assert sd["blocks.0.attn.qkv.weight"].shape == (3 * M, M)
    assert sd["blocks.0.mlp.fc1.weight"].shape == (int(32 * 3.0), M)
    assert sd["blocks.2.mlp.fc2.weight"].shape == (M, 96)
    assert sd["pos_embed.4"].shape == (1, (16 // 4) ** 2 + 1, M)
    assert sd["pos_embed.8"].shape == (1, (16 // 8) ** 2 + 1, M)
    assert sd["patch_embed.4.weight"].shape == (M, 3, 4, 4) and sd["patch_embed.8.weight"].shape == (M, 3, 8, 8)
    assert sd["cls_token"].shape == (1, 1, M)
    assert not any(k.startswith("blocks.3") for k in sd)
    assert 0.015 < float(sd["blocks.0.mlp.fc1.weight"].std()) < 0.025
    assert torch.equal(sd["blocks.0.mlp.fc1.bias"], torch.zeros(96))
    assert torch.equal(sd["blocks.1.norm1.weight"], torch.ones(M))
    assert float(sd["cls_token"].abs().max()) < 1e-4


def test_no_qkv_bias_follows_the_space():
    supernet = make(0, qkv_bias=False)
    assert "blocks.0.attn.qkv.bias" not in supernet.state_dict()
    x, a = batch(), arch(embed=16, heads=2)
    torch.testing.assert_close(supernet.extract(a)(x), out(supernet, a, x), atol=1e-5, rtol=1e-4)


def test_wrong_space_instance_and_bad_params_are_refused():
    with pytest.raises(ConfigError, match="vit"):
        ViTSupernet(space=SimpleNamespace(name="nb201"), generator=torch.Generator().manual_seed(0))
    with pytest.raises(InvalidParams):
        make(0, params={"bogus": 1})


# -- weight entanglement, by behaviour --------------------------------------------------------------


def test_qkv_uses_leading_rows_of_each_third_and_leading_columns():
    base = make(0)
    x, small, big = batch(), arch(embed=16, heads=2), arch(embed=32, heads=2)
    ref_small, ref_big = out(base, small, x), out(base, big, x)

    unused = make(0)  # rows e..M of the q, k and v thirds, and columns e..M: unused by width 16
    for lo in (16, M + 16, 2 * M + 16):
        perturbed(unused, "blocks.0.attn.qkv.weight", slice(lo, lo + 16))
        perturbed(unused, "blocks.0.attn.qkv.bias", slice(lo, lo + 16))
    perturbed(unused, "blocks.1.attn.qkv.weight", (slice(None), slice(16, M)))
    torch.testing.assert_close(out(unused, small, x), ref_small)
    assert not torch.allclose(out(unused, big, x), ref_big)

    for row in (0, 15, M, M + 15, 2 * M, 2 * M + 15):  # the leading rows of each third are used
        used = perturbed(make(0), "blocks.0.attn.qkv.weight", (row, slice(0, 16)))
        assert not torch.allclose(out(used, small, x), ref_small), f"qkv row {row} is not used by width 16"

    w = base.state_dict()["blocks.0.attn.qkv.weight"]
    got = base.extract(small).blocks[0].attn.qkv.weight
    assert torch.equal(got, torch.cat([w[0:16, :16], w[M:M + 16, :16], w[2 * M:2 * M + 16, :16]]))


def test_heads_split_the_same_weights_differently():
    supernet = make(0)
    x = batch()
    two, four = arch(embed=24, heads=2), arch(embed=24, heads=4)
    assert not torch.allclose(out(supernet, two, x), out(supernet, four, x), atol=1e-4)
    s2, s4 = supernet.extract(two).state_dict(), supernet.extract(four).state_dict()
    assert s2.keys() == s4.keys() and all(torch.equal(s2[k], s4[k]) for k in s2), "heads changed the weights"
    assert supernet.extract(two).blocks[0].attn.head_dim == 12
    assert supernet.extract(four).blocks[0].attn.head_dim == 6

    supernet.train()
    touched = []
    for a in (two, four):
        supernet.zero_grad(set_to_none=True)
        F.cross_entropy(supernet(x, a), torch.tensor([0, 1, 2])).backward()
        touched.append({n for n, p in supernet.named_parameters() if p.grad is not None and bool(p.grad.any())})
    assert touched[0] == touched[1]
    assert "blocks.0.attn.qkv.weight" in touched[0]


def test_attention_matches_a_manual_per_head_computation():
    supernet = make(0)
    e, heads = 16, 4
    a = arch(embed=e, depth=1, heads=heads, mlp=20)
    block = supernet.extract(a).blocks[0]
    y = torch.randn(2, 5, e, generator=torch.Generator().manual_seed(1))
    w = supernet.state_dict()["blocks.0.attn.qkv.weight"]
    b = supernet.state_dict()["blocks.0.attn.qkv.bias"]
    q, k, v = (y @ w[t * M:t * M + e, :e].T + b[t * M:t * M + e] for t in range(3))
    split = [t.reshape(2, 5, heads, e // heads).transpose(1, 2) for t in (q, k, v)]
    att = torch.softmax(split[0] @ split[1].transpose(-1, -2) * (e // heads) ** -0.5, dim=-1) @ split[2]
    pw, pb = supernet.state_dict()["blocks.0.attn.proj.weight"], supernet.state_dict()["blocks.0.attn.proj.bias"]
    expected = att.transpose(1, 2).reshape(2, 5, e) @ pw[:e, :e].T + pb[:e]
    with torch.no_grad():
        torch.testing.assert_close(block.attn(y), expected, atol=1e-5, rtol=1e-4)


def test_mlp_hidden_width_is_the_leading_int_embed_times_ratio():
    x = batch()
    a = arch(embed=24, depth=1, heads=2, mlp=30)  # hidden int(24 * 3.0) = 72
    base = make(0)
    assert base.extract(a).blocks[0].mlp.fc1.weight.shape == (72, 24)
    ref = out(base, a, x)
    unused = perturbed(make(0), "blocks.0.mlp.fc1.weight", slice(72, None))
    perturbed(unused, "blocks.0.mlp.fc1.weight", (slice(None), slice(24, None)))
    perturbed(unused, "blocks.0.mlp.fc2.weight", (slice(None), slice(72, None)))
    perturbed(unused, "blocks.0.mlp.fc2.weight", slice(24, None))
    torch.testing.assert_close(out(unused, a, x), ref)
    used = perturbed(make(0), "blocks.0.mlp.fc1.weight", (71, slice(0, 24)))
    assert not torch.allclose(out(used, a, x), ref)
    narrower = arch(embed=24, depth=1, heads=2, mlp=20)  # hidden 48: row 71 unused
    torch.testing.assert_close(out(used, narrower, x), out(base, narrower, x))


def test_embedding_dim_uses_leading_channels_everywhere():
    x = batch()
    small, big = arch(patch=4, embed=16, heads=2), arch(patch=4, embed=32, heads=2)
    base = make(0)
    ref_small, ref_big = out(base, small, x), out(base, big, x)
    unused = make(0)
    tail = slice(16, None)
    for name in ("patch_embed.4.weight", "patch_embed.4.bias", "norm.weight", "norm.bias"):
        perturbed(unused, name, tail)
    for name in ("cls_token", "pos_embed.4", "head.weight"):
        perturbed(unused, name, (Ellipsis, tail))
    for i in range(3):
        for part in ("norm1", "norm2"):
            perturbed(unused, f"blocks.{i}.{part}.weight", tail)
            perturbed(unused, f"blocks.{i}.{part}.bias", tail)
        perturbed(unused, f"blocks.{i}.attn.proj.weight", tail)
        perturbed(unused, f"blocks.{i}.attn.proj.weight", (slice(None), tail))
        perturbed(unused, f"blocks.{i}.mlp.fc2.bias", tail)
    torch.testing.assert_close(out(unused, small, x), ref_small)
    assert not torch.allclose(out(unused, big, x), ref_big)


def test_layer_norm_normalises_over_the_active_dims_only():
    # with the weights beyond e perturbed, a full-width norm would change; a LayerNorm(e) does not
    supernet = make(0)
    e = 16
    a = arch(embed=e, depth=1, heads=2, mlp=20)
    h = torch.randn(2, 5, e, generator=torch.Generator().manual_seed(2))
    norm = supernet.extract(a).norm
    torch.testing.assert_close(norm(h), F.layer_norm(h, (e,), supernet.norm.weight[:e], supernet.norm.bias[:e], 1e-6))


def test_depth_uses_the_first_blocks():
    x = batch()
    two, three = arch(depth=2), arch(depth=3)
    base = make(0)
    ref2, ref3 = out(base, two, x), out(base, three, x)
    changed = make(0)
    for name in [k for k in changed.state_dict() if k.startswith("blocks.2.")]:
        perturbed(changed, name, Ellipsis)
    torch.testing.assert_close(out(changed, two, x), ref2)
    assert not torch.allclose(out(changed, three, x), ref3)


def test_each_patch_size_has_its_own_embedding_and_position_embedding_cls_shared():
    x = batch()
    p4, p8 = arch(patch=4), arch(patch=8)
    base = make(0)
    ref4, ref8 = out(base, p4, x), out(base, p8, x)
    changed = perturbed(make(0), "patch_embed.8.weight", Ellipsis)
    torch.testing.assert_close(out(changed, p4, x), ref4)
    assert not torch.allclose(out(changed, p8, x), ref8)
    changed = perturbed(make(0), "pos_embed.4", Ellipsis)
    torch.testing.assert_close(out(changed, p8, x), ref8)
    assert not torch.allclose(out(changed, p4, x), ref4)
    changed = perturbed(make(0), "cls_token", Ellipsis)
    assert not torch.allclose(out(changed, p4, x), ref4)
    assert not torch.allclose(out(changed, p8, x), ref8)
    assert supernet_pos_tokens(base.extract(p4)) == 17 and supernet_pos_tokens(base.extract(p8)) == 5


def supernet_pos_tokens(module: torch.nn.Module) -> int:
    return int(module.pos_embed.shape[1])  # type: ignore[union-attr,index]


# -- training protocol -------------------------------------------------------------------------------


def test_largest_and_smallest():
    supernet = make(0)
    space = supernet.space
    big, small = supernet.largest(), supernet.smallest("uniform")
    space.validate(big)
    space.validate(small)
    assert big == arch(patch=4, embed=32, depth=3, heads=4, mlp=30)  # the smallest patch: the most tokens
    assert small == arch(patch=8, embed=16, depth=1, heads=2, mlp=20)
    assert supernet.smallest("largest") == big


def test_phases_and_sampling():
    supernet = make(0)
    assert supernet.phases == ("largest", "uniform")
    assert make(0, params={"warmup": False}).phases == ("uniform",)
    rng = np.random.default_rng(0)
    assert all(supernet.sample_subnet(rng, "largest") == supernet.largest() for _ in range(5))
    draws = [supernet.sample_subnet(rng, "uniform") for _ in range(200)]
    for a in draws:
        supernet.space.validate(a)
    for gene in ("patch", "embed", "depth", "heads0", "mlp0"):
        seen = {a.genes[gene] for a in draws}
        assert len(seen) > 1 and 0 not in seen, f"gene {gene} is not drawn at random: {seen}"
    first = [supernet.sample_subnet(np.random.default_rng(7), "uniform") for _ in range(3)]
    assert first == [supernet.sample_subnet(np.random.default_rng(7), "uniform") for _ in range(3)]
    with pytest.raises(ConfigError, match="phase"):
        supernet.sample_subnet(rng, "kernel")
    with pytest.raises(ConfigError, match="phase"):
        make(0, params={"warmup": False}).smallest("largest")
    before = {k: v.clone() for k, v in supernet.state_dict().items()}
    for phase in supernet.phases:
        supernet.begin_phase(phase)
    assert all(torch.equal(v, before[k]) for k, v in supernet.state_dict().items())


def test_sgd_steps_reduce_the_largest_loss():
    supernet = make(0).train()
    x = batch(n=8, seed=3)
    labels = torch.arange(8) % 5
    a = supernet.largest()
    opt = torch.optim.SGD(supernet.parameters(), lr=0.1, momentum=0.9)
    with torch.no_grad():
        first = float(F.cross_entropy(supernet(x, a), labels))
    for _ in range(15):
        opt.zero_grad()
        F.cross_entropy(supernet(x, a), labels).backward()
        opt.step()
    with torch.no_grad():
        last = float(F.cross_entropy(supernet(x, a), labels))
    assert last < 0.8 * first, (first, last)


def test_invalid_architectures_name_the_gene():
    supernet = make(0)
    x = batch()
    bad = Architecture("vit", {**arch().genes, "embed": 20})
    with pytest.raises(InvalidArchitecture, match="embed"):
        supernet(x, bad)
    with pytest.raises(InvalidArchitecture, match="embed"):
        supernet.extract(bad)
    with pytest.raises(InvalidArchitecture, match="heads1"):
        supernet(x, Architecture("vit", {**arch().genes, "heads1": 3}))
    with pytest.raises(InvalidArchitecture, match="space"):
        supernet(x, Architecture("nb201", dict(arch().genes)))
