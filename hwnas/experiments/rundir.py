"""The run directory: resolved config, environment, journal and outputs; never silently overwritten."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from hwnas.errors import RunDirectoryError
from hwnas.experiments.config.yaml_io import dump_yaml
from hwnas.fileio import LOCK as LOCK  # the lock file of the process writing the run (re-exported)
from hwnas.fileio import FolderLock, atomic_write

CONFIG = "config.yaml"
JOURNAL = "trials.jsonl"
#: What the run was started with (the config's hash and content): resume refuses an edited config.yaml.
RECORD = "run.json"

log = logging.getLogger(__name__)


def fresh_run_dir(root: Path, name: str) -> Path:
    """``root/name``, or ``root/name-2``, ``-3``... when it exists: an existing run is never reused silently."""
    candidate = root / name
    k = 2
    while candidate.exists():
        candidate = root / f"{name}-{k}"
        k += 1
    return candidate


def write_config(run_dir: Path, resolved: Mapping[str, object]) -> None:
    """Write the resolved config and the record of what the run was started with (:data:`RECORD`).

    Refuses if the run directory already has a different config.
    """
    path = run_dir / CONFIG
    text = dump_yaml(resolved)
    if path.exists() and path.read_text(encoding="utf-8") != text:
        raise RunDirectoryError(f"{path} exists with a different config; not overwriting it")
    atomic_write(path, text)
    record = run_dir / RECORD
    if not record.exists():
        atomic_write(record, json.dumps({"config_sha256": _sha(text), "config": resolved}, indent=1) + "\n")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: The config key a resume may change (``nas run --resume RUN --set budget.trials=N``): the budget may grow.
EXTENDABLE = "budget.trials"
#: A multi-fidelity run's budget (its cost), the key a resume of such a run may raise instead: ``budget.trials``
#: follows from it (``nas run --resume RUN --set multi_fidelity.budget=X``).
COST_BUDGET = "multi_fidelity.budget"


def extendable(config: Mapping[str, Any]) -> str:
    """The key a resume of a run with this config may raise: :data:`COST_BUDGET` for a multi-fidelity run (its
    ``budget.trials`` follows from it), else :data:`EXTENDABLE`."""
    return COST_BUDGET if isinstance(config.get("multi_fidelity"), Mapping) else EXTENDABLE


@dataclass(frozen=True)
class Extension:
    """A resume that raises a run's budget: its trials before and after, and for a multi-fidelity run its cost
    budget before and after (None otherwise)."""

    trials_before: int
    trials_after: int
    cost_before: float | None = None
    cost_after: float | None = None

    def describe(self) -> str:
        """``budget extended from 48 to 72 trials`` (and the cost budget, for a multi-fidelity run)."""
        text = f"budget extended from {self.trials_before} to {self.trials_after} trials"
        if self.cost_before is not None:
            text += f" (multi_fidelity.budget from {self.cost_before:g} to {self.cost_after:g})"
        return text


def extension_of(old: dict[str, Any], new: dict[str, Any], run_dir: Path) -> Extension | None:
    """How ``new`` (a resume's config) extends ``old`` (the run's config.yaml), or None when nothing changes. Only
    the budget may change, and only grow: ``budget.trials``, or for a multi-fidelity run ``multi_fidelity.budget``
    (with ``budget.trials``, which follows from it).

    Raises:
        RunDirectoryError: Any other key changed (named), or the budget shrinks.
    """
    diffs = diff_configs(old, new)
    if not diffs:
        return None
    key = extendable(old)
    allowed = {EXTENDABLE, COST_BUDGET} if key == COST_BUDGET else {EXTENDABLE}
    others = [d for d in diffs if d not in allowed]
    if others:
        raise RunDirectoryError(f"{run_dir / CONFIG} differs from this config at {', '.join(others[:8])}; a resume "
                                f"may only raise {key}: resume with the same config, or start a new run")
    before, after = int(old["budget"]["trials"]), int(new["budget"]["trials"])
    if key == COST_BUDGET:
        cost_before, cost_after = float(old["multi_fidelity"]["budget"]), float(new["multi_fidelity"]["budget"])
        if cost_after < cost_before or after < before:
            raise RunDirectoryError(f"{COST_BUDGET}: {cost_after:g} is smaller than the run's budget of "
                                    f"{cost_before:g}; a resume may only raise the budget (the run's trials stay "
                                    "in its journal)")
        if cost_after == cost_before:  # budget.trials alone: it follows from the cost budget
            raise RunDirectoryError(f"{EXTENDABLE}: a multi-fidelity run's trials follow from its {COST_BUDGET} "
                                    f"({cost_before:g}: {before} trials); extend it with --set {COST_BUDGET}=X "
                                    f"(Python: optimize(cost_budget=X))")
        return Extension(before, after, cost_before, cost_after)
    if after < before:
        raise RunDirectoryError(f"{EXTENDABLE}: {after} is smaller than the run's budget of {before}; a resume "
                                f"may only raise the budget (the run's trials stay in its journal)")
    return Extension(before, after)


def write_extension(run_dir: Path, resolved: Mapping[str, object], extension: Extension) -> None:
    """Extend a run's budget (``extension``): the record (:data:`RECORD`) takes the new config (and keeps the
    history under ``extensions``), then config.yaml is rewritten. A crash between the two leaves config.yaml as it
    was, which :func:`check_unchanged` accepts (the extension is then simply not made)."""
    path, record_path = run_dir / CONFIG, run_dir / RECORD
    text = dump_yaml(resolved)
    record: dict[str, Any] = {}
    if record_path.is_file():
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except ValueError:
            record = {}
    previous = _sha(path.read_text(encoding="utf-8")) if path.is_file() else None
    history = list(record.get("extensions", []))
    entry: dict[str, Any] = {"trials_before": extension.trials_before, "trials_after": extension.trials_after}
    if extension.cost_before is not None:
        entry.update(cost_budget_before=extension.cost_before, cost_budget_after=extension.cost_after)
    entry.update(previous_config_sha256=previous, at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    history.append(entry)
    record.update(config_sha256=_sha(text), config=resolved, extensions=history)
    atomic_write(record_path, json.dumps(record, indent=1) + "\n")
    atomic_write(path, text)


def check_unchanged(run_dir: Path) -> None:
    """Refuse to resume a run whose config.yaml was edited since it started (or since its budget was last
    extended), naming the keys that differ.

    Runs started before the record existed are accepted with a warning.
    """
    record_path, config_path = run_dir / RECORD, run_dir / CONFIG
    if not record_path.is_file():
        log.warning("%s has no %s (started by an older hwnas): cannot check that %s is unchanged",
                    run_dir, RECORD, CONFIG)
        return
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        expected, original = str(record["config_sha256"]), record["config"]
        extensions = record.get("extensions") or []
        unwritten = str(extensions[-1].get("previous_config_sha256")) if extensions else None
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise RunDirectoryError(f"{record_path}: unreadable run record ({exc}); this run cannot be resumed "
                                "safely") from None
    text = config_path.read_text(encoding="utf-8")
    if _sha(text) == unwritten:  # the last extension was recorded, then stopped before it rewrote config.yaml
        log.warning("%s: the last budget extension was not completed; the run resumes with the budget config.yaml "
                    "holds", config_path)
        return
    if _sha(text) != expected:
        try:
            current = yaml.safe_load(text)
        except yaml.YAMLError:
            current = None
        diffs = diff_configs(original, current) if isinstance(current, dict) else ["(not a valid YAML mapping)"]
        where = ", ".join(diffs[:8]) or "its text"
        raise RunDirectoryError(f"{config_path} was edited after the run started (at {where}); a run resumes only "
                                "with the config it started with: restore it, or start a new run with the edited file")


class RunLock(FolderLock):
    """An exclusive lock on a run directory for one writing process (``with RunLock(run_dir): ...``): the shared
    :class:`hwnas.fileio.FolderLock` on ``RUN_DIR/.lock``; a second writer is refused naming the process that
    holds it, and a killed holder's lock is released by the kernel."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir, why="two writers would journal every trial twice")


