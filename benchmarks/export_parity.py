"""ONNX parity of ``nas export``'s files for every search space (default Params), and int8 against fp32 here.

Per space: the largest member and ``--n`` sampled ones (seeded), each built with its seeded initialisation
(parity is about the conversion, not the weights) and its BatchNorm statistics recalibrated on 32
standard-normal inputs (so activations have a trained network's scale: with identity statistics an untrained
NAS-Bench-201 cell stack reaches outputs of 1e5), written exactly as ``nas export`` writes them
(fp32 ONNX simplified with onnxslim, fp16 ONNX, int8 ONNX with onnxruntime's static quantisation on
standard-normal calibration inputs), and compared with torch on ``--inputs`` standard-normal inputs: the largest
|onnx - torch| of the fp32 file (the target is <= 1e-4) and of the fp16 file, beside the spread of the outputs.
Then the fp32 and int8 files are timed side by side on this CPU (onnxruntime, one thread, batch 1, in rounds).

Run: ``python benchmarks/export_parity.py [--n 3] [--spaces mbv3,nb201] [--out runs/bench/export_parity]``
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from hwnas.experiments.export.formats import ort_outputs, simplify_onnx, torch_outputs, write_fp16
from hwnas.latency.backends import BACKENDS
from hwnas.latency.measure import MeasureProtocol
from hwnas.latency.onnx_export import export_onnx, host_description, quantize_int8
from hwnas.search_spaces import SPACES
from hwnas.training import build_seeded, recalibrate_bn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3, help="sampled architectures per space (beside the largest)")
    parser.add_argument("--inputs", type=int, default=8, help="random inputs the outputs are compared on")
    parser.add_argument("--spaces", default=",".join(sorted(SPACES.names())), help="comma-separated spaces")
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds (fp32 and int8 side by side)")
    parser.add_argument("--out", default="runs/bench/export_parity", help="folder for results.json")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    backend = {p: BACKENDS.get("onnxruntime")(provider="cpu", threads=1, precision=p) for p in ("fp32", "int8")}
    protocol = MeasureProtocol(warmup=20, repeats=30, min_time_s=0.1)
    rows = []
    with tempfile.TemporaryDirectory(prefix="hwnas-parity-") as tmp:
        files = []
        for name in args.spaces.split(","):
            space = SPACES.create(name, {})
            archs = [("largest", space.largest())]
            archs += [(f"sample {i}", space.sample(rng)) for i in range(args.n)]
            for label, arch in archs:
                start = time.perf_counter()
                model = build_seeded(space, arch, args.seed)
                shape = tuple(space.input_shape_of(arch))
                recalibrate_bn(model, rng.standard_normal((32, *shape)).astype(np.float32), batch_size=16)
                x = rng.standard_normal((args.inputs, *shape)).astype(np.float32)
                stem = Path(tmp) / f"{name}-{arch.arch_id}"
                fp32 = export_onnx(model, shape, stem.with_suffix(".onnx"))
                simplified = simplify_onnx(fp32) is None
                ref = torch_outputs(model, x)
                diff = float(np.max(np.abs(ort_outputs(fp32, x) - ref)))
                fp16 = write_fp16(model, shape, Path(f"{stem}.fp16.onnx"), opset=17, check=x, reference=ref,
                                  xs_val=None, ys_val=None)
                int8 = quantize_int8(fp32, Path(f"{stem}.int8.onnx"), shape)
                row = {"space": name, "arch": label, "arch_id": arch.arch_id, "input": list(shape),
                       "simplified": simplified, "max_abs_diff_fp32": diff,
                       "max_abs_diff_fp16": fp16.get("max_abs_diff_vs_torch_fp32"),
                       "output_std": float(ref.std()), "export_s": time.perf_counter() - start}
                rows.append(row)
                files.append((row, fp32, int8, shape))
                half = row["max_abs_diff_fp16"]
                print(f"{name:9s} {label:9s} {arch.arch_id}  |onnx-torch| fp32 {diff:.1e}  fp16 "
                      f"{'not run' if half is None else f'{half:.1e}'}"
                      f"  (output std {row['output_std']:.2f}; {row['export_s']:.1f} s)", flush=True)
        timings: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):  # side by side, in rounds over every file
            for row, fp32, int8, shape in files:
                for precision, path in (("fp32", fp32), ("int8", int8)):
                    stats, _ = backend[precision].profile(path, shape, protocol)
                    timings.setdefault((row["arch_id"], precision), []).append(stats.median_ms)
        for row, *_ in files:
            row["fp32_ms"] = float(np.median(timings[(row["arch_id"], "fp32")]))
            row["int8_ms"] = float(np.median(timings[(row["arch_id"], "int8")]))
            row["int8_over_fp32"] = row["int8_ms"] / row["fp32_ms"]
    print(f"\nhost: {host_description()['cpu']}, onnxruntime CPU, 1 thread, batch 1, median of {args.rounds} rounds")
    print(f"{'space':9s} {'arch':9s} {'max|onnx-torch|':>15s} {'fp32 ms':>9s} {'int8 ms':>9s} {'int8/fp32':>9s}")
    for row in rows:
        print(f"{row['space']:9s} {row['arch']:9s} {row['max_abs_diff_fp32']:15.1e} {row['fp32_ms']:9.3f} "
              f"{row['int8_ms']:9.3f} {row['int8_over_fp32']:9.2f}")
    worst = max(r["max_abs_diff_fp32"] for r in rows)
    print(f"worst fp32 |onnx - torch| over {len(rows)} models of {len({r['space'] for r in rows})} spaces: "
          f"{worst:.1e} ({'within' if worst <= 1e-4 else 'ABOVE'} 1e-4)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"host": host_description(), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
