"""The ``memory`` evaluator: how much memory a network needs for one inference at batch 1, read off its ONNX graph.

- ``weights_mb``: the bytes of the graph's initializers and ``Constant`` nodes (what the exported model stores,
  BatchNorm folded into convolutions as the exporter does in eval mode);
- ``peak_act_mb``: the largest total of activations alive at once when the nodes run one after another in the
  graph's (topological) order: a node's inputs and outputs are alive while it runs, a tensor is freed after its
  last consumer, the graph's outputs live to the end. Shapes come from ONNX shape inference at batch 1, and
  where it cannot work one out (a Reshape to a shape computed in the graph), from running the graph once on
  zeros with onnxruntime;
- ``peak_mem_mb``: the two together, the least an inference engine that keeps every weight resident and does
  not run nodes in place needs.

MB here are 2^20 bytes. A runtime can need less (in-place operators, a better order, memory reuse within a
node) or more (workspaces, allocator rounding); the figures rank architectures, as a lookup table's latency
does, and are exact for the graph and order given.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.evaluation import EvalContext, EvaluatorParams, Metrics, stable_fingerprint
from hwnas.training import build_seeded

if TYPE_CHECKING:
    from onnx import ModelProto, TypeProto

MB = float(1 << 20)

#: onnxruntime's input type names -> numpy dtypes (inputs are fed as zeros)
_ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
              "tensor(int64)": "int64", "tensor(int32)": "int32"}


class GraphMemory(TypedDict):
    """What :func:`graph_memory` finds of an ONNX graph."""

    weights_bytes: float
    peak_activation_bytes: float
    peak_at: str
    runtime_shapes: bool


class GraphMemoryError(ValueError):
    """The graph's memory cannot be worked out (a tensor of unknown shape or type)."""


def _tensor_bytes(type_proto: TypeProto) -> int | None:
    """Bytes of a tensor of this type, or None where ONNX shape inference left its type or a dimension unknown."""
    import onnx

    tensor = type_proto.tensor_type
    if not type_proto.HasField("tensor_type") or tensor.elem_type == 0 or not tensor.HasField("shape"):
        return None
    count = 1
    for d in tensor.shape.dim:
        if not d.HasField("dim_value"):
            return None
        count *= int(d.dim_value)
    return count * int(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).itemsize)


def _runtime_sizes(model: object, names: Sequence[str]) -> dict[str, int]:
    """Bytes of ``names`` found by running the graph once on zeros with onnxruntime (for shapes that inference
    cannot work out statically, e.g. a Reshape to a shape computed inside the graph)."""
    import numpy as np
    import onnx

    from hwnas.latency.onnx_export import import_onnxruntime

    ort = import_onnxruntime()
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = {v.name for v in probe.graph.output}
    for name in names:
        if name not in have:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep every tensor
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {}
    for v in session.get_inputs():
        if any(not isinstance(d, int) for d in v.shape):
            raise GraphMemoryError(f"input {v.name!r} has a dimension of unknown size ({v.shape}): export at a "
                                   "fixed batch size")
        if v.type not in _ORT_TYPES:
            raise GraphMemoryError(f"input {v.name!r} has type {v.type}; memory runs graphs with inputs of type "
                                   f"{', '.join(_ORT_TYPES)}")
        feeds[v.name] = np.zeros(v.shape, dtype=_ORT_TYPES[v.type])
    wanted = [o.name for o in session.get_outputs()]
    values = session.run(wanted, feeds)
    return {n: int(np.asarray(a).nbytes) for n, a in zip(wanted, values)}


def graph_memory(model: ModelProto) -> GraphMemory:
    """``weights_bytes``, ``peak_activation_bytes`` and the node at the peak (``peak_at``) of an ONNX
    ``ModelProto``; ``runtime_shapes`` says whether some shapes had to come from running the graph once.

    Raises:
        GraphMemoryError: When a tensor's size cannot be found.
    """
    import numpy as np
    import onnx

    model = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    weights = sum(int(np.prod(t.dims, dtype=np.int64)) * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
                  for t in graph.initializer)
    sizes = {v.name: _tensor_bytes(v.type) for v in (*graph.input, *graph.value_info, *graph.output)}
    inputs = [v.name for v in graph.input if v.name not in initializers]
    produced = [out for node in graph.node for out in node.output if out]
    unknown = [n for n in (*inputs, *produced) if sizes.get(n) is None]
    if unknown:
        sizes.update(_runtime_sizes(model, unknown))
        missing = [n for n in unknown if sizes.get(n) is None]
        if missing:
            raise GraphMemoryError(f"tensor {missing[0]!r} has no known size ({len(missing)} such tensors)")
    for node in graph.node:
        if node.op_type == "Constant":
            weights += sum(int(sizes[out] or 0) for out in node.output if out)
    last_use: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for name in node.input:
            if name:
                last_use[name] = i
    for v in graph.output:
        last_use[v.name] = len(graph.node)

    live = {name: int(sizes[name] or 0) for name in inputs}
    current = sum(live.values())
    peak, at = current, "input"
    for i, node in enumerate(graph.node):
        if node.op_type == "Constant":
            continue
        for out in node.output:
            if out and out not in live:
                live[out] = int(sizes[out] or 0)
                current += live[out]
        if current > peak:
            peak, at = current, f"{node.op_type} {node.name or i}"
        for name in [n for n in live if last_use.get(n, -1) <= i]:
            current -= live.pop(name)
    return {"weights_bytes": float(weights), "peak_activation_bytes": float(peak), "peak_at": at,
            "runtime_shapes": bool(unknown)}


class MemoryParams(EvaluatorParams):
    opset: int = Field(17, ge=13, description="ONNX opset of the export the graph is read from")


class MemoryEvaluator:
    """Memory at batch 1 from the ONNX graph: weights_mb, peak_act_mb, peak_mem_mb (MB = 2^20 bytes)."""

    Params = MemoryParams
    cheap = True
    provides = ("weights_mb", "peak_act_mb", "peak_mem_mb")

    def __init__(self, *, context: EvalContext, opset: int = 17) -> None:
        self.space = context.space
        self.seed = context.seed
        self.opset = opset

    def fingerprint(self) -> str:
        import onnx
        import torch

        return stable_fingerprint("memory", {"opset": self.opset, "onnx": onnx.__version__,
                                             "torch": torch.__version__.split("+")[0]})

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        import onnx

        from hwnas.latency.onnx_export import export_onnx

        out: list[Metrics | BaseException] = []
        with tempfile.TemporaryDirectory(prefix="hwnas-memory-") as tmp:
            for arch in archs:
                try:
                    model = build_seeded(self.space, arch, self.seed)
                    path = export_onnx(model, self.space.input_shape_of(arch), Path(tmp) / f"{arch.arch_id}.onnx",
                                       opset=self.opset)
                    figures = graph_memory(onnx.load(str(path)))
                    w, a = figures["weights_bytes"] / MB, figures["peak_activation_bytes"] / MB
                    out.append({"weights_mb": w, "peak_act_mb": a, "peak_mem_mb": w + a})
                except Exception as exc:  # reported per architecture
                    out.append(exc)
        return out