def diff_configs(old: object, new: object, prefix: str = "") -> list[str]:
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


#: The packages whose installed versions env.json records (``versions``: read from the installed metadata, which
#: imports nothing; None where not installed).
PACKAGES = ("hwnas", "torch", "timm", "onnx", "onnxruntime", "tensorrt", "pymoo", "optuna", "numpy", "ray")
#: The heavy packages env.json says were imported or not (``imported``): a run imports only what its components use.
HEAVY = ("torch", "timm", "onnx", "onnxruntime", "tensorrt", "pymoo", "optuna", "ray", "sklearn", "matplotlib")
#: The value of a fact that only an imported package can give (``torch_threads``, ``cuda_devices``) when the run's
#: process did not import it: env.json never imports a package to describe it.
NOT_IMPORTED = "not imported"


def _imported_facts() -> dict[str, object]:
    """What this process has imported (:data:`HEAVY`), and torch's threads and CUDA devices where torch is among
    them (:data:`NOT_IMPORTED` where not)."""
    torch = sys.modules.get("torch")
    facts: dict[str, object] = {"imported": {name: name in sys.modules for name in HEAVY}}
    if torch is None:
        facts.update(torch_threads=NOT_IMPORTED, cuda_devices=NOT_IMPORTED)
    else:
        facts["torch_threads"] = torch.get_num_threads()
        facts["cuda_devices"] = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
                                 if torch.cuda.is_available() else [])
    return facts


