"""``nas export``: a run's chosen models in every format asked for, each with its card, re-measured."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

    from hwnas.cli.parsing import Subparsers
    from hwnas.experiments.export.card import ModelCard


def add_parser(sub: Subparsers) -> None:
    """Register ``nas export``."""
    from hwnas.experiments.export.formats import FORMATS

    ex = sub.add_parser(
        "export", help="export a run's Pareto-front models: ONNX, fp16/int8 ONNX, torch.export, TensorRT; re-measured",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write the chosen models of a run (its Pareto front by default) in every format asked for, "
                    "each with a card (<arch_id>.json): weights source, top-1 and how it was obtained, params, "
                    "FLOPs, the ONNX file's difference from torch, int8's top-1 lost, and its latency re-measured "
                    "end to end in every context this host can measure, beside the search's prediction and the "
                    "error (\"not measured: ...\" with the reason elsewhere). export.json indexes the export.\n\n"
                    "Every check is made before anything is written: an existing file, or a --out folder holding "
                    "other files, is refused without --force; a model whose kept weights are missing is refused "
                    "without --random-init or --train. A format (or the raw-image graph) that fails for a model "
                    "is recorded on its card and named at the end; the rest is still written (exit 0).\n\n"
                    "The run directory is only read, but for one record: an export elsewhere (--out DIR) adds DIR "
                    "(absolute), the time and the models written to RUN_DIR/models/export.json under \"exports\", "
                    "atomically, so that nas report RUN_DIR --html finds it; the journal, config, weights and "
                    "run.json are never changed. A read-only run still exports, with a note that it was not "
                    "recorded.\n\nformats:\n"
                    + "\n".join(f"  {k:13s} {v}" for k, v in FORMATS.items()))
    ex.add_argument("run_dir")
    ex.add_argument("--out", help="output folder (default RUN_DIR/models)")
    ex.add_argument("--force", action="store_true",
                    help="replace existing files of this export (other files in --out are left as they are)")
    pick = ex.add_mutually_exclusive_group()
    pick.add_argument("--device", help="the Pareto front for one device only (its hardware objectives and the "
                                       "others); default: the front over every objective")
    pick.add_argument("--top-k", type=int, metavar="K", help="the best K feasible trials by --by instead")
    pick.add_argument("--arch", action="append", default=[], metavar="ARCH_ID",
                      help="export this architecture (an id or a unique prefix; repeatable)")
    ex.add_argument("--by", metavar="METRIC", help="with --top-k: the objective to rank by")
    ex.add_argument("--formats", default="all", metavar="LIST",
                    help="comma-separated formats (onnx is always written), or all (default)")
    ex.add_argument("--opset", type=int, help="ONNX opset (default: the experiment's export.opset)")
    ex.add_argument("--dynamic-batch", action="store_true",
                    help="leave the batch axis free in the ONNX files and the .pt2 (a torch.export.Dim); default "
                         "fixed 1 (each card's batch_sizes says what each file accepts)")
    ex.add_argument("--with-preprocessing", action="store_true",
                    help="also write <id>.raw.onnx: takes raw uint8 H x W x C images at the source's size and does "
                         "the dataset's preprocessing (cast, scale, resize, normalise, transpose) inside the graph; "
                         "checked against the Python pipeline on the held-out split, and re-measured beside <id>.onnx "
                         "on this CPU (latency rows named ...+preprocessing). An image folder's graph takes images "
                         "already at the network's resolution (card: raw_onnx.input.accepts)")
    ex.add_argument("--bundle", action="store_true",
                    help="per model also <id>.bundle.zip: its files, card, calibration statistics and a "
                         "standalone predict.py (numpy and onnxruntime only); implies --with-preprocessing")
    ex.add_argument("--no-simplify", action="store_true", help="do not simplify the ONNX file with onnxslim")
    weights = ex.add_mutually_exclusive_group()
    weights.add_argument("--random-init", action="store_true",
                         help="export models whose kept weights (RUN_DIR/weights/<arch_id>.pt) are missing with "
                              "their seeded, untrained initialisation (for latency work); the card says so")
    weights.add_argument("--train", action="store_true",
                         help="train every exported model from scratch with the experiment's recipe first "
                              "(weights kept as <arch_id>.pt beside it)")
    ex.add_argument("--no-measure", action="store_true",
                    help="do not re-measure the exported files' latency (the fp32/int8 ONNX files, the engine, and "
                         "<id>.raw.onnx with --with-preprocessing)")
    ex.add_argument("--repeats", type=int, default=50, help="timed runs per file, context and round (default 50)")
    ex.add_argument("--rounds", type=int, default=3,
                    help="timing rounds, each over every model; the median of the rounds is kept (default 3)")


def cmd_export(args: argparse.Namespace) -> int:
    """Export the chosen models again; refuses (writing nothing, before the progress bar shows) what
    :func:`hwnas.experiments.export.plan_export` refuses."""
    from rich.console import Console

    from hwnas.experiments.export import plan_export
    from hwnas.experiments.progress import progress_bar

    plan = plan_export(args.run_dir, out=args.out, formats=args.formats, device=args.device, top_k=args.top_k,
                       by=args.by, archs=args.arch, opset=args.opset, force=args.force, random_init=args.random_init,
                       train=args.train, dynamic_batch=args.dynamic_batch, simplify=not args.no_simplify,
                       measure=not args.no_measure, repeats=args.repeats, rounds=args.rounds,
                       with_preprocessing=args.with_preprocessing, bundle=args.bundle)
    console = Console()
    with progress_bar("export", status=True, console=console) as bar:
        task = bar.add_task("export", total=len(plan.models), status="")

        def on_model(k: int, n: int, arch_id: str) -> None:
            bar.update(task, completed=k, status=arch_id)

        notes: list[str] = []
        cards = plan.run(on_model=on_model, on_note=notes.append)
        bar.update(task, completed=len(plan.models), status="done")
    console.print(export_table(cards, title=f"{plan.selection}: {len(cards)} model(s) in {plan.out_dir}"))
    # what could not be written is on each card and said here; the export stands (exit 0), as for every format
    failed = [(c.arch_id, name, why) for c in cards for name, why in c.not_written()]
    for arch_id, name, why in failed:
        bundle = f"; so no {arch_id}.bundle.zip" if plan.bundle and name.endswith(".raw.onnx") else ""
        print(f"warning: {name} not written: {why}{bundle} (its card {arch_id}.json says so)", file=sys.stderr)
    if failed:
        print(f"warning: {len(failed)} file(s) of {len({a for a, _, _ in failed})} model(s) not written; every other "
              "file of the export was", file=sys.stderr)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def export_table(cards: Sequence[ModelCard], *, title: str) -> Table:
    """A rich table of an export: per model its weights, top-1 (fp32 / int8) and each re-measured latency."""
    from rich.table import Table

    from hwnas.experiments.export.remeasure import RAW_TAG

    table = Table(title=title)
    for col in ("model", "weights", "top-1 fp32/int8", "context", "median (p90) ms", "search ms", "error"):
        table.add_column(col, overflow="fold" if col == "context" else "ellipsis")  # context names are never cut
    for c in cards:
        int8 = c.format_record("onnx_int8").get("top1_heldout")
        top1 = c.top1.value if c.top1 is not None else None
        head = [c.arch_id[:8], c.weights.kind if c.weights is not None else "?",
                (f"{top1:.3f}" if top1 is not None else "-") + (f"/{int8:.3f}" if int8 is not None else "")]
        rows: list[Mapping[str, Any] | None] = [*c.measured_latency()] or [None]
        for i, row in enumerate(rows):
            cells = head if i == 0 else [""] * len(head)
            if row is None:
                table.add_row(*cells, "not measured", "", "", "")
                continue
            m = row["measured"]
            name = str(row.get("name", "")).replace(RAW_TAG, " +prep")  # wraps at the space in a narrow column
            table.add_row(*cells, name, f"{m['median_ms']:.3f} ({m['p90_ms']:.3f})",
                          f"{row['predicted_ms']:.3f}" if row["predicted_ms"] is not None else "",
                          f"{row['error_pct']:+.1f}%" if row["error_pct"] is not None else "")
    worst = max((c.max_abs_diff for c in cards if c.max_abs_diff is not None), default=0.0)
    raw = any(RAW_TAG in str(row.get("name", "")) for c in cards for row in c.measured_latency())
    table.caption = (f"max |onnx - torch| {worst:.1e}; contexts not measured here and why: see each "
                     "<arch_id>.json (latency)" + ("; +prep: <arch_id>.raw.onnx, raw uint8 images at the source "
                                                   "size in, the preprocessing timed inside the graph" if raw else ""))
    return table
