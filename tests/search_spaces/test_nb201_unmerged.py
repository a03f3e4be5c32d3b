"""NAS-Bench-201 with isomorphic cells kept apart: a hardware-aware search can reach the true front
(issue: canonicalising cells merged cells that the hardware times differently)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from hwnas.objectives import hypervolume
from hwnas.search_spaces.nb201 import NUM_CELLS, NB201Space
from hwnas.testing import check_space


def test_unmerged_space_is_every_cell_as_written():
    merged, kept = NB201Space(), NB201Space(merge_isomorphic=False)
    assert (merged.unique_size(), kept.unique_size()) == (6466, NUM_CELLS)
    dead = kept.from_str("|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")  # node 1 unused
    assert kept.canonicalize(dead) == dead and merged.canonicalize(dead) != dead
    assert merged.canonicalize(kept.canonicalize(dead)) == merged.canonicalize(dead)
    rng = np.random.default_rng(0)
    drawn = {kept.sample(rng).arch_id for _ in range(3000)}
    assert len(drawn) > 2500  # uniform over 15,625 cells: few repeats (merged: the classes' sizes skew it)
    check_space(kept)


def test_the_true_hardware_front_is_reachable_only_unmerged(shared_data):
    acc = {r["arch_str"]: float(r["cifar10_valid_12ep"])
           for r in csv.DictReader(open(shared_data / "nas-bench-201" / "nb201_accuracy.csv"))}
    lat = {r["arch_str"]: float(r["pixel3"])
           for r in csv.DictReader(open(shared_data / "help-latency" / "nb201_latency.csv"))}

    def points(space):
        return np.array([[-acc[space.to_str(a)], lat[space.to_str(a)]] for a in space.distribution()[0]])

    true = points(NB201Space(merge_isomorphic=False))
    ref = [-float(np.median(-true[:, 0])), float(np.median(true[:, 1]))]  # median accuracy, median latency
    merged = hypervolume(points(NB201Space()), ref) / hypervolume(true, ref)
    assert merged == pytest.approx(0.9417, abs=1e-3)  # CIFAR-10 12-epoch validation x Pixel 3 (HELP)


def test_isomorphs_are_the_cells_of_one_class():
    kept, merged = NB201Space(merge_isomorphic=False), NB201Space()
    dead = kept.from_str("|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")
    members = kept.isomorphs(dead)
    assert dead in members and len(members) > 1 and len(set(members)) == len(members)
    assert {merged.canonicalize(m) for m in members} == {merged.canonicalize(dead)}
    assert kept.isomorph_representative(dead) == merged.canonicalize(dead) == merged.isomorph_representative(dead)
    assert merged.isomorphs(dead) == [merged.canonicalize(dead)]
    # the classes partition the cells: every cell is in exactly one member list
    seen: dict[str, int] = {}
    for rep in merged.distribution()[0]:
        for m in kept.isomorphs(rep):
            seen[m.arch_id] = seen.get(m.arch_id, 0) + 1
    assert len(seen) == NUM_CELLS and set(seen.values()) == {1}
