"""torch backend: a real CPU measurement of a small conv net (pinned, restored threads), bf16 on the CPU, the
artifact round trip, the connection test, and CUDA-event timing where a GPU is present."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from hwnas.errors import BackendUnavailable
from hwnas.latency.backends import BACKENDS, LatencyBackend
from hwnas.latency.backends.torch_backend import TorchBackend
from hwnas.latency.measure import MeasureProtocol, time_cuda_events, time_cuda_graph

SHAPE = (3, 32, 32)


def _net() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1, groups=16), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))


def test_cpu_measures_a_conv_net_with_pinned_threads(tmp_path, monkeypatch):
    backend = BACKENDS.get("torch")(device="cpu", threads=2)
    assert isinstance(backend, LatencyBackend)
    assert backend.check().startswith(f"torch {torch.__version__} on the cpu (2 thread(s)")
    model = _net()
    artifact = backend.convert(model, SHAPE, tmp_path, "net")
    assert artifact == tmp_path / "net.torch.json" and artifact.stat().st_size > 0
    assert model.training  # convert leaves the caller's module as it was

    set_calls: list[int] = []
    real_set = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (set_calls.append(n), real_set(n))[1])
    before = torch.get_num_threads()
    stats, seconds = backend.profile(artifact, SHAPE, MeasureProtocol(warmup=3, repeats=15))
    assert set_calls == [2, before]  # pinned for the measurement, restored after
    assert torch.get_num_threads() == before
    assert stats.count == 15
    assert 0 < stats.p10_ms <= stats.median_ms <= stats.p90_ms
    assert stats.iqr_ms >= 0
    assert seconds >= stats.count * stats.p10_ms / 1e3


def test_min_time_extends_the_measurement(tmp_path):
    backend = TorchBackend(threads=1)
    artifact = backend.convert(_net(), SHAPE, tmp_path, "net")
    stats, seconds = backend.profile(artifact, SHAPE, MeasureProtocol(warmup=1, repeats=2, min_time_s=0.2))
    assert seconds >= 0.2
    assert stats.count > 2


def test_the_artifact_is_the_module(tmp_path):
    backend = TorchBackend()
    model = _net().eval()
    loaded = backend.load(backend.convert(model, SHAPE, tmp_path, "net"))
    assert not loaded.training
    x = torch.randn(2, *SHAPE)
    with torch.inference_mode():
        torch.testing.assert_close(loaded(x), model(x))


def test_bf16_on_the_cpu(tmp_path):
    backend = TorchBackend(precision="bf16", batch_size=2)
    artifact = backend.convert(_net(), SHAPE, tmp_path, "net")
    stats, _ = backend.profile(artifact, SHAPE, MeasureProtocol(warmup=1, repeats=5))
    assert stats.count == 5 and stats.median_ms > 0
    ctx = backend.context("xeon", input_resolution=32)
    assert (ctx.runtime, ctx.provider, ctx.precision, ctx.batch_size, ctx.threads, ctx.input_resolution) == (
        "torch", "cpu", "bf16", 2, 1, 32)
    assert ctx.runtime_version == torch.__version__


def test_nothing_is_pickled_and_a_foreign_artifact_is_refused(tmp_path):
    artifact = TorchBackend().convert(_net(), SHAPE, tmp_path, "net")
    assert json.loads(artifact.read_text())["class"] == "Sequential"  # a JSON marker, not a pickle
    with pytest.raises(ValueError, match="lives in the process and backend that converted it"):
        TorchBackend().load(artifact)
    (tmp_path / "junk.torch.json").write_text("[]")
    with pytest.raises(ValueError, match="not a torch backend artifact"):
        TorchBackend().load(tmp_path / "junk.torch.json")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"precision": "fp16"}, "fp16 runs on cuda only"),
    ({"precision": "int8"}, "not supported"),
    ({"device": "tpu"}, "cpu, cuda or cuda:N"),
    ({"threads": 0}, "threads"),
    ({"cuda_graph": True}, "cuda_graph needs a CUDA device"),
])
def test_constructor_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TorchBackend(**kwargs)


def test_check_names_torch_when_it_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(BackendUnavailable, match=r"^torch is not installed: pip install torch$"):
        TorchBackend().check()


def test_check_names_missing_cuda():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the message for its absence cannot be produced here")
    with pytest.raises(BackendUnavailable, match="CUDA is not available to torch"):
        TorchBackend(device="cuda").check()


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_cuda_event_timing(tmp_path, precision):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    backend = TorchBackend(device="cuda", precision=precision)
    assert "cuda" in backend.check()
    assert backend.context("gpu").threads is None
    artifact = backend.convert(_net(), SHAPE, tmp_path, "net")
    stats, seconds = backend.profile(artifact, SHAPE, MeasureProtocol(warmup=5, repeats=30))
    assert stats.count == 30
    assert 0 < stats.p10_ms <= stats.median_ms <= stats.p90_ms < 1000
    assert seconds > 0


def test_a_cuda_graph_table_has_its_own_context():
    plain = TorchBackend(device="cuda").context("h200")
    graphed = TorchBackend(device="cuda", cuda_graph=True).context("h200")
    assert (plain.provider, graphed.provider) == ("cuda", "cuda-graph")
    assert graphed.differences(plain) == ["provider: 'cuda-graph' != 'cuda'"]  # validate and use refuse the mix


@pytest.mark.gpu
def test_cuda_graph_timing(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    backend = TorchBackend(device="cuda", cuda_graph=True)
    assert backend.check().endswith(", CUDA graphs)")
    artifact = backend.convert(_net(), SHAPE, tmp_path, "net")
    stats, _ = backend.profile(artifact, SHAPE, MeasureProtocol(warmup=5, repeats=30))
    assert stats.count == 30
    assert 0 < stats.p10_ms <= stats.median_ms <= stats.p90_ms < 1000
    a = torch.randn(2048, 2048, device="cuda")
    one, _ = time_cuda_graph(lambda: a @ a, MeasureProtocol(warmup=3, repeats=10))
    eight, _ = time_cuda_graph(lambda: [a @ a for _ in range(8)], MeasureProtocol(warmup=3, repeats=10))
    assert eight.median_ms > 4 * one.median_ms  # a replay runs the captured work, all of it


@pytest.mark.gpu
def test_time_cuda_events_measures_gpu_work():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    a = torch.randn(2048, 2048, device="cuda")
    small, _ = time_cuda_events(lambda: a @ a, MeasureProtocol(warmup=3, repeats=10))
    big, _ = time_cuda_events(lambda: [a @ a for _ in range(8)], MeasureProtocol(warmup=3, repeats=10))
    assert big.median_ms > 4 * small.median_ms


@pytest.mark.gpu
def test_a_module_that_cannot_be_captured_is_named():  # last: a failed capture may leave CUDA errors behind
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    x = torch.randn(64, device="cuda")
    with pytest.raises(ValueError, match="cannot be captured as a CUDA graph"):
        time_cuda_graph(lambda: x[x > 0].sum().item(), MeasureProtocol(warmup=1, repeats=3))  # syncs with the host
