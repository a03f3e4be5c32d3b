"""Small file utilities every layer may use (standard library only)."""

from __future__ import annotations

import os
from pathlib import Path


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
