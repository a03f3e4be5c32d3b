"""Conformance checks for a SearchSpace."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture
from hwnas.search_spaces.base import BatchSampledSpace, EnumerableSpace, NeighbourhoodSpace

if TYPE_CHECKING:
    from pathlib import Path

    from hwnas.search_spaces.base import SearchSpace


def check_space(space: SearchSpace, *, samples: int = 30, seed: int = 0) -> None:
    """Genes, sampling, canonical form, ids, mutation, crossover, encoding, validation and layers.

    Raises AssertionError naming the first broken rule. Builds no model (see :func:`check_space_build`).
    """
    genes = space.genes()
    assert genes, "genes() is empty"
    names = [g.name for g in genes]
    assert len(set(names)) == len(names), "gene names are not unique"
    for g in genes:
        assert len(g.choices) >= 1 and all(isinstance(c, int) for c in g.choices), f"gene {g.name}: bad choices"

    a = [space.sample(np.random.default_rng(seed)) for _ in range(2)]
    assert a[0] == a[1], "sample() is not deterministic under the same seed"
    rng = np.random.default_rng(seed)
    archs = [space.sample(rng) for _ in range(samples)]
    assert len({x.arch_id for x in archs}) > 1, "sample() always returns the same architecture"
    widths = set()
    for arch in archs:
        assert isinstance(arch, Architecture) and arch.space == space.name, "sample() returned a foreign value"
        space.validate(arch)
        canon = space.canonicalize(arch)
        assert canon == arch, "sample() did not return the canonical form"
        assert space.canonicalize(canon) == canon, "canonicalize() is not idempotent"
        again = Architecture.from_json(arch.to_json())
        assert again == arch and again.arch_id == arch.arch_id, "JSON round trip changed the architecture"
        assert json.loads(arch.to_json())["space"] == space.name
        enc = space.encode(arch)
        assert enc.ndim == 1 and np.all(np.isfinite(enc)), "encode() must be a finite 1-D vector"
        assert np.array_equal(enc, space.encode(again)), "encode() differs for equal architectures"
        widths.add(enc.shape[0])
        keys = space.layers(arch)
        assert keys and all(isinstance(k, str) and k for k in keys), "layers() must be non-empty strings"
        assert keys == space.layers(again), "layers() is not deterministic"

    assert len(widths) == 1, f"encode() width varies: {sorted(widths)}"
    if isinstance(space, BatchSampledSpace):
        _check_sample_many(space, seed)
    if isinstance(space, EnumerableSpace):
        _check_distribution(space, seed)
    if isinstance(space, NeighbourhoodSpace):
        _check_neighbours(space, seed)

    m1 = [space.mutate(x, np.random.default_rng(seed + 1)) for x in archs[:10]]
    m2 = [space.mutate(x, np.random.default_rng(seed + 1)) for x in archs[:10]]
    assert m1 == m2, "mutate() is not deterministic under the same seed"
    for parent, child in zip(archs, m1):
        space.validate(child)
        assert space.canonicalize(child) == child, "mutate() did not return the canonical form"
        assert child != parent, "mutate() returned its parent unchanged"

    for x, y in zip(archs[::2], archs[1::2]):
        c1 = space.crossover(x, y, np.random.default_rng(seed + 2))
        c2 = space.crossover(x, y, np.random.default_rng(seed + 2))
        assert c1 == c2, "crossover() is not deterministic under the same seed"
        space.validate(c1)
        assert space.canonicalize(c1) == c1, "crossover() did not return the canonical form"

    arch = archs[0]
    bad = dict(arch.genes)
    bad["no_such_gene__"] = 1
    _expect_invalid(space, Architecture(space.name, bad), "an unknown gene")
    missing = dict(arch.genes)
    missing.pop(names[0])
    _expect_invalid(space, Architecture(space.name, missing), "a missing gene")
    out_of_range = dict(arch.genes)
    g0 = genes[0]
    out_of_range[g0.name] = max(g0.choices) + 1000
    _expect_invalid(space, Architecture(space.name, out_of_range), "an out-of-range value")
    _expect_invalid(space, Architecture(space.name + "_other", arch.genes), "a foreign space name")


def _expect_invalid(space: SearchSpace, arch: Architecture, what: str) -> None:
    try:
        space.validate(arch)
    except InvalidArchitecture:
        return
    raise AssertionError(f"validate() accepted {what}")


def check_space_build(space: SearchSpace, arch: Architecture | None = None, *, onnx_dir: str | Path | None = None,
                      seed: int = 0) -> float:
    """build() gives a module with a finite output at batch 1 that exports to ONNX and matches in onnxruntime.

    Returns the largest absolute difference between torch and onnxruntime.
    """
    import tempfile
    from pathlib import Path

    import torch

    from hwnas.latency.onnx_export import export_onnx, onnx_max_abs_diff

    arch = arch if arch is not None else space.sample(np.random.default_rng(seed))
    # a space whose resolution is a gene gives each architecture's own input shape
    shape = tuple(space.input_shape_of(arch))
    torch.manual_seed(seed)
    model = space.build(arch)
    assert isinstance(model, torch.nn.Module), f"build() must return a torch.nn.Module, got {type(model).__name__}"
    # settle BatchNorm statistics on random batches, as a trained network would have them: with the
    # default running stats some spaces shrink activations to nothing and the comparison would be empty
    gen = torch.Generator().manual_seed(seed + 1)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:  # exact averages over the settling batches, not a momentum blend with the defaults
        m.reset_running_stats()
        m.momentum = None
    with torch.no_grad():
        model.train()
        for _ in range(3):
            model(torch.randn(4, *shape, generator=gen))
    model.eval()
    x = torch.randn(1, *shape, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        y = model(x)
    assert torch.isfinite(y).all(), "build(): non-finite output"
    with torch.no_grad():
        y2 = model(torch.randn(1, *shape, generator=torch.Generator().manual_seed(seed + 2)))
    assert float((y - y2).abs().max()) > 1e-6, "build(): the output does not depend on the input"
    with tempfile.TemporaryDirectory() as tmp:
        path = export_onnx(model, shape, Path(onnx_dir or tmp) / f"{arch.arch_id}.onnx")
        diff = onnx_max_abs_diff(model, path, x.numpy())
    assert diff < 1e-3, f"onnxruntime output differs from torch by {diff}"
    return diff


def _check_neighbours(space: NeighbourhoodSpace, seed: int) -> None:
    """``neighbours`` lists valid canonical architectures, once each, never the architecture itself, the same
    list for the same generator; and a mutation is one of them (spaces whose mutations switch genes on draw
    those genes' values, so only the list's size is compared there)."""
    rng = np.random.default_rng(seed)
    for _ in range(3):
        arch = space.sample(rng)
        found = space.neighbours(arch, np.random.default_rng(seed))
        assert found, "neighbours() found nothing (a space with one member has no neighbours; this one has more)"
        assert found == space.neighbours(arch, np.random.default_rng(seed)), "neighbours() is not deterministic"
        assert len({a.arch_id for a in found}) == len(found), "neighbours() lists an architecture twice"
        assert arch not in found, "neighbours() lists the architecture itself"
        for n in found[:: max(1, len(found) // 10)]:
            space.validate(n)
            assert space.canonicalize(n) == n, "neighbours() lists an architecture that is not canonical"
        ids = {a.arch_id for a in found}
        hits = sum(space.mutate(arch, rng).arch_id in ids for _ in range(10))
        assert hits >= 5, f"only {hits} of 10 mutations are among neighbours(): they should be one step away"


def _check_distribution(space: EnumerableSpace, seed: int, n: int = 4000) -> None:
    """``distribution()`` lists canonical members once each, with probabilities that ``sample`` follows."""
    members, probs = space.distribution()
    assert len(members) == len(probs) == space.unique_size() > 0, (
        "distribution(): members, probabilities and unique_size() differ in length")
    ids = {a.arch_id: k for k, a in enumerate(members)}
    assert len(ids) == len(members), "distribution() lists a member twice"
    assert np.all(probs > 0) and abs(float(probs.sum()) - 1.0) < 1e-9, "distribution(): probabilities must sum to 1"
    for arch in members[:: max(1, len(members) // 50)]:
        space.validate(arch)
        assert space.canonicalize(arch) == arch, "distribution() lists a member that is not canonical"
    rng = np.random.default_rng(seed)
    drawn = [ids.get(space.sample(rng).arch_id) for _ in range(n)]
    assert None not in drawn, "sample() drew an architecture that distribution() does not list"
    # E[p(X)] for X drawn by sample() is sum(p^2) when the probabilities are right (a skew shows up here)
    mean_p, expected = float(probs[np.array(drawn)].mean()), float((probs ** 2).sum())
    spread = float(np.sqrt(max(float((probs ** 3).sum()) - expected ** 2, 0.0) / n))  # 0 for a uniform draw
    assert abs(mean_p - expected) <= 6 * spread + 1e-9 * expected, (
        f"sample() does not follow distribution(): mean probability of a draw {mean_p:.3g}, expected {expected:.3g}")


def _check_sample_many(space: BatchSampledSpace, seed: int, n: int = 600) -> None:
    """``sample_many`` is deterministic, canonical, and draws what ``sample`` draws (per-gene frequencies)."""
    batch = space.sample_many(np.random.default_rng(seed), n)
    assert batch == space.sample_many(np.random.default_rng(seed), n), "sample_many() is not deterministic"
    assert len(batch) == n, f"sample_many(rng, {n}) returned {len(batch)} architectures"
    for arch in batch[:50]:
        space.validate(arch)
        assert space.canonicalize(arch) == arch, "sample_many() did not return the canonical form"
        rebuilt = Architecture.from_dict(arch.to_dict())  # its JSON encoded afresh, not taken from a fast path
        assert arch.to_json() == rebuilt.to_json() and arch.arch_id == rebuilt.arch_id, (
            f"sample_many() returned an architecture whose canonical JSON is wrong: {arch.to_json()}")
    rng = np.random.default_rng(seed + 3)
    single = [space.sample(rng) for _ in range(n)]
    for g in space.genes():
        values = sorted({a.genes[g.name] for a in batch + single}, key=repr)
        p = np.array([sum(a.genes[g.name] == v for a in batch) for v in values]) / n
        q = np.array([sum(a.genes[g.name] == v for a in single) for v in values]) / n
        tv = 0.5 * float(np.abs(p - q).sum())  # about 0.05-0.1 for equal distributions at this n
        assert tv < 0.2, f"sample_many() and sample() draw gene {g.name} differently (total variation {tv:.2f})"


def check_space_units(space: SearchSpace, *, samples: int = 4, seed: int = 0) -> None:
    """The space's latency units are the network's modules: what ``nas latency profile`` and the kit rely on.

    ``all_layers()`` lists each unit once and covers ``layers(arch)`` of sampled members; the parameters of
    the units of ``layers(arch)`` add up to the whole network's (so each unit is the module the network
    runs, not a look-alike); the first unit takes the network's input; every unit runs on its input shape
    with a finite output. Raises AssertionError naming the first broken rule.
    """
    import torch

    from hwnas.search_spaces.base import UnitProfiledSpace

    assert isinstance(space, UnitProfiledSpace), f"{space.name}: not a UnitProfiledSpace (all_layers, build_layer)"
    keys = space.all_layers()
    assert keys, "all_layers() is empty"
    assert len(set(keys)) == len(keys), "all_layers() lists some units twice"
    listed = set(keys)
    params: dict[str, int] = {}
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    for _ in range(samples):
        arch = space.sample(rng)
        units = space.layers(arch)
        missing = sorted(set(units) - listed)
        assert not missing, f"layers() of {arch.arch_id} has unit(s) all_layers() does not list: {missing[:3]}"
        for key in dict.fromkeys(units):
            if key in params:
                continue
            module, shape = space.build_layer(key)
            module.eval()
            with torch.no_grad():
                y = module(torch.randn(1, *shape))
            assert torch.isfinite(y).all(), f"unit {key}: non-finite output on its input shape {tuple(shape)}"
            params[key] = sum(p.numel() for p in module.parameters())
        first_shape = tuple(space.build_layer(units[0])[1])
        assert first_shape == tuple(space.input_shape_of(arch)), (
            f"the first unit {units[0]} takes {first_shape}, the network {tuple(space.input_shape_of(arch))}")
        total = sum(params[k] for k in units)
        whole = sum(p.numel() for p in space.build(arch).parameters())
        assert total == whole, (f"{arch.arch_id}: the units of layers() hold {total} parameters, the network "
                                f"{whole}: a unit is not the module the network runs (or one is missing)")
    try:
        space.build_layer("no-such-unit")
    except InvalidArchitecture:
        pass
    else:
        raise AssertionError("build_layer() of an unknown key must raise InvalidArchitecture")
