"""Numbers for the darts, vit and convnext spaces (default Params).

Per space: the time to sample and canonicalize 10,000 architectures; the time to build the largest
member (imports excluded) and to export it to ONNX at batch 1 (one torch thread); the largest
absolute difference between onnxruntime and torch on one random input, beside the output's spread.

Run: ``python benchmarks/spaces_darts_vit_convnext.py [--n 10000]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from hwnas.architecture import Architecture
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.darts import PRIMITIVES


def largest(space) -> Architecture:
    """The member with the most compute: every choice at its largest (smallest patch for the ViT)."""
    genes = {g.name: max(g.choices) for g in space.genes()}
    if space.name == "darts":  # sep_conv_5x5 everywhere; each node reads the two newest states
        for cell in ("normal", "reduce"):
            for i in range(space.params.nodes):
                genes.update({f"{cell}_n{i}_in0": i, f"{cell}_n{i}_in1": i + 1,
                              f"{cell}_n{i}_op0": PRIMITIVES.index("sep_conv_5x5"),
                              f"{cell}_n{i}_op1": PRIMITIVES.index("sep_conv_5x5")})
    if space.name == "vit":
        genes["patch"] = min(space.params.patch_sizes)
    return space.canonicalize(Architecture(space.name, genes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="architectures to sample and canonicalize")
    args = parser.parse_args()

    import timm  # noqa: F401  (imported here so that build times below exclude import time)
    import torch

    from hwnas.latency.onnx_export import export_onnx, onnx_max_abs_diff

    torch.set_num_threads(1)
    for name in ("darts", "vit", "convnext"):
        space = SPACES.get(name)()
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        ids = {space.canonicalize(space.sample(rng)).arch_id for _ in range(args.n)}
        sample_s = time.perf_counter() - t0

        arch = largest(space)
        torch.manual_seed(0)
        t0 = time.perf_counter()
        model = space.build(arch).eval()
        build_s = time.perf_counter() - t0
        params_m = sum(p.numel() for p in model.parameters()) / 1e6
        x = np.random.default_rng(0).standard_normal((1, *space.input_shape)).astype(np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            path = export_onnx(model, space.input_shape, Path(tmp) / f"{arch.arch_id}.onnx")
            export_s = time.perf_counter() - t0
            diff = onnx_max_abs_diff(model, path, x)
        with torch.no_grad():  # how much the output moves with the input: a diff is only meaningful beside it
            outs = model(torch.from_numpy(np.random.default_rng(1).standard_normal((8, *space.input_shape),
                                                                                  dtype=np.float32)))
        spread = float((outs - outs.mean(0)).abs().max())
        print(f"{name:9s} size={space.size():.3e}  sample+canonicalize {args.n}: {sample_s:6.2f} s "
              f"({len(ids)} distinct)  largest {arch.arch_id} ({params_m:.2f} M params): build {build_s:.2f} s, "
              f"onnx export {export_s:.2f} s, max |onnx - torch| = {diff:.2e} (output spread over inputs {spread:.2f})")


if __name__ == "__main__":
    main()
