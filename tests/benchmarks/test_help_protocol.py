"""HELP's few-shot latency protocol (benchmarks/help_protocol.py): loader, trimming, splits, determinism."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from help_protocol import (
    HelpProtocol,
    LatencyTable,
    arch_description_tokens,
    help_split_tasks,
    hwnas_architectures,
    leave_one_out_tasks,
    load_help_table,
    nb201_arch_tokens,
    one_hot_encode,
    run_fewshot_protocol,
)

from hwnas.testing.latency import synthetic_devices

# ---------------------------------------------------------------------------------------------
# tables and protocol on small synthetic files


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.write_text("\n".join(",".join(str(v) for v in r) for r in [header, *rows]) + "\n")


def test_loader_takes_any_device_columns_and_parses_nb201_strings(tmp_path: Path) -> None:
    cells = ["|nor_conv_3x3~0|+|skip_connect~0|none~1|+|avg_pool_3x3~0|nor_conv_1x1~1|skip_connect~2|",
             "|none~0|+|nor_conv_3x3~0|none~1|+|avg_pool_3x3~0|nor_conv_1x1~1|skip_connect~2|"]
    _write_csv(tmp_path / "toy_latency.csv", ["index", "arch_str", "my_npu_8", "jetson"],
               [[1, cells[1], 2.5, 7], [0, cells[0], 1.5, 9]])
    table = load_help_table(tmp_path / "toy_latency.csv")
    assert table.space == "toy"
    assert table.devices == ("my_npu_8", "jetson")
    np.testing.assert_array_equal(table.column("jetson"), [9.0, 7.0])  # sorted by index
    assert table.arch_tokens[0] == nb201_arch_tokens(cells[0])
    assert table.arch_tokens[0][:2] == ("nor_conv_3x3", "skip_connect")
    assert table.encoding().shape == (2, 2 * 2)  # two positions differ, two values each
    with pytest.raises(ValueError, match="no device column 'pixel9'; it has my_npu_8, jetson"):
        table.column("pixel9")


def test_loader_errors_name_the_cell(tmp_path: Path) -> None:
    _write_csv(tmp_path / "bad_latency.csv", ["index", "op_idx_list", "cpu"], [[0, "1 2", 3.0], [1, "2 1", "n/a"]])
    with pytest.raises(ValueError, match=r"line 3, column 'cpu': 'n/a' is not a number"):
        load_help_table(tmp_path / "bad_latency.csv")
    with pytest.raises(ValueError, match="not a NAS-Bench-201 cell string"):
        nb201_arch_tokens("|conv|+|")


def test_ofa_style_descriptions_mask_unused_layers() -> None:
    arch = {"ks": [3, 5, 7, 7], "e": [4, 6, 3, 3], "d": [1, 2], "r": 160}
    assert arch_description_tokens(arch) == ("ks3", "e4", "none", "none", "ks7", "e3", "ks7", "e3", "r160")
    enc = one_hot_encode([("a", "x", "p"), ("b", "x", "q"), ("a", "x", "q")])
    assert enc.shape == (3, 4)  # the constant middle position is dropped


def _toy_table(n: int = 2000, seed: int = 0) -> LatencyTable:
    rng = np.random.default_rng(seed)
    X, sources, target = synthetic_devices(rng, n=n, d=10, m=4)
    tokens = tuple(tuple(str(int(v)) for v in row) for row in X)
    lat = np.column_stack([sources, target])
    devices = ("titanx_1", "1080ti_1", "pixel3", "silver_4114", "gold_6240")
    return LatencyTable(
        space="nb201", path=Path("toy_latency.csv"), devices=devices, latency_ms=lat, arch_tokens=tokens
    )


def test_help_trimming_keeps_the_middle_of_each_set_separately() -> None:
    latency = np.random.default_rng(9).permutation(2000).astype(float) + 1.0
    pool, query = HelpProtocol().split(latency)
    assert pool.shape == (720,) and query.shape == (800,)
    assert pool.max() < 900 and query.min() >= 900 and query.max() < 1900
    for idx, full in ((pool, np.arange(900)), (query, np.arange(900, 1900))):
        ranks = np.argsort(np.argsort(latency[full]))
        kept = set(full[(ranks >= int(0.1 * full.size)) & (ranks < int(0.9 * full.size))].tolist())
        assert set(idx.tolist()) == kept


def test_protocol_is_deterministic_under_seeds_and_splits_devices_by_name() -> None:
    table = _toy_table()
    tasks = help_split_tasks(table)
    # none of HELP's meta-test devices is in the table: its meta-valid ones present are the targets
    assert [t.target for t in tasks] == ["titanx_1", "gold_6240"]
    assert tasks[0].sources == ("1080ti_1", "silver_4114", "pixel3")
    run = lambda seeds: run_fewshot_protocol(  # noqa: E731
        table, tasks, ks=(10, 20), rngs=[np.random.default_rng(s) for s in seeds]
    )
    a, b, c = run([0, 1]), run([0, 1]), run([2, 3])
    assert np.array_equal(a.rho, b.rho)
    assert not np.array_equal(a.rho, c.rho)
    assert a.rho.shape == (2, 2, 2)
    assert set(a.summary()) == {10, 20}
    assert len(leave_one_out_tasks(table)) == 5
    with pytest.raises(ValueError, match="k=721 exceeds the 720 archs"):
        run_fewshot_protocol(table, tasks, ks=(721,), rngs=[np.random.default_rng(0)])
    with pytest.raises(ValueError, match="unknown few-shot method 'magic'"):
        run_fewshot_protocol(table, tasks, ks=(10,), rngs=[np.random.default_rng(0)], method="magic")


def test_device_groups_split_the_targets_by_name_alternately() -> None:
    """The tuning / reporting halves hwnas's default was chosen by (fewshot_latency.py --device-groups)."""
    from fewshot_latency import device_groups

    table = _toy_table()
    result = run_fewshot_protocol(table, leave_one_out_tasks(table), ks=(10, 20), rngs=[np.random.default_rng(0)],
                                  method="transfer+evidence")
    per_device = result.per_device()
    names = sorted(per_device)
    groups = device_groups(result)
    assert list(groups) == [f"tuning ({len(names[0::2])})", f"reporting ({len(names[1::2])})"]
    for (mean, worst), k in zip(groups[f"tuning ({len(names[0::2])})"], (10, 20)):
        rhos = [per_device[d][k] for d in names[0::2]]
        assert mean == pytest.approx(np.mean(rhos)) and worst == min(rhos)
    reporting = groups[f"reporting ({len(names[1::2])})"]
    assert reporting[0][1] == min(per_device[d][10] for d in names[1::2])


