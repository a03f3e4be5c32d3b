"""TensorRT Python-API backend: version parsing, the (version, precision) decision table, the I/O plan, typed
ONNX export (all without TensorRT), and a real build-and-time run where TensorRT and a GPU are present."""

from __future__ import annotations

import enum
import importlib.util
import sys

import pytest

from hwnas.errors import BackendUnavailable
from hwnas.latency.backends import BACKENDS, LatencyBackend
from hwnas.latency.backends.tensorrt_backend import IOTensor, TensorRTBackend, plan_io, require_static
from hwnas.latency.backends.trt_common import (
    TrtVersion,
    decode_packed_version,
    export_typed_onnx,
    flag_bits,
    parse_device_index,
    parse_trt_version,
    precision_plan,
)
from hwnas.latency.measure import MeasureProtocol


@pytest.mark.parametrize(("text", "expected"), [
    ("10.3.0.26", TrtVersion(10, 3, 0)), ("11.1.0.106", TrtVersion(11, 1, 0)), ("10.16", TrtVersion(10, 16, 0)),
    ("v11.0.0", TrtVersion(11, 0, 0)), ("8.6.1.post1", TrtVersion(8, 6, 1)),
])
def test_parse_trt_version(text, expected):
    assert parse_trt_version(text) == expected
    assert str(parse_trt_version(text)) == f"{expected.major}.{expected.minor}.{expected.patch}"


def test_parse_trt_version_rejects_garbage():
    with pytest.raises(ValueError, match="not a TensorRT version"):
        parse_trt_version("unknown")


@pytest.mark.parametrize(("packed", "expected"), [
    (100300, (10, 3, 0)), ("101602", (10, 16, 2)), (110000, (11, 0, 0)), (110100, (11, 1, 0)), (8602, (8, 6, 2)),
    (8502, (8, 5, 2)),
])
def test_decode_packed_version(packed, expected):
    assert decode_packed_version(packed) == TrtVersion(*expected)


@pytest.mark.parametrize(("major", "precision", "onnx_dtype", "network", "builder", "trtexec", "strong"), [
    (10, "fp32", "float32", (), (), (), False),
    (10, "fp16", "float32", (), ("FP16",), ("--fp16",), False),
    (10, "bf16", "float32", (), ("BF16",), ("--bf16",), False),
    (11, "fp32", "float32", ("STRONGLY_TYPED",), (), (), True),
    (11, "fp16", "float16", ("STRONGLY_TYPED",), (), (), True),
    (11, "bf16", "bfloat16", ("STRONGLY_TYPED",), (), (), True),
    (12, "fp16", "float16", ("STRONGLY_TYPED",), (), (), True),
])
def test_precision_decision_table(major, precision, onnx_dtype, network, builder, trtexec, strong):
    plan = precision_plan(TrtVersion(major, 0, 0), precision)
    assert (plan.onnx_dtype, plan.network_flags, plan.builder_flags, plan.trtexec_flags, plan.strongly_typed) == (
        onnx_dtype, network, builder, trtexec, strong)
    assert plan.describe().startswith(f"TensorRT {major}.0.0 {precision}: ")


def test_precision_plan_refuses_int8_and_old_tensorrt():
    with pytest.raises(ValueError, match="calibration or Q/DQ"):
        precision_plan(TrtVersion(10, 3, 0), "int8")
    with pytest.raises(ValueError, match="TensorRT 10 or 11"):
        precision_plan(TrtVersion(8, 6, 1), "fp32")


def test_flag_bits_uses_enum_values_and_skips_dropped_members():
    class Flags(enum.IntEnum):
        STRONGLY_TYPED = 1
        PREFER_JIT_PYTHON_PLUGINS = 2

    assert flag_bits(("STRONGLY_TYPED",), Flags) == 0b10
    assert flag_bits(("STRONGLY_TYPED", "PREFER_JIT_PYTHON_PLUGINS"), Flags) == 0b110
    assert flag_bits((), Flags) == 0

    class Later(enum.IntEnum):
        PREFER_AOT_PYTHON_PLUGINS = 0

    assert flag_bits(("STRONGLY_TYPED",), Later) == 0


@pytest.mark.parametrize(("device", "index"), [(0, 0), ("1", 1), ("cuda", 0), ("cuda:2", 2), ("GPU:3", 3)])
def test_parse_device_index(device, index):
    assert parse_device_index(device) == index


def test_parse_device_index_rejects_cpu():
    with pytest.raises(ValueError, match="CUDA device"):
        parse_device_index("cpu")


