"""What a run's outcome is, computed once: :class:`RunSummary`.

:func:`summary_of` computes it from trials (:func:`summarize` from an experiment and its trials); the run writes
it as ``pareto.json`` (:meth:`RunSummary.pareto_dict`, with ``pareto.csv``) and ``summary.json``
(:meth:`RunSummary.to_dict`) when it finishes (:func:`hwnas.experiments.api.finish`), and :func:`read_summary`
reads it back from a run directory, finished or not, falling back to the journal for what a run directory of an
earlier version (or a run still going) does not hold. ``nas run``, ``nas report``, the HTML report and the Python
API (``RunResult.summary``) all show this one summary.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.experiments.report.front import front_hypervolume, write_front_csv
from hwnas.experiments.report.trust import LatencyTrust, describe_trust, latency_trust
from hwnas.experiments.rundir import check_run_dir
from hwnas.experiments.runs import load_run
from hwnas.fileio import atomic_write
from hwnas.objectives import Constraint, Objective, ReferencePoint, Trial, pareto_front, reference_point

if TYPE_CHECKING:
    from hwnas.experiments.config import Experiment
    from hwnas.experiments.export.card import ModelCard

#: The run directory's files a summary is written to.
PARETO_JSON = "pareto.json"
SUMMARY_JSON = "summary.json"

#: Where a summary's hypervolume comes from when :func:`read_summary` computes it.
FROM_JOURNAL = "computed from the journal"


@dataclass(frozen=True)
class TrialCounts:
    """Trials by status."""

    ok: int = 0
    infeasible: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.ok + self.infeasible + self.failed

    @classmethod
    def of(cls, trials: Sequence[Trial]) -> TrialCounts:
        return cls(ok=sum(t.status == "ok" for t in trials), infeasible=sum(t.status == "infeasible" for t in trials),
                   failed=sum(t.status == "failed" for t in trials))

    def to_dict(self) -> dict[str, int]:
        return {"ok": self.ok, "infeasible": self.infeasible, "failed": self.failed}

    @classmethod
    def from_dict(cls, data: object) -> TrialCounts:
        """Lenient: a missing or unreadable count is 0."""
        counts: Mapping[object, object] = data if isinstance(data, Mapping) else {}
        return cls(**{k: v for k in ("ok", "infeasible", "failed")
                      if isinstance(v := counts.get(k), int) and not isinstance(v, bool)})


@dataclass(frozen=True)
class SearchFacts:
    """How this session's search went (``summary.json``'s ``search``; seconds are written to the millisecond).

    Args:
        setup_s: The evaluators' one-off setup.
        wall_s: The search loop.
        journal_evaluation_s: The evaluation time the journal holds, earlier sessions included.
        evaluated: Trials evaluated in this session.
        reused: Trials reused from the journal.
        stopped_early: Why the search stopped before its budget, or None.
        extra: Keys this version does not write: kept as read.
    """

    setup_s: float | None = None
    wall_s: float | None = None
    journal_evaluation_s: float | None = None
    evaluated: int | None = None
    reused: int | None = None
    stopped_early: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        def seconds(v: float | None) -> float | None:
            return round(v, 3) if v is not None else None

        out: dict[str, object] = {"setup_s": seconds(self.setup_s), "wall_s": seconds(self.wall_s),
               "journal_evaluation_s": seconds(self.journal_evaluation_s), "evaluated": self.evaluated,
               "reused": self.reused, "stopped_early": self.stopped_early}
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> SearchFacts:
        known = ("setup_s", "wall_s", "journal_evaluation_s", "evaluated", "reused", "stopped_early")
        stopped = data.get("stopped_early")
        return cls(setup_s=_number(data.get("setup_s")), wall_s=_number(data.get("wall_s")),
                   journal_evaluation_s=_number(data.get("journal_evaluation_s")),
                   evaluated=_int(data.get("evaluated")), reused=_int(data.get("reused")),
                   stopped_early=stopped if isinstance(stopped, str) else None,
                   extra={k: v for k, v in data.items() if k not in known})


@dataclass(frozen=True)
class RunSummary:
    """A run's outcome: its trial counts, front, hypervolume against the fixed reference point, constraints,
    how far its latency figures can be trusted, and (once it finished) how the search went and what it exported.

    Args:
        objectives: The experiment's objectives.
        front: The Pareto front of the run's trials (:func:`hwnas.objectives.pareto_front`).
        trials: Its trials by status.
        hypervolume: The front's hypervolume against ``reference``; None when an objective has no reference.
        reference: The hypervolume reference point.
        constraints: The experiment's constraints (relative ones resolved with the values the run measured).
        latency_trust: How far its table- or model-based latency metrics can be trusted.
        search: How the search went (written when the run finishes; None before, or for a run of an earlier
            version read back).
        exported: The ONNX files the run exported (None: the run exported nothing).
        max_abs_diff: The largest difference of the exported ONNX files' outputs from torch's.
        hypervolume_from: Where ``hypervolume`` and ``reference`` come from (a file, or computed from the journal).
        multi_fidelity: A multi-fidelity run's evaluations per rung and the cost spent
            (:func:`fidelity_facts`); None for another run.
        extra: ``summary.json`` keys this version does not write: kept as read.
    """

    objectives: tuple[Objective, ...] = ()
    front: tuple[Trial, ...] = ()
    trials: TrialCounts = field(default_factory=TrialCounts)
    hypervolume: float | None = None
    reference: ReferencePoint = field(default_factory=lambda: ReferencePoint((), (), ()))
    constraints: tuple[Constraint, ...] = ()
    latency_trust: LatencyTrust = field(default_factory=LatencyTrust)
    search: SearchFacts | None = None
    exported: tuple[str, ...] | None = None
    max_abs_diff: float | None = None
    hypervolume_from: str = FROM_JOURNAL
    multi_fidelity: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def stopped_early(self) -> str | None:
        """Why the search stopped before its budget (as the run recorded it), or None."""
        return self.search.stopped_early if self.search is not None else None

    def with_export(self, cards: Sequence[ModelCard]) -> RunSummary:
        """This summary with the models an export wrote (their ONNX files and the largest ONNX difference)."""
        diffs = [c.max_abs_diff for c in cards if c.max_abs_diff is not None]
        return replace(self, exported=tuple(c.onnx_file or "" for c in cards),
                       max_abs_diff=max(diffs) if diffs else None)

    # ---------------------------------------------------------------------------------------------- the JSON

    def to_dict(self) -> dict[str, object]:
        """``summary.json``: front size, hypervolume, trial counts, and the search and export once finished."""
        out: dict[str, object] = {"front": len(self.front), "hypervolume": self.hypervolume,
                               "trials": self.trials.to_dict()}
        if self.search is not None:
            out["search"] = self.search.to_dict()
        if self.exported is not None:
            out["exported"] = list(self.exported)
            out["max_abs_diff"] = self.max_abs_diff
        if self.multi_fidelity is not None:
            out["multi_fidelity"] = dict(self.multi_fidelity)
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}

    def pareto_dict(self) -> dict[str, object]:
        """``pareto.json``: the objectives, the front's trials, the latency trust, the constraints, the trial
        counts, the hypervolume and its reference point."""
        return {
            "objectives": [{"metric": o.metric, "direction": o.direction} for o in self.objectives],
            "front": [t.to_dict() for t in self.front],
            "latency_trust": self.latency_trust.to_dict(),
            "constraints": [{"metric": c.metric, "max": c.max, "min": c.min,
                             **({"relative_to": c.relative_to, "reference_value": c.reference_value}
                                if c.relative_to else {})} for c in self.constraints],
            "trials": self.trials.to_dict(),
            "hypervolume": self.hypervolume,
            "hypervolume_reference": self.reference.to_dict(),
        }

    @classmethod
    def from_dict(cls, summary: Mapping[str, object] | None, pareto: Mapping[str, object] | None = None) -> RunSummary:
        """A summary from ``summary.json`` and ``pareto.json`` as any version wrote them (either may be None).

        Lenient: a missing key is None (or empty, or counted 0), an entry that cannot be read (a front member,
        an objective, a constraint) is left out, and ``summary.json`` keys this version does not know are kept
        in :attr:`extra`. The front and what defines it come from ``pareto.json`` only.
        """
        s: Mapping[str, Any] = summary if isinstance(summary, Mapping) else {}
        p: Mapping[str, Any] = pareto if isinstance(pareto, Mapping) else {}
        objectives = tuple(_read_all(p.get("objectives"), lambda o: Objective(str(o["metric"]), o["direction"])))
        search = s.get("search")
        exported = s.get("exported")
        mf = s.get("multi_fidelity")
        hv = s.get("hypervolume", p.get("hypervolume"))
        return cls(
            objectives=objectives,
            front=tuple(_read_all(p.get("front"), Trial.from_dict)),
            trials=TrialCounts.from_dict(s.get("trials", p.get("trials"))),
            hypervolume=float(hv) if _number(hv) is not None else None,
            reference=_reference_from_dict(p.get("hypervolume_reference"), objectives),
            constraints=tuple(_read_all(p.get("constraints"), lambda c: Constraint(**c))),
            latency_trust=LatencyTrust.from_dict(p.get("latency_trust")),
            search=SearchFacts.from_dict(search) if isinstance(search, Mapping) else None,
            exported=tuple(str(f) for f in exported) if isinstance(exported, list) else None,
            max_abs_diff=_number(s.get("max_abs_diff")),
            hypervolume_from=PARETO_JSON if "hypervolume" in p else SUMMARY_JSON,
            multi_fidelity=dict(mf) if isinstance(mf, Mapping) else None,
            extra={k: v for k, v in s.items() if k not in ("front", "hypervolume", "trials", "search", "exported",
                                                           "max_abs_diff", "multi_fidelity")},
        )


def _number(value: object) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _read_all(items: Any, read: Any) -> list[Any]:
    """``read`` of every entry of a JSON list that it can read (a missing list: none)."""
    out = []
    for item in items if isinstance(items, list) else []:
        try:
            out.append(read(item))
        except (KeyError, TypeError, ValueError):  # an entry another version wrote otherwise: left out
            continue
    return out


def _reference_from_dict(data: object, objectives: Sequence[Objective]) -> ReferencePoint:
    """``pareto.json``'s ``hypervolume_reference``: ``{metric: {"value": v, "from": source}}``."""
    if not isinstance(data, Mapping):
        return ReferencePoint((), (), ())
    direction = {o.metric: o.direction for o in objectives}
    values, sources, objs = [], [], []
    for metric, r in data.items():
        r = r if isinstance(r, Mapping) else {}
        value = _number(r.get("value"))
        values.append(float(value) if value is not None else None)
        sources.append(str(r.get("from", "?")))
        objs.append(Objective(str(metric), direction.get(str(metric), "min")))
    return ReferencePoint(tuple(values), tuple(sources), tuple(objs))