def environment() -> dict[str, object]:
    """Versions, git sha, host and devices: written to env.json when a run starts (see :func:`write_env`).

    Imports nothing to describe it: ``versions`` are the installed distributions' (from their metadata),
    ``imported`` says which of the heavy packages (:data:`HEAVY`) the run's process had imported, and
    ``torch_threads`` / ``cuda_devices`` are torch's where it had, :data:`NOT_IMPORTED` where not.
    """
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True,
                             text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        sha = None
    facts = _imported_facts()
    return {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": {d: _version(d) for d in PACKAGES},
        "imported": facts["imported"],
        "git_sha": sha,
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": facts["torch_threads"],
        "cuda_devices": facts["cuda_devices"],
    }


def write_env(run_dir: Path) -> None:
    """env.json: kept from the first start; a resume adds its own record beside it (under ``resumes``)."""
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


def note_imports(run_dir: Path) -> None:
    """Bring env.json's newest record (the start's, or the last resume's) up to date with what the run imported
    since it started: ``imported``, ``torch_threads`` and ``cuda_devices`` (a run whose evaluators build torch
    models imports torch at its first trial, after :func:`write_env`). Never raises: env.json is a record, and
    a run's result does not hang on it."""
    path = run_dir / "env.json"
    try:
        env = json.loads(path.read_text())
        resumes = env.get("resumes")
        newest = resumes[-1] if isinstance(resumes, list) and resumes and isinstance(resumes[-1], dict) else env
        facts = _imported_facts()
        if all(newest.get(k) == v for k, v in facts.items()):
            return
        newest.update(facts)
        atomic_write(path, json.dumps(env, indent=2) + "\n")
    except (OSError, ValueError, AttributeError) as exc:
        log.warning("%s: could not record what the run imported (%s)", path, exc)


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one; else what :mod:`platform` says)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def check_run_dir(run_dir: Path) -> None:
    """Raise :class:`RunDirectoryError` naming what is missing when ``run_dir`` is not a run with a journal
    (what ``nas report --html`` and ``nas export`` read)."""
    if not run_dir.is_dir():
        raise RunDirectoryError(f"{run_dir} is not a run directory (no such folder)")
    if not (run_dir / "config.yaml").is_file():
        raise RunDirectoryError(f"{run_dir} is not a run directory (no config.yaml)")
    if not (run_dir / "trials.jsonl").is_file():
        raise RunDirectoryError(f"{run_dir} has no trials.jsonl: the run has not recorded a trial yet "
                                f"(continue it with nas run --resume {run_dir})")
