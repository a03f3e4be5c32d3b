"""Every registered space passes the shipped conformance suite (a new space is tested by being registered)."""

from __future__ import annotations

import pytest

from hwnas.search_spaces import SPACES
from hwnas.testing import check_space, check_space_build


@pytest.mark.parametrize("name", SPACES.names())
def test_space_conformance(name):
    check_space(SPACES.get(name)())


@pytest.mark.parametrize("name", SPACES.names())
def test_space_builds_and_exports(name):
    assert check_space_build(SPACES.get(name)()) < 1e-3


@pytest.mark.parametrize("name", SPACES.names())
def test_space_has_a_one_line_doc_and_params_model(name):
    cls = SPACES.get(name)
    assert (cls.__doc__ or "").strip(), f"{name} needs a docstring (nas list shows its first line)"
    assert cls.Params.model_config.get("extra") == "forbid"


@pytest.mark.parametrize("name", SPACES.names())
def test_every_space_samples_in_batches(name):
    from hwnas.search_spaces.base import BatchSampledSpace

    assert isinstance(SPACES.get(name)(), BatchSampledSpace)


def test_the_suite_catches_a_batch_sampler_with_another_distribution():
    import numpy as np

    from hwnas.search_spaces.fbnet import FBNetSpace

    class Skewed(FBNetSpace):
        def sample_many(self, rng, n):  # every layer's op drawn from the first three only
            return [self.from_op_indices(list(row)) for row in rng.integers(0, 3, size=(n, 22))]

    assert isinstance(Skewed().sample_many(np.random.default_rng(0), 2)[0].genes["l00"], int)
    with pytest.raises(AssertionError, match="draw gene l00 differently"):
        check_space(Skewed())
