from __future__ import annotations

import pytest

from hwnas.errors import UnknownComponent
from hwnas.registry import Registry, first_doc_line


def test_register_get_and_suggestions():
    reg: Registry[type] = Registry(kind="thing", entry_point_group="hwnas.test-things")

    @reg.register("alpha")
    class Alpha:
        """First line.

        More text."""

    assert reg.get("alpha") is Alpha and "alpha" in reg and reg.names() == ["alpha"]
    assert first_doc_line(Alpha) == "First line."
    with pytest.raises(UnknownComponent, match="did you mean 'alpha'"):
        reg.get("alpah")


def test_duplicate_names_are_refused_but_reregistering_the_same_object_is_fine():
    reg: Registry[type] = Registry(kind="thing", entry_point_group="hwnas.test-things")

    class A: ...

    class B: ...

    reg.register("a")(A)
    reg.register("a")(A)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(B)


def test_builtin_registries_are_populated():
    from hwnas.evaluation import EVALUATORS
    from hwnas.experiments import evaluators  # noqa: F401
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import STRATEGIES

    assert {"random", "evolution", "nsga2"} <= set(STRATEGIES.names())
    assert "mbv3" in SPACES.names()
    assert {"complexity", "ort_latency", "train"} <= set(EVALUATORS.names())
