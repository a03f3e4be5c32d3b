"""trtexec backend: parsing of trtexec's outputs, command lines for TensorRT 10 and 11, and the whole
subprocess path against a fake ``trtexec`` placed first on PATH (plus a real run where TensorRT is installed)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest

from hwnas.errors import BackendUnavailable
from hwnas.latency.backends import BACKENDS, LatencyBackend
from hwnas.latency.backends.trt_common import TrtVersion, precision_plan
from hwnas.latency.backends.trtexec_backend import (
    TrtexecBackend,
    build_command,
    first_error,
    missing_options,
    parse_profile,
    parse_summary,
    parse_times,
    parse_trace_count,
    parse_trtexec_version,
    stats_from_summary,
    timing_command,
)
from hwnas.latency.measure import MeasureProtocol, stats_from_ms

DATA = Path(__file__).parent / "data"
V10 = TrtVersion(10, 3, 0)
V11 = TrtVersion(11, 1, 0)


def _load(name: str):
    return json.loads((DATA / name).read_text())


# ----------------------------------------------------------------------------------------------- parsing


def test_times_v10_fixture_gives_compute_and_latency_stats():
    rec = parse_times(_load("trtexec_times_v10.json"), warmup_ms=200)
    compute = [0.512, 0.498, 0.505, 0.520, 0.501, 0.499, 0.530, 0.503, 0.507, 0.500, 0.611, 0.502]
    assert rec.compute_ms == compute
    stats = stats_from_ms(rec.compute_ms)
    assert stats.count == 12
    assert stats.median_ms == pytest.approx(0.504)
    assert stats.p10_ms < stats.median_ms < stats.p90_ms
    assert rec.latency_ms == pytest.approx([c + 0.039 for c in compute])
    records = _load("trtexec_times_v10.json")
    assert rec.span_s == pytest.approx((records[-1]["endD2hMs"] - records[0]["startEnqMs"]) / 1e3)


def test_times_from_releases_that_exported_warmup_queries_drop_them():
    records = _load("trtexec_times_legacy.json")
    assert len(parse_times(records).compute_ms) == 8
    rec = parse_times(records, warmup_ms=200)
    assert rec.compute_ms == [0.51, 0.52, 0.50, 0.53, 0.54]
    assert parse_times(records, warmup_ms=200, max_records=2).compute_ms == [0.51, 0.52]


def test_times_without_interval_fields_use_timestamps():
    records = [{"startComputeMs": 1.0, "endComputeMs": 1.25, "h2dMs": 0.5, "d2hMs": 0.25},
               {"startComputeMs": 2.0, "endComputeMs": 2.5, "h2dMs": 0.5, "d2hMs": 0.25}]
    rec = parse_times(records)
    assert rec.compute_ms == pytest.approx([0.25, 0.5])
    assert rec.latency_ms == pytest.approx([1.0, 1.25])
    assert rec.span_s == pytest.approx(1.5e-3)


@pytest.mark.parametrize("bad", [[], {"computeMs": 1.0}, [1, 2], [{"latencyMs": 1.0}]])
def test_times_reject_files_without_records(bad):
    with pytest.raises(ValueError, match="trtexec"):
        parse_times(bad)


def test_summary_of_a_tensorrt10_run():
    text = (DATA / "trtexec_stdout_v10.txt").read_text()
    summary = parse_summary(text)
    assert {"Latency", "Enqueue Time", "H2D Latency", "GPU Compute Time", "D2H Latency"} <= set(summary)
    gpu = summary["GPU Compute Time"]
    assert (gpu.min_ms, gpu.max_ms, gpu.mean_ms, gpu.median_ms) == (0.489502, 0.948242, 0.504394, 0.500732)
    assert gpu.percentiles_ms == {90.0: 0.515137, 95.0: 0.523193, 99.0: 0.580566}
    assert parse_trace_count(text) == (1872, 1.00123)
    assert parse_trtexec_version(text) == V10


def test_summary_of_a_tensorrt11_run_with_exponent_notation():
    text = (DATA / "trtexec_stdout_v11.txt").read_text()
    summary = parse_summary(text)
    assert summary["D2H Latency"].min_ms == pytest.approx(4.8828e-05)
    assert summary["GPU Compute Time"].median_ms == 0.0233154
    assert parse_trtexec_version(text) == V11


def test_stats_from_summary_are_bounds():
    gpu = parse_summary((DATA / "trtexec_stdout_v10.txt").read_text())["GPU Compute Time"]
    stats = stats_from_summary(gpu, 1872)
    assert stats.median_ms == 0.500732 and stats.count == 1872
    assert stats.p10_ms == gpu.min_ms and stats.p90_ms == 0.515137
    assert stats.iqr_ms == pytest.approx(0.515137 - 0.489502)


def test_profile_file():
    count, layers = parse_profile(_load("trtexec_profile.json"))
    assert count == 50
    assert [layer.name for layer in layers][-1] == "/head/fc/Gemm"
    assert layers[0].average_ms == 0.13623 and layers[0].median_ms == 0.135168
    assert sum(layer.percentage for layer in layers) == pytest.approx(100.0, abs=0.01)
    with pytest.raises(ValueError, match="count"):
        parse_profile([{"name": "x", "timeMs": 1.0}])


@pytest.mark.parametrize(("text", "expected"), [
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v100300] [b26] # trtexec --help", TrtVersion(10, 3, 0)),
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v101602] [b10] # trtexec --help", TrtVersion(10, 16, 2)),
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v110100] # trtexec", TrtVersion(11, 1, 0)),
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v8602] # trtexec", TrtVersion(8, 6, 2)),
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v11.1.0.106] [b48] # trtexec", TrtVersion(11, 1, 0)),
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v100300]\n[I] TensorRT version: 10.3.1", TrtVersion(10, 3, 1)),
    ("usage: something else", None),
])
def test_version_from_banner_or_version_line(text, expected):
    assert parse_trtexec_version(text) == expected


def test_first_error_prefers_error_lines():
    out = ("&&&& RUNNING TensorRT.trtexec [TensorRT v110100]\n[11/22/2026-12:00:00] [E] Unknown option: --fp16 \n"
           "&&&& FAILED TensorRT.trtexec")
    assert first_error(out) == "Unknown option: --fp16"
    assert first_error("a\nlast line\n") == "last line"


def test_missing_options_reads_the_help_listing():
    help10 = "=== Build Options ===\n  --fp16    Enable fp16 precision\n  --skipInference  Exit after build\n"
    help11 = "=== Build Options ===\n  --skipInference  Exit after build\n  --fp16Something  other\n"
    assert missing_options(help10, ["--fp16", "--skipInference"]) == []
    assert missing_options(help11, ["--fp16", "--skipInference"]) == ["--fp16"]


# ----------------------------------------------------------------------------------------------- command lines


@pytest.mark.parametrize(("version", "precision", "flags"), [
    (V10, "fp32", []), (V10, "fp16", ["--fp16"]), (V10, "bf16", ["--bf16"]),
    (V11, "fp32", []), (V11, "fp16", []), (V11, "bf16", []),
])
def test_build_command_precision_options(version, precision, flags):
    cmd = build_command("/opt/trt/trtexec", "m.onnx", "m.engine", precision_plan(version, precision))
    assert cmd[:4] == ["/opt/trt/trtexec", "--onnx=m.onnx", "--saveEngine=m.engine", "--skipInference"]
    assert cmd[4:] == flags
    assert "--stronglyTyped" not in cmd  # always on in 11, default-off opt-in on 10 (we use builder precision)


def test_tensorrt11_fp16_is_in_the_graph_not_on_the_command_line():
    plan = precision_plan(V11, "fp16")
    cmd = build_command("trtexec", "m.onnx", "m.engine", plan, workspace_mib=2048, device=1, extra=["--verbose"])
    assert not any(a in ("--fp16", "--bf16", "--int8", "--best") for a in cmd)
    assert plan.onnx_dtype == "float16"
    assert cmd[-3:] == ["--memPoolSize=workspace:2048", "--device=1", "--verbose"]


def test_timing_command_follows_the_protocol():
    proto = MeasureProtocol(warmup=5, repeats=80, min_time_s=1.2)
    cmd = timing_command("trtexec", "m.engine", proto, warmup_ms=150, times_path="t.json")
    assert cmd == ["trtexec", "--loadEngine=m.engine", "--warmUp=150", "--iterations=80", "--duration=2",
                   "--exportTimes=t.json"]
    cmd = timing_command("trtexec", "m.engine", MeasureProtocol(), warmup_ms=200, times_path="t.json",
                         profile_path="p.json", spin_wait=True, device=2)
    assert "--duration=0" in cmd  # overrides trtexec's default of 3 s
    assert cmd[6:] == ["--exportProfile=p.json", "--separateProfileRun", "--useSpinWait", "--device=2"]


def test_constructor_rejects_what_trtexec_cannot_do():
    with pytest.raises(ValueError, match="int8"):
        TrtexecBackend(precision="int8")
    with pytest.raises(ValueError, match="cuda"):
        TrtexecBackend(device="cpu")


# ----------------------------------------------------------------------------------------------- end to end


@pytest.fixture
def fake_trtexec(tmp_path, monkeypatch):
    """Install the fake trtexec as ``trtexec`` first on PATH; yields a function setting its version and the log."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "trtexec"
    exe.write_text(f"#!{sys.executable}\n" + (DATA / "fake_trtexec.py").read_text())
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_TRTEXEC_LOG", str(calls))

    def use(packed: str) -> Path:
        monkeypatch.setenv("FAKE_TRTEXEC_PACKED", packed)
        return calls

    return use


