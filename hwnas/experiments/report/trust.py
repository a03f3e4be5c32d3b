"""How far a run's table- or model-based latency figures can be trusted: what answers each metric and the figures
that judge it (held-out, leave-one-out or the raw sum), for pareto.json, ``nas report`` and the HTML report.

:func:`latency_trust` computes a :class:`LatencyTrust` from an experiment's evaluators; ``pareto.json`` holds its
:meth:`~LatencyTrust.to_dict` under ``latency_trust``, read back with :meth:`~LatencyTrust.from_dict` (every form
earlier versions wrote); :func:`describe_trust` says it in words.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hwnas.experiments.config import Experiment

#: What answers a table's whole-network latency: the sum of its units, that sum calibrated, or learned.
TABLE_ANSWERS = ("sum", "calibration", "learned")

# The keys of an entry as each form is written (pareto.json), in order.
_FEWSHOT_KEYS = ("answers", "how", "networks", "figures", "figures_are")
_TABLE_KEYS = ("networks", "raw", "calibrated_heldout", "learned_heldout", "calibrated", "answers", "how", "figures",
               "figures_are")
_FIRST_KEYS = ("networks", "raw", "calibrated_heldout", "calibrated", "how")  # before "answers" existed


@dataclass(frozen=True)
class TrustEntry:
    """How far one latency metric can be trusted: what answers it and the figures that judge it.

    Args:
        answers: ``sum``, ``calibration`` or ``learned`` (a table), ``fewshot`` (a few-shot latency model).
        how: How the table or model was validated.
        networks: Whole networks it was validated on.
        figures: The figures that judge what answers (``mape_pct``, ``within_10pct``, ``kendall_tau``, ``n`` ...).
        figures_are: What those figures are (``raw sum``, ``calibrated, held-out``, ``leave-one-out`` ...).
        raw: A table's raw-sum figures.
        calibrated_heldout: A table's calibrated figures, held-out.
        learned_heldout: A table's learned correction's figures, held-out.
        calibrated: Whether a table's calibration is applied.
        interpolated: At resolutions the table did not measure: ``figures``, ``measured_resolutions``,
            ``figures_are``.
        extra: Keys this version does not write: kept as read.
    """

    answers: str | None = None
    how: str | None = None
    networks: int | None = None
    figures: Mapping[str, Any] | None = None
    figures_are: str | None = None
    raw: Mapping[str, Any] | None = None
    calibrated_heldout: Mapping[str, Any] | None = None
    learned_heldout: Mapping[str, Any] | None = None
    calibrated: bool | None = None
    interpolated: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """The entry's JSON object: the keys of its form (a few-shot model, a table, or a table of the first
        versions, which said no ``answers``), or else the fields that are set."""
        if self.answers == "fewshot":
            keys: tuple[str, ...] = _FEWSHOT_KEYS
        elif self.answers in TABLE_ANSWERS:
            keys = _TABLE_KEYS + (("interpolated",) if self.interpolated is not None else ())
        elif self.answers is None and self.figures is None and self.calibrated is not None:
            keys = _FIRST_KEYS
        else:
            keys = tuple(f.name for f in fields(self) if f.name != "extra" and getattr(self, f.name) is not None)
        out = {k: _plain(getattr(self, k)) for k in keys}
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> TrustEntry:
        """An entry from its JSON object, of any form (missing keys are None, unknown ones kept in ``extra``)."""
        known = {f.name for f in fields(cls)} - {"extra"}
        networks = data.get("networks")
        calibrated = data.get("calibrated")
        return cls(
            answers=_str(data.get("answers")), how=_str(data.get("how")),
            networks=networks if isinstance(networks, int) and not isinstance(networks, bool) else None,
            figures=_mapping(data.get("figures")), figures_are=_str(data.get("figures_are")),
            raw=_mapping(data.get("raw")), calibrated_heldout=_mapping(data.get("calibrated_heldout")),
            learned_heldout=_mapping(data.get("learned_heldout")),
            calibrated=calibrated if isinstance(calibrated, bool) else None,
            interpolated=_mapping(data.get("interpolated")),
            extra={k: v for k, v in data.items() if k not in known},
        )


@dataclass(frozen=True)
class LatencyTrust(Mapping[str, "TrustEntry | None"]):
    """Per latency metric that comes from a table or a learned model, how far it can be trusted (None: a table
    never validated). A read-only mapping, metric to :class:`TrustEntry` or None, in the experiment's order."""

    entries: Mapping[str, TrustEntry | None] = field(default_factory=dict)

    def __getitem__(self, metric: str) -> TrustEntry | None:
        return self.entries[metric]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def to_dict(self) -> dict[str, dict[str, object] | None]:
        """JSON form, for ``pareto.json``'s ``latency_trust``."""
        return {m: (e.to_dict() if e is not None else None) for m, e in self.entries.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, object] | None) -> LatencyTrust:
        """Read ``pareto.json``'s ``latency_trust`` (None or not an object: no entry); an entry that is not an
        object is read as an empty one (it says nothing a report could describe)."""
        if not isinstance(data, Mapping):
            return cls()
        return cls({str(m): (None if v is None else TrustEntry.from_dict(v if isinstance(v, Mapping) else {}))
                    for m, v in data.items()})

    @classmethod
    def of(cls, trust: LatencyTrust | Mapping[str, object] | None) -> LatencyTrust:
        """``trust`` as a :class:`LatencyTrust` (a JSON object is read with :meth:`from_dict`)."""
        return trust if isinstance(trust, LatencyTrust) else cls.from_dict(trust)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _plain(value: object) -> object:
    return dict(value) if isinstance(value, Mapping) else value


