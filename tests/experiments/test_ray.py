"""The ray executor on a real local Ray cluster: ``ray start --head`` on the loopback device with 2 CPUs and a
second node joined by address with a custom resource. No mocks of Ray; the cluster is stopped afterwards.

The nodes use 127.0.0.2 (``hwnas.cluster.LOOPBACK``): Ray rewrites 127.0.0.1 into the machine's outward address,
and every byte of these tests stays on the loopback device."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import hwnas.testing  # noqa: F401  (registers the "fake" evaluator)
from hwnas.cluster import LOOPBACK
from hwnas.errors import ConfigError
from hwnas.experiments import load_run, run_experiment

from ..evaluators import test_supernet as supernet_tests
from .conftest import TINY, TINY_SPACE
from .test_executors import _journal, _summary, _yaml

pytestmark = pytest.mark.xdist_group("ray")  # one Ray instance at a time (see addopts in pyproject.toml)

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e \".[ray]\" (the dev extra has it)")

RAY = str(Path(sys.executable).with_name("ray"))


#: A supernet trained for a few seconds on digits, and an experiment scoring subnets with it.
tiny_checkpoint = supernet_tests.checkpoint  # a module-scoped fixture, shared with the supernet evaluator's tests
experiment_yaml = supernet_tests.experiment_yaml


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _ray(*args: str, env: dict[str, str]) -> None:
    proc = subprocess.run([RAY, *args], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def cluster():
    """A head node (2 CPUs) and a worker node (1 CPU, the custom resource ``probe_board``) on LOOPBACK, with
    Ray's token authentication on (a token of this test's own, in a file every node and the driver read)."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="hwr")  # short: Ray's unix sockets live under it
    token = Path(temp) / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **auth}
    common = [f"--node-ip-address={LOOPBACK}", f"--temp-dir={temp}", "--disable-usage-stats"]
    try:
        _ray("start", "--head", f"--port={port}", "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
             *common, env=env)
        _ray("start", f"--address={LOOPBACK}:{port}", "--num-cpus=1", "--num-gpus=0",
             '--resources={"probe_board": 1}', *common, env=env)
        yield f"{LOOPBACK}:{port}", env
    finally:
        _stop_cluster(temp)
        shutil.rmtree(temp, ignore_errors=True)


def _stop_cluster(temp: str) -> None:
    """Stop this cluster's processes only (each carries its temp dir on its command line); ``ray stop`` would stop
    every Ray process of the machine, another test run's cluster included."""
    def ours() -> list[int]:
        pids = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit() and int(proc.name) != os.getpid():
                try:
                    if temp.encode() in (proc / "cmdline").read_bytes():
                        pids.append(int(proc.name))
                except OSError:
                    pass
        return pids

    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        for pid in ours():
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while ours() and time.monotonic() < deadline:
            time.sleep(0.2)


def _nas_run(path: Path, run_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``nas run`` as its own driver process (with the cluster's token in its environment, as a user's shell
    would have it); the fake evaluators are registered first."""
    code = ("import sys, hwnas.testing; from hwnas.cli import main; "
            "raise SystemExit(main(['run', sys.argv[1], '--run-dir', sys.argv[2], '--quiet']))")
    return subprocess.run([sys.executable, "-c", code, str(path), str(run_dir)], capture_output=True, text=True,
                          timeout=600, env=env)


def _remote(path: Path, run_dir: Path, env: dict[str, str]) -> list:
    proc = _nas_run(path, run_dir, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return sorted(load_run(run_dir)[1], key=lambda t: t.number)  # journal order is completion order


def _ray_executor(address: str, **extra: str) -> str:
    more = "".join(f", {k}: {v}" for k, v in extra.items())
    return f"{{name: ray, params: {{address: '{address}', max_concurrent: 2{more}}}}}"


@pytest.mark.slow
def test_a_run_on_the_cluster_equals_the_local_run(cluster, tmp_path):
    address, env = cluster
    remote = _remote(_yaml(tmp_path, executor=_ray_executor(address)), tmp_path / "ray", env)
    local = run_experiment(_yaml(tmp_path), run_dir=tmp_path / "local")
    assert _summary(remote) == _summary(local.trials)


@pytest.mark.slow
def test_training_on_the_cluster_with_the_dataset_from_the_object_store_equals_local(cluster, tmp_path):
    """Real training (digits, the tiny space): the actors get the dataset the driver loaded, through the object
    store, and train exactly what a local run trains."""
    address, env = cluster
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.replace("budget:\n  trials: 10\n  batch_size: 4", "budget:\n  trials: 4\n  batch_size: 4")
                    + f"executor: {_ray_executor(address)}\n")
    remote = _remote(path, tmp_path / "ray", env)
    local = run_experiment(path, overrides=["executor.name=local", "executor.params={}"], run_dir=tmp_path / "local")
    assert len(remote) == 4 and all("top1" in t.metrics for t in remote if t.status == "ok")
    assert _summary(remote) == _summary(local.trials)


@pytest.mark.slow
def test_a_supernet_search_on_the_cluster_ships_the_checkpoint_and_equals_local(cluster, tmp_path, tiny_checkpoint):
    """The supernet evaluator's checkpoint goes to the actors through the object store (each writes it once to a
    folder of its own); the inherited-weight scores equal a local run's."""
    address, env = cluster
    checkpoint = tiny_checkpoint
    path = experiment_yaml(tmp_path, checkpoint)
    path.write_text(path.read_text().replace("export: {enabled: true}", "export: {enabled: false}")
                    + f"executor: {_ray_executor(address)}\n")
    remote = _remote(path, tmp_path / "ray", env)
    local = run_experiment(path, overrides=["executor.name=local", "executor.params={}"], run_dir=tmp_path / "local")
    assert len(remote) == 6 and all(t.status == "ok" for t in remote)
    assert _summary(remote) == _summary(local.trials)


