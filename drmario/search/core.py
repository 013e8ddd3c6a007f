"""What every search shares: the position it sees, the evaluator it may call, and its result.

A search sees a `Position`: the board, the pill to place, the NES preview (the next pill, which
the game shows), the stall rule's state and the pills used so far; never a game's later pills.

Searches with a network are written as generators (`Steps`): each yields the positions it needs
evaluated (`Leaves`, one batch for the leaves of all its games), receives the evaluator's
`Prediction` for them, and returns its results. `run` drives one with an `Evaluator`; `merged`
drives several as one (one evaluator call a step for all of them); the lockstep driver
(`play.lockstep`) interleaves two of them to overlap tree work with an asynchronous device.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import Move, Pill
from drmario.engine.game import Game
from drmario.engine.rules import MOVES_SHAPE, symmetrize
from drmario.engine.timing import reachable

if TYPE_CHECKING:
    import pandas as pd

N_PILLS = 9  # ordered colour pairs: pill index 3 * (left - 1) + (right - 1)


class Position(NamedTuple):
    """What a player may know: the board, the pill to place, the stall rule's state (pills since a
    virus was last cleared, and the game's stall limit, None without a stall rule), the NES preview
    of the next pill (None: unknown), how many pills the game has used, and its timing: under NES
    timing the speed index and the frame parity of the pill's first frame, which make the legal
    moves the reachable ones (`legal_moves_of`); speed_index None: free timing."""

    cells: np.ndarray  # uint8[8, 16]
    pill: Pill
    stall: int = 0
    stall_limit: int | None = None
    preview: Pill | None = None
    pills_used: int = 0
    speed_index: int | None = None
    parity: int = 1

    @classmethod
    def of(cls, game: Game) -> Position:
        if game.over:
            raise ValueError(f"{game!r} is over ({game.outcome and game.outcome.value}): it has no pill to place")
        timed = (game.speed_index, game.parity) if game.timed else (None, 1)
        return cls(game.board.cells, game.pill, game.stall, game.stall_limit, game.next_pill, game.pills_used, *timed)


def legal_moves_of(pos: Position, moves: np.ndarray) -> int:
    """Fill moves (int8[>= MAX_MOVES, 3]) with the position's legal moves and return how many: the
    timing-free ones (`kernels.legal_moves_into`), under NES timing only those reachable at the
    position's speed index and parity (`timing.reachable`, cached by board, speed and parity), in
    the same order."""
    n = K.legal_moves_into(pos.cells, int(pos.pill.left), int(pos.pill.right), moves)
    if pos.speed_index is None or n == 0:
        return n
    reach = reachable(pos.cells, pos.pill, pos.speed_index, pos.parity)
    keep = [j for j, (r, x, y) in enumerate(moves[:n].tolist()) if Move(r, x, y) in reach]
    moves[: len(keep)] = moves[keep]
    return len(keep)


def legal_mask_of(pos: Position) -> np.ndarray | None:
    """uint8[4, 8, 16] of the legal moves of a position under NES timing (planes r and r + 2 alike
    for a same-colour pill), None under free timing (every timing-free legal move)."""
    if pos.speed_index is None:
        return None
    mask = np.zeros(MOVES_SHAPE, np.uint8)
    for r, x, y in reachable(pos.cells, pos.pill, pos.speed_index, pos.parity):
        mask[r, x, y] = 1
        if pos.pill.same_colour:
            mask[r + 2, x, y] = 1
    return mask


class Prediction(NamedTuple):
    """Evaluator outputs for N positions. The last three are an evaluator's outcome-conditioned
    counts, if it has them (`NetConfig.outcome_values`); None: the means over both outcomes stand in."""

    won: np.ndarray  # float32[N] in [-1, 1]
    cleared: np.ndarray  # float32[N] >= 0, viruses cleared from here to the end
    duration: np.ndarray  # float32[N] >= 0, pills from here to the end
    moves: np.ndarray  # float32[N, 4, 8, 16] move probabilities
    win_pills: np.ndarray | None = None  # float32[N] >= 0, pills to the end of a won game
    loss_cleared: np.ndarray | None = None  # float32[N] >= 0, viruses cleared in a lost game
    loss_pills: np.ndarray | None = None  # float32[N] >= 0, pills to the end of a lost game

    def by_outcome(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(win_pills, loss_cleared, loss_pills), each float32[N]: duration and cleared where None."""
        return (
            self.duration if self.win_pills is None else self.win_pills,
            self.cleared if self.loss_cleared is None else self.loss_cleared,
            self.duration if self.loss_pills is None else self.loss_pills,
        )

    def rows(self, start: int, stop: int) -> Prediction:
        """Positions start to stop of every output."""
        w, c, d, m = (a[start:stop] for a in (self.won, self.cleared, self.duration, self.moves))
        return Prediction(w, c, d, m, *(None if a is None else a[start:stop] for a in self[4:]))


def check_prediction(prediction: Prediction, n: int) -> None:
    """ValueError unless an evaluator's answer holds its outputs for n positions (the outcome ones
    each None or float[n])."""
    got = [np.shape(a) for a in prediction[:4]] + [np.shape(a) for a in prediction[4:] if a is not None]
    want = [(n,), (n,), (n,), (n, *MOVES_SHAPE)] + [(n,)] * (len(got) - 4)
    if got != want:
        raise ValueError(f"the evaluator answered {n} positions with outputs of shapes {got}; expected {want}")


class Leaves(NamedTuple):
    """Positions a search asks to be evaluated, N of them."""

    cells: np.ndarray  # uint8[N, 8, 16]
    pills: np.ndarray  # uint8[N, 2] (left, right) colours
    previews: np.ndarray  # uint8[N, 2] the preview's colours