def latency_trust(experiment: Experiment) -> LatencyTrust:
    """Per latency metric that comes from a table or a learned model: how far it can be trusted.

    Each entry names what answers (``sum``, ``calibration``, ``learned`` for a table; ``fewshot`` for a
    model) and the figures that judge it (``figures``: held-out for a calibrated or learned table,
    leave-one-out for a few-shot model, the raw sum otherwise), beside the table's raw-sum figures.

    Args:
        experiment: The experiment (only its ``evaluators`` are read).
    """
    out: dict[str, TrustEntry | None] = {}
    for ev in experiment.evaluators:
        trust = getattr(ev, "trust", None)
        if trust is None:
            continue
        v = trust()
        if v is None:
            out[ev.provides[0]] = None
            continue
        if "loo" in v:  # a few-shot latency model
            out[ev.provides[0]] = TrustEntry(answers="fewshot", how=v.get("how"), networks=v["loo"].get("n"),
                                             figures=v["loo"], figures_are="leave-one-out")
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
        interpolated = None
        model = getattr(ev, "model", None)
        interp = v.get("interpolated")
        if interp and getattr(model, "measured_resolutions", None) is not None:  # this search prices others too
            held, used = interp.get("heldout"), bool((interp.get("correction") or {}).get("used"))
            f = (held["corrected"] if used else held["interpolated"]) if held else interp
            interpolated = {
                "figures": f, "measured_resolutions": interp.get("measured_resolutions"),
                "figures_are": ("corrected per resolution, held-out" if used else "interpolated, held-out")
                if held else "interpolated"}
        out[ev.provides[0]] = TrustEntry(
            networks=v.get("networks"), raw=v.get("raw"), calibrated_heldout=v.get("calibrated_heldout"),
            learned_heldout=v.get("learned_heldout"), calibrated=calibrated, answers=answers,
            how=v.get("how"), figures=figures, figures_are=label, interpolated=interpolated,
        )
    return LatencyTrust(out)


def describe_entry(metric: str, entry: TrustEntry | None) -> list[str]:
    """The lines :func:`describe_trust` says of one metric.

    Raises:
        KeyError, TypeError, ValueError: An entry without the figures a line needs (one of another version).
    """
    if entry is None:
        return [f"{metric}: from a table that was never validated (nas latency validate TABLE)"]
    if entry.answers is None or entry.figures_are is None:
        raise ValueError(f"{metric}: the entry says neither what answers nor what its figures are")
    f: Any = entry.figures
    source = "few-shot model" if entry.answers == "fewshot" else "table"
    lines = [f"{metric}: {source} validated on {entry.networks} networks ({entry.figures_are}): MAPE "
             f"{f['mape_pct']:.1f}%, {100 * f['within_10pct']:.0f}% within ±10%, Kendall τ "
             f"{f['kendall_tau']:.2f}"]
    if entry.interpolated:
        i, g = entry.interpolated, entry.interpolated["figures"]
        lines.append(f"{metric}: at resolutions other than the measured {i['measured_resolutions']} "
                     f"({i['figures_are']}, {g['n']} networks): MAPE {g['mape_pct']:.1f}%, "
                     f"{100 * g['within_10pct']:.0f}% within ±10%, Kendall τ {g['kendall_tau']:.2f}")
    return lines


def describe_trust(trust: LatencyTrust | Mapping[str, object]) -> list[str]:
    """One line per table- or model-based latency metric, for reports (a JSON object is read first)."""
    return [line for metric, entry in LatencyTrust.of(trust).items() for line in describe_entry(metric, entry)]
