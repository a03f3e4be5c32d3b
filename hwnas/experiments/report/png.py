"""pareto.png's drawing: the plotted data (``FrontPlot``'s fields) to PNG bytes, with matplotlib's Agg canvas.

It imports nothing from hwnas, so it also runs as a script: :class:`hwnas.experiments.report.drawer.PlotDrawer`
starts it as a child process when a run begins, where it imports matplotlib (about 0.4 s on a slow CPU, a third of
a table-only run) on another core while the search goes on, then waits on its standard input for the plot's JSON
and writes the PNG to its standard output. The same :func:`draw` runs in the run's process wherever no child does.
"""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Points = Sequence[Sequence[float]]  # (x values, y values)
#: The first bytes of every PNG file.
SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Seconds a drawing process waits for its plot before it exits (the run then draws in process).
IDLE_S = 60.0


def _figure() -> Figure:
    # a Figure drawn by the Agg canvas directly: no pyplot (its backend choice and figure manager), which leaves
    # the process's matplotlib backend as it was
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 5), dpi=120)
    FigureCanvasAgg(fig)
    return fig


def draw(*, title: str, x_label: str, y_label: str, ok: Points, infeasible: Points, infeasible_count: int,
         front: Points, lines: Sequence[Sequence[object]]) -> bytes:
    """The PNG: all trials in grey, infeasible ones as crosses, the front highlighted and joined, constraints
    dashed (``lines``: ``("v" or "h", where, label)`` each)."""
    import numpy as np

    fig = _figure()
    ax = fig.subplots()
    # arrays, not lists: matplotlib converts a list to a masked array one element at a time
    arr = lambda v: np.asarray(v, dtype=float)  # noqa: E731
    # markers of a Line2D, not a scatter: Agg stamps one rendered marker per point (the same look, the same sizes:
    # a scatter's s is the marker size squared), where a scatter's PathCollection draws each point as a path;
    # 6,000 points draw in about half the time
    ax.plot(arr(ok[0]), arr(ok[1]), "o", ls="none", ms=22 ** 0.5, c="0.65", mec="0.65",
            label=f"evaluated ({len(ok[0])})", zorder=2)
    if len(infeasible[0]):
        ax.plot(arr(infeasible[0]), arr(infeasible[1]), "x", ls="none", ms=26 ** 0.5, c="tab:red",
                alpha=0.7, label=f"infeasible ({infeasible_count})", zorder=2)
    ax.plot(arr(front[0]), arr(front[1]), "-o", c="tab:blue", ms=6, lw=1.5,
            label=f"Pareto front ({len(front[0])})", zorder=3)
    for axis, where, label in lines:
        (ax.axvline if axis == "v" else ax.axhline)(float(where), ls="--", c="tab:red", lw=1,  # type: ignore[arg-type]
                                                    label=str(label))
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def warm_up() -> None:
    """Draw a small plot once, so that a first real drawing finds its fonts and renderer ready."""
    draw(title="warm-up", x_label="x", y_label="y", ok=([0.0, 1.0], [0.0, 1.0]), infeasible=([0.5], [0.5]),
         infeasible_count=1, front=([0.0, 1.0], [1.0, 0.0]), lines=[("v", 0.5, "warm-up")])


def main(argv: Sequence[str]) -> NoReturn:
    """The child (``png.py [IDLE_S]``): import matplotlib, read one plot's JSON line from stdin, write its PNG to
    stdout, exit. Standard input is read by a thread from the start, so that the run's process never waits on a
    full pipe while this one imports; the renderer is warmed up only if the plot has not come by then. An empty
    line or end of input (the run drew no plot, or its process died), or no plot within IDLE_S seconds
    (:data:`IDLE_S` by default), ends it quietly: the run then draws in its own process.
    """
    idle_s = float(argv[0]) if argv else IDLE_S
    if hasattr(os, "nice"):  # below the run's priority: on an idle core it runs as fast, and it never takes a core
        try:                 # from the run (or from a latency measurement the run makes meanwhile)
            os.nice(10)
        except OSError:
            pass
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.append(sys.stdin.buffer.readline()), daemon=True)
    reader.start()
    _figure()  # the imports
    if reader.is_alive():
        warm_up()
    reader.join(timeout=idle_s)
    data = lines[0] if lines else b""
    if data.strip():
        sys.stdout.buffer.write(draw(**json.loads(data)))
        sys.stdout.buffer.flush()
    # at once: an interpreter that has imported matplotlib takes about 0.1 s to finalise, and the run waits for
    # this process's end; there is nothing to clean up (the reader thread may still block on stdin)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
