"""The FBNet supernet: conformance (extract equals forward, one-hot relaxation reproduces it), one path under
binarised weights, every live op under soft weights, and its training hooks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hwnas.errors import ConfigError
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.fbnet import NUM_LAYERS, OPS
from hwnas.supernet import SUPERNETS, RelaxedSupernet, TrainableSupernet, one_hot_weights
from hwnas.testing import check_supernet
from hwnas.testing.supernet import randomize_batch_norms


def make(seed: int = 0, **space_params):
    space = SPACES.create("fbnet", {"in_chans": 1, "num_classes": 10, **space_params})
    return SUPERNETS.create("fbnet", {}, space=space, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("seed", [0, 1])
def test_the_supernet_passes_the_conformance_suite(seed):
    supernet = make(seed)
    randomize_batch_norms(supernet, seed)
    assert isinstance(supernet, RelaxedSupernet) and isinstance(supernet, TrainableSupernet)
    check_supernet(supernet, np.random.default_rng(seed), n_archs=4, batch=2)


def test_extract_equals_forward_in_the_imagenet_setting():
    supernet = make(3, setting="imagenet").eval()
    randomize_batch_norms(supernet, 3)
    arch = supernet.space.sample(np.random.default_rng(3))
    x = torch.randn((1, *supernet.space.input_shape), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = supernet(x, arch)
        got = supernet.extract(arch)(x)
    assert want.shape == (1, 10)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-4), float((got - want).abs().max())


def _count_block_calls(supernet):
    calls: dict[tuple[int, str], int] = {}
    handles = []
    for layer in range(NUM_LAYERS):
        for op in OPS:
            def hook(_m, _i, _o, key=(layer, op)):
                calls[key] = calls.get(key, 0) + 1
            handles.append(supernet.block(layer, op).register_forward_hook(hook))
    return calls, handles


def test_binarised_weights_run_one_block_per_layer_and_soft_weights_run_every_live_one():
    supernet = make(0).eval()
    space = supernet.space
    arch = space.sample(np.random.default_rng(5))
    x = torch.randn((2, *space.input_shape), generator=torch.Generator().manual_seed(1))
    calls, handles = _count_block_calls(supernet)
    try:
        with torch.no_grad():
            supernet.forward_relaxed(x, one_hot_weights(space, arch))
        assert sorted(calls) == sorted((i, OPS[o]) for i, o in enumerate(space.op_indices(arch)))
        calls.clear()
        soft = {g.name: torch.softmax(torch.randn(len(g.choices), generator=torch.Generator().manual_seed(i)), 0)
                for i, g in enumerate(space.genes())}
        soft["l03"] = torch.tensor([0.5, 0, 0, 0, 0, 0, 0, 0.5, 0])  # zero weights are not computed
        with torch.no_grad():
            supernet.forward_relaxed(x, soft)
        assert len(calls) == (NUM_LAYERS - 1) * len(OPS) + 2
        assert (3, "k3_e1") in calls and (3, "k5_e6") in calls and (3, "skip") not in calls
    finally:
        for h in handles:
            h.remove()


def test_relaxation_errors_name_the_gene():
    supernet = make(0)
    space = supernet.space
    weights = one_hot_weights(space, space.largest())
    x = torch.zeros((1, *space.input_shape))
    with pytest.raises(ValueError, match="every weight of gene 'l07' is 0"):
        supernet.forward_relaxed(x, {**weights, "l07": torch.zeros(len(OPS))})
    with pytest.raises(ValueError, match="lack gene 'l21'"):
        supernet.forward_relaxed(x, {k: v for k, v in weights.items() if k != "l21"})


def test_training_hooks_largest_smallest_uniform_sample():
    supernet = make(0)
    space = supernet.space
    assert supernet.phases == ("uniform",)
    assert space.op_indices(supernet.largest()) == [OPS.index("k5_e6")] * NUM_LAYERS
    smallest = supernet.smallest("uniform")
    assert space.op_indices(smallest) == [OPS.index("skip")] * NUM_LAYERS
    n_params = [sum(p.numel() for p in supernet.extract(a).parameters()) for a in (smallest, supernet.largest())]
    assert n_params[0] < n_params[1]
    a = supernet.sample_subnet(np.random.default_rng(7), "uniform")
    assert a == supernet.sample_subnet(np.random.default_rng(7), "uniform") == space.sample(np.random.default_rng(7))
    with pytest.raises(ConfigError, match="unknown phase 'kernel'"):
        supernet.sample_subnet(np.random.default_rng(0), "kernel")


def test_the_same_seed_gives_the_same_weights():
    a, b, c = make(4), make(4), make(5)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa if sa[k].is_floating_point())
