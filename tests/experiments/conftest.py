from __future__ import annotations

from pathlib import Path

import pytest

#: A MobileNetV3-style space small enough that a network builds, trains and exports in well under a second.
TINY_SPACE = """\
space:
  name: mbv3
  params:
    resolution: 8
    head_channels: 16
    stages:
      - {channels: 8, stride: 1, depths: [1, 2]}
      - {channels: 16, stride: 2, depths: [1, 2], se: true}
"""

TINY = """\
name: tiny
seed: 3
""" + TINY_SPACE + """\
dataset:
  name: digits
  max_images: 240
evaluators:
  - name: complexity
  - name: train
    params: {epochs: 1, batch_size: 32}
objectives:
  - {metric: top1, direction: max}
  - {metric: flops_m, direction: min}
constraints:
  - {metric: params_m, max: 0.05}
strategy:
  name: nsga2
  params: {pop_size: 4}
budget:
  trials: 10
  batch_size: 4
export:
  enabled: true
"""


@pytest.fixture
def tiny_yaml(tmp_path: Path) -> Path:
    """A deterministic experiment that runs in seconds (no latency measurement: every metric is reproducible)."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY + f"output:\n  root: {tmp_path / 'runs'}\n")
    return path