@pytest.mark.slow
def test_a_function_evaluator_is_rebuilt_by_import_path_in_the_actors_and_equals_local(cluster, tmp_path):
    """The ``function`` evaluator (issue 46) goes to the Ray actors as its import path, as to process workers:
    the cluster's trials equal a local run's, trial for trial."""
    import yaml

    from ..evaluators.test_function import experiment

    address, env = cluster
    expensive = {"name": "function", "params": {"callable": "hwnas.testing.scores:gene_count",
                                                "provides": ["gene_sum", "nonzero"], "cheap": False}}
    config = experiment(tmp_path, expensive,
                        executor={"name": "ray", "params": {"address": address, "max_concurrent": 2}})
    path = tmp_path / "fn_ray.yaml"
    path.write_text(yaml.safe_dump(config))
    remote = _remote(path, tmp_path / "ray", env)
    local = run_experiment(experiment(tmp_path, expensive), run_dir=tmp_path / "local")
    assert len(remote) == 12 and all(t.status == "ok" for t in remote)
    assert _summary(remote) == _summary(local.trials)


def test_shipped_files_are_written_locally_and_the_spec_points_there(tmp_path, tiny_checkpoint):
    from hwnas.experiments.executors import ComponentSpec, PipelineSpec, shared_files, with_local_files

    checkpoint = tiny_checkpoint
    ev = ComponentSpec("supernet", {"checkpoint": str(checkpoint), "calib_images": 64},
                       "hwnas.evaluators.supernet")
    spec = PipelineSpec(space=ComponentSpec("mbv3", {}, "hwnas.search_spaces.mbv3"), dataset=None,
                        artifacts_dir=None, seed=0, evaluators=(ev,), names=("evaluators[1] (supernet)",),
                        fingerprints=("x",))
    files = shared_files(spec)
    assert list(files) == ["0:checkpoint"] and files["0:checkpoint"].name == "supernet.safetensors"
    local = with_local_files(spec, {k: (p.name, p.read_bytes()) for k, p in files.items()}, tmp_path / "mine")
    moved = Path(local.evaluators[0].params["checkpoint"])
    assert moved.parent.parent == tmp_path / "mine" and moved.read_bytes() == files["0:checkpoint"].read_bytes()
    assert local.evaluators[0].params["calib_images"] == 64 and spec.evaluators[0].params["checkpoint"] == str(
        checkpoint)
    # an ensemble's list of checkpoints: each shipped, each position pointing at its own copy
    ens = ComponentSpec("supernet", {"checkpoint": str(checkpoint), "ensemble": [str(checkpoint), str(checkpoint)]},
                        "hwnas.evaluators.supernet")
    spec2 = PipelineSpec(space=spec.space, dataset=None, artifacts_dir=None, seed=0, evaluators=(ens,),
                         names=spec.names, fingerprints=spec.fingerprints)
    files2 = shared_files(spec2)
    assert sorted(files2) == ["0:checkpoint", "0:ensemble.0", "0:ensemble.1"]
    local2 = with_local_files(spec2, {k: (p.name, p.read_bytes()) for k, p in files2.items()}, tmp_path / "ens")
    moved2 = local2.evaluators[0].params["ensemble"]
    assert [Path(p).parent.name for p in moved2] == ["0-ensemble.0", "0-ensemble.1"]
    assert all(Path(p).read_bytes() == files2["0:checkpoint"].read_bytes() for p in moved2)


