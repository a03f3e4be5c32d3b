from __future__ import annotations

import subprocess
import sys


def test_import_hwnas_and_cli_module_do_not_import_torch():
    code = ("import sys, hwnas, hwnas.cli, hwnas.search_spaces, hwnas.strategies, hwnas.experiments; "
            "print(sorted(m for m in ('torch', 'onnxruntime', 'timm', 'tensorrt', 'ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_the_cli_parser_imports_no_run_machinery():
    """``nas --version`` and every ``--help`` build the whole parser: it must not import the run's modules (the
    package __init__ files re-export lazily), nor matplotlib, pydantic's models of the config, or torch."""
    code = ("import sys; from hwnas.cli import _parser; _parser(); "
            "print(sorted(m for m in ('hwnas.experiments.api', 'hwnas.experiments.config', 'hwnas.experiments.runner',"
            " 'matplotlib', 'torch', 'onnxruntime', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
    import hwnas.experiments as experiments

    assert callable(experiments.run_experiment) and "run_experiment" in dir(experiments)  # still there, lazily


def test_every_lazily_exported_name_resolves_and_unknown_names_are_named():
    """Each package's ``__all__`` (hwnas.lazy.lazy_exports) resolves to the object its module defines, is listed by
    ``dir()``, and an unknown name raises AttributeError naming the package and the name."""
    import importlib

    import pytest

    for package in ("hwnas", "hwnas.experiments", "hwnas.experiments.export"):
        module = importlib.import_module(package)
        for name in module.__all__:
            assert name in dir(module), (package, name)
            value = getattr(module, name)
            source = module._LAZY.get(name)
            if source is not None:
                assert value is getattr(importlib.import_module(source), name), (package, name)
        with pytest.raises(AttributeError, match=rf"module '{package}' has no attribute 'no_such_name'"):
            _ = module.no_such_name