# ------------------------------------------------------------------------------------------ computing one


def summary_of(trials: Sequence[Trial], objectives: Sequence[Objective], constraints: Sequence[Constraint] = (), *,
               latency_trust: LatencyTrust | None = None, search: SearchFacts | None = None,
               unit: str | None = None) -> RunSummary:
    """The summary of ``trials``: their front, counts, and the front's hypervolume against the reference point
    the objectives and constraints fix (:func:`hwnas.objectives.reference_point`).

    In a multi-fidelity run the front is of top-rung trials only, the counts are of candidates (each at the
    highest rung it reached), and :attr:`RunSummary.multi_fidelity` says what each rung evaluated and cost
    (``unit``: the schedule's).
    """
    front = pareto_front(trials, objectives)
    reference = reference_point(objectives, constraints)
    mf = fidelity_facts(trials, unit)
    counted = final_trials(trials) if mf is not None else trials
    return RunSummary(objectives=tuple(objectives), front=tuple(front), trials=TrialCounts.of(counted),
                      hypervolume=front_hypervolume(front, reference), reference=reference,
                      constraints=tuple(constraints), latency_trust=latency_trust or LatencyTrust(), search=search,
                      multi_fidelity=mf)


def final_trials(trials: Sequence[Trial]) -> list[Trial]:
    """One trial per candidate: in a multi-fidelity run the one of the highest rung it reached (its final word);
    in another run, every trial."""
    best: dict[str, Trial] = {}
    for t in trials:
        seen = best.get(t.arch.arch_id)
        if seen is None or (t.rung or 0) > (seen.rung or 0):
            best[t.arch.arch_id] = t
    return sorted(best.values(), key=lambda t: t.number)


