from __future__ import annotations

import numpy as np
import pytest

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture
from hwnas.search_spaces.mbv3 import MobileNetV3Space


def _small() -> MobileNetV3Space:
    return MobileNetV3Space(stages=[{"channels": 8, "depths": [1, 2]}, {"channels": 16, "stride": 2, "depths": [1, 2]}],
                            kernels=[3, 5], expand_ratios=[3, 6])


def test_size_matches_brute_force_count():
    import itertools

    space = _small()
    choices = [range(len(g.choices)) for g in space.genes()]
    seen = {space.from_indices(idx).arch_id for idx in itertools.product(*choices)}
    # per stage: 4 + 4**2 = 20 settings; two stages
    assert space.size() == 400
    assert len(seen) == 400


def test_inactive_genes_are_zeroed_and_share_an_id():
    space = _small()
    genes = {g.name: g.choices[0] for g in space.genes()}
    genes.update(d0=1, k0_1=5, e0_1=6)
    a = space.canonicalize(Architecture("mbv3", genes))
    genes.update(k0_1=3, e0_1=3)
    b = space.canonicalize(Architecture("mbv3", genes))
    assert a == b and a.genes["k0_1"] == 0 and a.genes["e0_1"] == 0


def test_out_of_range_gene_is_named():
    space = _small()
    genes = {g.name: g.choices[0] for g in space.genes()}
    genes["k1_0"] = 9
    with pytest.raises(InvalidArchitecture, match=r"k1_0=9 is out of range \(choices: 3, 5\)"):
        space.validate(Architecture("mbv3", genes))


def test_layers_follow_the_genes_and_build_matches_them():
    import torch

    space = _small()
    arch = space.sample(np.random.default_rng(3))
    keys = space.layers(arch)
    blocks = [k for k in keys if k.startswith("mbconv")]
    assert len(blocks) == arch.genes["d0"] + arch.genes["d1"]
    assert keys[0].startswith("stem:") and keys[-1].startswith("head:")
    model = space.build(arch)
    assert len(model.blocks) == len(blocks)
    assert model(torch.zeros(2, 3, 16, 16)).shape == (2, 10)
    changed = arch.replace(k0_0=5 if arch.genes["k0_0"] == 3 else 3)
    assert space.layers(changed) != keys


def test_index_vector_round_trip():
    space = MobileNetV3Space()
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = space.sample(rng)
        assert space.from_indices(space.to_indices(a)) == a
    with pytest.raises(InvalidArchitecture, match="index"):
        space.from_indices([99] * len(space.genes()))
