"""Predictor-guided search: an inner evolution on fitted predictors picks what is really evaluated.

As once-for-all's search and DyNAS-T's LINAS: after ``initial`` random architectures, every ``ask`` fits one
predictor per objective (``hwnas.predictors``, default gradient-boosted trees) on the trials told so far, runs
an evolution on the predictions alone (a pool of random samples and mutants of the best evaluated
architectures; ``generations`` rounds that mutate the predicted best), and proposes the predicted best
architectures not yet evaluated: by predicted value with one objective, by non-dominated rank of the
predicted objective vectors (then spread along the first objective) with several. The runner evaluates
them like any other proposals, and the next ``ask`` refits on what they scored.

Hardware-aware use (several objectives): an objective the run can look up (a latency table's
``latency_ms@device``, given through :meth:`use_lookup`) is not predicted but read exactly for every candidate;
the predicted candidates are picked one by one by the hypervolume each would add to the evaluated front
(from ``reference``, default just beyond the worst evaluated point; each pick joins the front at its predicted
value before the next), after the predicted best on each predicted objective (``extremes``), and the inner
evolution mutates the most accurate and the evaluated front (inside ``reference`` when it reaches it). With
``skip_beyond_reference`` (``bayes_opt``'s default), a candidate whose looked-up value lies beyond ``reference`` is
not proposed (it could add no hypervolume there, whatever its accuracy), unless no candidate is inside; off by
default here, where it measured worse (docs/results/strategies.md). In a space whose isomorphic cells are kept apart
(:class:`~hwnas.search_spaces.base.IsomorphicSpace`, NB201 unmerged) the ``isomorphic_metrics`` (accuracy) are
learned on each cell's class representative and taken as the mean of the evaluated isomorphs where there are some
(NAS-Bench-201 trained every cell apart: isomorphs differ by training noise, a median 0.6 points of CIFAR-10
validation accuracy), while hardware metrics stay per cell.

A ``challenger`` (off here; ``linear`` in ``bayes_opt``) is a second predictor compared with ``predictor`` on each
learned objective by 3-fold cross-validation on the told trials (Kendall tau of the out-of-fold predictions); the
one that ranks better is fitted until the told trials have grown by half, when they are compared again. Trees do not
predict beyond the best value they were fitted on; a linear model does, and where an objective is a sum of per-gene
costs (FLOPs, a lookup latency) it is the right form and wins. The comparison draws its folds from a child of the
strategy's generator, so where the predictor keeps winning the search is the same as without a challenger.

The strategy only sees Architectures, finished Trials and looked-up metrics (its predictors learn from the
trials' metrics); it is deterministic given its generator and the tells. The defaults (400 trees, a pool of
3,000) were the best of six settings tried with ``nas bench strategies`` on NAS-Bench-201 CIFAR-10 at 50
queries (50 seeds; docs/results/strategies.md). Constraints are left to the runner: an infeasible candidate is
told as such and teaches the predictors nothing about its objectives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.objectives import Trial, hypervolume_improvement, non_dominated
from hwnas.search_spaces.base import CellGraphSpace, IsomorphicSpace, SearchSpace, balanced_batch, sample_batch
from hwnas.strategies.base import WORST, BlackBoxStrategy, LookupMixin, StrategyContext, StrategyParams

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from hwnas.predictors.base import Predictor

    #: Per objective: a fitted predictor, a constant (nothing to learn yet), or None (looked up, not learned).
    Surrogate = Predictor | float | None

#: Folds of the cross-validation that compares a challenger with the predictor.
CHALLENGE_FOLDS = 3
#: Told rows before the first comparison: each training fold then has the 8 rows the shipped predictors need.
CHALLENGE_MIN_ROWS = 12
#: The told trials compare the two again once they are this many times as many as at the last comparison.
CHALLENGE_GROWTH = 1.5
#: ``generations: auto``: one inner round per this many genes, within these bounds.
GENES_PER_GENERATION, AUTO_GENERATIONS = 4, (3, 8)
#: Feature rows kept per strategy (NB201 has 15,625 cells; a larger space keeps the most recent ones).
FEATURE_CACHE = 100_000


class PredictorGuidedParams(StrategyParams):
    """Parameters of the ``predictor_guided`` strategy."""

    predictor: str = Field("gbt", description="registered predictor fitted per objective (gbt, mlp, gp, linear, "
                                                              "ensemble)")
    predictor_params: dict[str, Any] = Field(
        default_factory=lambda: {"n_estimators": 400},
        description="its parameters (default: 400 trees, refitted at every ask)")
    challenger: str | None = Field(
        None, description="a second registered predictor (e.g. linear) compared with `predictor` per objective by "
                          "3-fold cross-validation on the told trials (Kendall tau of the out-of-fold predictions); "
                          "the better one is fitted, chosen again each time the told trials have grown by half. "
                          "null: `predictor` always")
    challenger_params: dict[str, Any] = Field(default_factory=dict, description="the challenger's parameters")
    features: str = Field("auto", description="feature set: auto (cell for cell spaces, else encode), encode, path, "
                                              "cell, or several joined with +")
    initial: int = Field(10, ge=1, description="architectures evaluated before the first fit (at least 8), drawn as "
                                               "`initial_design` says")
    initial_design: Literal["random", "balanced"] = Field(
        "random", description="how the first `initial` are drawn: random (uniform samples) or balanced (every value "
                              "of every gene as evenly as `initial` allows, a Latin-hypercube design; spaces that "
                              "sample otherwise, e.g. DARTS, get random ones)")
    pool: int = Field(3000, ge=10, description="random samples scored by the predictors at every ask")
    parents: int = Field(10, ge=1, description="best evaluated (and, later, best predicted) architectures mutated")
    mutants: int = Field(20, ge=1, description="mutants per parent per generation")
    generations: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        3, description="rounds of the inner evolution on the predictions; auto: one per four genes of the space, "
                       "3 to 8 (each round changes 1 or 2 genes: NAS-Bench-201's 6 genes 3, FBNet's 22 genes 6)")
    selection: Literal["auto", "hypervolume", "rank"] = Field(
        "auto", description="how several objectives pick: the hypervolume each candidate adds to the evaluated front "
                            "(auto with two or more objectives) or non-dominated rank then spread")
    extremes: int = Field(1, ge=0, description="with hypervolume selection, per batch the best predicted candidates on "
                                              "each predicted objective first (a predictor regresses to the mean, so "
                                              "the front's ends look worth less than they are)")
    reference: list[float] | None = Field(
        None, description="hypervolume reference, one value per objective in its units and order (the region the "
                          "front should cover: a value the user chose, e.g. the deployment's latency budget); without "
                          "it, see reference_from")
    reference_from: Literal["worst", "initial_median", "sampled_median"] = Field(
        "worst", description="without a reference: worst (the hypervolume measured from just beyond the worst "
                             "evaluated value of each objective, nothing steered or skipped), initial_median (the "
                             "median of each objective over the first `initial` evaluated architectures, the random "
                             "ones, used as the reference from then on: the middle of the space as the strategy "
                             "sampled it, known from its own trials alone) or sampled_median (as initial_median, but "
                             "on an objective the lookup prices, the median of `pool` random architectures looked "
                             "up: the same middle, estimated from many samples where each costs a lookup)")
    skip_beyond_reference: bool = Field(
        False, description="with a reference and a lookup: propose no candidate whose looked-up value lies beyond the "
                           "reference (it can add no hypervolume inside it)")
    isomorphic_metrics: list[str] = Field(
        default_factory=lambda: ["top1", "top5"],
        description="metrics isomorphic cells share (what the network computes), learned per isomorphism class in "
                    "a space that keeps isomorphs apart; hardware metrics never are")


class PredictorGuidedKwargs(StrategyContext, total=False):
    """The keyword arguments a subclass (``bayes_opt``) passes on to :class:`PredictorGuided`: the context, and
    the search parameters it does not set itself."""

    challenger_params: Mapping[str, object]
    features: str
    initial: int
    pool: int
    parents: int
    mutants: int
    selection: str
    extremes: int
    reference: Sequence[float] | None
    isomorphic_metrics: Sequence[str]


class PredictorGuided(LookupMixin, BlackBoxStrategy):
    """Fits a predictor per objective each ask; an inner evolution on the predictions proposes (OFA, LINAS)."""

    Params = PredictorGuidedParams

    def __init__(self, *, predictor: str = "gbt", predictor_params: Mapping[str, object] | None = None,
                 challenger: str | None = None, challenger_params: Mapping[str, object] | None = None,
                 features: str = "auto", initial: int = 10, initial_design: str = "random", pool: int = 3000,
                 parents: int = 10, mutants: int = 20,
                 generations: int | str = 3, selection: str = "auto", extremes: int = 1,
                 reference: Sequence[float] | None = None, reference_from: str = "worst",
                 skip_beyond_reference: bool = False, isomorphic_metrics: Sequence[str] = ("top1", "top5"),
                 **kwargs: Unpack[StrategyContext]) -> None:
        super().__init__(**kwargs)
        from hwnas.errors import ConfigError
        from hwnas.predictors import PREDICTORS, metric_features

        self.predictor = predictor
        self.predictor_params = dict(predictor_params) if predictor_params is not None else {"n_estimators": 400}
        self.challenger = challenger
        self.challenger_params = dict(challenger_params or {})
        for role, name, params in (("predictor", predictor, self.predictor_params),
                                   ("challenger", challenger, self.challenger_params)):
            try:
                if name is not None:
                    PREDICTORS.validate_params(name, params)
            except ConfigError as e:
                raise ConfigError(f"{type(self).__name__}: {role}: {e}") from None
        #: Per objective with a challenger: (told rows when last compared, the role that won: predictor or challenger).
        self.chosen: dict[int, tuple[int, str]] = {}
        #: The cross-validation folds' generator: a child of the strategy's, so its draws leave the search's alone.
        self._cv_rng = self.rng.spawn(1)[0]
        #: ``sampled_median``'s random architectures come from another child (the search's draws stay the same).
        self._reference_rng = self.rng.spawn(1)[0]
        if features == "auto":
            features = "cell" if isinstance(self.space, CellGraphSpace) else "encode"
        if metric_features(features):
            raise ConfigError(f"{type(self).__name__}: features {features!r} read measured metrics; the candidates "
                              "it scores are not measured yet (use encode, path, cell or graph)")
        self.features = features
        self.initial = max(initial, 8)  # the shipped predictors fit on 8 rows or more
        if initial_design not in ("random", "balanced"):
            raise ConfigError(f"{type(self).__name__}: initial_design must be random or balanced, not "
                              f"{initial_design!r}")
        self.initial_design = initial_design
        #: ``balanced``: the initial design, drawn at the first ask, served until the first fit.
        self._design: list[Architecture] | None = None
        self.pool = pool
        self.parents = parents
        self.mutants = mutants
        self.generations = auto_generations(self.space) if generations == "auto" else int(generations)
        self.extremes = extremes
        if reference is not None and len(reference) != len(self.objectives):
            raise ConfigError(f"{type(self).__name__}: reference has {len(reference)} values for "
                              f"{len(self.objectives)} objectives ({', '.join(o.metric for o in self.objectives)})")
        if reference is not None and not all(np.isfinite(float(v)) for v in reference):
            raise ConfigError(f"{type(self).__name__}: reference {list(reference)} is not finite")
        if reference_from not in ("worst", "initial_median", "sampled_median"):
            raise ConfigError(f"{type(self).__name__}: reference_from must be worst, initial_median or "
                              f"sampled_median, not {reference_from!r}")
        #: The region the front should cover (minimise scale): the user's, or derived once ``initial`` trials are told
        #: (``reference_from``: their median, or on a looked-up objective a looked-up random sample's); None: none.
        self.reference = (None if reference is None else
                          np.array([o.to_minimise(float(v)) for o, v in zip(self.objectives, reference)]))
        self.reference_from = reference_from
        self.skip_beyond_reference = skip_beyond_reference
        self.selection = ("hypervolume" if len(self.objectives) > 1 else "rank") if selection == "auto" else selection
        #: The space, where it keeps isomorphic cells apart (accuracy is learned per isomorphism class there).
        self.isomorphic: IsomorphicSpace | None = (
            self.space if isinstance(self.space, IsomorphicSpace) and self.space.keeps_isomorphs_apart else None)
        iso = set(isomorphic_metrics) if self.isomorphic is not None else set()
        #: Per objective: learned on the isomorphism class (accuracy in an unmerged cell space) or per architecture.
        self.by_class = [o.metric in iso for o in self.objectives]
        self.trials: list[Trial] = []
        self._rows: dict[str, np.ndarray] = {}  # arch id -> feature row
        self._known: dict[str, tuple[np.ndarray, int]] = {}  # class representative id -> (sum of vectors, count)

    def tell(self, trials: Sequence[Trial]) -> None:
        self.remember(trials)
        self.trials.extend(trials)
        if self.reference is None and self.reference_from != "worst" and len(self.objectives) > 1:
            first = [v for v in (self.objective_vector(t) for t in self.trials if t.status == "ok")
                     if np.all(v < WORST)][: self.initial]
            if len(first) == self.initial:  # from the first `initial` evaluated, the random ones; fixed from then on
                self.reference = np.median(np.stack(first), axis=0)
                if self.reference_from == "sampled_median":
                    self._sampled_reference(self.reference)
        if any(self.by_class):  # the mean over the evaluated members of each class (training noise differs)
            for t in trials:
                v = self.objective_vector(t)
                if t.status == "ok" and np.all(v < WORST):
                    key = self._class_of(t.arch).arch_id
                    total, count = self._known.get(key, (np.zeros_like(v), 0))
                    self._known[key] = (total + v, count + 1)

    def _sampled_reference(self, reference: np.ndarray) -> None:
        """On each looked-up objective, set ``reference`` to the median over ``pool`` random architectures' looked-up
        values (drawn once, from a child generator; architectures the lookup cannot price are left out)."""
        cols = self.looked_up_objectives()
        if not cols:
            return
        priced = self.look_up(sample_batch(self.space, self._reference_rng, self.pool))
        for j in cols:
            values = priced[:, j][priced[:, j] < WORST]
            if values.size:
                reference[j] = float(np.median(values))

    def _class_of(self, arch: Architecture) -> Architecture:
        assert self.isomorphic is not None  # by_class is set only for such a space
        return self.isomorphic.isomorph_representative(arch)

    def _features(self, archs: Sequence[Architecture]) -> np.ndarray:
        """Feature rows of ``archs``, each computed once (the pool revisits a finite space's members)."""
        from hwnas.predictors import featurize

        missing = list({a.arch_id: a for a in archs if a.arch_id not in self._rows}.values())
        if missing:
            if len(self._rows) + len(missing) > FEATURE_CACHE:  # full: start again with these archs' rows only
                self._rows.clear()
                missing = list({a.arch_id: a for a in archs}.values())
            for a, row in zip(missing, featurize(self.space, missing, self.features)):
                self._rows[a.arch_id] = row
        return np.stack([self._rows[a.arch_id] for a in archs])

    def _learned_on(self, archs: Sequence[Architecture], j: int) -> list[Architecture]:
        return [self._class_of(a) for a in archs] if self.by_class[j] else list(archs)

    # -- ask -------------------------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Architecture]:
        n = max(1, n)
        fitted = self._fit()
        out = [] if fitted is None else self._propose(fitted, n)  # too few evaluated yet: random ones
        taken = {a.arch_id for a in out}
        if fitted is None and self.initial_design == "balanced":  # the design's next rows, then random ones
            if self._design is None:
                self._design = balanced_batch(self.space, self.rng, self.initial)
            while len(out) < n and self._design:
                arch = self._design.pop(0)
                if arch.arch_id not in self.seen and arch.arch_id not in taken:
                    out.append(arch)
                    taken.add(arch.arch_id)
        while len(out) < n:  # the inner search found fewer new architectures than asked: fill up
            out.append(self.novel(lambda _attempt: self.space.sample(self.rng), taken))
        return out

    def _propose(self, models: list[Surrogate], n: int) -> list[Architecture]:
        """At most ``n`` unevaluated architectures chosen on the fitted predictors: the predicted best."""
        candidates, predicted = self._inner_search(models)
        return [candidates[i] for i in self._select(predicted, n)]

    def _fit(self) -> list[Surrogate] | None:
        """Per objective a fitted predictor (on the minimise scale), a constant, or None where the objective is
        looked up; None altogether while there are too few trials."""
        from hwnas.predictors import PREDICTORS

        rows = [(t, self.objective_vector(t)) for t in self.trials if t.status == "ok"]
        rows = [(t, v) for t, v in rows if np.all(v < 1e11)]
        if len(rows) < self.initial:
            return None
        Y = np.stack([v for _, v in rows])
        looked_up = set(self.looked_up_objectives())
        models: list[Surrogate] = []
        for j in range(Y.shape[1]):
            if j in looked_up:
                models.append(None)
            elif np.ptp(Y[:, j]) == 0:  # nothing to learn yet on this objective: predict the constant
                models.append(float(Y[0, j]))
            else:
                X = self._features(self._learned_on([t.arch for t, _ in rows], j))
                name, params = self._surrogate(j, X, Y[:, j])
                seed = np.random.default_rng(int(self.rng.integers(2**63 - 1)))
                models.append(PREDICTORS.create(name, params, rng=seed).fit(X, Y[:, j]))
        return models

    def _surrogate(self, j: int, X: np.ndarray, y: np.ndarray) -> tuple[str, Mapping[str, object]]:
        """The predictor to fit on objective ``j``: ``predictor``, or with a ``challenger`` whichever of the two
        ranked the told trials better out of fold when last chosen (from :data:`CHALLENGE_MIN_ROWS` told trials, and
        again each time they have grown by half; before that, ``predictor``)."""
        if self.challenger is None:
            return self.predictor, self.predictor_params
        both = {"predictor": (self.predictor, self.predictor_params),
                "challenger": (self.challenger, self.challenger_params)}
        when, role = self.chosen.get(j, (0, "predictor"))
        if y.size >= max(CHALLENGE_GROWTH * when, CHALLENGE_MIN_ROWS) and y.size > when:
            seed = int(self._cv_rng.integers(2**31 - 1))  # the same folds for both
            ours, theirs = (_out_of_fold_tau(name, params, X, y, seed) for name, params in both.values())
            # the challenger only where it ranks strictly better (a nan, a constant prediction, never wins)
            role = "challenger" if theirs > ours or (np.isnan(ours) and not np.isnan(theirs)) else "predictor"
            self.chosen[j] = (y.size, role)
        return both[role]

    def _predict(self, models: list[Surrogate], archs: list[Architecture]) -> np.ndarray:
        """Objective vectors of ``archs`` (minimise scale): looked up where the run can, else the evaluated
        isomorph's value where the objective is shared by isomorphs and one is known, else predicted."""
        out = self.look_up(archs)
        for j, m in enumerate(models):
            if m is None:
                continue
            if isinstance(m, float):
                out[:, j] = m
                continue
            learned = self._learned_on(archs, j)
            out[:, j] = np.asarray(m.predict(self._features(learned)))
            if self.by_class[j]:  # an evaluated class: the mean of its evaluated members
                for i, a in enumerate(learned):
                    known = self._known.get(a.arch_id)
                    if known is not None:
                        out[i, j] = known[0][j] / known[1]
        return out

    def _add(self, arch: Architecture, found: dict[str, Architecture]) -> None:
        arch = self.space.canonicalize(arch)
        if arch.arch_id not in self.seen and arch.arch_id not in found:
            found[arch.arch_id] = arch

    def _inner_search(self, models: list[Surrogate]) -> tuple[list[Architecture], np.ndarray]:
        """Unevaluated candidates and their predicted objective vectors (minimise scale)."""
        found: dict[str, Architecture] = {}
        for arch in sample_batch(self.space, self.rng, self.pool):
            self._add(arch, found)
        ok = [t for t in self.trials if t.status == "ok"]
        parents = [ok[i].arch for i in self._best(np.stack([self.objective_vector(t) for t in ok]))]
        for generation in range(self.generations + 1):
            for parent in parents:
                if any(self.by_class) and self.isomorphic is not None:
                    # its isomorphs: the same accuracy (up to noise) at other latencies
                    for member in self.isomorphic.isomorphs(parent):
                        self._add(member, found)
                for k in range(self.mutants):
                    self._add(self.mutate_steps(parent, 1 + k % 2), found)
            if generation == self.generations or not found:
                break
            cands = list(found.values())
            parents = [cands[i] for i in self._best(self._predict(models, cands))]
        cands = list(found.values())
        if not cands:
            return [], np.zeros((0, len(models)))
        predicted = self._predict(models, cands)
        keep = self._can_add_hypervolume(predicted)
        return [a for a, k in zip(cands, keep) if k], predicted[keep]

    def _can_add_hypervolume(self, predicted: np.ndarray) -> np.ndarray:
        """With ``skip_beyond_reference``, rows inside ``reference`` on every looked-up objective (known exactly: a
        candidate beyond the reference there can add no hypervolume, whatever it scores on the rest); else, without
        a reference or a lookup, or when no row is inside, every row."""
        inside = np.ones(predicted.shape[0], dtype=bool)
        if not self.skip_beyond_reference or self.reference is None or self.selection != "hypervolume":
            return inside
        for j in self.looked_up_objectives():
            inside &= predicted[:, j] < self.reference[j]
        return inside if inside.any() else np.ones_like(inside)

    def _best(self, vectors: np.ndarray) -> list[int]:
        """Rows to mutate: the ``parents`` best by the first objective (a tie broken by the sum of the rest); with
        hypervolume selection, the ``parents`` best on each objective that is not looked up, then whole
        non-dominated ranks until ``parents`` more (only rows inside ``reference`` when there are any)."""
        if self.selection != "hypervolume":
            order = np.lexsort((vectors[:, 1:].sum(axis=1), vectors[:, 0]))
            return [int(i) for i in order[: self.parents]]
        remaining = np.flatnonzero(np.all(vectors < WORST, axis=1))
        if self.reference is not None:  # the region the front should cover, when any of it is reached
            inside = remaining[np.all(vectors[remaining] < self.reference, axis=1)]
            remaining = inside if inside.size else remaining
        chosen: list[int] = []
        looked_up = set(self.looked_up_objectives())
        for j in range(vectors.shape[1]):  # the best on each predicted objective (the front's costly end)
            if j not in looked_up:
                best = remaining[np.argsort(vectors[remaining, j], kind="stable")[: self.parents]]
                chosen.extend(int(i) for i in best if int(i) not in chosen)
        remaining = np.setdiff1d(remaining, chosen)
        top = len(chosen) + self.parents
        while remaining.size and len(chosen) < top:
            front = remaining[non_dominated(vectors[remaining])]
            chosen.extend(int(i) for i in front)
            remaining = np.setdiff1d(remaining, front, assume_unique=True)
        return chosen

    def _select(self, predicted: np.ndarray, n: int) -> list[int]:
        """The ``n`` to evaluate: by hypervolume gain, or by predicted rank (see the module doc)."""
        if predicted.shape[0] == 0:
            return []
        chosen = self._by_hypervolume(predicted, n) if self.selection == "hypervolume" else []
        if len(chosen) < n:  # no candidate adds hypervolume any more: the predicted ranks fill up
            taken = set(chosen)
            chosen += [i for i in self._by_rank(predicted, n + len(chosen)) if i not in taken][: n - len(chosen)]
        return chosen

    def _by_hypervolume(self, predicted: np.ndarray, n: int) -> list[int]:
        """Greedily, the candidate whose predicted vector adds the most hypervolume to the evaluated front (and the
        picks before it), from ``reference`` (default: just beyond the worst evaluated value of each objective)."""
        evaluated = np.stack([self.objective_vector(t) for t in self.trials if t.status == "ok"])
        evaluated = evaluated[np.all(evaluated < WORST, axis=1)]
        if len(evaluated) == 0:
            return []
        reference = (evaluated.max(axis=0) + 1e-9 * (1.0 + np.abs(evaluated.max(axis=0))) if self.reference is None
                     else self.reference)
        front = evaluated[non_dominated(evaluated)]
        usable = np.all(np.isfinite(predicted) & (predicted < WORST), axis=1)
        chosen: list[int] = []
        looked_up = set(self.looked_up_objectives())
        for j in range(predicted.shape[1] if self.extremes else 0):
            if j in looked_up or len(chosen) >= n:
                continue
            order = [int(i) for i in np.argsort(predicted[:, j], kind="stable") if usable[i] and int(i) not in chosen]
            picks = order[: min(self.extremes, n - len(chosen))]
            chosen.extend(picks)
            front = np.vstack([front, predicted[picks]])
        for _ in range(n - len(chosen)):
            gain = np.where(usable, hypervolume_improvement(predicted, front, reference), 0.0)
            gain[chosen] = 0.0
            best = int(np.argmax(gain))
            if gain[best] <= 0.0:
                break
            chosen.append(best)
            front = np.vstack([front, predicted[best]])
        return chosen

    def _by_rank(self, predicted: np.ndarray, n: int) -> list[int]:
        """The ``n`` best by predicted non-dominated rank; within the last rank, spread along objective 0."""
        if predicted.shape[1] == 1:
            return [int(i) for i in np.argsort(predicted[:, 0], kind="stable")[:n]]
        remaining = np.arange(predicted.shape[0])
        chosen: list[int] = []
        while remaining.size and len(chosen) < n:
            front = remaining[non_dominated(predicted[remaining])]
            need = n - len(chosen)
            if front.size <= need:
                chosen.extend(int(i) for i in front)
            else:  # evenly spaced along the first objective, ends included
                front = front[np.argsort(predicted[front, 0], kind="stable")]
                picks = np.unique(np.round(np.linspace(0, front.size - 1, need)).astype(int))
                chosen.extend(int(front[i]) for i in picks)
            remaining = np.setdiff1d(remaining, front, assume_unique=True)
        return chosen[:n]


def _out_of_fold_tau(name: str, params: Mapping[str, object], X: np.ndarray, y: np.ndarray, seed: int) -> float:
    """Kendall tau of ``name``'s out-of-fold predictions of ``y`` (:data:`CHALLENGE_FOLDS` folds); nan where a fold's
    predictions are not numbers (such a predictor does not win the comparison)."""
    from hwnas.errors import ConfigError
    from hwnas.predictors.fit import cross_validate

    try:
        return float(cross_validate(name, params, X, y, folds=CHALLENGE_FOLDS, seed=seed)["kendall_tau"])
    except ConfigError:
        return float("nan")


def auto_generations(space: SearchSpace) -> int:
    """Rounds of the inner evolution for ``generations: auto``: enough for a candidate to move a quarter or more of
    a large space's genes from its evaluated ancestor in one ask (each round changes 1 or 2), at least 3, at most 8."""
    lo, hi = AUTO_GENERATIONS
    return int(min(hi, max(lo, -(-len(space.genes()) // GENES_PER_GENERATION))))
