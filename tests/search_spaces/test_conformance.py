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


UNIT_SPACES = [("mbv3", {}), ("ofa_mbv3", {}), ("ofa_mbv3", {"width_mult": 1.2}), ("fbnet", {"setting": "cifar100"}),
               ("fbnet", {"setting": "imagenet"}), ("nb201", {}), ("darts", {}), ("vit", {}), ("convnext", {}),
               ("convnext", {"mixers": ["dw", "inception"]})]


@pytest.mark.parametrize(("name", "params"), UNIT_SPACES, ids=[f"{n}-{p}" for n, p in UNIT_SPACES])
def test_every_space_lists_its_latency_units_as_the_modules_its_network_runs(name, params):
    from hwnas.testing import check_space_units

    check_space_units(SPACES.get(name)(**params), samples=3)


def test_every_registered_space_is_profiled_unit_by_unit():
    from hwnas.search_spaces import UnitProfiledSpace

    assert {n for n, _ in UNIT_SPACES} == set(SPACES.names())
    assert all(isinstance(SPACES.get(n)(), UnitProfiledSpace) for n in SPACES.names())


def test_the_unit_suite_catches_a_unit_that_is_not_the_networks_module():
    from hwnas.search_spaces.nb201 import NB201Space
    from hwnas.testing import check_space_units

    class Wrong(NB201Space):
        def _build_unit(self, kind, spec):
            import torch.nn as nn

            if kind == "op" and spec[0] == "nor_conv_3x3":  # a 1x1 conv priced where the network runs a 3x3
                return super()._build_unit(kind, ("nor_conv_1x1", spec[1]))
            return super()._build_unit(kind, spec) if kind != "head" else nn.Flatten()

    with pytest.raises(AssertionError, match="not the module the network runs"):
        check_space_units(Wrong(), samples=6)