def test_an_actor_removes_its_copy_of_the_shipped_files_once_its_evaluators_hold_them(tmp_path, tiny_checkpoint,
                                                                                       monkeypatch):
    """Actors are killed, not stopped, at the end of a run: a copy kept for their lifetime was left in the node's
    temp folder run after run. The worker body (the class Ray wraps) deletes it once the supernet is loaded."""
    import numpy as np

    from hwnas.experiments.api import prepare
    from hwnas.experiments.executors import shared_files
    from hwnas.experiments.executors.ray import _RayWorker

    exp, _, _ = prepare(experiment_yaml(tmp_path, tiny_checkpoint))
    spec = exp.pipeline().spec
    files = {k: (p.name, p.read_bytes()) for k, p in shared_files(spec).items()}
    temp = tmp_path / "node-tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    worker = _RayWorker(spec.to_json(), 1, None, files)
    assert worker.ready()[0] is None, worker.ready()[0]
    assert list(temp.iterdir()) == []
    arch = exp.space.sample(np.random.default_rng(0))
    _, metrics, error, _ = worker.evaluate(0, arch.to_dict())  # scored from the weights in memory
    assert error is None and 0.0 <= metrics["top1"] <= 100.0


@pytest.mark.slow
def test_a_ray_worker_killed_mid_run_is_replaced_and_nothing_is_lost(cluster, tmp_path):
    address, env = cluster
    marks = tmp_path / "killed"
    trials = _remote(_yaml(tmp_path, expensive=f"kill_fraction: 0.3, kill_once_dir: {marks}",
                           executor=_ray_executor(address)), tmp_path / "run", env)
    assert list(marks.iterdir()), "no Ray worker was killed: the test proves nothing"
    assert all(t.status == "ok" for t in trials)  # every killed evaluation succeeded on its retry
    rows = _journal(tmp_path / "run")
    assert len(rows) == 18 and len({r["arch_id"] for r in rows}) == 18  # nothing lost, nothing twice
    local = run_experiment(_yaml(tmp_path), run_dir=tmp_path / "local")
    assert _summary(local.trials) == _summary(trials)


