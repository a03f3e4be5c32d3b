from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from hwnas.errors import ConfigError, EvaluationError
from hwnas.evaluation import EVALUATORS, EvalContext
from hwnas.evaluators.benchmark import BenchmarkEvaluator
from hwnas.experiments import load_experiment, run_experiment
from hwnas.search_spaces.fbnet import NUM_LAYERS, FBNetSpace
from hwnas.search_spaces.mbv3 import MobileNetV3Space
from hwnas.search_spaces.nb201 import EDGES, OPS, NB201Space

REPO = Path(__file__).resolve().parents[2]
BEST = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_1x1~2|"


def _evaluator(space, **params) -> BenchmarkEvaluator:
    cls = EVALUATORS.get("benchmark")
    return cls(context=EvalContext(space=space), **cls.Params.model_validate(params).model_dump())


def _small_table(tmp_path: Path, space: NB201Space, extra_row: str = "") -> Path:
    """Three NB201 rows with two device columns (one made up for this test), plus an optional raw line."""
    archs = [BEST, space.to_str(space.from_ops((1,) * 6)), space.to_str(space.from_ops((2,) * 6))]
    lines = ["index,arch_str,pixel3,my_new_board_fp16"]
    lines += [f"{i},{a},{1.5 + i},{0.25 * (i + 1)}" for i, a in enumerate(archs)]
    path = tmp_path / "table.csv"
    path.write_text("\n".join(lines) + "\n" + extra_row)
    return path


def test_best_of_all_15625_is_6111_at_94_37(shared_data):
    space = NB201Space()
    table = shared_data / "nas-bench-201" / "nb201_accuracy.csv"
    ev = _evaluator(space, table=str(table), columns={"top1": "cifar10_test_200ep"}, cost_s_per_query=2.5)
    archs = [space.from_ops(ops) for ops in itertools.product(range(len(OPS)), repeat=len(EDGES))]
    results = ev.evaluate(archs)
    assert not [r for r in results if isinstance(r, BaseException)]
    top = max(r["top1"] for r in results)
    tied = sorted((space.index(a, table), i) for i, (a, r) in enumerate(zip(archs, results)) if r["top1"] == top)
    assert [index for index, _ in tied] == [6111, 13714]  # two cells share the maximum; the first index wins
    best = tied[0][1]
    assert space.to_str(archs[best]) == BEST
    assert round(results[best]["top1"], 2) == 94.37  # percent, the table's unit
    assert results[best]["sim_cost_s"] == 2.5
    assert ev.provides == ("top1", "sim_cost_s")
    # the representative of 6111's class is 6111 itself, so a canonicalizing runner can find it
    assert space.canonicalize(archs[best]) == archs[best]


def test_any_device_column_by_name(shared_data):
    space = NB201Space()
    arch = space.from_str(BEST)
    help_ev = _evaluator(space, table=str(shared_data / "help-latency" / "nb201_latency.csv"),
                         columns={"latency_ms@pixel3": "pixel3", "latency_ms@titanx_256": "titanx_256"})
    hw_ev = _evaluator(space, table=str(shared_data / "hw-nas-bench" / "nb201_cifar10_latency.csv"),
                       columns={"latency_ms@pixel3": "pixel3_latency"})
    nats_ev = _evaluator(space, table=str(shared_data / "nas-bench-201" / "nats_bench_200ep_test.csv"),
                         columns={"top1_c100": "CIFAR100TestAccuracy200Epochs"})
    assert nats_ev.key_column == "ArchitectureString"
    a, b, c = help_ev.evaluate([arch])[0], hw_ev.evaluate([arch])[0], nats_ev.evaluate([arch])[0]
    assert a["latency_ms@pixel3"] == b["latency_ms@pixel3"]  # HELP's pixel3 is HW-NAS-Bench's
    assert a["latency_ms@titanx_256"] > 0 and set(a) == {"latency_ms@pixel3", "latency_ms@titanx_256"}
    acc_ev = _evaluator(space, table=str(shared_data / "nas-bench-201" / "nb201_accuracy.csv"),
                        columns={"top1_c100": "cifar100_test_200ep"})
    assert c["top1_c100"] == pytest.approx(acc_ev.evaluate([arch])[0]["top1_c100"], abs=1e-6)


