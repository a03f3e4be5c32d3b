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


def test_a_plug_in_that_fails_to_import_is_named_with_its_error(tmp_path, monkeypatch):
    """A real entry point (a dist-info on sys.path): a plug-in whose module raises is reported as broken, with
    the error, not as an unknown name; a working plug-in beside it loads."""
    dist = tmp_path / "hwnas_plugin_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hwnas-plugin-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[hwnas.test-plugins]\nbroken = hwnas_demo_broken:Thing\ngood = hwnas_demo_good:Thing\n")
    (tmp_path / "hwnas_demo_broken.py").write_text("import a_module_that_is_not_installed\n")
    (tmp_path / "hwnas_demo_good.py").write_text("class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry[type] = Registry(kind="thing", entry_point_group="hwnas.test-plugins")
    assert reg.get("good").__name__ == "Thing"
    with pytest.raises(UnknownComponent, match=r"thing 'broken' is a plug-in that failed to load "
                                               r"\(hwnas_demo_broken:Thing: ModuleNotFoundError: .*a_module_that"):
        reg.get("broken")
    with pytest.raises(UnknownComponent, match="unknown thing 'neither'"):
        reg.get("neither")
