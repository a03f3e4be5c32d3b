"""A search over a space smaller than its budget stops early, saying why, with every strategy kind: pymoo's when it
makes no new offspring, the mutating ones when no gene can change."""

from __future__ import annotations

import pytest

from hwnas.experiments.api import run_experiment

SMALL = """\
name: small
seed: 0
space:
  name: mbv3
  params: {{resolution: 8, head_channels: 16, kernels: {kernels}, expand_ratios: {expand}, stages: [{{channels: 8,
    depths: [1]}}]}}
evaluators:
  - name: complexity
objectives:
  - {{metric: params_m, direction: min, reference: 1}}
  - {{metric: flops_m, direction: min, reference: 10}}
strategy: {{name: {strategy}{params}}}
budget: {{trials: 40, batch_size: 4}}
export: {{enabled: false}}
output: {{root: {root}}}
"""


@pytest.mark.parametrize(("strategy", "params", "kernels", "expand", "members"), [
    ("nsga2", ", params: {pop_size: 4}", [3, 5], [3, 4], 4),   # pymoo's ask() comes back empty
    ("evolution", "", [3], [3], 1),                             # no gene has a second choice to mutate to
    ("nsga2", "", [3], [3], 1),
])
def test_a_space_smaller_than_the_budget_stops_early(tmp_path, strategy, params, kernels, expand, members):
    path = tmp_path / "small.yaml"
    path.write_text(SMALL.format(strategy=strategy, params=params, kernels=kernels, expand=expand,
                                 root=tmp_path / "runs"))
    result = run_experiment(path)
    assert len(result.trials) == members and all(t.status == "ok" for t in result.trials)
    assert result.stopped_early and "exhausted" in result.stopped_early
    assert result.run_dir.joinpath("pareto.json").is_file()
