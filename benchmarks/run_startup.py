"""The fixed cost of a table-only ``nas run``, side by side for one or more source trees (prints figures).

For each tree, alternating trees on every repeat so that drifts of this VM's speed fall on all alike:

- ``nas --version`` (the interpreter, the entry point, ``import hwnas.cli``);
- ``nas run experiments/nb201_benchmark.yaml --set budget.trials=10`` (the search itself takes about 0.1 s: the
  rest is imports, reading two tables, the run directory, the front and its plot);
- the same with ``--set budget.trials=6000``;
- which heavy packages (torch, onnxruntime, timm, onnx, optuna, pymoo, sklearn, ray) the 10-trial run imported;
- in how many runs ``pareto.png`` was drawn by a child process (the run's process did not import matplotlib:
  ``hwnas/experiments/report/drawer.py`` starts one only where a core is idle).

Each tree is put first on ``PYTHONPATH`` so its ``hwnas`` is the one imported (the editable install of the
checkout stays behind it). Medians of ``--repeat`` runs (default 5), in seconds of wall time and of CPU time
(user + system of the command's processes). ``--bytecode cached`` (the default) times a user's second
run: each tree's modules are compiled once, by a warm-up run, into a bytecode cache of its own.

    python benchmarks/run_startup.py                          # this checkout
    python benchmarks/run_startup.py --tree /path/to/older/checkout --tree .
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "onnxruntime", "timm", "onnx", "optuna", "pymoo", "sklearn", "ray", "matplotlib")
PROBE = ("import runpy, sys, json, atexit\n"
         "def _dump():\n"
         "    heavy = {h: h in sys.modules for h in %r}\n"
         "    open(%r, 'w').write(json.dumps(heavy))\n"
         "atexit.register(_dump)\n"
         "sys.argv = ['nas'] + sys.argv[1:]\n"
         "from hwnas.cli import main\n"
         "raise SystemExit(main())\n")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _time(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of ``cmd``; the CPU time is its processes' user + system."""
    c0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", default=[], help="a checkout to time (repeatable; default: this one)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per command and tree (the median is printed)")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"), help="the published benchmark data")
    ap.add_argument("--bytecode", choices=("cached", "none"), default="cached",
                    help="cached (Python's default, a user's second run): each tree's bytecode is written once by a "
                         "warm-up run, into a cache of its own; none: every module compiled on every run "
                         "(PYTHONDONTWRITEBYTECODE=1, as some sandboxes set it)")
    args = ap.parse_args(argv)
    trees = [Path(t).resolve() for t in (args.tree or [str(REPO)])]
    experiment = REPO / "experiments" / "nb201_benchmark.yaml"
    times: dict[tuple[Path, str], list[tuple[float, float]]] = {}
    heavy: dict[Path, dict[str, bool]] = {}
    drawn_aside: dict[Path, list[bool]] = {}
    with tempfile.TemporaryDirectory(prefix="hwnas-startup-") as tmp:
        work = Path(tmp)
        (work / "shared").symlink_to(Path(args.data).resolve().parent)  # the file's ../shared/data paths
        cwd = work / "repo"
        cwd.mkdir()
        base = [sys.executable, "-c", "from hwnas.cli import main; raise SystemExit(main())"]
        envs = {}
        for k, tree in enumerate(trees):
            env = dict(os.environ, PYTHONPATH=str(tree))
            if args.bytecode == "cached":
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                env["PYTHONPYCACHEPREFIX"] = str(work / f"pycache-{k}")  # the trees' sources are left as they are
                _time([*base, "run", str(experiment), "--quiet", "--run-dir", str(work / f"warm-{k}"),
                       "--set", "budget.trials=10"], env, cwd)
            else:
                env["PYTHONDONTWRITEBYTECODE"] = "1"
            envs[tree] = env
        for rep in range(args.repeat):
            for tree in trees:
                env = envs[tree]
                times.setdefault((tree, "version"), []).append(_time([*base, "--version"], env, cwd))
                for trials in (10, 6000):
                    run_dir = work / f"run-{rep}-{trials}-{trees.index(tree)}"
                    cmd = [*base, "run", str(experiment), "--quiet", "--run-dir", str(run_dir),
                           "--set", f"budget.trials={trials}"]
                    probe = work / f"heavy-{trees.index(tree)}-{rep}-{trials}.json"
                    cmd[2] = PROBE % (HEAVY, str(probe))  # every run says what its process imported
                    times.setdefault((tree, str(trials)), []).append(_time(cmd, env, cwd))
                    imported = json.loads(probe.read_text())
                    if trials == 10 and rep == 0:
                        heavy[tree] = imported
                    # matplotlib not imported by the run's process: pareto.png was drawn by a child process
                    drawn_aside.setdefault(tree, []).append(not imported["matplotlib"])
    print(f"median of {args.repeat} runs, seconds ({os.uname().nodename}, {time.strftime('%Y-%m-%d')}, bytecode "
          f"{args.bytecode}, load average {os.getloadavg()[0]:.1f})")
    for i, what in enumerate(("wall", "CPU")):
        print(f"\n{what} time\n{'tree':40s} {'--version':>10s} {'10 trials':>10s} {'beyond':>8s} {'6000 trials':>12s}"
              + ("  heavy imported by the run's process" if i == 0 else ""))
        for tree in trees:
            med = {k: statistics.median(t[i] for t in times[(tree, k)]) for k in ("version", "10", "6000")}
            imported = ", ".join(h for h, v in heavy[tree].items() if v) or "none"
            print(f"{str(tree)[-40:]:40s} {med['version']:10.2f} {med['10']:10.2f} {med['10'] - med['version']:8.2f} "
                  f"{med['6000']:12.2f}" + (f"  {imported}" if i == 0 else ""))
    for tree in trees:
        aside = drawn_aside[tree]
        print(f"{str(tree)[-40:]}: pareto.png drawn by a child process in {sum(aside)} of {len(aside)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