@pytest.mark.slow
def test_evaluations_go_to_the_node_that_offers_the_resource(cluster, tmp_path):
    """One node has one ``probe_board``: the two evaluations asked for at once become one, on that node."""
    address, env = cluster
    executor = _ray_executor(address, resources_per_eval="{CPU: 1, probe_board: 1}")
    proc = _nas_run(_yaml(tmp_path, executor=executor, trials=6), tmp_path / "run", env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "holds 1 evaluation(s)" in proc.stderr and "running 1" in proc.stderr
    trials = load_run(tmp_path / "run")[1]
    assert len(trials) == 6 and all(t.status == "ok" for t in trials)


def test_capacity_counts_what_live_nodes_hold_at_once():
    from hwnas.cluster import capacity

    nodes = [{"Alive": True, "Resources": {"CPU": 2.0, "GPU": 1.0}},
             {"Alive": True, "Resources": {"CPU": 1.0, "probe_board": 1.0}},
             {"Alive": False, "Resources": {"CPU": 64.0, "GPU": 8.0}}]
    assert capacity(nodes, {"CPU": 1.0}) == 3
    assert capacity(nodes, {"CPU": 1.0, "GPU": 0.25}) == 2  # the head: 2 CPUs bind before 4 quarter-GPUs
    assert capacity(nodes, {"CPU": 0.5, "probe_board": 1.0}) == 1
    assert capacity(nodes, {"CPU": 1.0, "jetson_orin": 1.0}) == 0


@pytest.mark.slow
def test_on_device_measurement_runs_on_the_node_with_the_device(cluster, tmp_path):
    """ort_latency made expensive (cheap: false) is an evaluation the executor sends: with the board's resource
    asked for, every measurement runs on the node that advertises it."""
    address, env = cluster
    path = tmp_path / "board.yaml"
    path.write_text("name: board\nseed: 0\n" + TINY_SPACE + f"""\
evaluators:
  - name: complexity
  - name: ort_latency
    params: {{cheap: false, device: probe_board, warmup: 1, repeats: 3}}
objectives:
  - {{metric: params_m, direction: min, reference: 0.05}}
  - {{metric: "latency_ms@probe_board", direction: min, reference: 10}}
strategy: {{name: random}}
budget: {{trials: 4, batch_size: 4}}
export: {{enabled: false}}
executor: {_ray_executor(address, resources_per_eval="{CPU: 1, probe_board: 1}")}
""")
    trials = _remote(path, tmp_path / "run", env)
    assert len(trials) == 4 and all(t.status == "ok" and t.metrics["latency_ms@probe_board"] > 0 for t in trials)


def test_resources_no_node_offers_are_refused_before_the_run(cluster, tmp_path):
    address, env = cluster
    executor = _ray_executor(address, resources_per_eval="{CPU: 1, jetson_orin: 1}")
    proc = _nas_run(_yaml(tmp_path, executor=executor), tmp_path / "run", env)
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and "jetson_orin" in line and "no live node" in line and "probe_board" in line
    assert not (tmp_path / "run" / "trials.jsonl").exists() or not _journal(tmp_path / "run")


def test_an_unreachable_address_is_a_clear_error_not_a_hang(tmp_path):
    port = _free_port()  # nothing listens there
    start = time.monotonic()
    # found with the inputs' checks, located at the file's executor.address, before any run folder is made
    with pytest.raises(ConfigError, match=rf"fake\.yaml:\d+: executor\.address: no Ray cluster answers at "
                                          rf"{LOOPBACK}:{port} within 2 s"):
        run_experiment(_yaml(tmp_path, executor=_ray_executor(f"{LOOPBACK}:{port}", connect_timeout_s="2")),
                       run_dir=tmp_path / "run")
    assert time.monotonic() - start < 60
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_auto_finds_a_running_cluster_as_ray_does_and_its_probe_passes(cluster, monkeypatch, tmp_path):
    """``auto`` with RAY_ADDRESS naming the head, and with nothing but the cluster's raylets to find it by (Ray's
    last resort; ``ray start --temp-dir`` records the cluster in its own folder, not the default one)."""
    from hwnas.cluster import check_reachable, find_auto_address

    address, _ = cluster
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no ray_current_cluster there
    monkeypatch.setenv("RAY_ADDRESS", address)
    check_reachable("auto", 10.0)
    monkeypatch.delenv("RAY_ADDRESS")
    found, where = find_auto_address()
    assert where == "a raylet process of this machine" and found is not None
    check_reachable("auto", 10.0)  # this cluster's, or another one running here: a Ray GCS either way


def test_ray_missing_is_one_line_naming_the_extra(monkeypatch):
    from hwnas.cluster import ClusterError, import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray gives: ImportError
    with pytest.raises(ClusterError, match=r'pip install -e "\.\[ray\]"'):
        import_ray()


TINY_SPACE_ARGS = ["--space", "mbv3", "--space-param", "resolution=8", "--space-param", "head_channels=16",
                   "--space-param", "stages=[{channels: 8, stride: 1, depths: [1, 2]}, "
                                    "{channels: 16, stride: 2, depths: [1, 2], se: true}]"]


@pytest.mark.slow
def test_a_table_is_profiled_on_the_node_with_the_custom_resource(cluster, tmp_path):
    address, env = cluster
    out = tmp_path / "board.json"
    args = [sys.executable, "-m", "hwnas.cli", "latency", "profile", *TINY_SPACE_ARGS, "--device", "board",
            "--out", str(out), "--warmup", "1", "--repeats", "3", "--min-time", "0",
            "--ray-resource", "probe_board", "--ray-address", address]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = json.loads(out.read_text())
    assert len(table["entries"]) == 29 and not table["failed"]
    prov = table["provenance"]
    assert prov["ray_resource"] == "probe_board" and "probe_board" in prov["ray_node"]["resources"]
    assert prov["cpu"] and prov["host"] and table["context"]["device"] == "board"
    assert f"measured on Ray node {LOOPBACK}" in proc.stdout
    # a resource nobody offers: one line before anything is measured
    bad = subprocess.run([*args[:-4], "--ray-resource", "jetson_orin", "--ray-address", address,
                          "--out", str(tmp_path / "none.json")], capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 2 and "no live node" in bad.stderr and "probe_board" in bad.stderr
    assert not (tmp_path / "none.json").exists()


@pytest.mark.slow
def test_a_multi_fidelity_run_on_the_cluster_equals_the_local_run(cluster, tmp_path, shared_data):
    """Each rung's evaluator rebuilt in the actors, each task naming its rung: the journal of a multi-fidelity run on
    the cluster is the local run's (wall times and completion order aside)."""
    from .test_multi_fidelity import _lines, _nb201

    address, env = cluster
    local = run_experiment(_nb201(tmp_path, shared_data), run_dir=tmp_path / "local")
    path = _nb201(tmp_path, shared_data, executor=_ray_executor(address), name="ray.yaml")
    proc = _nas_run(path, tmp_path / "ray", env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = _lines(tmp_path / "ray")
    assert lines == _lines(local.run_dir)
    assert {d["rung"] for d in lines} == {0, 1, 2}