def _net():
    import torch

    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))


def _calls(path: Path) -> list[list[str]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize(("packed", "version", "elem_type", "options"), [
    ("100300", "10.3.0", 1, ["--fp16"]),   # 10: fp32 graph, --fp16 builder option
    ("110100", "11.1.0", 10, []),          # 11: fp16 graph (ONNX FLOAT16), no precision option
])
def test_fp16_end_to_end_through_a_fake_trtexec(fake_trtexec, tmp_path, packed, version, elem_type, options):
    calls = fake_trtexec(packed)
    backend = BACKENDS.get("trtexec")(precision="fp16", export_profile=True)
    assert isinstance(backend, LatencyBackend)
    assert f"TensorRT {version} fp16" in backend.check()
    ctx = backend.context("a10", input_resolution=16)
    assert (ctx.runtime, ctx.runtime_version, ctx.precision, ctx.threads) == ("trtexec", version, "fp16", None)

    model = _net()
    engine = backend.convert(model, (3, 16, 16), tmp_path / "work", "unit0")
    assert engine == tmp_path / "work" / "unit0.engine"
    built = json.loads(engine.read_text())
    assert built["input_elem_type"] == elem_type
    assert built["precision_options"] == options
    assert str(next(model.parameters()).dtype) == "torch.float32"  # the caller's module is left as it was

    protocol = MeasureProtocol(warmup=3, repeats=25)
    stats, seconds = backend.profile(engine, (3, 16, 16), protocol)
    expected = [0.40 + 0.01 * (i % 5) for i in range(25)]
    assert stats.count == 25
    assert stats.median_ms == pytest.approx(statistics.median(expected))
    assert stats.p10_ms == pytest.approx(float(np.percentile(expected, 10)))
    assert seconds > 0

    timing = backend.measure(engine, protocol)
    assert timing.source == "exportTimes"
    assert timing.latency is not None and timing.latency.median_ms == pytest.approx(stats.median_ms + 0.03)
    assert [layer.name for layer in timing.layers] == ["/conv/Conv + /act/Relu", "/fc/Gemm"]

    help_call, build_call, time_call = _calls(calls)[:3]
    assert help_call == ["--help"]
    assert [a for a in build_call if a in ("--fp16", "--bf16", "--stronglyTyped")] == options
    assert "--iterations=25" in time_call and "--warmUp=200" in time_call and "--separateProfileRun" in time_call


@pytest.mark.slow
def test_summary_fallback_when_no_times_file(fake_trtexec, tmp_path, monkeypatch):
    fake_trtexec("100300")
    monkeypatch.setenv("FAKE_TRTEXEC_NO_TIMES", "1")
    backend = TrtexecBackend()
    engine = backend.convert(_net(), (3, 16, 16), tmp_path, "unit1")
    timing = backend.measure(engine, MeasureProtocol(warmup=1, repeats=10))
    assert timing.source == "summary"
    assert timing.compute.count == 10
    assert timing.compute.median_ms == pytest.approx(0.42)
    assert timing.compute.p10_ms == pytest.approx(0.40)


@pytest.mark.slow
def test_trtexec_errors_are_reported_in_one_line(fake_trtexec, tmp_path):
    fake_trtexec("110100")
    backend = TrtexecBackend(build_args=["--fp16"])  # what a TensorRT 10 habit does on 11
    with pytest.raises(RuntimeError, match="Unknown option: --fp16"):
        backend.convert(_net(), (3, 16, 16), tmp_path, "unit2")
    bogus = tmp_path / "not-an-engine.engine"
    bogus.write_text("garbage")
    with pytest.raises(RuntimeError, match="Error opening engine file"):
        backend.profile(bogus, (3, 16, 16), MeasureProtocol(warmup=1, repeats=5))


def test_check_names_trtexec_when_it_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BackendUnavailable, match="trtexec not found on PATH: install TensorRT"):
        TrtexecBackend().check()
    with pytest.raises(BackendUnavailable, match="not found at"):
        TrtexecBackend(executable=tmp_path / "nowhere" / "trtexec").check()


