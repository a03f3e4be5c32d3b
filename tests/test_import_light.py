from __future__ import annotations

import subprocess
import sys


def test_import_hwnas_and_cli_module_do_not_import_torch():
    code = ("import sys, hwnas, hwnas.cli, hwnas.search_spaces, hwnas.strategies, hwnas.experiments; "
            "print(sorted(m for m in ('torch', 'onnxruntime', 'timm', 'tensorrt', 'ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
