"""The board kit: latency tables for devices that have onnxruntime or trtexec but no torch (and no hwnas).

:func:`~hwnas.latency.kit.make.make_kit` writes ``kit.zip`` and the runner (:mod:`hwnas.latency.kit.run_kit`,
shipped as ``run_kit.py``); on the board ``python3 run_kit.py kit.zip --out results.json`` measures it;
:func:`~hwnas.latency.kit.results.import_results` turns the results into a
:class:`~hwnas.latency.tables.LatencyTable`.

This ``__init__`` imports nothing: :mod:`hwnas.latency.measure` reads the runner's stop rule and statistics from
:mod:`~hwnas.latency.kit.run_kit` (one copy, shipped to boards as it is), and the kit's writer reads
:mod:`hwnas.latency.measure`.
"""
