"""A stand-in for NVIDIA's ``trtexec``, for tests of the trtexec backend on machines without TensorRT.

It accepts the options the backend uses, rejects unknown ones the way trtexec does (``[E] Unknown option``), and
behaves like the TensorRT major given by ``FAKE_TRTEXEC_PACKED`` (a packed version such as ``100300`` for 10.3.0
or ``110100`` for 11.1.0): only 10 lists and accepts ``--fp16`` / ``--bf16``. Building writes a JSON "engine"
that records the ONNX input's element type and the precision options; timing writes ``--exportTimes`` records in
trtexec's format with GPU compute times cycling 0.40, 0.41, ..., 0.44 ms, an ``--exportProfile`` file, and the
performance summary. ``FAKE_TRTEXEC_LOG`` names a file each call's arguments are appended to (one JSON line);
``FAKE_TRTEXEC_NO_TIMES=1`` leaves the times file unwritten.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

COMMON = ["--onnx", "--saveEngine", "--loadEngine", "--skipInference", "--memPoolSize", "--warmUp", "--iterations",
          "--duration", "--exportTimes", "--exportProfile", "--separateProfileRun", "--useSpinWait", "--device",
          "--help"]
TRT10_ONLY = ["--fp16", "--bf16", "--int8", "--best", "--stronglyTyped"]


def out(line: str) -> None:
    sys.stdout.write(line + "\n")


def main(argv: list[str]) -> int:
    packed = int(os.environ.get("FAKE_TRTEXEC_PACKED", "100300"))
    major, minor, patch = packed // 10000, (packed // 100) % 100, packed % 100
    known = COMMON + (TRT10_ONLY if major == 10 else [])
    if os.environ.get("FAKE_TRTEXEC_LOG"):
        with open(os.environ["FAKE_TRTEXEC_LOG"], "a") as fh:
            fh.write(json.dumps(argv) + "\n")
    banner = f"[TensorRT v{packed}] [b1] # trtexec {' '.join(argv)}"
    out(f"&&&& RUNNING TensorRT.trtexec {banner}")
    opts: dict[str, str] = {}
    for arg in argv:
        key, _, value = arg.partition("=")
        if key not in known:
            out(f"[11/22/2026-12:00:00] [E] Unknown option: {key} {value}")
            out(f"&&&& FAILED TensorRT.trtexec {banner}")
            return 1
        opts[key] = value
    if "--help" in opts:
        out("=== Model Options ===\n  --onnx=<file>               ONNX model")
        out("=== Build Options ===")
        for opt in known:
            out(f"  {opt:<28}(fake)")
        out(f"&&&& PASSED TensorRT.trtexec {banner}")
        return 0
    out(f"[11/22/2026-12:00:00] [I] TensorRT version: {major}.{minor}.{patch}")
    if "--onnx" in opts:
        import onnx

        graph = onnx.load(opts["--onnx"]).graph
        engine = {"fake_engine": True, "input_elem_type": graph.input[0].type.tensor_type.elem_type,
                  "precision_options": [a for a in argv if a in TRT10_ONLY]}
        with open(opts["--saveEngine"], "w") as fh:
            json.dump(engine, fh)
        out("[11/22/2026-12:00:01] [I] Engine built in 0.1 sec.")
        out(f"&&&& PASSED TensorRT.trtexec {banner}")
        return 0
    try:
        with open(opts["--loadEngine"]) as fh:
            json.load(fh)["fake_engine"]
    except (OSError, ValueError, KeyError):
        out("[11/22/2026-12:00:00] [E] Error opening engine file: " + opts.get("--loadEngine", ""))
        out(f"&&&& FAILED TensorRT.trtexec {banner}")
        return 1
    n = int(opts.get("--iterations", "10"))
    t = float(opts.get("--warmUp", "200")) + 0.25
    records = []
    for i in range(n):
        compute = 0.40 + 0.01 * (i % 5)
        h2d, d2h = 0.02, 0.01
        records.append({"startEnqMs": t, "endEnqMs": t + 0.01, "startH2dMs": t, "endH2dMs": t + h2d,
                        "startComputeMs": t + h2d, "endComputeMs": t + h2d + compute,
                        "startD2hMs": t + h2d + compute, "endD2hMs": t + h2d + compute + d2h,
                        "h2dMs": h2d, "computeMs": compute, "d2hMs": d2h, "latencyMs": h2d + compute + d2h})
        t += h2d + compute + d2h + 0.005
    if "--exportTimes" in opts and os.environ.get("FAKE_TRTEXEC_NO_TIMES") != "1":
        with open(opts["--exportTimes"], "w") as fh:
            json.dump(records, fh)
    if "--exportProfile" in opts:
        with open(opts["--exportProfile"], "w") as fh:
            json.dump([{"count": n}, {"name": "/conv/Conv + /act/Relu", "timeMs": 0.3 * n, "averageMs": 0.3,
                                      "medianMs": 0.3, "percentage": 75.0},
                       {"name": "/fc/Gemm", "timeMs": 0.1 * n, "averageMs": 0.1, "medianMs": 0.1,
                        "percentage": 25.0}], fh)
    out(f"[11/22/2026-12:00:01] [I] Timing trace has {n} queries over {(t - records[0]['startEnqMs']) / 1000:g} s")
    out("[11/22/2026-12:00:01] [I] === Performance summary ===")
    for metric, key in (("Latency", "latencyMs"), ("GPU Compute Time", "computeMs")):
        vals = sorted(r[key] for r in records)
        p90 = vals[max(len(vals) - 1 - int(0.1 * len(vals)), 0)]
        out(f"[11/22/2026-12:00:01] [I] {metric}: min = {vals[0]:g} ms, max = {vals[-1]:g} ms, "
            f"mean = {statistics.fmean(vals):g} ms, median = {statistics.median(vals):g} ms, "
            f"percentile(90%) = {p90:g} ms")
    out(f"&&&& PASSED TensorRT.trtexec {banner}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
