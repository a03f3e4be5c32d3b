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
