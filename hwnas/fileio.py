"""Small file utilities every layer may use (standard library and hwnas.errors only).

The shared guards of every command: :func:`check_input_file` (a file argument is looked at before it is read:
a pipe, a device, a socket or a folder is refused at once, never read), :func:`refuse_overwrite` (with
:func:`refuse_run_files`: no command replaces a run's own files, not even with ``--force``), :class:`FolderLock`
(one writing process per run or training folder), and the one rule for names (:func:`check_name`) and seeds
(:func:`check_seed`).
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from hwnas.errors import ConfigError, OutputExists, RunDirectoryError


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write a file through a temporary name and a rename, so a crash leaves the old or the new file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(tmp, mode) as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def refuse_overwrite(paths: Sequence[Path], *, force: bool, flag: str = "--force", own: Sequence[str] = (),
                     own_run: Path | None = None) -> None:
    """Raise :class:`OutputExists` naming every path that exists, unless ``force``.

    A path among a run's own files is refused even with ``force`` (:func:`refuse_run_files`; ``own`` names what
    of a run folder the calling command itself writes, e.g. ``models`` for an export, in the run ``own_run``).

    Call it for *all* outputs of a command before writing any of them, so a refused command writes nothing.
    A path that is a directory is refused even with ``force`` (a file is expected there).
    """
    refuse_run_files(paths, own=own, own_run=own_run)
    dirs = [p for p in paths if Path(p).is_dir()]
    if dirs:
        raise OutputExists(f"{dirs[0]} is a directory; a file path is expected")
    special = [p for p in paths if Path(p).exists() and not Path(p).is_file()]
    if special:
        raise OutputExists(f"{special[0]} is not a regular file (a device or a pipe); a file path is expected")
    for p in paths:
        check_folder_writable(Path(p))
    existing = [str(p) for p in paths if Path(p).exists()]
    if existing and not force:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        raise OutputExists(f"{existing[0]}{more} exists; not replacing it (pass {flag} to replace)")


def check_folder_writable(path: Path) -> None:
    """Raise :class:`OutputExists` unless ``path``'s folder exists and is writable, or can be made: its nearest
    existing ancestor must be a writable folder (nothing is created here)."""
    parent = Path(os.path.abspath(path)).parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputExists(f"{parent} is not a folder; cannot write {path}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputExists(f"{parent} is not writable; cannot write {path}")


def write_new(path: str | Path, data: str | bytes, *, force: bool = False, flag: str = "--force") -> None:
    """:func:`atomic_write`, refusing to replace an existing file unless ``force`` (see :func:`refuse_overwrite`)."""
    refuse_overwrite([Path(path)], force=force, flag=flag)
    atomic_write(path, data)


# -- what a path is, before it is read ---------------------------------------------------------------------------

def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_input_file(path: str | Path, what: str = "file") -> Path:
    """``path`` if it is a regular, readable file; else one :class:`ConfigError` naming it and what it is.

    Looks with ``stat`` only (which never blocks): a named pipe, a device, a socket or a directory is refused
    before anything opens it, so a command given one stops at once instead of waiting on it for ever.
    """
    p = Path(path).expanduser()
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such file (expected {what})") from None
    except NotADirectoryError:
        raise ConfigError(f"{p}: no such file (a part of the path is a file, not a folder)") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise ConfigError(f"{p}: is {kind}, not {what}; refusing to read it")
    if not os.access(p, os.R_OK):
        raise ConfigError(f"{p}: is not readable (permission denied)")
    return p


def open_input(path: str | Path, what: str = "file", *, binary: bool = False) -> IO[str] | IO[bytes]:
    """:func:`check_input_file`, then open it (text as UTF-8, or bytes); the one way commands open a file argument."""
    p = check_input_file(path, what)
    return open(p, "rb") if binary else open(p, encoding="utf-8", newline="")


def read_input_bytes(path: str | Path, what: str = "file") -> bytes:
    """The bytes of a file argument, after :func:`check_input_file`."""
    with open(check_input_file(path, what), "rb") as fh:
        return fh.read()


def looks_binary(data: bytes) -> bool:
    """Whether bytes are not text: a NUL byte in the first 8 KiB (what ``file`` and git go by)."""
    return b"\0" in data[:8192]


def read_input_text(path: str | Path, what: str = "file") -> str:
    """The text of a file argument: :func:`check_input_file`, then one located error for a binary file (its bytes
    never shown) or one that is not UTF-8."""
    p = Path(path).expanduser()
    data = read_input_bytes(p, what)
    if looks_binary(data):
        raise ConfigError(f"{p}: is a binary file, not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: is not UTF-8 text (byte {exc.start}), not {what}") from None


# -- a run's own files -------------------------------------------------------------------------------------------

#: The files of an experiment's run folder (besides weights/ and models/, which are folders of them).
RUN_FILES = frozenset({"config.yaml", "run.json", "trials.jsonl", "trials.jsonl.torn", "env.json", "summary.json",
                       "pareto.csv", "pareto.json", "pareto.png", "report.html", "export.json", ".lock"})
#: The files of a supernet training's folder.
SUPERNET_FILES = frozenset({"supernet.json", "curves.csv", "curves.png", "checkpoint", "checkpoint.old", ".lock"})


def run_folder_kind(folder: Path) -> str | None:
    """``"run"`` for an experiment's run folder, ``"supernet training"`` for a supernet's, else None."""
    try:
        if (folder / "run.json").is_file() or ((folder / "config.yaml").is_file()
                                               and (folder / "trials.jsonl").is_file()):
            return "run"
        if (folder / "supernet.json").is_file() and ((folder / "checkpoint").is_dir()
                                                     or (folder / "checkpoint.old").is_dir()):
            return "supernet training"
    except OSError:
        return None
    return None


def refuse_run_files(paths: Sequence[str | Path], *, own: Sequence[str] = (), own_run: Path | None = None) -> None:
    """Raise :class:`OutputExists` when a path to be written is one of a run's own files (its journal, config,
    record, summary, weights, models; a supernet training's config, curves and checkpoints), or would replace an
    existing file inside a run or training folder: never allowed, ``--force`` or not.

    ``own`` names the first part (under the run folder) of what the calling command itself writes there:
    ``models`` for ``nas export``, ``report.html`` for ``nas report --html``; with ``own_run``, only in that run
    (an export of one run never replaces another run's models).
    """
    mine = Path(own_run).resolve() if own_run is not None else None
    for raw in paths:
        try:
            p = Path(raw).expanduser().resolve(strict=False)  # a link, or a/../b, cannot hide where it goes
        except (OSError, RuntimeError):
            p = Path(os.path.abspath(Path(raw).expanduser()))
        for folder in p.parents:
            kind = run_folder_kind(folder)
            if kind is None:
                continue
            rel = p.relative_to(folder)
            if rel.parts[0] in own and (mine is None or folder == mine):
                break
            names = RUN_FILES | {"weights", "models"} if kind == "run" else SUPERNET_FILES
            known = rel.parts[0] in names
            if known or p.exists():
                raise OutputExists(f"{p} is {rel} of the {kind} in {folder}; a command never replaces a {kind}'s "
                                   "own files, not even with --force: choose another path")
            break


# -- one writer per folder ---------------------------------------------------------------------------------------

#: The lock file of the process writing a run or a training.
LOCK = ".lock"


class FolderLock:
    """An exclusive lock on a folder for one writing process (``with FolderLock(folder): ...``).

    A kernel lock (``flock``) on ``FOLDER/.lock``: a second writer is refused naming the process that holds it; a
    killed holder's lock is released by the kernel, so a lock file left behind is stale by construction and is
    simply taken over.

    Args:
        folder: The folder (made if missing).
        why: What two writers would do, for the refusal's message.
    """

    def __init__(self, folder: str | Path, *, why: str = "two writers would spoil it") -> None:
        self.path = Path(folder) / LOCK
        self.why = why
        self._fh: IO[str] | None = None

    def __enter__(self) -> FolderLock:
        import fcntl
        import socket

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+", encoding="utf-8")  # closed in __exit__ or below
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            # the holder writes its id just after taking the lock (and blanks it just before
            # letting go): a racer that reads in between retries briefly before giving up on a name
            holder = ""
            for _ in range(20):
                fh.seek(0)
                holder = fh.read().strip()
                if holder:
                    break
                time.sleep(0.01)
            holder = holder or "process (one that has not written its id yet, or is just finishing)"
            fh.close()
            raise RunDirectoryError(f"{self.path.parent} is in use by {holder}; wait for it to finish or stop it "
                                    f"({self.why})") from None
        fh.seek(0)
        stale = fh.read().strip()
        if stale:
            import logging

            logging.getLogger(__name__).info("taking over the lock of %s, which no longer runs", stale)
        fh.seek(0)
        fh.truncate()
        fh.write(f"process {os.getpid()} on {socket.gethostname()} "
                 f"(since {datetime.now(timezone.utc).isoformat(timespec='seconds')})\n")
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.truncate(0)  # released: nothing left that looks like a holder
            self._fh.close()  # closing releases the flock
            self._fh = None


# -- names and seeds: one rule everywhere ------------------------------------------------------------------------

NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"
NAME_MAX = 100
SEED_MAX = 2**63 - 1


def check_name(value: str) -> str:
    """``value`` if it can name a folder: letters, digits, '.', '_' and '-', not starting with '.', '_' or '-' (so
    never ``.``, ``..`` or a path), at most :data:`NAME_MAX` characters; else ValueError saying the rule."""
    if not isinstance(value, str) or not re.fullmatch(NAME_PATTERN, value):
        raise ValueError("use letters, digits, '.', '_' and '-' only, starting with a letter or digit (it names a "
                         "folder)")
    if len(value) > NAME_MAX:
        raise ValueError(f"at most {NAME_MAX} characters (it names a folder)")
    return value


def check_seed(value: object) -> int:
    """``value`` if it is a seed: an integer from 0 to 2**63 - 1 (not a bool, not a float); else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"a seed is a whole number from 0 to {SEED_MAX}, not {value!r}")
    if not 0 <= value <= SEED_MAX:
        raise ValueError(f"a seed is a whole number from 0 to {SEED_MAX}; {value} is out of range")
    return value


def json_pairs_once(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """``json.loads(..., object_pairs_hook=json_pairs_once)``: a key written twice in one object is a ValueError
    naming it (``json`` alone keeps the last one silently: a latency unit listed twice, its first figure lost)."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"{key!r} is listed twice in one object")
        out[key] = value
    return out
