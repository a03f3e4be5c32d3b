"""How far a run's table- or model-based latency figures can be trusted: what answers each metric and the figures
that judge it (held-out, leave-one-out or the raw sum), for pareto.json, ``nas report`` and the HTML report."""

from __future__ import annotations

from typing import Any

from hwnas.experiments.config import Experiment


def latency_trust(experiment: Experiment) -> dict[str, Any]:
    """Per latency metric that comes from a table or a learned model: how far it can be trusted.

    Each entry names what answers (``sum``, ``calibration``, ``learned`` for a table; ``fewshot`` for a
    model) and the figures that judge it (``figures``: held-out for a calibrated or learned table,
    leave-one-out for a few-shot model, the raw sum otherwise), beside the table's raw-sum figures.
    """
    out: dict[str, Any] = {}
    for ev in experiment.evaluators:
        trust = getattr(ev, "trust", None)
        if trust is None:
            continue
        v = trust()
        if v is None:
            out[ev.provides[0]] = None
            continue
        if "loo" in v:  # a few-shot latency model
            out[ev.provides[0]] = {"answers": "fewshot", "how": v.get("how"), "networks": v["loo"].get("n"),
                                   "figures": v["loo"], "figures_are": "leave-one-out"}
            continue
        calibrated = bool(getattr(ev, "calibrated", False))
        answers = v.get("answers", "calibration") if calibrated else "sum"
        figures, label = v.get("raw"), "raw sum"
        kind = ("learned" if answers == "learned" and v.get("learned_heldout") else
                "calibrated" if answers != "sum" and v.get("calibrated_heldout") else None)
        if kind:
            mean = (v.get("mean_heldout") or {}).get(kind) or {}  # tables validated on one halving have none
            figures, label = ((mean, f"{kind}, held-out, mean of {mean['splits']} halvings")
                              if mean.get("splits", 1) > 1 else (v[f"{kind}_heldout"], f"{kind}, held-out"))
        out[ev.provides[0]] = {
            "networks": v.get("networks"), "raw": v.get("raw"), "calibrated_heldout": v.get("calibrated_heldout"),
            "learned_heldout": v.get("learned_heldout"), "calibrated": calibrated, "answers": answers,
            "how": v.get("how"), "figures": figures, "figures_are": label,
        }
        model = getattr(ev, "model", None)
        interp = v.get("interpolated")
        if interp and getattr(model, "measured_resolutions", None) is not None:  # this search prices others too
            held, used = interp.get("heldout"), bool((interp.get("correction") or {}).get("used"))
            f = (held["corrected"] if used else held["interpolated"]) if held else interp
            out[ev.provides[0]]["interpolated"] = {
                "figures": f, "measured_resolutions": interp.get("measured_resolutions"),
                "figures_are": ("corrected per resolution, held-out" if used else "interpolated, held-out")
                if held else "interpolated"}
    return out


def describe_trust(trust: dict[str, Any]) -> list[str]:
    """One line per table- or model-based latency metric, for reports."""
    lines = []
    for metric, v in trust.items():
        if v is None:
            lines.append(f"{metric}: from a table that was never validated (nas latency validate TABLE)")
            continue
        f = v["figures"]
        source = "few-shot model" if v["answers"] == "fewshot" else "table"
        lines.append(f"{metric}: {source} validated on {v['networks']} networks ({v['figures_are']}): MAPE "
                     f"{f['mape_pct']:.1f}%, {100 * f['within_10pct']:.0f}% within ±10%, Kendall τ "
                     f"{f['kendall_tau']:.2f}")
        if v.get("interpolated"):
            i, g = v["interpolated"], v["interpolated"]["figures"]
            lines.append(f"{metric}: at resolutions other than the measured {i['measured_resolutions']} "
                         f"({i['figures_are']}, {g['n']} networks): MAPE {g['mape_pct']:.1f}%, "
                         f"{100 * g['within_10pct']:.0f}% within ±10%, Kendall τ {g['kendall_tau']:.2f}")
    return lines
