"""The append-only trial journal (``trials.jsonl``): the resume log and the evaluation cache."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

from hwnas.errors import JournalError
from hwnas.objectives import Trial

log = logging.getLogger(__name__)


class Journal:
    """One JSON object per line: a finished trial and the evaluator fingerprint it was computed under.

    A line is written and flushed as soon as its trial is finished, so a killed process loses at most
    the line it was writing; the runner fsyncs once per batch, before the strategy is told, so a trial is
    on disk before anything depends on it. Such a torn last line is skipped by every read, and moved to
    ``trials.jsonl.torn`` only by ``read(repair=True)``, which the runner calls when it resumes (it is
    about to append): readers (``nas report``, ``nas export``, :func:`read_trials`, iteration) never
    modify the run.

    Args:
        path: The journal file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self, repair: bool = False) -> list[tuple[Trial, str]]:
        """All (trial, fingerprint) pairs. A corrupt line is a :class:`JournalError` naming its line number.

        A torn last line (no final newline: a crash in the middle of a write) is skipped with a warning and
        the file is left untouched, unless ``repair``: then that line is appended to ``trials.jsonl.torn``
        and cut from the journal, so that new lines can be appended after it. Only the writer of a run (the
        runner, on resume) should repair; a corrupt line elsewhere is never repaired.
        """
        if not self.path.exists():
            return []
        raw = self.path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            torn = raw[cut:]
            if repair:
                log.warning("%s: the last line was cut off by a crash (%d bytes); moved to %s.torn",
                            self.path, len(torn), self.path.name)
                with open(self.path.with_name(self.path.name + ".torn"), "ab") as fh:
                    fh.write(torn + b"\n")
                with open(self.path, "r+b") as fh:
                    fh.truncate(cut)
            else:
                log.warning("%s: the last line was cut off by a crash (%d bytes); skipped (nas run --resume "
                            "sets it aside)", self.path, len(torn))
            raw = raw[:cut]
        out = []
        for lineno, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                out.append((Trial.from_dict(data), str(data.get("fingerprint", ""))))
            except (ValueError, KeyError, TypeError) as exc:
                raise JournalError(f"{self.path}:{lineno}: corrupt journal line ({exc}); "
                                   "fix or delete that line to resume (the rest of the file is kept as is)") from None
        return out

    def append(self, trial: Trial, fingerprint: str) -> None:
        """Write one trial durably (opens, writes, fsyncs; the runner uses :meth:`writer` instead)."""
        with self.writer(fingerprint) as w:
            w.append(trial)

    def writer(self, fingerprint: str) -> JournalWriter:
        """An open appender for one run: ``append`` writes and flushes a line, ``sync`` fsyncs."""
        return JournalWriter(self.path, fingerprint)

    def __iter__(self) -> Iterator[Trial]:
        """The trials, read-only (see :meth:`read`)."""
        return (t for t, _ in self.read())


#: Seconds of evaluation above which a trial's line is flushed to the OS as soon as it is written.
FLUSH_AFTER_S = 1e-3


class JournalWriter:
    """Appends trials to an open journal file (a context manager; fsyncs when closed)."""

    def __init__(self, path: Path, fingerprint: str, *, min_sync_interval_s: float = 0.2) -> None:
        self.fingerprint = fingerprint
        self._end = f", {json.dumps('fingerprint')}: {json.dumps(fingerprint)}}}\n"  # every line's last field
        self.min_sync_interval_s = min_sync_interval_s
        self._fh = open(path, "a", encoding="utf-8")  # closed in close()
        self._dirty = False
        self._last_sync = time.monotonic()  # the first fsync comes one interval in (or at close)

    def append(self, trial: Trial, *, flush: bool | None = None) -> None:
        """Write one line; flush it to the OS at once when it cost at least :data:`FLUSH_AFTER_S` to evaluate.

        A flushed line survives the process being killed (:meth:`sync` survives the machine). Lines of trials
        that cost less stay buffered until the next flush or :meth:`sync`, which the runner calls before the
        strategy hears of them: a kill in between loses work cheaper than the flush that would have kept it,
        and resume evaluates it again. ``flush`` overrides the rule.
        """
        self._fh.write(trial.json_line(self._end))
        if flush or (flush is None and trial.cost_s >= FLUSH_AFTER_S):
            self._fh.flush()
        self._dirty = True

    def sync(self, *, force: bool = False) -> None:
        """Flush every written line to the OS; fsync at most once per ``min_sync_interval_s`` unless forced.

        After the flush a killed process loses nothing written; fsync guards against the machine going
        down, where losing the last fraction of a second of trials costs only their re-evaluation on
        resume. Bounding the rate keeps microsecond evaluations from being paced by the disk (one fsync is
        about 0.1-1.5 ms on this VM).
        """
        if not self._dirty:
            return
        self._fh.flush()
        now = time.monotonic()
        if force or now - self._last_sync >= self.min_sync_interval_s:
            os.fsync(self._fh.fileno())
            self._dirty = False
            self._last_sync = now

    def close(self) -> None:
        if not self._fh.closed:
            self.sync(force=True)
            self._fh.close()

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trials(run_dir: str | Path) -> list[Trial]:
    """The trials of a run directory, in journal order; read-only (a torn last line is skipped, not repaired)."""
    return list(Journal(Path(run_dir) / "trials.jsonl"))