def test_a_file_with_more_columns_works_unchanged(tmp_path):
    space = NB201Space()
    ev = _evaluator(space, table=str(_small_table(tmp_path, space)), columns={"latency_ms@board": "my_new_board_fp16"})
    assert ev.evaluate([space.from_str(BEST)]) == [{"latency_ms@board": 0.25}]


def test_missing_column_lists_the_columns_at_construction(tmp_path):
    space = NB201Space()
    with pytest.raises(ConfigError) as info:
        _evaluator(space, table=str(_small_table(tmp_path, space)), columns={"latency_ms@px": "pixel_3"})
    text = str(info.value)
    assert "metric 'latency_ms@px': column 'pixel_3' is not in" in text and "did you mean 'pixel3'?" in text
    assert "its columns: index, arch_str, pixel3, my_new_board_fp16" in text


def test_missing_column_is_reported_with_the_yaml_path(tmp_path, shared_data):
    text = (REPO / "experiments" / "nb201_benchmark.yaml").read_text()
    text = text.replace("../shared/data", str(shared_data))
    text = text.replace("{top1: cifar10_test_200ep}", "{top1: cifar10_test}")
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}:")
    assert "evaluators[1]: benchmark: metric 'top1': column 'cifar10_test'" in problem
    assert "cifar10_test_200ep" in problem


def test_missing_table_and_missing_key_column(tmp_path):
    space = NB201Space()
    with pytest.raises(ConfigError, match="does not exist"):
        _evaluator(space, table=str(tmp_path / "nope.csv"), columns={"x": "y"})
    no_key = tmp_path / "no_key.csv"
    no_key.write_text("index,pixel3\n0,1.0\n")
    with pytest.raises(ConfigError, match=r"has no architecture column \(arch_str or ArchitectureString\)"):
        _evaluator(space, table=str(no_key), columns={"x": "pixel3"})
    with pytest.raises(ConfigError, match="key column 'arch' is not in"):
        _evaluator(space, table=str(no_key), columns={"x": "pixel3"}, key_column="arch")


def test_space_without_a_string_form_is_refused(tmp_path):
    space = NB201Space()
    with pytest.raises(ConfigError, match="space 'mbv3' has no string form"):
        _evaluator(MobileNetV3Space(), table=str(_small_table(tmp_path, space)), columns={"x": "pixel3"})


def test_uncovered_architecture_is_named_in_its_slot(tmp_path):
    space = NB201Space()
    ev = _evaluator(space, table=str(_small_table(tmp_path, space)), columns={"latency_ms": "pixel3"})
    missing = space.from_ops((3,) * 6)
    results = ev.evaluate([space.from_str(BEST), missing])
    assert results[0] == {"latency_ms": 1.5}
    assert isinstance(results[1], EvaluationError)
    assert missing.arch_id in str(results[1]) and space.to_str(missing) in str(results[1])


def test_loads_lazily_and_reports_bad_cells_per_architecture(tmp_path):
    space = NB201Space()
    bad = space.to_str(space.from_ops((4,) * 6))
    table = _small_table(tmp_path, space, extra_row=f"3,{bad},n/a,1.0\n")
    ev = _evaluator(space, table=str(table), columns={"latency_ms": "pixel3"}, cheap=False)
    assert ev._rows is None and ev.cheap is False  # the constructor read the header only
    results = ev.evaluate([space.from_str(bad), space.from_str(BEST)])
    assert isinstance(results[0], EvaluationError) and "'n/a' is not a finite number" in str(results[0])
    assert results[1] == {"latency_ms": 1.5}


def test_quoted_table_reads_like_the_plain_one(tmp_path):
    """A file with quotes goes through the csv module; one without is split directly: the same rows."""
    space = NB201Space()
    plain = _small_table(tmp_path, space, extra_row="\n")  # a blank last line is skipped by both
    quoted = tmp_path / "quoted.csv"
    quoted.write_text("\r\n".join(",".join(f'"{c}"' for c in line.split(",")) if line else ""
                                   for line in plain.read_text().split("\n")))
    archs = [space.from_str(BEST), space.from_ops((1,) * 6), space.from_ops((2,) * 6), space.from_ops((3,) * 6)]
    a = _evaluator(space, table=str(plain), columns={"lat": "pixel3", "fp16": "my_new_board_fp16"})
    b = _evaluator(space, table=str(quoted), columns={"lat": "pixel3", "fp16": "my_new_board_fp16"})
    ra, rb = a.evaluate(archs), b.evaluate(archs)
    assert ra[:3] == rb[:3] == [{"lat": 1.5, "fp16": 0.25}, {"lat": 2.5, "fp16": 0.5}, {"lat": 3.5, "fp16": 0.75}]
    assert isinstance(ra[3], EvaluationError) and isinstance(rb[3], EvaluationError)


