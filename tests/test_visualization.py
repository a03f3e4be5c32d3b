"""hwnas.visualization: Plotly figures of runs, standalone HTML without network, gene importance (issue 46)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import hwnas
from hwnas.testing.experiments import nb201_benchmark_yaml

pytest.importorskip("plotly")
pytest.importorskip("sklearn")

from hwnas import visualization as vis


def nb201(shared: Path, root: Path, name: str, *, seed: int = 3, trials: int = 40) -> Any:
    cfg = yaml.safe_load(nb201_benchmark_yaml(shared, name=name, seed=seed, trials=trials, batch_size=8))
    cfg["objectives"][1]["reference"] = 40.0
    cfg["output"] = {"root": str(root)}
    study = hwnas.create_run(cfg)
    study.optimize(show_progress=False)
    return study


@pytest.fixture(scope="module")
def runs(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    root = tmp_path_factory.mktemp("vis")
    return nb201(shared_data, root, "a"), nb201(shared_data, root, "b", seed=5, trials=30)


def test_the_front_per_device_has_every_trial_and_hover_with_id_metrics_and_genes(runs, tmp_path):
    study, _ = runs
    fig = vis.plot_front(study)
    by_name = {}
    for trace in fig.data:
        by_name.setdefault(trace.name, []).append(trace)
    ok = [t for t in study.trials if t.status == "ok"]
    assert len(by_name["ok"][0].x) == len(ok)
    front = by_name["front"][0]
    assert len(front.x) == len(vis.pareto_front(study.trials, study.objectives))  # two objectives: the run's front
    first = front.hovertext[0]
    member = next(t for t in study.trials if f"trial {t.number} " in first)
    assert member.arch.arch_id in first and all(m in first for m in member.metrics)
    assert all(f"{g}={v}" in first for g, v in member.arch.genes.items())
    assert "latency_ms@pixel3" in fig.layout.xaxis.title.text and "top1" in fig.layout.yaxis.title.text


def test_the_hypervolume_history_never_falls_and_ends_at_the_runs_hypervolume(runs):
    study, _ = runs
    fig = vis.plot_hypervolume_history(study)
    ys = list(fig.data[0].y)
    assert len(ys) == len(study.trials) and all(a <= b for a, b in itertools.pairwise(ys))
    assert ys[-1] == pytest.approx(study.summary.hypervolume)


def test_parallel_coordinates_have_an_axis_per_gene_and_metric(runs):
    study, _ = runs
    fig = vis.plot_parallel_coordinate(study)
    labels = [d.label for d in fig.data[0].dimensions]
    genes = sorted(study.trials[0].arch.genes)
    assert labels == [*genes, "top1", "latency_ms@pixel3"]
    assert len(fig.data[0].dimensions[0].values) == sum(t.status == "ok" for t in study.trials)


def test_gene_importance_finds_the_one_gene_a_metric_depends_on(tmp_path):
    """A function evaluator whose metric is one gene's value: that gene gets (almost) all the importance."""
    cfg = {"name": "imp", "seed": 0, "space": {"name": "nb201", "params": {"merge_isomorphic": False}},
           "evaluators": [{"name": "function", "params": {"callable": "hwnas.testing.scores:gene_count",
                                                          "provides": ["gene_sum", "nonzero"]}},
                          {"name": "function", "params": {"callable": "hwnas.testing.scores:weighted_genes",
                                                          "provides": ["weighted"]}}],
           "objectives": [{"metric": "gene_sum", "direction": "max"}, {"metric": "weighted", "direction": "min"}],
           "strategy": {"name": "random"}, "budget": {"trials": 60, "batch_size": 10},
           "export": {"enabled": False}, "output": {"root": str(tmp_path)}}
    study = hwnas.create_run(cfg)
    study.optimize(show_progress=False)
    importances = vis.gene_importances(study, seed=0)
    assert set(importances) == {"gene_sum", "weighted"}
    for per_gene in importances.values():
        assert sum(per_gene.values()) == pytest.approx(1.0)
    # weighted = sum(position x value) over independent uniform genes (no isomorphism merging): the last gene weighs
    # most, its share of the variance about 36 times the first's
    genes = sorted(study.trials[0].arch.genes)
    weighted = importances["weighted"]
    assert max(weighted, key=weighted.__getitem__) == genes[-1]
    assert weighted[genes[-1]] > 3 * weighted[genes[0]]
    assert vis.gene_importances(study, seed=0) == importances  # seeded: the same again
    fig = vis.plot_gene_importance(study)
    assert [t.name for t in fig.data] == ["gene_sum", "weighted"]


def test_several_runs_fronts_on_one_figure(runs):
    a, b = runs
    fig = vis.plot_fronts({"first": a, "second": b.run_dir})
    assert [t.name for t in fig.data] == ["first", "second"]


def test_a_figure_is_written_as_html_that_opens_without_network(runs, tmp_path):
    study, _ = runs
    path = vis.write_html(vis.plot_front(study), tmp_path / "front.html")
    text = path.read_text()
    assert len(text) > 1_000_000  # plotly.js inlined
    assert not re.search(r"<script[^>]+src=[\"']https?://", text)  # nothing fetched from the network


def test_a_run_with_one_objective_has_no_front_to_draw(tmp_path):
    cfg = {"name": "one", "space": {"name": "nb201"},
           "evaluators": [{"name": "function", "params": {"callable": "hwnas.testing.scores:gene_count",
                                                          "provides": ["gene_sum", "nonzero"]}}],
           "objectives": [{"metric": "gene_sum", "direction": "max"}], "strategy": {"name": "random"},
           "budget": {"trials": 4}, "export": {"enabled": False}, "output": {"root": str(tmp_path)}}
    study = hwnas.create_run(cfg)
    study.optimize(show_progress=False)
    with pytest.raises(hwnas.HwnasError, match="a front needs two objectives"):
        vis.plot_front(study)