class Evaluator(Protocol):
    """Evaluates the leaves of many games in one call (a network, or rollouts)."""

    def evaluate(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> Prediction:
        """cells uint8[N, 8, 16], pills and previews uint8[N, 2] -> Prediction."""
        ...


@dataclass
class SearchResult:
    """The root of one search. n = legal moves."""

    pill: Pill
    moves: list[Move]  # the legal moves (canonical r for same-colour pills)
    prior: np.ndarray  # float64[n] the network's policy at the root, before any noise (else uniform)
    visits: np.ndarray  # float64[n] visits of each move
    value: np.ndarray  # float64[n] each move's value: utility in [0, 1] (NaN if never visited); expert: its score
    target: np.ndarray  # float32[4, 8, 16] the moves training target
    best: Move  # the move the search plays at temperature 0
    simulations: int  # simulations run (root evaluations not counted)

    def target_probs(self) -> np.ndarray:
        """float64[n]: the target's probability of each legal move (planes r and r + 2 together
        for a same-colour pill)."""
        r, x, y = (np.array([m[i] for m in self.moves], np.intp) for i in range(3))
        return self.target[r, x, y].astype(np.float64) * (2 if self.pill.same_colour else 1)

    def kl(self) -> float:
        """KL(target || prior) in nats: how far the search moved from the network's policy (0: the
        search added nothing); without a network, from the uniform prior."""
        target, prior = self.target_probs(), self.prior
        mass = target > 0
        return float(np.sum(target[mass] * np.log(target[mass] / np.maximum(prior[mass], 1e-12))))

    def table(self) -> pd.DataFrame:
        """The root moves as a pandas DataFrame (r, x, y, prior, visits, value, target)."""
        import pandas as pd

        r, x, y = (np.array([m[i] for m in self.moves], int) for i in range(3))
        return pd.DataFrame(
            {
                "r": r,
                "x": x,
                "y": y,
                "prior": self.prior,
                "visits": self.visits,
                "value": self.value,
                "target": self.target_probs(),
            }
        )


def dense_target(pill: Pill, moves: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """float32[4, 8, 16] from probabilities of the moves int8[n, 3] (a same-colour pill's mass is
    split between r and r + 2)."""
    dense = np.zeros(MOVES_SHAPE, np.float32)
    r, x, y = np.asarray(moves, np.intp).T
    dense[r, x, y] = probs / probs.sum()
    return symmetrize(dense, pill.same_colour)


Steps = Generator[Leaves, Prediction, list[SearchResult]]


def run(steps: Steps, evaluator: Evaluator) -> list[SearchResult]:
    """Drive a search written as `Steps` with an evaluator: evaluate each batch of leaves it yields
    until it returns its results."""
    try:
        leaves = next(steps)
        while True:
            leaves = steps.send(evaluator.evaluate(*leaves))
    except StopIteration as done:
        return done.value


def merged(searches: Sequence[Steps]) -> Generator[Leaves, Prediction, list[list[SearchResult]]]:
    """Several searches driven as one: each step yields the leaves of every search still running,
    concatenated, so that one evaluator call serves them all (a search that needs fewer steps drops
    out early); returns each search's results, in order."""
    if len(searches) == 1:  # nothing to merge: pass the one search's leaves and predictions through
        return [(yield from searches[0])]
    results: list[list[SearchResult]] = [[] for _ in searches]
    pending: dict[int, Leaves] = {}

    def advance(i: int, prediction: Prediction | None) -> None:
        try:
            pending[i] = next(searches[i]) if prediction is None else searches[i].send(prediction)
        except StopIteration as done:
            results[i] = done.value

    for i in range(len(searches)):
        advance(i, None)
    while pending:
        asked = list(pending.items())
        pending = {}
        prediction = yield Leaves(*(np.concatenate(parts) for parts in zip(*(leaves for _, leaves in asked))))
        bounds = np.cumsum([0] + [len(leaves.cells) for _, leaves in asked])
        for (i, _), a, b in zip(asked, bounds[:-1], bounds[1:]):
            advance(i, prediction.rows(a, b))
    return results


def pill_probs_problems(probs: Sequence[float] | None) -> list[str]:
    """The settings problem of a next-pill distribution (9 probabilities summing to 1, or None)."""
    if probs is not None and (len(probs) != N_PILLS or abs(sum(probs) - 1) > 1e-6):
        return [f"pill_probs = {list(probs)}: expected 9 numbers >= 0 summing to 1 (or None: uniform)"]
    return []


def pill_distribution(probs: Sequence[float] | None) -> np.ndarray:
    """float64[9] probabilities of the next pill (pill index 3 * (left - 1) + right - 1); None: uniform."""
    return np.full(N_PILLS, 1 / N_PILLS) if probs is None else np.asarray(probs, np.float64)


def check_positions(positions: Sequence[Position], need_preview: bool = True) -> None:
    """ValueError for positions a tree search cannot start from: a blocked spawn (no move), an
    unknown preview (the tree's pills come from it), or different stall rules in one batch."""
    limits = {pos.stall_limit for pos in positions}
    if len(limits) > 1:
        raise ValueError(f"positions searched together must share the stall rule, got stall limits {limits}")
    for i, pos in enumerate(positions):
        if K.spawn_blocked(pos.cells):
            raise ValueError(f"position {i}: a spawn cell is occupied, so there is no move to search")
        if need_preview and pos.preview is None:
            raise ValueError(
                f"position {i}: the preview (the next pill, which the NES shows) is unknown; a tree search "
                "needs it: its chance nodes draw the preview after it"
            )
