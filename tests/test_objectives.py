from __future__ import annotations

import math

import numpy as np
import pytest

from hwnas.architecture import Architecture
from hwnas.objectives import (
    Constraint,
    IncrementalFront,
    Objective,
    Trial,
    hypervolume,
    hypervolume_improvement,
    non_dominated,
    non_dominated_rows,
    pareto_front,
)


def _trial(i, top1, lat, status="ok"):
    return Trial(i, Architecture("toy", {"i": i}), {"top1": top1, "latency_ms": lat}, status)


def test_pareto_front_by_hand():
    trials = [_trial(0, 0.90, 1.0), _trial(1, 0.95, 2.0), _trial(2, 0.93, 2.5), _trial(3, 0.97, 3.0),
              _trial(4, 0.99, 9.0, status="infeasible"), _trial(5, 0.80, 0.5)]
    objs = [Objective("top1", "max"), Objective("latency_ms", "min")]
    front = pareto_front(trials, objs)
    # trial 2 is dominated by 1; trial 4 is infeasible; sorted by the first objective (best top1 first)
    assert [t.number for t in front] == [3, 1, 0, 5]


def test_front_keeps_one_trial_per_architecture():
    a = Architecture("toy", {"i": 1})
    trials = [Trial(0, a, {"f": 1.0}), Trial(1, a, {"f": 1.0})]
    assert len(pareto_front(trials, [Objective("f", "min")])) == 1


def test_non_dominated_ignores_nan_rows():
    pts = np.array([[1.0, 2.0], [np.nan, 0.0], [2.0, 1.0], [3.0, 3.0]])
    assert sorted(non_dominated(pts).tolist()) == [0, 2]


@pytest.mark.parametrize("dim", [2, 3, 4])
def test_hypervolume_matches_pymoo(dim):
    from pymoo.indicators.hv import HV

    rng = np.random.default_rng(dim)
    for _ in range(5):
        pts = rng.random((25, dim))
        ref = np.full(dim, 1.1)
        assert hypervolume(pts, ref) == pytest.approx(HV(ref_point=ref)(pts), rel=1e-9)


@pytest.mark.parametrize("dim", [2, 3])
def test_hypervolume_improvement_is_the_hypervolume_each_candidate_adds(dim):
    rng = np.random.default_rng(10 + dim)
    ref = np.full(dim, 0.9)
    for size in (0, 1, 7, 20):
        front = rng.random((size, dim))
        cands = np.vstack([rng.random((30, dim)), front[:2], np.full((1, dim), 0.95)])  # ties and an outsider
        base = hypervolume(front, ref) if size else 0.0
        want = [hypervolume(np.vstack([front, c]), ref) - base for c in cands]
        assert hypervolume_improvement(cands, front, ref) == pytest.approx(want, abs=1e-12)


def test_hypervolume_improvement_by_hand():
    front = np.array([[0.5, 0.0], [0.0, 0.5]])
    gain = hypervolume_improvement(np.array([[0.25, 0.25], [0.6, 0.6], [2.0, 0.0], [0.5, 0.0]]), front, [1.0, 1.0])
    assert gain.tolist() == pytest.approx([0.0625, 0.0, 0.0, 0.0])


def test_hypervolume_simple_cases():
    assert hypervolume(np.array([[0.0, 0.0]]), [1.0, 1.0]) == pytest.approx(1.0)
    assert hypervolume(np.array([[0.5, 0.0], [0.0, 0.5]]), [1.0, 1.0]) == pytest.approx(0.75)
    assert hypervolume(np.array([[2.0, 2.0]]), [1.0, 1.0]) == 0.0
    assert hypervolume(np.empty((0, 2)), [1.0, 1.0]) == 0.0