def test_a_short_row_is_named_by_its_line(tmp_path):
    space = NB201Space()
    ev = _evaluator(space, table=str(_small_table(tmp_path, space, extra_row="9,|x~0|,1.0\n")),
                    columns={"lat": "pixel3"})
    with pytest.raises(EvaluationError, match=r"table.csv:5: 3 cells, the header has 4"):
        ev.prepare()


def test_relative_paths_are_taken_from_the_working_directory(tmp_path, monkeypatch):
    space = NB201Space()
    _small_table(tmp_path, space)
    monkeypatch.chdir(tmp_path)
    ev = _evaluator(space, table="table.csv", columns={"latency_ms": "pixel3"})
    assert ev.path == tmp_path / "table.csv"


def test_fingerprint_follows_content_not_location(tmp_path):
    space = NB201Space()
    table = _small_table(tmp_path, space)
    a = _evaluator(space, table=str(table), columns={"latency_ms": "pixel3"})
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "t.csv").write_bytes(table.read_bytes())
    b = _evaluator(space, table=str(moved / "t.csv"), columns={"latency_ms": "pixel3"})
    assert a.fingerprint() == b.fingerprint()
    (moved / "t.csv").write_text(table.read_text().replace(",1.5,", ",1.6,"))
    c = _evaluator(space, table=str(moved / "t.csv"), columns={"latency_ms": "pixel3"})
    assert c.fingerprint() != a.fingerprint()
    d = _evaluator(space, table=str(table), columns={"latency_ms": "pixel3"}, cost_s_per_query=1)
    assert d.fingerprint() != a.fingerprint()


def test_fbnet_table_agrees_with_the_lut_sum(shared_data):
    space = FBNetSpace()
    ev = _evaluator(space, table=str(shared_data / "help-latency" / "fbnet_latency.csv"),
                    columns={"latency_ms@pixel3": "pixel3"})
    with open(shared_data / "hw-nas-bench" / "fbnet_lut.json") as f:
        lut = json.load(f)["pixel3_latency"]
    arch = space.from_str("7 8 1 8 4 8 8 8 7 4 1 4 7 3 2 7 3 2 4 2 4 5")  # the table's first row
    (got,) = ev.evaluate([arch])
    assert got["latency_ms@pixel3"] == sum(lut[k] for k in space.layers(arch))
    (uncovered,) = ev.evaluate([space.from_op_indices([0] * NUM_LAYERS)])
    assert isinstance(uncovered, EvaluationError) and "has no row" in str(uncovered)


def test_example_experiment_runs(tmp_path, monkeypatch, shared_data):
    if (REPO.parent / "shared" / "data").resolve() != shared_data.resolve():
        pytest.skip("the example's paths assume the data at ../shared/data")
    monkeypatch.chdir(REPO)
    result = run_experiment(REPO / "experiments" / "nb201_benchmark.yaml", run_dir=tmp_path / "run",
                            overrides=["budget.trials=60"])
    assert len(result.trials) == 60 and all(t.status == "ok" for t in result.trials)
    # a latency objective: every cell as written is its own architecture (isomorphic cells run differently)
    assert all(t.arch == NB201Space(merge_isomorphic=False).canonicalize(t.arch) for t in result.trials)
    assert any(t.arch != NB201Space().canonicalize(t.arch) for t in result.trials)
    best = max(t.metrics["top1"] for t in result.trials)
    assert 85 < best <= 94.38 and result.front
    assert not (tmp_path / "run" / "models").exists()  # export disabled
    search = json.loads((tmp_path / "run" / "summary.json").read_text())["search"]
    assert search["setup_s"] > 0 and search["wall_s"] > 0  # the tables are read before the loop's clock starts
    import gc

    assert gc.get_freeze_count() == 0  # the loop's frozen heap was given back to the collector
