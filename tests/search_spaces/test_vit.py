from __future__ import annotations

import itertools

import numpy as np
import pytest
from pydantic import ValidationError

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.vit import AUTOFORMER_TINY, ViTSpace
from hwnas.testing import check_space, check_space_build

TINY = {"patch_sizes": [4], "embed_dims": [64], "depths": [1, 2], "num_heads": [2, 4], "mlp_ratios": [2, 4]}


def test_registered_and_conformant():
    assert SPACES.get("vit") is ViTSpace
    check_space(ViTSpace())


def test_build_exports_and_matches_onnxruntime():
    space = ViTSpace()
    arch = space.sample(np.random.default_rng(4))
    assert check_space_build(space, arch) < 1e-3


def test_size_matches_brute_force_count():
    space = ViTSpace(**TINY)
    every = itertools.product(*(range(len(g.choices)) for g in space.genes()))
    seen = {space.from_indices(idx).arch_id for idx in every}
    assert space.size() == 2 * 2 + (2 * 2) ** 2 == 20
    assert len(seen) == 20


def test_default_and_autoformer_tiny_sizes():
    assert ViTSpace().size() == 2 * 3 * sum(6**d for d in range(4, 9))
    tiny = ViTSpace(**AUTOFORMER_TINY)
    assert tiny.size() == 3 * (4**12 + 4**13 + 4**14)
    assert tiny.input_shape == (3, 224, 224)
    assert tiny.genes()[-1].name == "mlp13" and tiny.genes()[-1].choices == (35, 40)
    arch = tiny.sample(np.random.default_rng(0))
    assert tiny.layers(arch)[1].startswith("vit_block:e") and ":t197:" in tiny.layers(arch)[1]


def test_blocks_beyond_depth_are_zeroed_and_share_an_id():
    space = ViTSpace()
    genes = {g.name: g.choices[0] for g in space.genes()}
    genes.update(depth=4, heads6=4, mlp6=30)
    a = space.canonicalize(Architecture("vit", genes))
    genes.update(heads6=2, mlp6=40)
    b = space.canonicalize(Architecture("vit", genes))
    assert a == b and a.genes["heads6"] == 0 and a.genes["mlp6"] == 0 and a.genes["heads3"] == 2


def test_out_of_range_heads_is_named():
    space = ViTSpace()
    arch = space.sample(np.random.default_rng(1))
    with pytest.raises(InvalidArchitecture, match=r"heads0=3 is out of range \(choices: 2, 4\)"):
        space.validate(arch.replace(heads0=3))


def test_layers_follow_the_genes_and_build_matches_them():
    import torch

    space = ViTSpace()
    genes = {g.name: g.choices[0] for g in space.genes()}
    genes.update(patch=8, embed=96, depth=5, heads1=4, mlp2=40)
    arch = space.canonicalize(Architecture("vit", genes))
    keys = space.layers(arch)
    assert keys[0] == "vit_embed:in3:p8:e96:r32" and keys[-1] == "vit_head:e96:cls10:t17"
    assert keys[1:-1] == ["vit_block:e96:h2:mlp2:t17:qkvb1", "vit_block:e96:h4:mlp2:t17:qkvb1",
                          "vit_block:e96:h2:mlp4:t17:qkvb1", "vit_block:e96:h2:mlp2:t17:qkvb1",
                          "vit_block:e96:h2:mlp2:t17:qkvb1"]
    assert space.layers(arch.replace(heads0=4))[1] == "vit_block:e96:h4:mlp2:t17:qkvb1"
    assert space.layers(arch.replace(mlp4=30))[5] == "vit_block:e96:h2:mlp3:t17:qkvb1"

    model = space.build(arch)
    assert len(model.blocks) == 5
    assert [b.attn.num_heads for b in model.blocks] == [2, 4, 2, 2, 2]
    assert [b.mlp.fc1.out_features for b in model.blocks] == [192, 192, 384, 192, 192]
    assert model.patch_embed.proj.kernel_size == (8, 8) and model.pos_embed.shape == (1, 17, 96)
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_params_are_checked():
    with pytest.raises(ValidationError, match="divisible by every num_heads choice; not: 64/5, 96/5"):
        ViTSpace(num_heads=[2, 5], embed_dims=[64, 96], mlp_ratios=[2.0], patch_sizes=[4])
    with pytest.raises(ValidationError, match="not a multiple of patch size"):
        ViTSpace(resolution=36, patch_sizes=[8])
    with pytest.raises(ValidationError, match=r"multiple of 0\.1"):
        ViTSpace(mlp_ratios=[3.25])
    with pytest.raises(ValidationError, match="duplicates"):
        ViTSpace(depths=[4, 4])
