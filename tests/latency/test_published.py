"""Readers of published latency lookup tables (once-for-all / ProxylessNAS YAML)."""

from __future__ import annotations

import pytest

from hwnas.errors import ConfigError, MissingLatencyEntry
from hwnas.latency.published import load_ofa_lut, sum_ofa_lut


def test_load_and_sum_a_small_table(tmp_path):
    path = tmp_path / "224_lookup_table.yaml"
    path.write_text("Conv-input:224x224x3-output:112x112x24:\n  count: 3\n  mean: 1.5\n  std: 0.1\n"
                    "Logits-input:1x1x1536-output:1000:\n  count: 3\n  mean: 0.25\n  std: 0.0\n")
    lut = load_ofa_lut(path)
    assert lut == {"Conv-input:224x224x3-output:112x112x24": 1.5, "Logits-input:1x1x1536-output:1000": 0.25}
    keys = ["Conv-input:224x224x3-output:112x112x24", "Logits-input:1x1x1536-output:1000",
            "Logits-input:1x1x1536-output:1000"]
    assert sum_ofa_lut(lut, keys) == pytest.approx(2.0)  # a repeated key counts each time


def test_missing_keys_are_named_never_priced_zero():
    lut = {"a": 1.0}
    with pytest.raises(MissingLatencyEntry, match=r"in note10/224 for 2 key\(s\): b, c") as info:
        sum_ofa_lut(lut, ["a", "b", "c", "b"], table="note10/224")
    assert info.value.keys == ["b", "c"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- 1\n- 2\n", "non-empty mapping"),
        ("k:\n  count: 1\n", "entry 'k' has no 'mean' field"),
        ("k:\n  mean: .nan\n", "entry 'k' has mean nan"),
        ("k: [unclosed\n", "not valid YAML"),
        ("k: !!python/object:os.system {}\n", "not valid YAML"),  # safe loading only
    ],
)
def test_malformed_tables_are_refused(tmp_path, text, message):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_ofa_lut(path)


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read latency table"):
        load_ofa_lut(tmp_path / "nope.yaml")


def test_real_note10_tables_load(shared_data):
    for r in (160, 176, 192, 208, 224):
        lut = load_ofa_lut(shared_data / "ofa-lut" / "note10" / f"{r}_lookup_table.yaml")
        assert len(lut) == 96 and all(v > 0 for v in lut.values())
    assert len(load_ofa_lut(shared_data / "ofa-lut" / "proxylessnas" / "mobile_trim.yaml")) == 72
