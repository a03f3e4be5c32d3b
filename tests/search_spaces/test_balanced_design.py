"""A balanced initial design: every value of every gene as evenly as the number of draws allows."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from hwnas.search_spaces.base import balanced_batch
from hwnas.search_spaces.darts import DartsSpace
from hwnas.search_spaces.fbnet import FBNetSpace
from hwnas.search_spaces.mbv3 import MobileNetV3Space
from hwnas.search_spaces.nb201 import NB201Space


def _counts(space, archs):
    return {g.name: Counter(a.genes[g.name] for a in archs) for g in space.genes()}


@pytest.mark.parametrize(("space", "n"), [(FBNetSpace(), 10), (FBNetSpace(), 18),
                                          (NB201Space(merge_isomorphic=False), 10)])
def test_every_value_of_every_gene_gets_its_share(space, n):
    archs = balanced_batch(space, np.random.default_rng(0), n)
    assert len(archs) == n
    for gene in space.genes():
        counts = _counts(space, archs)[gene.name]
        k = len(gene.choices)
        assert set(counts) == set(gene.choices)  # none left out (n >= k)
        assert min(counts.values()) >= n // k and max(counts.values()) <= -(-n // k)


def test_the_same_seed_gives_the_same_valid_design():
    space = MobileNetV3Space()  # genes that others switch off: rows are canonicalized
    a = balanced_batch(space, np.random.default_rng(7), 12)
    b = balanced_batch(space, np.random.default_rng(7), 12)
    assert [x.arch_id for x in a] == [x.arch_id for x in b]
    assert [x.arch_id for x in a] != [x.arch_id for x in balanced_batch(space, np.random.default_rng(8), 12)]
    for arch in a:
        space.validate(arch)
        assert space.canonicalize(arch) == arch


def test_a_space_that_samples_otherwise_gets_its_own_samples():
    """DARTS draws its cells by its own rule (sample is overridden): the design is that rule's draws."""
    space = DartsSpace()
    design = balanced_batch(space, np.random.default_rng(4), 5)
    g = np.random.default_rng(4)
    assert [a.arch_id for a in design] == [space.sample(g).arch_id for _ in range(5)]
