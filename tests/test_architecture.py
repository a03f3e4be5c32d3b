from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from hwnas.architecture import Architecture


def test_id_is_sha_of_canonical_json_and_stable_across_processes():
    a = Architecture("toy", {"b": 2, "a": (1, 2)})
    assert a.to_json() == '{"genes":{"a":[1,2],"b":2},"space":"toy"}'
    code = "from hwnas.architecture import Architecture; print(Architecture('toy', {'a': [1, 2], 'b': 2}).arch_id)"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert other == a.arch_id and len(a.arch_id) == 16


def test_equal_values_hash_equal_and_order_does_not_matter():
    a = Architecture("toy", {"a": 1, "b": [3, 4]})
    b = Architecture("toy", {"b": (3, 4), "a": 1})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != Architecture("toy", {"a": 2, "b": [3, 4]})
    assert a != Architecture("other", {"a": 1, "b": [3, 4]})


def test_json_round_trip_and_replace():
    a = Architecture("toy", {"x": 3, "y": (1, 2, 3)})
    assert Architecture.from_json(a.to_json()) == a
    assert Architecture.from_dict(a.to_dict()) == a
    b = a.replace(x=5)
    assert b.genes["x"] == 5 and a.genes["x"] == 3


def test_frozen():
    a = Architecture("toy", {"x": 3})
    with pytest.raises(AttributeError):
        a.space = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.genes["x"] = 4  # type: ignore[index]


@pytest.mark.parametrize("bad", [1.5, "3", True, [1, "a"], None])
def test_bad_gene_values_are_rejected(bad):
    with pytest.raises(TypeError, match="gene 'x'"):
        Architecture("toy", {"x": bad})


def test_from_dict_needs_space_and_genes():
    with pytest.raises(ValueError, match="space"):
        Architecture.from_dict({"genes": {}})


def test_canonical_json_is_json_dumps_with_sorted_keys():
    """The hand-written canonical text (arch_id's input) is exactly what json.dumps gives."""
    import json

    import numpy as np

    rng = np.random.default_rng(0)
    for _ in range(200):
        genes = {}
        for _ in range(int(rng.integers(1, 8))):
            name = "".join(rng.choice(list("abcXYZ_é\"0%d"), size=int(rng.integers(1, 5))))
            genes[name] = (int(rng.integers(-5, 50)) if rng.random() < 0.7
                           else [int(v) for v in rng.integers(0, 9, size=int(rng.integers(0, 4)))])
        a = Architecture(str(rng.choice(["nb201", "ofa_mbv3", "spé\"ce", "s%dp%%"])), genes)
        assert a.to_json() == json.dumps(a.to_dict(), sort_keys=True, separators=(",", ":"))
        fast = Architecture.from_sorted(a.space, a.genes._items)
        assert fast == a and hash(fast) == hash(a) and fast.arch_id == a.arch_id
        if all(isinstance(v, int) for v in a.genes.values()):  # the batch constructor's %-template
            [row] = Architecture.from_rows(a.space, tuple(a.genes), [tuple(a.genes.values())])
            assert row == a and row.to_json() == a.to_json() and row.arch_id == a.arch_id
            one = Architecture.from_row(a.space, tuple(a.genes), tuple(a.genes.values()))
            assert one == a and one.to_json() == a.to_json() and one.arch_id == a.arch_id


@pytest.mark.parametrize("space_name", ["mbv3", "nb201", "darts"])
def test_a_seed_in_place_of_a_generator_is_named(space_name):
    from hwnas.search_spaces import SPACES

    space = SPACES.get(space_name)()
    arch = space.sample(np.random.default_rng(0))
    for call in (lambda: space.sample(0), lambda: space.mutate(arch, 0), lambda: space.crossover(arch, arch, 0),
                 lambda: space.sample_many(np.random.RandomState(0), 2)):
        with pytest.raises(TypeError, match=rf"{space_name}\.\w+: rng must be a numpy.random.Generator"):
            call()


@pytest.mark.parametrize("strategy",
                         ["random", "evolution", "nsga2", "optuna", "reinforce", "local_search", "bayes_opt"])
def test_a_strategy_given_a_seed_in_place_of_a_generator_is_named(strategy):
    from hwnas.objectives import Objective
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import STRATEGIES

    with pytest.raises(TypeError, match=r"rng must be a numpy\.random\.Generator .* got int"):
        STRATEGIES.create(strategy, {}, space=SPACES.get("mbv3")(), objectives=[Objective("top1", "max")],
                          constraints=[], rng=0)