def fidelity_facts(trials: Sequence[Trial], unit: str | None = None) -> dict[str, Any] | None:
    """A multi-fidelity run's evaluations per rung and their cost (the schedule's stated cost per evaluation),
    ``{"rungs": [{"rung": 0, "evaluated": 64, "cost": 6.4}, ...], "cost": total, "unit": ...}``; None when no
    trial has a rung."""
    rungs: dict[int, list[Trial]] = {}
    for t in trials:
        if t.rung is not None:
            rungs.setdefault(t.rung, []).append(t)
    if not rungs:
        return None
    per = [{"rung": r, "evaluated": len(ts), "cost": round(sum(t.rung_cost or 0.0 for t in ts), 6)}
           for r, ts in sorted(rungs.items())]
    total = round(sum(float(p["cost"]) for p in per), 6)
    return {"rungs": per, "cost": total, "unit": unit}


def describe_fidelity(mf: Mapping[str, Any]) -> str:
    """:func:`fidelity_facts` in one line, as ``nas run`` and ``nas report`` print it: ``rung 0: 96 (96), rung 1: 24
    (72), rung 2: 8 (48); 216 epochs spent in all``."""
    rungs = ", ".join(f"rung {r['rung']}: {r['evaluated']} ({float(r['cost']):g})" for r in mf.get("rungs") or [])
    unit = mf.get("unit")
    return f"{rungs}; {float(mf.get('cost') or 0):g}{' ' + str(unit) if unit else ''} spent in all"


