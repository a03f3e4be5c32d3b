"""The append-only trial journal (``trials.jsonl``): the resume log and the evaluation cache."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hwnas.errors import JournalError
from hwnas.objectives import Trial

log = logging.getLogger(__name__)


class Journal:
    """One JSON object per line: a finished trial and the evaluator fingerprint it was computed under.

    A line is written and flushed as soon as its trial is finished, so a killed process loses at most
    the line it was writing (such a torn last line is moved to ``trials.jsonl.torn`` on the next open);
    the runner fsyncs once per batch, before the strategy is told, so a trial is on disk before anything
    depends on it.

    Args:
        path: The journal file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> list[tuple[Trial, str]]:
        """All (trial, fingerprint) pairs. A corrupt line is a :class:`JournalError` naming its line number."""
        if not self.path.exists():
            return []
        raw = self.path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            torn = raw[cut:]
            log.warning("%s: the last line was cut off by a crash (%d bytes); moved to %s.torn",
                        self.path, len(torn), self.path.name)
            with open(self.path.with_name(self.path.name + ".torn"), "ab") as fh:
                fh.write(torn + b"\n")
            with open(self.path, "r+b") as fh:
                fh.truncate(cut)
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
        return (t for t, _ in self.read())


class JournalWriter:
    """Appends trials to an open journal file (a context manager; fsyncs when closed)."""

    def __init__(self, path: Path, fingerprint: str, *, min_sync_interval_s: float = 0.2) -> None:
        self.fingerprint = fingerprint
        self.min_sync_interval_s = min_sync_interval_s
        self._fh = open(path, "a", encoding="utf-8")  # closed in close()
        self._dirty = False
        self._last_sync = 0.0

    def append(self, trial: Trial) -> None:
        """Write and flush one line (survives the process being killed; :meth:`sync` survives the machine)."""
        data: dict[str, Any] = trial.to_dict()
        data["fingerprint"] = self.fingerprint
        self._fh.write(json.dumps(data, allow_nan=False) + "\n")
        self._fh.flush()
        self._dirty = True

    def sync(self, *, force: bool = False) -> None:
        """fsync what was written since the last sync, at most once per ``min_sync_interval_s`` unless forced.

        Lines are flushed to the OS as they are written, so a killed process loses nothing; fsync guards
        against the machine going down, where losing the last fraction of a second of trials costs only
        their re-evaluation on resume. Bounding the rate keeps microsecond evaluations from being paced by
        the disk (one fsync is about 1.5 ms here).
        """
        now = time.monotonic()
        if self._dirty and (force or now - self._last_sync >= self.min_sync_interval_s):
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
    """The trials of a run directory, in journal order."""
    return list(Journal(Path(run_dir) / "trials.jsonl"))
