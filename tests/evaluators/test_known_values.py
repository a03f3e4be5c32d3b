"""What evaluators know before any search, against the constraints (``joint_conflicts`` with ``KnownValues``): a
latency table's cheapest and dearest members, a benchmark table's rows. The user's warning only."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.evaluation import EVALUATORS, EvalContext
from hwnas.latency.published import hw_nas_bench_fbnet_table
from hwnas.objectives import Constraint, KnownValues, joint_conflicts
from hwnas.search_spaces.fbnet import FBNetSpace
from hwnas.search_spaces.nb201 import NB201Space


def _evaluator(name: str, space, **params):
    cls = EVALUATORS.get(name)
    return cls(context=EvalContext(space=space), **cls.Params.model_validate(params).model_dump())


@pytest.fixture(scope="module")
def fbnet_table(shared_data, tmp_path_factory):
    space = FBNetSpace()
    path = tmp_path_factory.mktemp("fb") / "fb.json"
    hw_nas_bench_fbnet_table(shared_data / "hw-nas-bench" / "fbnet_lut.json", space=space,
                             metric="pixel3_latency").save(path)
    return space, path


def test_a_latency_tables_range_is_the_sum_of_each_layers_cheapest_and_dearest_unit(fbnet_table):
    """FBNet prices each of its 22 layers by the op chosen there alone, so the extremes are the sums, position by
    position, of the cheapest and dearest unit: computed here from the table's entries, apart from the search."""
    space, path = fbnet_table
    ev = _evaluator("latency_table", space, table=str(path))
    table = ev.table
    per_op = [space.layers(space.from_op_indices([j] * 22)) for j in range(9)]  # every op at every position
    costs = np.array([[table.entries[k].median_ms for k in keys] for keys in per_op])  # op x position
    low, high, how = ev.model.range_ms()
    assert low == pytest.approx(costs.min(axis=0).sum()) and high == pytest.approx(costs.max(axis=0).sum())
    assert how == "over its members, searched one gene at a time"
    sampled = ev.model.predict_ms([space.sample(np.random.default_rng(i)) for i in range(500)])
    assert low <= sampled.min() and sampled.max() <= high
    assert isinstance(ev, KnownValues)
    metric = ev.provides[0]
    said = joint_conflicts([Constraint(metric, max=low * 0.99)], [ev])
    assert len(said) == 1 and said[0].startswith(f"constraints[0]: {metric} at most {low * 0.99:g}: the table fb.json "
                                                 f"prices {metric} from {low:.4g} to {high:.4g}")
    assert joint_conflicts([Constraint(metric, max=low * 1.01)], [ev]) == []  # the cheapest member meets it
    assert "at least" in joint_conflicts([Constraint(metric, min=high * 1.01)], [ev])[0]
    assert joint_conflicts([Constraint(metric, max=low * 0.5, relative_to="largest")], [ev]) == []  # not known yet


def test_a_benchmark_table_warns_only_when_no_row_meets_the_bounds_together(shared_data):
    space = NB201Space()
    ev = _evaluator("benchmark", space, table=str(shared_data / "nas-bench-201" / "nb201_accuracy.csv"),
                    columns={"top1": "cifar10_test_200ep", "top1_100": "cifar100_test_200ep"})
    each = [Constraint("top1", max=90), Constraint("top1_100", min=70)]  # each met by some row, never both
    said = joint_conflicts(each, [ev])
    assert said == ["constraints[0] and constraints[1]: top1 at most 90, top1_100 at least 70: the 15,625 rows of "
                    "nb201_accuracy.csv have top1 from 10 to 94.37, top1_100 from 1 to 73.51 (and no row meets them "
                    "together): no architecture can meet them together, so every trial will be infeasible"]
    assert joint_conflicts([Constraint("top1", max=94), Constraint("top1_100", min=70)], [ev]) == []
    assert joint_conflicts([Constraint("top1", min=90)], []) == []  # nothing known: nothing said
    crossed = joint_conflicts([Constraint("top1", min=90), Constraint("top1", max=80)], [ev])
    assert len(crossed) == 1 and "no architecture can meet both" in crossed[0]  # said once, not again by the rows
