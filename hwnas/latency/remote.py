"""``nas latency profile --ray-resource NAME``: profile a space on the node of a Ray cluster that has the hardware.

The node advertises the hardware as a custom resource (``ray start --address HEAD --resources '{"jetson_orin":
1}'``). One Ray task, placed by that resource, rebuilds the space and the backend from plain data (registry
names and parameters), runs :func:`~hwnas.latency.tables.profile.profile_space` there with the backend that node
has, and returns the table as JSON text; the driver writes it to ``--out``. The table's provenance is the
remote host's (its CPU and name, recorded where the units were measured) plus the Ray node that measured it. A
table already at ``--out`` travels with the task, so an interrupted remote profile resumes as a local one does.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.errors import ConfigError

if TYPE_CHECKING:
    from hwnas.latency.measure import MeasureProtocol
    from hwnas.search_spaces.base import SearchSpace

log = logging.getLogger(__name__)


def _profile_here(space_name: str, space_params: dict[str, Any], backend_name: str, backend_kwargs: dict[str, Any],
                  device: str, protocol: dict[str, Any], in_context: bool | str,
                  existing: str | None) -> dict[str, Any]:
    """The body of the remote task: profile on this node; the table as text and what the run did."""
    import tempfile

    import ray

    from hwnas.latency.backends import BACKENDS
    from hwnas.latency.measure import MeasureProtocol
    from hwnas.latency.tables import profile_space
    from hwnas.latency.tables.profile import unit_profiled
    from hwnas.search_spaces import SPACES

    space = SPACES.create(space_name, space_params)
    backend = BACKENDS.get(backend_name)(**backend_kwargs)
    with tempfile.TemporaryDirectory(prefix="hwnas-remote-profile-") as tmp:
        out = Path(tmp) / "table.json"
        if existing is not None:
            out.write_text(existing, encoding="utf-8")
        rep = profile_space(unit_profiled(space), backend, device=device, out=out,
                            protocol=MeasureProtocol(**protocol), in_context=in_context)
        return {"table": out.read_text(encoding="utf-8"), "measured": rep.measured, "reused": rep.reused,
                "failed": rep.failed, "wall_s": rep.wall_s, "measure_s": rep.measure_s,
                "node_id": ray.get_runtime_context().get_node_id()}


def profile_remote(space: SearchSpace, backend_name: str, backend_kwargs: dict[str, Any], *, resource: str,
                   address: str, device: str, out: Path, protocol: MeasureProtocol, in_context: bool | str = False
                   ) -> dict[str, Any]:
    """Profile ``space`` on a node of the Ray cluster at ``address`` that offers ``resource``; write the table to
    ``out`` (atomically) and return what the remote run did (``measured``, ``reused``, ``failed``, ``wall_s``,
    ``measure_s``, ``node``).

    Raises:
        ConfigError: No live node offers ``resource`` (named with the resources the cluster has).
        ClusterError: Ray missing, or the address not answering.
    """
    from hwnas.cluster import capacity, connect, import_ray, offered_resources
    from hwnas.latency.tables import LatencyTable, space_params_of

    ray = import_ray()
    owns = connect(address)
    try:
        nodes = ray.nodes()
        if capacity(nodes, {resource: 1.0}) == 0:
            raise ConfigError(f"--ray-resource {resource}: no live node of the Ray cluster offers it (resources "
                              f"there: {', '.join(offered_resources(nodes)) or 'none'})")
        existing = out.read_text(encoding="utf-8") if out.is_file() else None
        task = ray.remote(_profile_here).options(num_cpus=1, resources={resource: 1.0}, max_retries=0)
        result = ray.get(task.remote(space.name, space_params_of(space), backend_name, backend_kwargs, device,
                                     protocol.to_dict(), in_context, existing))
        node: dict[str, Any] = next((n for n in nodes if n.get("NodeID") == result["node_id"]), {})
    finally:
        if owns:
            ray.shutdown()
    table = LatencyTable.from_dict(json.loads(result.pop("table")), source=str(out))
    result["node"] = {"node_id": result.pop("node_id"), "address": node.get("NodeManagerAddress"),
                      "resources": {k: v for k, v in (node.get("Resources") or {}).items()
                                    if not k.startswith(("node:", "memory", "object_store_memory"))}}
    table.provenance = {**table.provenance, "ray_resource": resource, "ray_node": result["node"]}
    table.save(out)
    return result