# ---------------------------------------------------------------------------------------------
# the real HELP data


@pytest.fixture(scope="module")
def nb201_table(shared_data: Path) -> LatencyTable:
    path = shared_data / "help-latency" / "nb201_latency.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return load_help_table(path)


def test_nb201_table_is_read_by_column_name(nb201_table: LatencyTable) -> None:
    header = (nb201_table.path.read_text().split("\n", 1)[0]).split(",")
    assert nb201_table.devices == tuple(h for h in header if h not in ("index", "arch_str"))
    assert nb201_table.latency_ms.shape == (15625, len(nb201_table.devices))
    assert nb201_table.encoding().shape == (15625, 6 * 5)  # 6 edges x 5 ops, from the strings


def test_nb201_ten_samples_rank_new_devices_well(nb201_table: LatencyTable) -> None:
    """Measured (seeds 0-2, k=10): HELP's meta-validation devices (the table has none of its meta-test ones;
    validation devices, not held-out) 0.962, leave-one-out over all 21 0.953.

    The encoding alone (no transfer) reaches 0.33.
    """
    rngs = lambda: [np.random.default_rng(s) for s in range(3)]  # noqa: E731
    validation = run_fewshot_protocol(nb201_table, help_split_tasks(nb201_table), ks=(10,), rngs=rngs())
    assert validation.summary()[10][0] >= 0.93
    loo = run_fewshot_protocol(nb201_table, leave_one_out_tasks(nb201_table), ks=(10,), rngs=rngs())
    assert loo.summary()[10][0] >= 0.93
    # the transfer is what does it: the encoding alone cannot learn from 10 samples
    alone = run_fewshot_protocol(
        nb201_table, help_split_tasks(nb201_table), ks=(10,), rngs=rngs(), method="encoding-ridge"
    )
    assert alone.summary()[10][0] < validation.summary()[10][0] - 0.3


@pytest.mark.parametrize("space", ["fbnet", "ofa"])
def test_help_rows_become_the_hwnas_architectures_they_describe(shared_data: Path, space: str) -> None:
    import json
    from dataclasses import replace

    path = shared_data / "help-latency" / f"{space}_latency.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    table = load_help_table(path)
    table = replace(table, latency_ms=table.latency_ms[:300], arch_tokens=table.arch_tokens[:300])
    hw_space, archs = hwnas_architectures(table)
    if space == "fbnet":  # the op indices follow HW-NAS-Bench's order, as the file's own op names say
        names = [line.split(",")[2] for line in path.read_text().splitlines()[1:301]]
        assert [hw_space.to_str(a) for a in archs] == names
    else:
        described = json.loads((shared_data / "help-latency" / "ofa_archs.json").read_text())["arch"][:300]
        for arch, d in zip(archs, described):
            assert [arch.genes[f"d{i}"] for i in range(5)] == d["d"] and arch.genes["r"] == d["r"]
            for stage, depth in enumerate(d["d"]):
                used = range(4 * stage, 4 * stage + depth)
                assert [arch.genes[f"ks{i}"] for i in used] == [d["ks"][i] for i in used]
                assert [arch.genes[f"e{i}"] for i in used] == [d["e"][i] for i in used]