def _io(*tensors):
    return [IOTensor(*t) for t in tensors]


def test_plan_io_resolves_the_dynamic_batch_and_keeps_outputs():
    plan = plan_io(_io(("input", True, (-1, 3, 32, 32), "HALF"), ("output", False, (-1, 10), "HALF")), (4, 3, 32, 32))
    assert plan == _io(("input", True, (4, 3, 32, 32), "HALF"), ("output", False, (-1, 10), "HALF"))
    assert plan[0].torch_dtype == "float16"


@pytest.mark.parametrize(("tensors", "message"), [
    ([("input", True, (1, 3, 32, 32), "FLOAT")], "no output"),
    ([("a", True, (1, 3), "FLOAT"), ("b", True, (1, 3), "FLOAT"), ("o", False, (1,), "FLOAT")], "2 input tensors"),
    ([("input", True, (1, 3, 16, 16), "FLOAT"), ("o", False, (1, 10), "FLOAT")], "does not fit"),
    ([("input", True, (1, 3, 32), "FLOAT"), ("o", False, (1, 10), "FLOAT")], "does not fit"),
    ([("input", True, (1, 3, 32, 32), "FP8"), ("o", False, (1, 10), "FLOAT")], "no buffer can be allocated"),
])
def test_plan_io_rejects_engines_hwnas_did_not_build(tensors, message):
    with pytest.raises(ValueError, match=message):
        plan_io(_io(*tensors), (1, 3, 32, 32))


def test_require_static():
    assert require_static("output", [1, 10]) == (1, 10)
    with pytest.raises(ValueError, match="'output' still has a dynamic shape"):
        require_static("output", (-1, 10))


def _net():
    import torch

    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.Hardswish(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4)).eval()


@pytest.mark.parametrize(("dtype", "elem_type"), [("float32", 1), ("float16", 10), ("bfloat16", 16)])
def test_typed_onnx_export_puts_the_precision_in_the_graph(tmp_path, dtype, elem_type):
    import onnx
    import torch

    model = _net()
    path = export_typed_onnx(model, (3, 16, 16), tmp_path / f"net_{dtype}.onnx", dtype=dtype, batch_size=2)
    graph = onnx.load(path).graph
    assert graph.input[0].type.tensor_type.elem_type == elem_type
    assert [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim] == [2, 3, 16, 16]
    assert graph.output[0].type.tensor_type.elem_type == elem_type
    assert {init.data_type for init in graph.initializer} == {elem_type}
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the caller's module was copied


def test_typed_fp16_graph_computes_what_the_module_computes(tmp_path):
    import numpy as np
    import onnxruntime as ort
    import torch

    model = _net()
    path = export_typed_onnx(model, (3, 16, 16), tmp_path / "net.onnx", dtype="float16")
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model(x).numpy()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x.numpy().astype(np.float16)})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, atol=2e-2, rtol=2e-2)


def test_registered_and_shaped_like_a_backend():
    backend = BACKENDS.get("tensorrt")(precision="fp16", device="cuda:0")
    assert isinstance(backend, LatencyBackend)
    assert backend.device_index == 0
    with pytest.raises(ValueError, match="int8"):
        TensorRTBackend(precision="int8")


def test_check_names_the_package_when_tensorrt_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # makes `import tensorrt` raise ImportError
    backend = TensorRTBackend()
    with pytest.raises(BackendUnavailable, match=r"pip install tensorrt"):
        backend.check()
    with pytest.raises(BackendUnavailable, match=r"pip install tensorrt"):
        backend.context("h100")


def _tensorrt_and_gpu() -> bool:
    if importlib.util.find_spec("tensorrt") is None:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.tensorrt
@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_real_tensorrt_builds_and_times_an_engine(tmp_path, precision):
    if not _tensorrt_and_gpu():
        pytest.skip("needs TensorRT's Python package (pip install tensorrt) and a CUDA GPU")
    backend = TensorRTBackend(precision=precision, workspace_mib=256)
    assert precision in backend.check()
    ctx = backend.context("gpu", input_resolution=32)
    assert ctx.runtime == "tensorrt" and ctx.precision == precision
    engine = backend.convert(_net(), (3, 32, 32), tmp_path, f"net_{precision}")
    assert engine.suffix == ".engine" and engine.stat().st_size > 0
    stats, seconds = backend.profile(engine, (3, 32, 32), MeasureProtocol(warmup=5, repeats=30))
    assert stats.count == 30
    assert 0 < stats.p10_ms <= stats.median_ms <= stats.p90_ms < 100
    assert seconds > 0
