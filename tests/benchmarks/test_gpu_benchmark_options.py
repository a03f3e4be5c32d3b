"""The benchmark options the GPU figures use, run here on the CPU: the torch backend in the latency-table
benchmark, space parameters and per-step sandwich timing in the supernet-overhead benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import latency_tables
import pytest
import supernet_overhead


def test_latency_tables_times_with_the_torch_backend_and_records_it(tmp_path: Path) -> None:
    out = tmp_path / "lt"
    assert latency_tables.main(["--backend", "torch", "--only", "nb201", "--networks", "8", "--repeat-check", "2",
                                "--warmup", "1", "--repeats", "3", "--min-time", "0", "--rounds", "1",
                                "--space-param", "nb201.cells_per_stage=1", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["backend"], summary["backend_device"]) == ("torch", "cpu")
    (row,) = summary["rows"]
    assert row["space_params"] == {"cells_per_stage": 1}
    assert len(row["measured_ms"]) == 8 and all(ms > 0 for ms in row["measured_ms"])
    # the table itself was profiled by torch, not onnxruntime
    table = json.loads((out / "nb201.json").read_text())
    assert table["context"]["runtime"] == "torch"


def test_supernet_overhead_takes_space_parameters_and_times_each_sandwich_step(tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    assert supernet_overhead.main(["--spaces", "nb201", "--batch", "2", "--steps", "1", "--repeats", "1",
                                   "--sandwich-steps", "3", "--threads", "1",
                                   "--space-param", "nb201.resolution=16", "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert row["input"] == [3, 16, 16] and row["space_params"]["resolution"] == 16
    assert len(row["sandwich_step_ms_each"]) == 3
    assert row["overhead_ratio"] > 0 and row["sandwich_step_ms"] > 0
    # the first sandwich step meets the supernet's convolution configurations for the first time
    new = row["sandwich_new_conv_configs_each"]
    assert len(new) == 3 and new[0] > 0 and sum(new) == row["conv_configs_seen"]


def test_the_conv_config_counter_counts_distinct_configurations_once() -> None:
    import torch

    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    counter = supernet_overhead.conv_config_counter()
    with torch.no_grad(), counter:
        for size in (8, 8, 6, 8):  # two input shapes
            conv(torch.zeros(1, 3, size, size))
        torch.nn.functional.conv2d(torch.zeros(1, 3, 8, 8), conv.weight, stride=2)  # another stride
        torch.nn.functional.conv2d(torch.zeros(1, 3, 8, 8), conv.weight[:2])  # another weight shape
        torch.relu(torch.zeros(2))  # not a convolution
    assert counter.new == len(counter.seen) == 4


def test_supernet_overhead_refuses_a_parameter_of_an_unknown_space() -> None:
    with pytest.raises(SystemExit):
        supernet_overhead.main(["--space-param", "resnet.depth=3"])
