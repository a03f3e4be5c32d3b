"""The run directory: resolved config, environment, journal and outputs; never silently overwritten."""

from __future__ import annotations

import json
import platform
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from hwnas.errors import RunDirectoryError
from hwnas.experiments.yaml_io import dump_yaml
from hwnas.fileio import atomic_write

CONFIG = "config.yaml"
JOURNAL = "trials.jsonl"


def fresh_run_dir(root: Path, name: str) -> Path:
    """``root/name``, or ``root/name-2``, ``-3``... when it exists: an existing run is never reused silently."""
    candidate = root / name
    k = 2
    while candidate.exists():
        candidate = root / f"{name}-{k}"
        k += 1
    return candidate


def write_config(run_dir: Path, resolved: dict[str, Any]) -> None:
    """Write the resolved config; refuses if the run directory already has a different one."""
    path = run_dir / CONFIG
    text = dump_yaml(resolved)
    if path.exists() and path.read_text(encoding="utf-8") != text:
        raise RunDirectoryError(f"{path} exists with a different config; not overwriting it")
    atomic_write(path, text)


def diff_configs(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Paths where two config trees differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            p = f"{prefix}.{k}" if prefix else str(k)
            if k not in old or k not in new:
                out.append(p)
            else:
                out.extend(diff_configs(old[k], new[k], p))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new)) for d in diff_configs(a, b, f"{prefix}[{i}]")]
    return [] if old == new else [prefix or "(top level)"]


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """Versions, git sha, host and devices: written to env.json when a run starts."""
    import torch

    from hwnas.latency.onnx_export import host_description

    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True,
                             text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        sha = None
    host = host_description()
    cuda = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if torch.cuda.is_available() else [])
    return {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": {d: _version(d) for d in ("hwnas", "torch", "timm", "onnx", "onnxruntime", "tensorrt", "pymoo",
                                              "optuna", "numpy", "ray")},
        "git_sha": sha,
        "host": socket.gethostname(),
        "cpu": host["cpu"],
        "cpu_cores": host["cores"],
        "torch_threads": torch.get_num_threads(),
        "cuda_devices": cuda,
    }


def write_env(run_dir: Path) -> None:
    """env.json: kept from the first start; a resume adds its own record beside it."""
    env = environment()
    path = run_dir / "env.json"
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except ValueError:
            old = {}
        old.setdefault("resumes", []).append(env)
        env = old
    atomic_write(path, json.dumps(env, indent=2) + "\n")
