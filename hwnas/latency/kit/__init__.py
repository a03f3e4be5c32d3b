"""The board kit: latency tables for devices that have onnxruntime or trtexec but no torch (and no hwnas).

:func:`make_kit` writes ``kit.zip`` and the runner (:mod:`hwnas.latency.run_kit`, shipped as ``run_kit.py``);
on the board ``python3 run_kit.py kit.zip --out results.json`` measures it; :func:`import_results` turns the
results into a :class:`~hwnas.latency.tables.LatencyTable`.
"""

from hwnas.latency.kit.make import Kit, KitError, compute_kit_id, make_kit, runner_source
from hwnas.latency.kit.results import import_results, measured_networks, read_manifest, read_results

__all__ = ["Kit", "KitError", "compute_kit_id", "import_results", "make_kit", "measured_networks",
           "read_manifest", "read_results", "runner_source"]
