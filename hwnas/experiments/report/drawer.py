"""pareto.png drawn beside the search: a child process that imports matplotlib on another core while the run
searches, then draws the plot it is sent (:mod:`.png`, the same drawing the run's process does without it).

A table-only run spends about a third of its time importing matplotlib and drawing; the child takes the import
off the run's path. Nothing about the plot changes: the child's PNG is byte for byte the one :func:`.png.draw` makes
in process, and wherever the child is not started, fails, or has given up waiting, the run draws in its own process
as before. It costs CPU time (a second interpreter: about 0.3 s on the machine of ``docs/results/executors.md``),
so it is started only where it can shorten the run: matplotlib not imported yet (a notebook that has it draws at
once), and more than one core usable with one of them idle by the 1-minute load average (under ``cores - 0.5``).

The child lowers its own scheduling priority (``nice`` 10), so that it never takes a core from the run, or from a
latency measurement the run makes meanwhile. ``nas run`` starts one before it imports the library (:func:`spare`),
so that the child's import overlaps the run's own; :func:`hwnas.experiments.api.run_experiment` takes it
(:func:`for_run`), or starts one itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from hwnas.experiments.report import png

if TYPE_CHECKING:
    from hwnas.experiments.report.front import FrontPlot

log = logging.getLogger(__name__)

#: The child's command line: the script run by path, as ``python png.py IDLE_S`` would, but with the script's own
#: folder kept off ``sys.path`` (Python 3.10 has no ``-P``), so that this package's module names cannot shadow the
#: standard library's.
_BOOT = ("import runpy, sys; del sys.path[0]; sys.argv[:] = sys.argv[1:]; "
         "runpy.run_path(sys.argv[0], run_name='__main__')")
#: Seconds the run waits for a drawing before it draws the plot itself.
WAIT_S = 120.0

_spare: PlotDrawer | None = None  # started by spare(), taken by for_run()


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def can_gain() -> bool:
    """Whether a child would shorten the run: matplotlib not imported here yet, and a core to spare."""
    if "matplotlib.figure" in sys.modules:
        return False
    cores = _usable_cores()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    # the load average counts this run's own process (and a previous run's, just ended): a core is to spare while
    # the rest of the machine keeps fewer than cores - 1 busy, rounding half a core to idle
    return cores > 1 and load < cores - 0.5


class PlotDrawer:
    """A child process that draws one ``pareto.png``: :meth:`start` it early, ask it to :meth:`draw` the plot when
    the front is known; :meth:`close` it in any case (a context manager).

    The child waits :data:`png.IDLE_S` seconds for its plot and then exits: a run longer than that gains nothing
    measurable from it, and does not keep an idle interpreter; its plot is drawn in process.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    @classmethod
    def start(cls, idle_s: float = png.IDLE_S) -> PlotDrawer | None:
        """A started child, or None where it cannot be started (the run then draws in process)."""
        if not sys.executable:  # an embedded interpreter: no Python to start
            return None
        try:
            proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(Path(png.__file__)), str(idle_s)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            log.debug("pareto.png: no drawing process (%s); drawn in this one", exc)
            return None
        return cls(proc)

    def draw(self, plot: FrontPlot) -> bytes | None:
        """The PNG of ``plot`` as the child drew it, or None where it did not (why, at debug level): the run draws
        it itself then. The child has been reading its input since it started, so the plot goes straight in."""
        data = json.dumps(dataclasses.asdict(plot)).encode() + b"\n"  # one line: json.dumps writes no newline
        try:
            out, err = self.proc.communicate(data, timeout=WAIT_S)  # a child that is gone: b"" (no broken pipe)
        except subprocess.TimeoutExpired:
            self.close()
            log.debug("pareto.png: the drawing process took over %.0f s; drawn in this one", WAIT_S)
            return None
        except (OSError, ValueError) as exc:  # ValueError: its pipes were closed already (drawn once)
            log.debug("pareto.png: the drawing process could not be used (%s)", exc)
            return None
        if self.proc.returncode != 0 or not out.startswith(png.SIGNATURE):
            log.debug("pareto.png: the drawing process gave no PNG (exit %s): %s", self.proc.returncode,
                      err.decode(errors="replace").strip()[-2000:])
            return None
        return out

    def close(self) -> None:
        """Stop the child if it is still running, and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
            self.proc.communicate(timeout=10)

    def __enter__(self) -> PlotDrawer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def spare() -> Iterator[None]:
    """Start a child now, where :func:`can_gain`, for the run this process is about to make (:func:`for_run`
    takes it); on leaving, one nobody took is stopped. ``nas run`` wraps its whole command in it."""
    global _spare
    _spare = PlotDrawer.start() if can_gain() else None
    try:
        yield
    finally:
        left, _spare = _spare, None
        if left is not None:
            left.close()


def for_run(plots: bool) -> PlotDrawer | None:
    """The child for a run that starts now: the one :func:`spare` started, else a new one where :func:`can_gain`;
    None where the run draws no plot (``plots`` false: fewer than two objectives) or draws it in process. The
    caller closes it."""
    global _spare
    taken, _spare = _spare, None
    if not plots:
        if taken is not None:
            taken.close()
        return None
    return taken if taken is not None else (PlotDrawer.start() if can_gain() else None)
