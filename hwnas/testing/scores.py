"""Scoring functions for the ``function`` evaluator's tests and examples (importable by path in worker
processes): well-behaved ones, and ones that break its contract in each way it checks."""

from __future__ import annotations

from typing import Any

from hwnas.architecture import Architecture

__all__ = ["CALLS", "counted", "gene_count", "misses_a_metric", "module_params", "not_a_mapping", "not_a_number",
           "raises_on_odd", "weighted_genes"]


def _ints(arch: Architecture) -> list[int]:
    out: list[int] = []
    for value in arch.genes.values():
        out.extend(value if isinstance(value, tuple) else (value,))
    return out


def gene_count(arch: Architecture) -> dict[str, float]:
    """``gene_sum`` (the sum of every gene value) and ``nonzero`` (how many are not 0): a deterministic score."""
    values = _ints(arch)
    return {"gene_sum": float(sum(values)), "nonzero": float(sum(v != 0 for v in values))}


def weighted_genes(arch: Architecture, *, scale: float = 1.0, space: Any = None) -> dict[str, float]:
    """``weighted`` = ``scale`` x the sum of gene value x position: takes a keyword argument and the space."""
    assert space is not None, "the evaluator passes the space to a function that asks for it"
    return {"weighted": scale * float(sum(i * v for i, v in enumerate(_ints(arch), start=1)))}


def module_params(arch: Architecture, module: Any) -> dict[str, float]:
    """``params_k``: the built module's parameters in thousands (asks for the module)."""
    return {"params_k": sum(p.numel() for p in module.parameters()) / 1e3}


def raises_on_odd(arch: Architecture) -> dict[str, float]:
    """Raises for architectures whose gene sum is odd; else ``gene_sum``."""
    total = sum(_ints(arch))
    if total % 2:
        raise RuntimeError(f"odd gene sum {total}")
    return {"gene_sum": float(total)}


def not_a_mapping(arch: Architecture) -> Any:
    """Returns a list instead of metric -> number."""
    return [1.0, 2.0]


def not_a_number(arch: Architecture) -> dict[str, Any]:
    """Returns a string where a number belongs."""
    return {"gene_sum": "fast"}


def misses_a_metric(arch: Architecture) -> dict[str, float]:
    """Declared with ``provides: [gene_sum, nonzero]`` in the tests, returns ``gene_sum`` alone."""
    return {"gene_sum": float(sum(_ints(arch)))}


#: Arch id -> how many times :func:`counted` scored it in this process (tests read it to prove nothing is scored
#: twice).
CALLS: dict[str, int] = {}


def counted(arch: Architecture) -> dict[str, float]:
    """:func:`gene_count`, counting the calls per architecture in :data:`CALLS`."""
    CALLS[arch.arch_id] = CALLS.get(arch.arch_id, 0) + 1
    return gene_count(arch)
