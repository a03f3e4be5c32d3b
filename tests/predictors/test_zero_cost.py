"""Zero-cost proxies against values worked out by hand on networks small enough to do so."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hwnas.predictors.zero_cost import PROXIES, grad_norm, naswot, ntk_cond, score_all, snip, synflow


def _linear_chain() -> torch.nn.Module:
    g = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3, bias=False), torch.nn.Linear(3, 2, bias=False))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return net


def test_synflow_of_a_linear_chain_is_twice_its_absolute_path_sum():
    net = _linear_chain()
    w1, w2 = (p.detach().abs().double() for p in net.parameters())
    r = float(torch.ones(2, dtype=torch.float64) @ w2 @ w1 @ torch.ones(4, dtype=torch.float64))
    # R = 1'|W2||W1|1 is linear in each layer, so sum |θ ∂R/∂θ| over one layer's weights is R
    assert synflow(net, torch.zeros(5, 4), None) == pytest.approx(2 * r, rel=1e-12)


def test_snip_and_grad_norm_match_the_loss_gradient():
    net, x, y = _linear_chain(), torch.randn(6, 4, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 1] * 3)
    ref = _linear_chain()
    torch.nn.functional.cross_entropy(ref(x), y).backward()
    expect_snip = sum(float((p * p.grad).detach().abs().sum()) for p in ref.parameters())
    expect_norm = sum(float(p.grad.norm()) for p in ref.parameters())
    assert snip(net, x, y) == pytest.approx(expect_snip, rel=1e-6)
    assert grad_norm(_linear_chain(), x, y) == pytest.approx(expect_norm, rel=1e-6)


def test_naswot_is_the_log_determinant_of_the_code_kernel():
    net = torch.nn.Sequential(torch.nn.Identity(), torch.nn.ReLU())
    x = torch.tensor([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0], [1.0, 1.0, -1.0]])
    codes = (x > 0).double()
    k = codes @ codes.T + (1 - codes) @ (1 - codes).T  # 3 on the diagonal, 1 (one agreeing unit) elsewhere
    assert naswot(net, x, None) == pytest.approx(float(torch.logdet(k)), rel=1e-12)
    assert float(torch.logdet(k)) == pytest.approx(np.log(np.linalg.det([[3, 1, 1], [1, 3, 1], [1, 1, 3]])))
    with pytest.raises(ValueError, match="no activation modules"):
        naswot(torch.nn.Linear(3, 2), x, None)


def test_ntk_condition_number_of_a_linear_model_is_that_of_the_gram_matrix():
    net = torch.nn.Linear(5, 1, bias=False)
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(2))
    eig = np.linalg.eigvalsh((x @ x.T).double().numpy())  # per-sample gradient of w'x is x
    assert ntk_cond(net, x, None) == pytest.approx(eig[-1] / eig[0], rel=1e-6)


def test_score_all_rebuilds_per_proxy_and_leaves_the_global_generator_alone():
    built = []

    def build() -> torch.nn.Module:
        built.append(1)
        return torch.nn.Sequential(_linear_chain(), torch.nn.ReLU())

    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    x = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    out = score_all(build, x, np.array([0, 1] * 4), list(PROXIES))
    assert set(out) == set(PROXIES) and len(built) == len(PROXIES)
    assert torch.equal(before, torch.random.get_rng_state())
    with pytest.raises(ValueError, match="unknown zero-cost proxies"):
        score_all(build, x, np.zeros(8), ["flops"])