def test_constraint_violation():
    c = Constraint("latency_ms", max=2.0)
    assert c.is_satisfied({"latency_ms": 1.5})
    assert c.violation({"latency_ms": 2.5}) == pytest.approx(0.5)
    assert math.isinf(c.violation({}))
    assert math.isinf(c.violation({"latency_ms": float("nan")}))
    both = Constraint("top1", min=0.5, max=0.9)
    assert both.describe() == "top1 >= 0.5 and top1 <= 0.9"
    with pytest.raises(ValueError):
        Constraint("x")
    with pytest.raises(ValueError, match=r"min 0\.9 is above max 0\.5"):
        Constraint("top1", min=0.9, max=0.5)
    with pytest.raises(ValueError, match="max nan is not a finite number"):
        Constraint("latency_ms", max=float("nan"))


def test_objective_direction_checked():
    with pytest.raises(ValueError):
        Objective("x", "up")  # type: ignore[arg-type]


def test_trial_round_trip_and_id_check():
    t = Trial(3, Architecture("toy", {"a": 1}), {"top1": 0.5, "bad": float("nan")}, "ok", 1.25)
    d = t.to_dict()
    assert d["metrics"]["bad"] is None
    back = Trial.from_dict(d)
    assert back.arch == t.arch and back.metrics["top1"] == 0.5 and math.isnan(back.metrics["bad"])
    d["arch_id"] = "0" * 16
    with pytest.raises(ValueError, match="does not match"):
        Trial.from_dict(d)


def _brute_force_front(pts: np.ndarray) -> list[int]:
    return [i for i, p in enumerate(pts)
            if not np.isnan(p).any()
            and not any(np.all(q <= p) and np.any(q < p) for q in pts if not np.isnan(q).any())]


@pytest.mark.parametrize("dim", [2, 3, 4])
def test_non_dominated_equals_the_quadratic_definition(dim):
    """The O(n·front) sweep keeps exactly the rows no other row dominates (ties and duplicates included)."""
    rng = np.random.default_rng(dim)
    for _ in range(20):
        pts = rng.integers(0, 6, size=(60, dim)).astype(float)  # small integers: many ties and duplicates
        pts[rng.random(60) < 0.05, 0] = np.nan
        assert non_dominated(pts).tolist() == _brute_force_front(pts)
        pts[rng.random(60) < 0.1, -1] = np.inf  # infinite values compare like any other
        assert non_dominated(pts).tolist() == _brute_force_front(pts)


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_non_dominated_rows_gives_the_indices_of_non_dominated(dim):
    """The pairwise test for a few rows of Python floats (a tournament) and numpy's sweep agree, ties, duplicates,
    NaN and infinities included, below and above FEW_ROWS."""
    rng = np.random.default_rng(10 + dim)
    for n in (*range(1, 12), 31, 32, 33, 50):
        for _ in range(10):
            pts = rng.integers(0, 4, size=(n, dim)).astype(float)
            pts[rng.random(n) < 0.1, 0] = np.nan
            pts[rng.random(n) < 0.1, -1] = np.inf
            got = non_dominated_rows(pts.tolist())
            assert got == non_dominated(pts).tolist() and all(type(i) is int for i in got)
    assert non_dominated_rows([]) == [] and non_dominated_rows([[math.nan, 1.0]]) == []


def test_incremental_front_follows_additions():
    front = IncrementalFront(2)
    assert front.add(np.array([2.0, 2.0])) and front.add(np.array([1.0, 3.0]))
    assert not front.add(np.array([3.0, 3.0]))  # dominated
    assert front.add(np.array([1.0, 1.0])) and len(front) == 1  # dominates both members
    assert front.add(np.array([1.0, 1.0])) and len(front) == 2  # a duplicate joins


def test_incremental_front_add_many_matches_adding_one_at_a_time():
    rng = np.random.default_rng(3)
    for dim in (2, 3):
        one, many = IncrementalFront(dim), IncrementalFront(dim)
        seen = np.empty((0, dim))
        for _ in range(30):
            batch = rng.integers(0, 8, size=(int(rng.integers(0, 12)), dim)).astype(float)  # ties, duplicates
            seen = np.vstack([seen, batch])
            assert many.add_many(batch) == sum(one.add(p) for p in batch)
            assert sorted(map(tuple, many.points)) == sorted(map(tuple, one.points))
            assert sorted(map(tuple, many.points)) == sorted(map(tuple, seen[_brute_force_front(seen)]))
