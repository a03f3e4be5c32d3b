"""The all-active fast paths of CategoricalSpace (mutate, encode) give what the general code gives, draw for draw."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from hwnas.search_spaces.base import CategoricalSpace, Gene
from hwnas.search_spaces.fbnet import FBNetSpace


class _Toy(CategoricalSpace):
    """Every gene always active; one gene with a single choice, one whose choices are not 0..k-1."""

    name = "toy_fast"

    def genes(self) -> list[Gene]:
        return [Gene("b_width", (16, 24, 32)), Gene("a_fixed", (3,)), Gene("c_kernel", (3, 5, 7, 9))]


def _general(space_cls: type[CategoricalSpace]) -> CategoricalSpace:
    """The same space with active_genes overridden (to what it was): mutate takes the general path."""

    class General(space_cls):  # type: ignore[valid-type, misc]
        def active_genes(self, genes: Mapping[str, Any]) -> set[str]:
            return {g.name for g in self._gene_list()}

    return General()


def _old_encode(space: CategoricalSpace, arch: Any) -> np.ndarray:
    """One-hot per gene as the general code built it before the fast path: a zero block per gene, concatenated."""
    parts = []
    for g in space.genes():
        v = np.zeros(len(g.choices), dtype=np.float32)
        if arch.genes[g.name] in g.choices:
            v[g.choices.index(arch.genes[g.name])] = 1.0
        parts.append(v)
    return np.concatenate(parts)


@pytest.mark.parametrize("space_cls", [FBNetSpace, _Toy])
def test_fast_mutate_equals_the_general_path_draw_for_draw(space_cls):
    fast, general = space_cls(), _general(space_cls)
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    a = b = fast.sample(np.random.default_rng(1))
    for _ in range(2000):
        a, b = fast.mutate(a, rng_a), general.mutate(b, rng_b)
        assert a.genes == b.genes
    assert rng_a.integers(1 << 30) == rng_b.integers(1 << 30)  # the same number of draws were taken
    assert fast.canonicalize(a) is fast.canonicalize(a)


@pytest.mark.parametrize("space_cls", [FBNetSpace, _Toy])
def test_encode_equals_the_concatenated_one_hot_blocks(space_cls):
    space = space_cls()
    for arch in space.sample_many(np.random.default_rng(3), 200):
        row = space.encode(arch)
        assert row.dtype == np.float32
        np.testing.assert_array_equal(row, _old_encode(space, arch))


def test_a_space_with_its_own_validity_rule_is_mutated_through_it():
    """A space that overrides validate (a combination it refuses) keeps the general path: every child is checked."""
    from hwnas.errors import InvalidArchitecture

    class Strict(_Toy):
        def validate(self, arch: Any) -> None:
            super().validate(arch)
            if arch.genes["b_width"] == 32 and arch.genes["c_kernel"] == 9:
                raise InvalidArchitecture("toy_fast: b_width=32 with c_kernel=9")

    space, rng = Strict(), np.random.default_rng(0)
    arch = space.sample(np.random.default_rng(2))
    refused = 0
    for _ in range(300):
        try:
            arch = space.mutate(arch, rng)
        except InvalidArchitecture:
            refused += 1
        assert not (arch.genes["b_width"] == 32 and arch.genes["c_kernel"] == 9)
    assert refused > 0