def test_check_refuses_a_trtexec_without_the_precision_option(tmp_path, monkeypatch):
    exe = tmp_path / "trtexec"
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write('&&&& RUNNING TensorRT.trtexec "
                   "[TensorRT v100300] # trtexec --help\\n  --onnx=<file>  ONNX model\\n  --exportTimes=<file>\\n"
                   "  --skipInference\\n')\n")
    exe.chmod(0o755)
    with pytest.raises(BackendUnavailable, match="has no --fp16 option"):
        TrtexecBackend(precision="fp16", executable=exe).check()
    assert "TensorRT 10.3.0 fp32" in TrtexecBackend(executable=exe).check()


# ----------------------------------------------------------------------------------------------- real trtexec


@pytest.mark.tensorrt
@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_real_trtexec_builds_and_times_an_engine(tmp_path, precision):
    if shutil.which("trtexec") is None:
        pytest.skip("needs TensorRT's trtexec on PATH and an NVIDIA GPU")
    backend = TrtexecBackend(precision=precision, warmup_ms=50)
    backend.check()
    engine = backend.convert(_net(), (3, 32, 32), tmp_path, f"net_{precision}")
    timing = backend.measure(engine, MeasureProtocol(warmup=1, repeats=20))
    assert timing.source == "exportTimes"
    assert timing.compute.count >= 20
    assert 0 < timing.compute.median_ms < 100
    assert timing.latency is not None and timing.latency.median_ms >= timing.compute.median_ms * 0.5
