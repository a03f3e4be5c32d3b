"""Helpers for tests of the benches (``nas bench strategies | predictors``)."""

from __future__ import annotations

from collections.abc import Collection


def without_keys(node: object, drop: Collection[str]) -> object:
    """``node`` (a bench's JSON results) with every mapping key in ``drop`` removed, at any depth: what is left is
    what a resumed bench must reproduce exactly (timings, dates and the machine go in ``drop``)."""
    if isinstance(node, dict):
        return {k: without_keys(v, drop) for k, v in node.items() if k not in drop}
    if isinstance(node, list):
        return [without_keys(v, drop) for v in node]
    return node
