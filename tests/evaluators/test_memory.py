"""The memory evaluator: weights and peak activation memory of a network's ONNX graph at batch 1."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from hwnas.evaluation import EvalContext
from hwnas.evaluators.complexity import ComplexityEvaluator
from hwnas.evaluators.memory import MB, GraphMemoryError, MemoryEvaluator, graph_memory
from hwnas.search_spaces import SPACES


def _model(nodes, inputs, outputs, initializers=(), value_info=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers), value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_peak_and_weights_of_a_small_graph_by_hand():
    """input 1x3x8x8 (768 B) -> Conv -> A (1x4x8x8, 1,024 B) -> Relu -> B; Add(A, B) -> C. Alive: conv 768 + 1,024;
    relu A + B = 2,048 (the input is freed after the conv); add A + B + C = 3,072, the peak. Weights: 4x3x3x3
    floats and 4 bias floats = 448 B."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    c = helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 4, 8, 8])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], np.zeros(108, dtype=np.float32).tolist())
    b = helper.make_tensor("b", TensorProto.FLOAT, [4], [0.0] * 4)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["a"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Add", ["a", "r"], ["c"], name="add")]
    figures = graph_memory(_model(nodes, [x], [c], [w, b]))
    assert figures == {"weights_bytes": 448.0, "peak_activation_bytes": 3072.0, "peak_at": "Add add",
                       "runtime_shapes": False}


def test_shapes_that_inference_cannot_find_come_from_one_run():
    """A Reshape to a shape that only exists at run time: onnxruntime gives the sizes, and the figures equal
    those of the same graph with every shape declared."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Constant", [], ["s"], value=helper.make_tensor("s", TensorProto.INT64, [2], [2, 4])),
             helper.make_node("Identity", ["s"], ["s2"]),
             helper.make_node("Add", ["a", "a"], ["a2"]),
             helper.make_node("Reshape", ["a2", "s2"], ["y"])]
    ran = graph_memory(_model(nodes, [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]))
    declared = graph_memory(_model(nodes, [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                                   value_info=[helper.make_tensor_value_info("s2", TensorProto.INT64, [2])]))
    assert ran["runtime_shapes"] and not declared["runtime_shapes"]
    # x 32 B; relu x + a; identity a + s2 (16 B); add a + s2 + a2 = 80 (the peak); weights: the 16-B constant
    assert {k: ran[k] for k in ("weights_bytes", "peak_activation_bytes", "peak_at")} == \
        {k: declared[k] for k in ("weights_bytes", "peak_activation_bytes", "peak_at")} == \
        {"weights_bytes": 16.0, "peak_activation_bytes": 80.0, "peak_at": "Add 3"}


def test_a_dynamic_batch_is_refused_by_name():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    with pytest.raises(GraphMemoryError, match="input 'x' has a dimension of unknown size"):
        graph_memory(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y]))


@pytest.mark.parametrize("space_name", ["mbv3", "vit"])
def test_evaluator_on_real_networks(space_name):
    """Weights: the float32 parameters of the exported model (BatchNorm folded into the convolutions, so a
    little less than torch's count); the peak holds at least the input image; peak_mem = weights + peak."""
    space = SPACES.create(space_name)
    context = EvalContext(space=space, seed=0)
    archs = [space.sample(np.random.default_rng(s)) for s in range(2)]
    memory = MemoryEvaluator(context=context).evaluate(archs)
    complexity = ComplexityEvaluator(context=context).evaluate(archs)
    for arch, m, c in zip(archs, memory, complexity):
        assert isinstance(m, dict) and isinstance(c, dict)
        torch_mb = c["params_m"] * 1e6 * 4 / MB
        assert 0.9 * torch_mb < m["weights_mb"] <= torch_mb * 1.0001
        assert m["peak_act_mb"] >= 4 * np.prod(space.input_shape_of(arch)) / MB
        assert m["peak_mem_mb"] == pytest.approx(m["weights_mb"] + m["peak_act_mb"])


@pytest.mark.parametrize("space_name", SPACES.names())
def test_every_space_gets_figures(space_name):
    """Every registered space's sample exports to a graph whose sizes are all found (FBNet's channel shuffle and
    ViT's reshapes need the onnxruntime run)."""
    space = SPACES.create(space_name)
    [m] = MemoryEvaluator(context=EvalContext(space=space, seed=0)).evaluate([space.sample(np.random.default_rng(0))])
    assert isinstance(m, dict), m
    assert m["weights_mb"] > 0 and m["peak_act_mb"] > 0 and np.isfinite(m["peak_mem_mb"])
