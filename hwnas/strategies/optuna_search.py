"""Optuna's samplers (TPE, GP, NSGA-II, NSGA-III, random) as a strategy, driven through Optuna's ask/tell interface.

One integer parameter per gene (``suggest_int(gene.name, 0, len(gene.choices) - 1)``: an index into the gene's
choices), one study direction per objective (several objectives: a multi-objective study), constraints as
Optuna constraints. The run journal stays the source of truth: a resumed run replays it through ``tell``
into a fresh strategy, which rebuilds the study from nothing.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import sqlite3
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, InvalidArchitecture
from hwnas.objectives import Trial
from hwnas.strategies.base import BlackBoxStrategy, StrategyContext, StrategyParams

if TYPE_CHECKING:
    # optuna is imported when a strategy is built, not when hwnas.strategies is
    import sqlite3 as _sqlite3

    import optuna
    from optuna.distributions import BaseDistribution
    from optuna.samplers import BaseSampler
    from optuna.storages import RDBStorage
    from optuna.study import Study
    from optuna.study._frozen import FrozenStudy  # what RDBStorage.get_all_studies returns (not re-exported)
    from optuna.trial import FrozenTrial, TrialState
    from typing_extensions import Unpack

    from hwnas.search_spaces.base import IntegerVectorSpace

log = logging.getLogger(__name__)

#: The study's name in ``optuna.db`` (``optuna-dashboard RUN_DIR/optuna.db`` lists it).
STUDY_NAME = "hwnas"
#: The SQLite file in the run directory.
DB_FILE = "optuna.db"
#: The study user attribute holding the run's config hash (``run.json``'s ``config_sha256``).
CONFIG_ATTR = "hwnas_config_sha256"

Direction = Literal["minimize", "maximize"]
SamplerName = Literal["tpe", "motpe", "gp", "nsga2", "nsga3", "random"]
_WITH_STARTUP = ("tpe", "motpe", "gp")
_WITH_POPULATION = ("nsga2", "nsga3")
DEFAULT_STARTUP = 10
DEFAULT_POPULATION = 20


class OptunaParams(StrategyParams):
    sampler: SamplerName = Field("tpe", description="tpe, motpe, gp, nsga2, nsga3 or random")
    n_startup_trials: int | None = Field(
        None, ge=0, description=f"random trials before the model is used (tpe, motpe, gp; default {DEFAULT_STARTUP})")
    population_size: int | None = Field(
        None, ge=2, description=f"population size (nsga2, nsga3; default {DEFAULT_POPULATION})")

    @model_validator(mode="after")
    def _for_this_sampler(self) -> OptunaParams:
        if self.n_startup_trials is not None and self.sampler not in _WITH_STARTUP:
            raise ValueError(f"n_startup_trials is a parameter of samplers {', '.join(_WITH_STARTUP)}, "
                             f"not of {self.sampler!r}")
        if self.population_size is not None and self.sampler not in _WITH_POPULATION:
            raise ValueError(f"population_size is a parameter of samplers {', '.join(_WITH_POPULATION)}, "
                             f"not of {self.sampler!r}")
        return self


class OptunaSearch(BlackBoxStrategy):
    """Optuna samplers through ask/tell: ``tpe`` (default), ``motpe``, ``gp``, ``nsga2``, ``nsga3``, ``random``.

    Samplers (all seeded once from the strategy's generator, so the same seed and tells give the same
    proposals):

    - ``tpe``: :class:`optuna.samplers.TPESampler` with ``multivariate=True`` (one joint density over the
      genes); on several objectives it is Optuna's multi-objective TPE, which TPE does by itself.
    - ``motpe``: also ``TPESampler``: Optuna has no separate MOTPE sampler any more, TPE handles several
      objectives itself. Here with Optuna's own defaults: independent per-gene densities on several
      objectives (the published MOTPE), multivariate on one.
    - ``gp``: :class:`optuna.samplers.GPSampler` (log EI; log EHVI on several objectives; q-batch variants
      while other trials of the batch run). Slow: 0.3 s per proposal after ``n_startup_trials`` on one
      objective, a few seconds on two or in a batch (two cores); for expensive evaluations.
    - ``nsga2`` / ``nsga3``: :class:`optuna.samplers.NSGAIISampler` / ``NSGAIIISampler`` (uniform crossover,
      random mutation, constrained domination), ``population_size`` per generation.
    - ``random``: :class:`optuna.samplers.RandomSampler` (uniform per gene index, unlike the ``random``
      strategy, which samples the space's own distribution).

    Every sampler here takes one or more objectives (Optuna 5: GP and NSGA-III included).

    Trials are told as follows, with their constraint violations set through ``Trial.set_constraint``
    (Optuna's system attributes ``constraints:NAME``; ``<= 0`` is feasible) on every trial that did not fail:

    - ``ok``: COMPLETE with the objective values.
    - ``infeasible`` with every objective value: COMPLETE with them, and violations > 0. TPE ranks it
      among the infeasible trials by violation, NSGA-II/III by constrained domination, GP fits its
      feasibility models to it.
    - ``infeasible`` without them (a cheap constraint failed, the expensive evaluators never ran): PRUNED,
      not FAIL. Optuna's TPE learns from PRUNED trials with violations (they join the "bad" density,
      ranked by violation), so TPE learns where the constraints fail, the common case in a hardware-aware
      search (a latency bound checked before training). FAIL trials are ignored by every sampler and
      values cannot be invented: GP and NSGA-II/III use COMPLETE trials only, so for them a PRUNED trial is
      as a FAIL would be, but it stays in the study with its violations.
    - ``failed`` (an evaluator raised), and an ``ok`` trial lacking an objective value: FAIL (no constraints
      set: the violation of a metric that was never measured is unknown).

    Each trial carries user attributes ``hwnas_number``, ``hwnas_arch_id``, ``hwnas_status`` (and
    ``hwnas_error``), tying it to the run journal.

    Novelty: Optuna may suggest an index vector whose (canonical) architecture was evaluated already, or is
    already in the batch. The suggestion is intercepted inside the sampler, before the trial's parameters are
    written, and replaced by :meth:`~hwnas.strategies.base.BlackBoxStrategy.novel` (mutations of it, then
    uniform samples; a vector that is not a member is repaired by a sample, as the pymoo strategies do). So every
    Optuna trial is exactly one evaluated architecture: no discarded duplicates in the study, and the
    parameters Optuna learns from are those of the architecture evaluated.

    Storage: the sampler's study lives in memory (cheap asks and tells). With a run directory, every told
    trial is also written, after each ``tell``, to the study ``hwnas`` in ``RUN_DIR/optuna.db`` (SQLite):
    ``optuna-dashboard RUN_DIR/optuna.db`` or ``optuna.load_study(study_name="hwnas",
    storage="sqlite:///RUN_DIR/optuna.db")`` open it during and after the run (running trials are not
    written). A study of this run found there is deleted and rebuilt from the journal on resume; a study of
    another experiment (another config hash, another study name, other directions) is refused and left alone.
    Without a run directory (tests) nothing is written.
    """

    Params = OptunaParams
    space: IntegerVectorSpace  # the sampler suggests a choice index per gene (to_indices / from_indices)

    def __init__(self, *, sampler: str = "tpe", n_startup_trials: int | None = None,
                 population_size: int | None = None, **kwargs: Unpack[StrategyContext]) -> None:
        super().__init__(**kwargs)
        import optuna

        params = OptunaParams(sampler=sampler, n_startup_trials=n_startup_trials,
                              population_size=population_size)
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # Optuna's own logger only
        if not self.objectives:
            raise ConfigError(f"strategy 'optuna' (sampler {params.sampler!r}) needs at least one objective; "
                              "every sampler takes one or more")
        self.sampler_name = params.sampler
        self._genes = [(g.name, len(g.choices) - 1) for g in self.space.genes()]
        self._directions: list[Direction] = ["maximize" if o.direction == "max" else "minimize"
                                             for o in self.objectives]
        self._constraint_keys = _constraint_keys([c.describe() for c in self.constraints])
        seed = int(self.rng.integers(2**31 - 1))
        inner = _make_sampler(params, seed)
        # Replaces a suggestion already evaluated (or in the batch) before it is written: see the class doc.
        wrapped = _novelty_sampler_class()(inner, self)
        self._study = optuna.create_study(directions=self._directions, sampler=wrapped)
        self._db: optuna.Study | None = self._open_db(Path(self.run_dir)) if self.run_dir is not None else None
        self._pending: list[tuple[str, optuna.Trial]] = []  # (arch_id, trial) asked, not told yet, in ask order
        self._taken: set[str] = set()  # arch ids in the batch being asked (and pending)
        self._proposed: Architecture | None = None  # what the sampler wrapper chose for the trial being asked

    # -- ask ---------------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Architecture]:
        """``n`` new trials of the study, each a new architecture (see the class doc, Novelty)."""
        self._taken = {aid for aid, _ in self._pending}
        out = []
        for _ in range(max(1, n)):
            self._proposed = None
            trial = self._study.ask()
            indices = [trial.suggest_int(name, 0, top) for name, top in self._genes]
            arch = self._proposed
            if arch is None:  # every gene has a single choice: the sampler was never asked
                arch = self._decode(indices)
                self._taken.add(arch.arch_id)
            trial.set_user_attr("hwnas_arch_id", arch.arch_id)
            self._pending.append((arch.arch_id, trial))
            out.append(arch)
        self._proposed = None
        return out

    def _choose(self, params: dict[str, int]) -> dict[str, int]:
        """The sampler's suggestion (an index per gene), or, when its architecture is evaluated or already
        in the batch, a novel one's indices; the architecture goes to :attr:`_proposed`."""
        indices = [int(params.get(name, 0)) for name, _ in self._genes]
        try:
            arch, repaired = self.space.from_indices(indices), False
        except InvalidArchitecture:  # not a member (e.g. a DARTS node fed twice by one input): a fresh sample
            arch, repaired = self.space.sample(self.rng), True
        if arch.arch_id in self.seen or arch.arch_id in self._taken:
            start = arch
            arch = self.novel(lambda attempt: self.mutate_steps(start, 1 + attempt // 8), self._taken)
            repaired = True
        else:
            self._taken.add(arch.arch_id)
        self._proposed = arch
        if not repaired:
            return params
        return {name: int(i) for (name, _), i in zip(self._genes, self.space.to_indices(arch).tolist())}

    def _decode(self, indices: Sequence[int]) -> Architecture:
        try:
            return self.space.from_indices(indices)
        except InvalidArchitecture:
            return self.space.sample(self.rng)

    # -- tell --------------------------------------------------------------------------------------
    def tell(self, trials: Sequence[Trial]) -> None:
        """Tell the study (in the order asked) and copy the finished trials to ``optuna.db``."""
        self.remember(trials)
        finished = []
        for t in trials:
            trial = self._take_pending(t.arch.arch_id)
            if trial is None:  # not asked by this strategy (or told already): nothing for the study
                log.debug("trial %d (%s) was not asked by this strategy; not told to Optuna", t.number, t.arch.arch_id)
                continue
            finished.append(self._finish(trial, t))
        if self._db is not None and finished:
            self._db.add_trials(finished)

    def _take_pending(self, arch_id: str) -> optuna.Trial | None:
        for k, (aid, trial) in enumerate(self._pending):
            if aid == arch_id:
                del self._pending[k]
                return trial
        return None

    def _finish(self, trial: optuna.Trial, t: Trial) -> optuna.trial.FrozenTrial:
        from optuna.trial import TrialState

        trial.set_user_attr("hwnas_number", int(t.number))
        trial.set_user_attr("hwnas_status", t.status)
        if t.error:
            trial.set_user_attr("hwnas_error", t.error[:1000])
        values = self._values(t)
        if t.status == "failed":
            return self._study.tell(trial, state=TrialState.FAIL)
        violations = self.violation_vector(t)
        for key, v in zip(self._constraint_keys, violations.tolist()):
            trial.set_constraint(key, float(v))
        if values is not None:
            return self._study.tell(trial, values, state=TrialState.COMPLETE)
        if t.status == "infeasible" and float(np.clip(violations, 0, None).sum()) > 0:
            return self._study.tell(trial, state=TrialState.PRUNED)  # see the class doc
        return self._study.tell(trial, state=TrialState.FAIL)

    def _values(self, t: Trial) -> list[float] | None:
        """The objective values (the study has the directions), or None when one is missing or not finite."""
        out = []
        for o in self.objectives:
            v = t.metrics.get(o.metric)
            if v is None or not math.isfinite(v):
                return None
            out.append(float(v))
        return out

    # -- storage -----------------------------------------------------------------------------------
    def _open_db(self, run_dir: Path) -> optuna.Study:
        """The study ``hwnas`` in ``run_dir/optuna.db``, empty (the journal's replay fills it); one of this run
        is deleted first, one of another experiment refused."""
        import optuna

        path = run_dir / DB_FILE
        sha = _config_sha(run_dir)
        tables = _sqlite_tables(path) if path.exists() else set()
        if tables is None or (tables and not {"studies", "trials"} <= tables):
            raise ConfigError(f"{path} is not an Optuna database; it belongs to something else and is left as it "
                              "is: move it away to run this Optuna search here")
        run_dir.mkdir(parents=True, exist_ok=True)
        try:  # on an existing database: no table created, nothing written before the check below
            storage = optuna.storages.RDBStorage(f"sqlite:///{path.resolve()}", skip_table_creation=bool(tables))
            studies = storage.get_all_studies()
        except Exception as exc:  # an Optuna of another schema version, a locked or damaged file
            raise ConfigError(f"{path}: cannot be opened as an Optuna database ({exc})") from exc
        if studies:
            problem = _foreign(studies, sha, self._directions, earlier=_extended_from(run_dir))
            if problem:
                storage.engine.dispose()
                raise ConfigError(f"{path} belongs to another experiment ({problem}); it is left as it is: move "
                                  "it away to run or resume this experiment here")
            optuna.delete_study(study_name=STUDY_NAME, storage=storage)
            log.info("%s: the Optuna study is rebuilt from the run journal", path)
        _faster_sqlite(storage)
        db = optuna.create_study(storage=storage, study_name=STUDY_NAME, directions=self._directions,
                                 sampler=optuna.samplers.RandomSampler(seed=0))  # a record: never samples
        db.set_user_attr(CONFIG_ATTR, sha)
        db.set_user_attr("hwnas_sampler", self.sampler_name)
        db.set_user_attr("hwnas_space", str(getattr(self.space, "name", "")))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            db.set_metric_names([o.metric for o in self.objectives])  # the dashboard's axis labels
        return db


def _make_sampler(params: OptunaParams, seed: int) -> BaseSampler:
    import optuna

    startup = DEFAULT_STARTUP if params.n_startup_trials is None else params.n_startup_trials
    population = DEFAULT_POPULATION if params.population_size is None else params.population_size
    name = params.sampler
    if name == "tpe":
        return optuna.samplers.TPESampler(n_startup_trials=startup, multivariate=True, seed=seed)
    if name == "motpe":
        return optuna.samplers.TPESampler(n_startup_trials=startup, seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(n_startup_trials=startup, seed=seed, warn_independent_sampling=False)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(population_size=population, seed=seed)
    if name == "nsga3":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.NSGAIIISampler(population_size=population, seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)


@functools.cache
def _novelty_sampler_class() -> type:
    """The sampler wrapper class (made on first use: optuna is not imported with hwnas.strategies)."""
    from optuna.distributions import IntDistribution
    from optuna.samplers import BaseSampler

    class NoveltySampler(BaseSampler):
        """Delegates to ``inner``; the whole index vector is sampled at the trial's first suggestion (the
        inner sampler's relative sample, then its independent one per remaining gene, as a trial would do),
        then :meth:`OptunaSearch._choose` may replace it; the trial's parameters are written from the result."""

        def __init__(self, inner: BaseSampler, owner: OptunaSearch) -> None:
            self._inner = inner
            self._owner = owner
            self._space = {name: IntDistribution(0, top) for name, top in owner._genes if top > 0}

        def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
            return dict(self._space)

        def sample_relative(self, study: Study, trial: FrozenTrial,
                            search_space: dict[str, BaseDistribution]) -> dict[str, int]:
            inner_space = self._inner.infer_relative_search_space(study, trial)
            params = dict(self._inner.sample_relative(study, trial, inner_space)) if inner_space else {}
            for name, dist in self._space.items():
                if name not in params:
                    params[name] = self._inner.sample_independent(study, trial, name, dist)
            chosen = self._owner._choose({k: int(v) for k, v in params.items()})
            return {name: chosen[name] for name in self._space}

        def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                               param_distribution: BaseDistribution) -> Any:
            return self._inner.sample_independent(study, trial, param_name, param_distribution)

        def before_trial(self, study: Study, trial: FrozenTrial) -> None:
            self._inner.before_trial(study, trial)

        def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                        values: Sequence[float] | None) -> None:
            self._inner.after_trial(study, trial, state, values)

        def reseed_rng(self) -> None:
            self._inner.reseed_rng()

    return NoveltySampler


def _constraint_keys(described: Sequence[str]) -> list[str]:
    """Constraint names for ``set_constraint`` (their descriptions, numbered when two are alike)."""
    out: list[str] = []
    for text in described:
        key, k = text, 2
        while key in out:
            key, k = f"{text} ({k})", k + 1
        out.append(key)
    return out


def _config_sha(run_dir: Path) -> str | None:
    """``run.json``'s ``config_sha256`` (None without a run.json)."""
    path = run_dir / "run.json"
    if not path.is_file():
        return None
    try:
        sha = json.loads(path.read_text(encoding="utf-8"))["config_sha256"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable run record ({exc}); cannot tell whether {DB_FILE} is this run's "
                          "study") from None
    return None if sha is None else str(sha)


def _sqlite_tables(path: Path) -> set[str] | None:
    """The table names of SQLite file ``path``, read without writing to it; None when it is not SQLite."""
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return {str(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.Error:
        return None


def _extended_from(run_dir: Path) -> set[str]:
    """The config hashes the run had before its budget was extended (``run.json``'s ``extensions``): its study was
    written under one of them."""
    try:
        record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        return {str(e["previous_config_sha256"]) for e in record.get("extensions", [])
                if e.get("previous_config_sha256")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set()


def _foreign(studies: Sequence[FrozenStudy], sha: str | None, directions: Sequence[str], *,
             earlier: set[str] | frozenset[str] = frozenset()) -> str | None:
    """Why the studies in a database are not this run's (None when they are: one study ``hwnas`` with this
    run's config hash, or one it had before its budget was extended (``earlier``), and its directions)."""
    names = sorted(s.study_name for s in studies)
    if names != [STUDY_NAME]:
        return f"studies {', '.join(repr(n) for n in names)}, not one study {STUDY_NAME!r}"
    study = studies[0]
    if CONFIG_ATTR not in study.user_attrs:
        return f"study {STUDY_NAME!r} has no {CONFIG_ATTR} (not written by hwnas)"
    if study.user_attrs[CONFIG_ATTR] != sha and study.user_attrs[CONFIG_ATTR] not in earlier:
        return f"config sha256 {study.user_attrs[CONFIG_ATTR]}, this run's is {sha}"
    theirs = [d.name.lower() for d in study.directions]
    if theirs != list(directions):
        return f"directions {', '.join(theirs)}, this run's are {', '.join(directions)}"
    return None


def _faster_sqlite(storage: RDBStorage) -> None:
    """WAL journal and ``synchronous=NORMAL`` for the connections to come: a commit per trial costs less, and
    a crash loses at most the last trials written (the journal has them; resume rebuilds the study)."""
    from sqlalchemy import event

    def on_connect(dbapi_connection: _sqlite3.Connection, _record: object) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    event.listen(storage.engine, "connect", on_connect)
    storage.engine.dispose()  # connections made before the listener close; new ones get the pragmas
