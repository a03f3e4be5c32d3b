"""BatchLoop, the one ask -> canonicalize -> dedupe -> evaluate -> tell loop: numbering, telling, stopping."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hwnas.architecture import Architecture
from hwnas.objectives import Trial
from hwnas.strategies.loop import MAX_STALE_BATCHES, BatchLoop, Candidate


class Mod5:
    """A space whose canonical form of ``x`` is ``x % 5``: five distinct architectures."""

    def canonicalize(self, arch: Architecture) -> Architecture:
        return Architecture("toy", {"x": int(arch.genes["x"]) % 5})


def arch(x: int) -> Architecture:
    return Architecture("toy", {"x": x})


class Script:
    """Asks the batches given, then the last one again and again; records what it is told."""

    def __init__(self, batches: list[list[int]]) -> None:
        self.batches, self.asks, self.told = batches, [], []

    def ask(self, n: int) -> list[Architecture]:
        self.asks.append(n)
        return [arch(x) for x in self.batches[min(len(self.asks), len(self.batches)) - 1]]

    def tell(self, trials: Sequence[Trial]) -> None:
        self.told.append([(t.number, int(t.arch.genes["x"])) for t in trials])


def evaluate_into(calls: list[list[tuple[int, int]]]):
    def evaluate(candidates: Sequence[Candidate]) -> list[Trial]:
        calls.append([(c.number, int(c.arch.genes["x"])) for c in candidates])
        return [Trial(c.number, c.arch, {"v": float(c.number)}) for c in candidates]

    return evaluate


def test_new_architectures_are_numbered_in_the_order_first_asked_and_every_slot_is_told() -> None:
    strategy, calls = Script([[1, 6, 2, 1], [7, 3, 8]]), []
    loop = BatchLoop(strategy, Mod5(), evaluate_into(calls), budget=4, batch_size=4)
    stop = loop.run()
    # 6 is 1 and 7 is 2 once canonical; 8 is 3, asked again; then nothing new (evaluate still called each batch)
    assert calls[:2] == [[(0, 1), (1, 2)], [(2, 3)]] and all(c == [] for c in calls[2:])
    assert strategy.told[:2] == [[(0, 1), (0, 1), (1, 2), (0, 1)], [(1, 2), (2, 3), (2, 3)]]
    assert strategy.asks[:3] == [4, 2, 1]  # min(batch_size, budget - evaluated)
    assert [t.number for t in loop.trials.values()] == [0, 1, 2]
    assert list(loop.trials) == [arch(x).arch_id for x in (1, 2, 3)]
    assert stop.reason == "stale" and loop.stale == MAX_STALE_BATCHES


def test_the_budget_running_out_inside_a_batch_tells_nothing_of_that_batch() -> None:
    strategy, calls = Script([[0, 1], [2, 3, 4]]), []
    loop = BatchLoop(strategy, Mod5(), evaluate_into(calls), budget=3, batch_size=3)
    batches = [loop.step(), loop.step()]
    assert calls == [[(0, 0), (1, 1)], [(2, 2)]]  # 3 and 4 are past the budget: never evaluated
    assert strategy.told == [[(0, 0), (1, 1)]]
    assert batches[1].told is None and [t.number for t in batches[1].new] == [2]
    assert loop.stop is not None and loop.stop.reason == "budget" and not loop.stop.early


def test_stale_batches_stop_the_loop_and_say_so() -> None:
    strategy, calls = Script([[0, 1], [1, 0]]), []
    loop = BatchLoop(strategy, Mod5(), evaluate_into(calls), budget=5, batch_size=2)
    stop = loop.run()
    assert stop.early and stop.reason == "stale"
    assert stop.message == (f"the space is exhausted, or nearly: for {MAX_STALE_BATCHES} batches the strategy found "
                            "no architecture it had not evaluated (2 of the budget's 5 evaluated)")
    assert len(strategy.told) == 1 + MAX_STALE_BATCHES and len(calls) == 1 + MAX_STALE_BATCHES  # evaluate: every batch
    assert calls[1:] == [[]] * MAX_STALE_BATCHES


class Finite(Script):
    def exhausted(self) -> bool:
        return len(self.asks) >= 2


def test_a_finite_strategy_stops_once_exhausted_and_its_batch_brought_nothing_new() -> None:
    loop = BatchLoop(Finite([[0, 1], [1], [2]]), Mod5(), evaluate_into([]), budget=5, batch_size=2)
    stop = loop.run()
    assert stop.reason == "exhausted" and stop.early
    assert stop.message == "the strategy has no more architectures (every one it derived is evaluated)"
    assert len(loop.trials) == 2


def test_ask_tell_time_stops_after_the_batch_that_passed_it_and_hooks_see_each_batch() -> None:
    asked: list[tuple[int, list[int]]] = []
    told: list[int] = []
    loop = BatchLoop(Script([[0, 1], [2, 3]]), Mod5(), evaluate_into([]), budget=5, batch_size=2,
                     max_ask_tell_s=-1.0, on_ask=lambda n, archs: asked.append((n, [a.genes["x"] for a in archs])),
                     on_told=lambda batch: told.append(len(batch.new)))
    assert loop.run().reason == "ask_tell_time"
    assert asked == [(2, [0, 1])] and told == [2] and loop.ask_tell_s >= 0


def test_an_evaluate_that_answers_for_the_wrong_number_of_candidates_is_refused() -> None:
    loop = BatchLoop(Script([[0, 1]]), Mod5(), lambda candidates: [], budget=5, batch_size=2)
    with pytest.raises(ValueError, match=r"evaluate returned 0 trial\(s\) for 2 candidate\(s\)"):
        loop.step()
