"""Ray's ``auto`` address, resolved as ``ray.init`` resolves it and then probed like an explicit address: real
sockets and real environment variables, no Ray process of this test's own and no mock of Ray."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from hwnas.cluster import LOOPBACK, ClusterError, _raylet_gcs_addresses, check_reachable, find_auto_address


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def ray_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No RAY_ADDRESS, and Ray's temporary folder under tmp_path (empty): what ``auto`` reads is this test's."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    return tmp_path / "ray"


def test_auto_follows_ray_address_and_probes_it_within_the_timeout(ray_env: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    address = f"{LOOPBACK}:{_free_port()}"  # nothing listens there
    monkeypatch.setenv("RAY_ADDRESS", address)
    assert find_auto_address() == (address, f"RAY_ADDRESS={address}")
    start = time.monotonic()
    with pytest.raises(ClusterError, match=rf"^no Ray cluster answers at auto \({address}, RAY_ADDRESS={address}\) "
                                           "within 2 s"):
        check_reachable("auto", 2.0)
    assert time.monotonic() - start < 30
    monkeypatch.setenv("RAY_ADDRESS", "local")  # Ray starts its own: nothing to probe
    check_reachable("auto", 2.0)
    monkeypatch.setenv("RAY_ADDRESS", "not an address")
    with pytest.raises(ClusterError, match=r"Ray address 'auto \(not an address, RAY_ADDRESS=not an address\)' is "
                                           "not local, auto, HOST:PORT"):
        check_reachable("auto", 2.0)


def test_auto_reads_the_cluster_ray_start_recorded_and_a_silent_one_fails_in_time(ray_env: Path) -> None:
    silent = socket.socket()  # accepts connections (the kernel's backlog) and never says a word
    silent.bind((LOOPBACK, 0))
    silent.listen(8)
    address = f"{LOOPBACK}:{silent.getsockname()[1]}"
    ray_env.mkdir()
    (ray_env / "ray_current_cluster").write_text(address + "\n")
    try:
        assert find_auto_address() == (address, f"recorded by ray start in {ray_env / 'ray_current_cluster'}")
        start = time.monotonic()
        with pytest.raises(ClusterError, match=rf"^auto \({address}, recorded by ray start in .*ray_current_cluster\) "
                                               "accepts connections but does not answer as Ray does"):
            check_reachable("auto", 2.0)
        assert time.monotonic() - start < 30
    finally:
        silent.close()


def test_auto_with_no_cluster_anywhere_is_one_line_within_the_timeout(ray_env: Path) -> None:
    running = _raylet_gcs_addresses()
    if running:  # Ray's last resort: a raylet of this machine, which auto rightly joins
        pytest.skip(f"a Ray cluster runs on this machine ({', '.join(running)}): auto would join it")
    start = time.monotonic()
    with pytest.raises(ClusterError, match=r"^Ray address auto finds no running cluster \(RAY_ADDRESS is not set, "
                                           rf"there is no {ray_env / 'ray_current_cluster'} \(written by ray start\) "
                                           r"and no raylet process runs here\)"):
        check_reachable("auto", 2.0)
    assert time.monotonic() - start < 30
