"""Every built-in evaluator, one module each, and the one list that registers them.

An evaluator scores architectures with metrics (``top1``, ``latency_ms@pixel3``, ...); the protocol it
follows, its parameter model and the ``EVALUATORS`` registry live in :mod:`hwnas.evaluation` (the core). This
room sits above the component rooms (spaces, training, latency, predictors, supernets, strategies) and below
:mod:`hwnas.experiments`, which builds evaluators by name: nothing here imports ``hwnas.experiments``.

A new built-in evaluator is a module here plus one line in :data:`BUILTIN_EVALUATORS`; a third party's
registers under the ``hwnas.evaluators`` entry point group instead (see CONTRIBUTING.md).
"""

#: name -> "module:class"; each module is imported when its name is first looked up.
BUILTIN_EVALUATORS: dict[str, str] = {
    "benchmark": "hwnas.evaluators.benchmark:BenchmarkEvaluator",
    "complexity": "hwnas.evaluators.complexity:ComplexityEvaluator",
    "function": "hwnas.evaluators.function:FunctionEvaluator",
    "latency_model": "hwnas.evaluators.latency_table:LatencyModelEvaluator",
    "latency_table": "hwnas.evaluators.latency_table:LatencyTableEvaluator",
    "memory": "hwnas.evaluators.memory:MemoryEvaluator",
    "ort_latency": "hwnas.evaluators.ort_latency:OrtLatencyEvaluator",
    "predictor": "hwnas.evaluators.predictor:PredictorEvaluator",
    "supernet": "hwnas.evaluators.supernet:SupernetEvaluator",
    "train": "hwnas.evaluators.train:TrainEvaluator",
    "zero_cost": "hwnas.evaluators.zero_cost:ZeroCostEvaluator",
}
