"""Joining a Ray cluster: Ray imported with one clear error when it is missing, an address checked within a
bounded time (never a hang), and how many evaluations a cluster's live nodes hold at once.

Imports nothing heavy: Ray is imported only by :func:`import_ray`. Used by the ``ray`` executor, ``nas sweep``
and ``nas latency profile --ray-resource``.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from hwnas.errors import HwnasError

#: The address a local Ray instance binds its nodes to. Ray replaces 127.0.0.1 (and localhost) by the machine's
#: outward address so other machines could join, which sends a purely local instance's traffic through that
#: interface; any other loopback address is taken as given and keeps it on the loopback device (Linux routes all
#: of 127.0.0.0/8 there; elsewhere Ray keeps 127.0.0.1 as it is).
LOOPBACK = "127.0.0.2" if sys.platform.startswith("linux") else "127.0.0.1"

#: What to install for everything Ray: the project's extra.
RAY_EXTRA = 'pip install -e ".[ray]" (or pip install "ray[tune]")'


class ClusterError(HwnasError):
    """Ray is missing, or a cluster cannot be reached or joined."""


def import_ray() -> ModuleType:
    """The ``ray`` module, or one clear error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise ClusterError(f"this needs Ray: {RAY_EXTRA}") from None
    return ray


def ray_temp_dir() -> Path:
    """Ray's default temporary folder, as Ray finds it: ``$RAY_TMPDIR/ray``, else (Linux) ``$TMPDIR/ray``, else
    ``/tmp/ray`` (the system's temporary folder elsewhere than Linux and macOS)."""
    if "RAY_TMPDIR" in os.environ:
        base = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        base = os.environ["TMPDIR"]
    elif sys.platform.startswith(("linux", "darwin")):
        base = "/tmp"
    else:
        import tempfile

        base = tempfile.gettempdir()
    return Path(base) / "ray"


def _raylet_gcs_addresses() -> list[str]:
    """The GCS addresses that the raylet processes of this machine were started with (Ray's last resort for
    ``auto``), read from ``/proc``; empty where there is no ``/proc``."""
    found: set[str] = set()
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # gone, or not ours to read
            continue
        if not args or "raylet" not in os.path.basename(args[0]):
            continue
        for word in (w for a in args for w in a.split(" ")):
            if word.startswith("--gcs-address="):
                value = word.split("=", 1)[1]
                if value not in ("", "None"):
                    found.add(value)
    return sorted(found)


def find_auto_address() -> tuple[str | None, str]:
    """Where Ray's address ``auto`` leads, found as ``ray.init(address="auto")`` finds it: ``$RAY_ADDRESS`` when it
    is set and not empty, else the cluster that the last ``ray start`` of this machine recorded in
    ``<Ray's temporary folder>/ray_current_cluster``, else the GCS address of a raylet process running here.

    Returns:
        (the address, or None when nothing was found; where it was found, or where it was looked for).
    """
    env = os.environ.get("RAY_ADDRESS", "")
    if env and env != "auto":
        return env, f"RAY_ADDRESS={env}"
    record = ray_temp_dir() / "ray_current_cluster"
    try:
        recorded = record.read_text(errors="replace").strip() if record.is_file() else ""
    except OSError:
        recorded = ""
    if recorded:
        return recorded, f"recorded by ray start in {record}"
    raylets = _raylet_gcs_addresses()
    if raylets:
        return raylets[0], "a raylet process of this machine"
    return None, f"RAY_ADDRESS is not set, there is no {record} (written by ray start) and no raylet process runs here"


