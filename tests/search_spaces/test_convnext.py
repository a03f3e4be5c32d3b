from __future__ import annotations

import itertools

import numpy as np
import pytest
from pydantic import ValidationError

from hwnas.architecture import Architecture
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.convnext import ConvNeXtSpace
from hwnas.testing import check_space, check_space_build

BOTH = {"mixers": ["dw", "inception"]}
TINY = {"stages": [{"widths": [8, 16], "depths": [1, 2]}, {"widths": [16], "depths": [1, 2]}],
        "kernels": [3, 7], "mlp_ratios": [2], **BOTH}


def test_registered_and_conformant():
    assert SPACES.get("convnext") is ConvNeXtSpace
    check_space(ConvNeXtSpace())
    check_space(ConvNeXtSpace(**BOTH))


def test_build_with_both_mixers_exports_and_matches_onnxruntime():
    space = ConvNeXtSpace(**BOTH, layer_scale_init=1.0)  # layer scale 1: the blocks visibly change the output
    arch = space.sample(np.random.default_rng(2))
    mixers = {arch.genes[f"m{s}_{b}"] for s in range(4) for b in range(arch.genes[f"d{s}"])}
    assert mixers == {0, 1}, "the seed should give a network with both mixers"
    assert check_space_build(space, arch) < 1e-3


def test_size_matches_brute_force_count():
    space = ConvNeXtSpace(**TINY)
    every = itertools.product(*(range(len(g.choices)) for g in space.genes()))
    seen = {space.from_indices(idx).arch_id for idx in every}
    # per block 2 kernels x 2 mixers = 4; stage 0: 2 widths x (4 + 16); stage 1: 1 x (4 + 16)
    assert space.size() == 40 * 20
    assert len(seen) == 800


def test_default_size_formula():
    per_block = 5 * 3
    assert ConvNeXtSpace().size() == (3 * (per_block + per_block**2 + per_block**3)) ** 4
    assert ConvNeXtSpace(**BOTH).size() == (3 * sum((2 * per_block) ** d for d in (1, 2, 3))) ** 4


def test_blocks_beyond_depth_are_zeroed_and_share_an_id():
    space = ConvNeXtSpace(**BOTH)
    genes = {g.name: g.choices[0] for g in space.genes()}
    genes.update(d1=1, k1_2=9, e1_2=4, m1_2=1)
    a = space.canonicalize(Architecture("convnext", genes))
    genes.update(k1_2=5, m1_2=0)
    b = space.canonicalize(Architecture("convnext", genes))
    assert a == b and (a.genes["k1_2"], a.genes["e1_2"], a.genes["m1_2"]) == (0, 0, 0)


def test_layers_follow_the_genes_and_build_matches_them():
    import torch
    from timm.models.convnext import ConvNeXtBlock
    from timm.models.inception_next import MetaNeXtBlock

    space = ConvNeXtSpace(**BOTH)
    genes = {g.name: g.choices[0] for g in space.genes()}
    genes.update(w0=24, d0=2, k0_0=7, e0_0=4, m0_1=1, k0_1=11, d3=1, w3=192)
    arch = space.canonicalize(Architecture("convnext", genes))
    keys = space.layers(arch)
    assert keys[:4] == [
        "convnext_stem:i3:o24:s2:r32",
        "convnext_block:c24:k7:e4:r16:ls",
        "inceptionnext_block:c24:sq3:band11:br0.125:e2:r16:ls",
        "convnext_down:i24:o32:r16",
    ]
    assert keys[-2:] == ["convnext_block:c192:k3:e2:r2:ls", "convnext_head:i192:cls10:r2"]
    assert space.layers(arch.replace(k0_0=5))[1] == "convnext_block:c24:k5:e4:r16:ls"
    assert space.layers(arch.replace(m0_0=1))[1] == "inceptionnext_block:c24:sq3:band7:br0.125:e4:r16:ls"
    assert space.layers(arch.replace(w1=48)) != keys

    model = space.build(arch)
    first = model.stages[0]
    assert isinstance(first[0], ConvNeXtBlock) and first[0].conv_dw.kernel_size == (7, 7)
    assert first[0].mlp.fc1.out_features == 96
    assert isinstance(first[1], MetaNeXtBlock)
    assert first[1].token_mixer.dwconv_w.kernel_size == (1, 11) and first[1].token_mixer.dwconv_hw.kernel_size == (3, 3)
    assert first[1].token_mixer.split_indexes == (24 - 9, 3, 3, 3)
    assert len(model.stages[3]) == 2  # downsampling + one block
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_params_are_checked():
    with pytest.raises(ValidationError, match=r"odd and within 3..11; not: \[4\]"):
        ConvNeXtSpace(kernels=[3, 4])
    with pytest.raises(ValidationError, match=r"stages\[0\]: width\(s\) \[4\] leave no channel"):
        ConvNeXtSpace(stages=[{"widths": [4, 8]}], **BOTH)
    with pytest.raises(ValidationError, match="too small"):
        ConvNeXtSpace(resolution=8, stem_stride=4)
    with pytest.raises(ValidationError):
        ConvNeXtSpace(mixers=["attention"])