def summarize(experiment: Experiment, trials: Sequence[Trial], *, search: SearchFacts | None = None) -> RunSummary:
    """The summary of an experiment's trials, with its latency metrics' trust (:func:`summary_of`)."""
    mf = experiment.config.multi_fidelity
    return summary_of(trials, experiment.objectives, experiment.constraints, latency_trust=latency_trust(experiment),
                      search=search, unit=mf.unit if mf is not None else None)


# ------------------------------------------------------------------------------------------ reading one


def _describable(trust: LatencyTrust) -> bool:
    try:
        describe_trust(trust)
    except (KeyError, TypeError, ValueError):
        return False
    return True


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_summary(run_dir: str | Path, experiment: Experiment | None = None,
                 trials: Sequence[Trial] | None = None) -> RunSummary:
    """The summary of a run directory, finished or not (read-only).

    The front and the trial counts are the journal's. The hypervolume and its reference point are
    ``pareto.json``'s when it was written for these trials (the same counts), else computed from the journal;
    the latency trust is what ``pareto.json`` recorded (in a form this version describes), else computed from
    the experiment's evaluators; the search's facts and the exported models are ``summary.json``'s when it was
    written for these trials. A run directory of an earlier version, or of a run still going, is summarised
    from its journal.

    Args:
        run_dir: The run directory.
        experiment, trials: The run as :func:`hwnas.experiments.runs.load_run` reads it (read when not given).
    """
    run_dir = Path(run_dir)
    if experiment is None or trials is None:
        experiment, trials = load_run(run_dir)
    pareto = _read_json(run_dir / PARETO_JSON)
    pareto = pareto if isinstance(pareto, dict) else {}
    summary = _read_json(run_dir / SUMMARY_JSON)
    summary = summary if isinstance(summary, dict) else {}
    stored = RunSummary.from_dict(summary, pareto)
    trust = stored.latency_trust if "latency_trust" in pareto and _describable(stored.latency_trust) else None
    if trust is None:  # none recorded, or in a form this version cannot describe: the tables' own, now
        trust = latency_trust(experiment)
    mf = experiment.config.multi_fidelity
    out = summary_of(trials, experiment.objectives, experiment.constraints, latency_trust=trust,
                     unit=mf.unit if mf is not None else None)  # the schedule's unit, as the run's summary says
    counts = out.trials.to_dict()
    if ("hypervolume" in pareto and isinstance(pareto.get("hypervolume_reference"), dict)
            and pareto.get("trials") == counts):
        hv = _number(pareto["hypervolume"])
        out = replace(out, hypervolume=float(hv) if hv is not None else None, reference=stored.reference,
                      hypervolume_from=PARETO_JSON)
    if summary.get("trials") == counts:
        out = replace(out, search=stored.search, exported=stored.exported, max_abs_diff=stored.max_abs_diff,
                      extra=stored.extra)
    return out


def read_run(run_dir: str | Path) -> tuple[Experiment, list[Trial], RunSummary]:
    """A run directory checked (:func:`hwnas.experiments.rundir.check_run_dir`: one line naming what an incomplete
    one lacks), loaded and summarised (:func:`read_summary`): what ``nas report`` and the HTML report show."""
    run_dir = Path(run_dir)
    check_run_dir(run_dir)
    experiment, trials = load_run(run_dir)
    return experiment, trials, read_summary(run_dir, experiment, trials)


def write_pareto(run_dir: Path, summary: RunSummary) -> None:
    """Write the front as ``pareto.csv`` and the summary's ``pareto.json`` (:meth:`RunSummary.pareto_dict`)."""
    write_front_csv(run_dir, summary.front, summary.objectives)
    atomic_write(run_dir / PARETO_JSON, json.dumps(summary.pareto_dict(), indent=2) + "\n")


def write_summary(run_dir: Path, summary: RunSummary) -> None:
    """Write ``summary.json`` (:meth:`RunSummary.to_dict`)."""
    atomic_write(run_dir / SUMMARY_JSON, json.dumps(summary.to_dict(), indent=2) + "\n")


def closest_infeasible(trials: Sequence[Trial], constraints: Sequence[Constraint]) -> tuple[float, Trial] | None:
    """When no trial is feasible: the infeasible trial that missed the constraints by the least (its summed
    violation, and the trial); None when some trial is feasible, or none was judged infeasible."""
    if not trials or any(t.status == "ok" for t in trials):
        return None
    scored = [(sum(c.violation(t.metrics) for c in constraints), t) for t in trials if t.status == "infeasible"]
    return min(scored, key=lambda p: p[0]) if scored else None