def check_reachable(address: str, timeout_s: float) -> None:
    """A ``HOST:PORT`` or ``ray://HOST:PORT`` address must accept a TCP connection within ``timeout_s`` and answer
    as Ray does (``local`` starts Ray and passes). ``auto`` is resolved as Ray resolves it
    (:func:`find_auto_address`) and the address found is checked the same way.

    Raises:
        ClusterError: The address is malformed, does not resolve, nothing answers in time (or, for ``auto``, no
            cluster is found).
    """
    if address == "local":
        return
    shown = address
    if address == "auto":
        found, where = find_auto_address()
        if found is None:
            if not Path("/proc").is_dir():  # no process table to look in: Ray may still find one
                return
            raise ClusterError(f"Ray address auto finds no running cluster ({where}): start one with ray start --head, "
                               "name it with RAY_ADDRESS or HOST:PORT, or use address local")
        if found == "local":  # RAY_ADDRESS=local: Ray starts its own
            return
        address, shown = found, f"auto ({found}, {where})"
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClusterError(f"Ray address {shown!r} is not local, auto, HOST:PORT or ray://HOST:PORT")
    deadline = time.monotonic() + timeout_s
    try:
        conn = socket.create_connection((host, int(port)), timeout=timeout_s)
    except OSError as exc:
        raise ClusterError(f"no Ray cluster answers at {shown} within {timeout_s:g} s ({exc.strerror or exc}); "
                           "start one with: ray start --head --port " + port) from None
    with conn:
        if not _speaks_grpc(conn, deadline):
            raise ClusterError(f"{shown} accepts connections but does not answer as Ray does (no gRPC greeting "
                               f"within {timeout_s:g} s): is it a Ray head's port (ray start --head prints it)?")


#: An HTTP/2 client's opening (the connection preface and an empty SETTINGS frame): what gRPC, and so every Ray
#: endpoint (the GCS, the Ray Client server), answers at once with a SETTINGS frame of its own.
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _speaks_grpc(conn: socket.socket, deadline: float) -> bool:
    """Whether the peer answers an HTTP/2 opening with a SETTINGS frame before ``deadline`` (Ray itself would wait
    on a silent peer for minutes, retrying)."""
    try:
        conn.settimeout(max(0.05, deadline - time.monotonic()))
        conn.sendall(_HTTP2_HELLO)
        head = b""
        while len(head) < 9:
            conn.settimeout(max(0.05, deadline - time.monotonic()))
            chunk = conn.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:  # a timeout included
        return False
    return head[3] == 4 and int.from_bytes(head[5:9], "big") & 0x7FFFFFFF == 0  # SETTINGS, on stream 0


def connect(address: str, *, num_cpus: int | None = None, timeout_s: float = 15.0) -> bool:
    """Join (or, for ``local``, start) Ray unless this process already has; returns whether it did (then the
    caller shuts it down).

    Raises:
        ClusterError: Ray missing, the address not answering, or Ray refusing to start or join (its first line).
    """
    ray = import_ray()
    check_reachable(address, timeout_s)
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address == "local":
        kwargs.update(num_cpus=num_cpus, num_gpus=0, _node_ip_address=LOOPBACK)
    else:
        kwargs["address"] = address
    try:
        ray.init(**kwargs)
    except Exception as exc:  # ConnectionError, RuntimeError, an authentication error, ...
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ClusterError(f"cannot start or join Ray at {address}: {first[:300]}") from None
    return True


def capacity(nodes: Sequence[dict[str, Any]], wanted: dict[str, float]) -> int:
    """How many evaluations holding ``wanted`` each the live nodes of a cluster can run at once (0: no node
    offers every resource in the amount asked)."""
    total = 0
    for node in nodes:
        if not node.get("Alive", node.get("alive", False)):
            continue
        have = node.get("Resources") or node.get("resources") or {}
        fits = [have.get(k, 0.0) / v for k, v in wanted.items() if v > 0]
        total += int(min(fits) + 1e-9) if fits else 1_000_000
    return total


def offered_resources(nodes: Sequence[dict[str, Any]]) -> list[str]:
    """The resource names the live nodes advertise (CPU, GPU, custom ones), without Ray's internal ones."""
    return sorted({k for n in nodes if n.get("Alive", n.get("alive", False)) for k in (n.get("Resources") or {})
                   if not k.startswith(("node:", "memory", "object_store_memory", "accelerator_type"))})
