"""Small file utilities every layer may use (standard library and hwnas.errors only)."""

from __future__ import annotations

import os
from pathlib import Path

from hwnas.errors import OutputExists


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


def refuse_overwrite(paths: list[Path] | tuple[Path, ...], *, force: bool, flag: str = "--force") -> None:
    """Raise :class:`OutputExists` naming every path that exists, unless ``force``.

    Call it for *all* outputs of a command before writing any of them, so a refused command writes nothing.
    A path that is a directory is refused even with ``force`` (a file is expected there).
    """
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
