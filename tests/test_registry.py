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


def test_builtins_are_listed_without_import_and_imported_on_first_lookup():
    """The one list of built-ins names each component's module; ``names()`` and ``in`` read the list, ``get``
    imports the module (in a fresh interpreter, so no earlier test has imported it already)."""
    import subprocess
    import sys

    code = ("import sys; from hwnas.search_spaces.base import SPACES; "
            "listed = 'nb201' in SPACES and 'nb201' in SPACES.names(); "
            "before = 'hwnas.search_spaces.nb201' in sys.modules; "
            "cls = SPACES.get('nb201'); "
            "print(listed, before, 'hwnas.search_spaces.nb201' in sys.modules, cls.registry_name, "
            "'hwnas.search_spaces.vit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False", "True", "nb201", "False"]


def test_a_builtin_name_cannot_be_taken_by_another_component():
    reg: Registry[type] = Registry(kind="thing", entry_point_group="hwnas.test-things",
                                   builtins={"first": "hwnas.errors:ConfigError"})

    class Other: ...

    with pytest.raises(ValueError, match="already registered"):
        reg.register("first")(Other)
    from hwnas.errors import ConfigError

    assert reg.get("first") is ConfigError and reg.names() == ["first"]


def test_builtins_named_by_a_list_elsewhere_and_a_broken_target_is_an_import_error():
    reg: Registry[type] = Registry(kind="evaluator", entry_point_group="hwnas.test-things",
                                   builtins="hwnas.evaluators:BUILTIN_EVALUATORS")
    assert {"train", "benchmark", "latency_table"} <= set(reg.names())
    broken: Registry[type] = Registry(kind="thing", entry_point_group="hwnas.test-things",
                                      builtins={"gone": "hwnas.no_such_module:Thing"})
    with pytest.raises(ModuleNotFoundError, match=r"hwnas\.no_such_module"):
        broken.get("gone")


def test_every_builtin_of_every_registry_resolves_to_a_class_registered_under_its_name():
    from hwnas.evaluation import EVALUATORS
    from hwnas.experiments.executors import EXECUTORS
    from hwnas.latency.backends import BACKENDS
    from hwnas.predictors import PREDICTORS
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES
    from hwnas.supernet import SUPERNETS

    for registry in (EVALUATORS, EXECUTORS, BACKENDS, PREDICTORS, SPACES, STRATEGIES, ONE_SHOT_STRATEGIES, SUPERNETS):
        for name, cls in registry.items():
            assert isinstance(cls, type) and cls.registry_name == name, (registry.kind, name)


def test_the_static_conformance_module_lists_every_builtin_of_every_registry():
    """``hwnas/testing/builtins_conform.py`` makes mypy compare each built-in with its registry's protocol; a built-in
    added to a registry's list must be added there too."""
    import ast
    from pathlib import Path

    import hwnas.testing
    from hwnas.evaluators import BUILTIN_EVALUATORS
    from hwnas.experiments.executors.base import BUILTIN_EXECUTORS
    from hwnas.latency.backends.base import BUILTIN_BACKENDS
    from hwnas.predictors.base import BUILTIN_PREDICTORS
    from hwnas.search_spaces.base import BUILTIN_SPACES
    from hwnas.strategies.base import BUILTIN_STRATEGIES
    from hwnas.strategies.oneshot import BUILTIN_ONE_SHOT_STRATEGIES
    from hwnas.supernet.base import BUILTIN_SUPERNETS

    tree = ast.parse((Path(hwnas.testing.__file__).parent / "builtins_conform.py").read_text())
    imported = {f"{node.module}:{alias.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    listed = {node.target.id: {elt.id for elt in node.value.elts if isinstance(elt, ast.Name)}
              for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)
              and isinstance(node.target, ast.Name) and isinstance(node.value, ast.List)}
    for name, builtins in (("EVALUATORS", BUILTIN_EVALUATORS), ("EXECUTORS", BUILTIN_EXECUTORS),
                           ("BACKENDS", BUILTIN_BACKENDS), ("PREDICTORS", BUILTIN_PREDICTORS),
                           ("SPACES", BUILTIN_SPACES), ("STRATEGIES", BUILTIN_STRATEGIES),
                           ("ONE_SHOT_STRATEGIES", BUILTIN_ONE_SHOT_STRATEGIES), ("SUPERNETS", BUILTIN_SUPERNETS)):
        for target in builtins.values():
            assert target in imported and target.split(":")[1] in listed[name], (name, target)
