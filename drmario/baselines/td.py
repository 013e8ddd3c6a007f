"""A TD-Gammon-style learner with a shallow search (design note 004), for Dr. Mario.

Value network: board features (`features.FEATURES`, 23 numbers) -> one hidden layer of sigmoid units
(`hidden`, default 40, as in the note) -> a sigmoid output V in (0, 1), the value of a board whose
next pill is not yet known. The note's net has 2 outputs (each player's chances); one player needs
one. What V estimates (`value`):

- ``"share"`` (default): the share of the board's viruses that will still be cleared. A win is 1, a
  top out or stalemate ends the clearing (0, or `stalemate`). A placement that clears c of the
  board's n viruses and leaves board b is worth ``(c + (n - c) * V(b)) / n``.
- ``"win"`` (the note's): the chance of a win; a placement is worth V(b). In Dr. Mario this gets no
  signal until wins happen, and random or untrained play never wins (0 wins in 1,000 random games at
  levels 0-5, without a stall limit), so the search alone has to find the first ones.

Search (the note's depth-2 minimax becomes a depth-2 expectimax, the opponent being the random pill):
a placement's board b is terminal (a win is worth `win`, a top out `topout`, a stalemate
`stalemate`) or is valued ``sum_p prob_p * max_a' value(p at a' on b)`` over the 9 next pills.
Every first-ply placement is valued by the network first (1 ply), and only the `top_k` best of them
are searched to the second ply (all with top_k = 0); the move is the best of those (terminal
placements compete with their exact values). The engine kernels place and resolve every child
(`features.expand`, numba), and a compiled copy of the network values them all in one call.

Learning, as in the note: after each decision, one plain SGD step (in-game rate `lr_game`) on
0.5 * (V - target)^2 moves V(current board) toward the searched value of the chosen placement; at
the end of a game one step (after-game rate `lr_after`) moves V(final board) toward the outcome: 1
for a win, 0 for a top out and `stalemate` (default 0) for a stalemate. The rules count a stalemate
like a win for the main network; here that would teach the search to stall on purpose, so it is a
parameter. Games cut by `max_pills` get no final step. Unlike the note (self-play of a two-player
game, 500,000 games, the first half counting only "path" wins) there is no opponent and no
curriculum of outcomes; training levels are drawn from `levels`, and no exploration is added (the
random pills vary the games, as dice did for TD-Gammon).

`train_td(cfg, run_dir)` writes config.json, metrics.csv and checkpoints/{latest,step-N}.pt between
games (so a resumed run continues exactly); `TDAgent.load(path)` plays from any checkpoint.
metrics.csv, one row per `log_every` games: step (decisions, i.e. in-game updates), games, time_s,
split ("train", for `drmario.viz`), lr and lr_after, loss (mean squared TD error of the in-game
updates since the last row), mean_outcome, viruses_per_game, cleared_share (the share of each
level's viruses) and clear_rate (games since the last row), samples_per_s (decisions per second)
and positions_per_s (boards valued per second).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import torch
from torch import nn

from drmario.baselines.common import (
    PILLS,
    RunResult,
    TrainingRun,
    Window,
    config_problems,
    draw_game,
    load_baseline_net,
    progress_bar,
)
from drmario.baselines.features import N_FEATURES, board_features, expand, mlp_values
from drmario.engine import kernels as K
from drmario.engine.board import Move
from drmario.engine.game import DEFAULT_STALL_LIMIT, Game, Outcome
from drmario.engine.level import MAX_LEVEL
from drmario.files import lock_run_dir
from drmario.learn.device import resolve_device
from drmario.play.agents import Decision
from drmario.search.core import Position, legal_mask_of, pill_distribution
from drmario.settings import Settings, setting

COLUMNS = (
    *("step", "games", "time_s", "split", "lr", "lr_after", "loss", "mean_outcome", "viruses_per_game"),
    *("cleared_share", "clear_rate", "samples_per_s", "positions_per_s"),
)
Weights = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # of the value network, for mlp_values
RESUMABLE = {"games", "log_every", "checkpoint_every", "keep_checkpoints", "device", "progress"}


@dataclass(frozen=True)
class TDConfig(Settings):
    """Every setting of a TD run (saved in config.json and in every checkpoint)."""

    # Several fields share their names with DQNConfig's, but not their docs, defaults or units
    # (games here, transitions there): each learner's settings stay its own; the shared checks are
    # `common.config_problems`.
    seed: int = setting(0, "network initialisation and the training games", ge=0)
    levels: tuple[int, ...] = setting(
        tuple(range(21)), "training games: a level drawn uniformly from these", ge=0, le=MAX_LEVEL
    )
    pill_mode: Literal["nes", "iid"] = setting("nes", "the pill sequence of the training games")
    stall_limit: int | None = setting(DEFAULT_STALL_LIMIT, "in the games and inside the search", ge=1)
    max_pills: int = setting(400, "a training game is cut after this many pills (no final update then)", ge=1, le=10**5)
    games: int = setting(300, "training games in the whole run", ge=1, le=10**8)
    hidden: int = setting(40, "hidden sigmoid units", ge=1, le=4096)
    lr_game: float = setting(0.005, "in-game learning rate (TD step toward the chosen successor's value)", ge=0)
    lr_after: float = setting(0.01, "after-game learning rate (step toward the outcome)", ge=0)
    win: float = setting(1.0, "outcome value of a win, in [0, 1] like the sigmoid output", ge=0, le=1)
    topout: float = setting(0.0, "outcome value of a top out", ge=0, le=1)
    stalemate: float = setting(0.0, "outcome value of a stalemate", ge=0, le=1)
    value: Literal["share", "win"] = setting("share", "what V estimates (module docstring)")
    depth: Literal[1, 2] = setting(2, "1: value of the board after each placement; 2: expectimax over the next pill")
    top_k: int = setting(6, "first-ply placements searched to the second ply (best by 1-ply value); 0: all", ge=0)
    pill_probs: tuple[float, ...] | None = setting(None, "of the 9 pills; None: uniform", ge=0)
    log_every: int = setting(10, "games between metrics.csv rows", ge=1)
    checkpoint_every: int = setting(100, "games between checkpoints (and one at the end)", ge=1)
    keep_checkpoints: int = setting(0, "step-*.pt files kept (0: all)", ge=0)
    device: str = setting("cpu", "a 40-unit net is fastest on the CPU")
    progress: bool = setting(True, "show a progress bar")

    def check(self) -> list[str]:
        return config_problems(self.levels, self.pill_probs)


class ValueNet(nn.Module):
    """features float[B, N_FEATURES] -> value float[B] in (0, 1); one hidden sigmoid layer."""

    def __init__(self, hidden: int = 40) -> None:
        super().__init__()
        self.hidden = nn.Linear(N_FEATURES, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.out(torch.sigmoid(self.hidden(x)))).squeeze(-1)

    def numpy_weights(self) -> Weights:
        """(w1 float32[H, F], b1 [H], w2 [H], b2 [1]) for `features.mlp_values`."""

        def numpy(p: torch.Tensor) -> np.ndarray:
            return np.ascontiguousarray(p.detach().float().cpu().numpy())

        return numpy(self.hidden.weight), numpy(self.hidden.bias), numpy(self.out.weight[0]), numpy(self.out.bias)


def td_update(net: ValueNet, features: np.ndarray, target: float, lr: float) -> float:
    """One plain SGD step on 0.5 * (V(features) - target)^2 (features float32[N_FEATURES]), i.e.
    every parameter moves by -lr * (V - target) * dV/dparameter. Returns V before the step."""
    net.zero_grad(set_to_none=True)
    device = next(net.parameters()).device
    v = net(torch.from_numpy(features[None]).to(device))[0]
    (0.5 * (v - target) ** 2).backward()
    with torch.no_grad():
        for p in net.parameters():
            if p.grad is not None:
                p.sub_(lr * p.grad)
    return float(v.detach())


class Children(NamedTuple):
    """The output of one `features.expand` call, T children (see there for the fields)."""

    boards: np.ndarray  # uint8[T, 8, 16]
    feats: np.ndarray  # float32[T, N_FEATURES]
    parent: np.ndarray  # int64[T]
    pill: np.ndarray  # int64[T]
    moves: np.ndarray  # int8[T, 3]
    outcome: np.ndarray  # int8[T]
    info: np.ndarray  # int64[T, 3]: stall counter after, viruses cleared, viruses left


class _Expander:
    """`features.expand` with reusable output buffers (grown when a call needs more)."""

    def __init__(self) -> None:
        self.capacity = 0

    def __call__(
        self, boards: np.ndarray, stalls: np.ndarray | Sequence[int], pills: np.ndarray, stall_limit: int
    ) -> Children:
        need = len(boards) * len(pills) * K.MAX_MOVES
        if need > self.capacity:
            self.capacity = need
            self.buf = Children(
                np.empty((need, K.WIDTH, K.HEIGHT), np.uint8),
                np.empty((need, N_FEATURES), np.float32),
                np.empty(need, np.int64),
                np.empty(need, np.int64),
                np.empty((need, 3), np.int8),
                np.empty(need, np.int8),
                np.empty((need, 3), np.int64),
            )
        t = expand(np.ascontiguousarray(boards), np.asarray(stalls, np.int64), pills, stall_limit, *self.buf)
        return Children(*(a[:t] for a in self.buf))


class TDSearch(NamedTuple):
    """One decision of `td_search`, for n legal moves."""

    moves: np.ndarray  # int8[n, 3] canonical legal moves (r, x, y)
    values: np.ndarray  # float64[n]: exact for terminal placements, 2-ply for searched ones, else 1-ply
    candidates: np.ndarray  # bool[n]: the placements the choice is made among
    best: int  # index of the chosen move
    positions: int  # boards valued by the network


def _board_values(weights: Weights, kids: Children, cfg: TDConfig) -> np.ndarray:
    """float64[T]: the value of each child board: the network's, or the exact outcome if terminal."""
    v = np.empty(len(kids.feats))
    mlp_values(kids.feats, *weights, v)
    exact = np.array([0.0, cfg.win, cfg.topout, cfg.stalemate])  # indexed by RUNNING, WON, TOPPED_OUT, STALEMATE
    return np.where(kids.outcome == K.RUNNING, v, exact[kids.outcome])


def _move_values(board_values: np.ndarray, kids: Children, cfg: TDConfig) -> np.ndarray:
    """float64[T]: each placement's value for the player at its parent board. "win": the child's
    value; "share": (viruses it clears + viruses left * the child's value) / the parent's viruses."""
    if cfg.value == "win":
        return board_values
    cleared, left = kids.info[:, 1], kids.info[:, 2]
    return (cleared + left * board_values) / np.maximum(cleared + left, 1)


def td_search(
    net: ValueNet,
    cells: np.ndarray,
    pill: np.ndarray,
    stall: int,
    cfg: TDConfig,
    expander: _Expander | None = None,
    reachable: np.ndarray | None = None,
) -> TDSearch:
    """The shallow search of one position: cells uint8[8, 16], pill uint8[2] (left, right colours);
    cfg.stall_limit is the game's stall rule; reachable (uint8[4, 8, 16], `core.legal_mask_of`):
    the moves NES timing leaves at the root (None: every legal move)."""
    expander = expander or _Expander()
    weights = net.numpy_weights()
    limit = cfg.stall_limit or 0
    one = expander(cells[None], [stall], np.asarray(pill, np.uint8).reshape(1, 2), limit)
    if len(one.moves) == 0:
        raise ValueError("TD search of a position with no legal move (a spawn cell is occupied)")
    one = Children(*(a.copy() for a in one))  # the buffers are reused by the second ply
    boards = _board_values(weights, one, cfg)
    values = _move_values(boards, one, cfg)
    allowed = np.ones(len(values), bool) if reachable is None else reachable[tuple(one.moves.T)].astype(bool)
    running = (one.outcome == K.RUNNING) & allowed
    candidates, positions = allowed.copy(), int(running.sum())
    if cfg.depth == 2 and running.any():
        order = np.flatnonzero(running)[np.argsort(-values[running], kind="stable")]
        top = order[: cfg.top_k] if cfg.top_k else order
        two = expander(one.boards[top], one.info[top, 0], PILLS, limit)
        v2 = _move_values(_board_values(weights, two, cfg), two, cfg)
        positions += int((two.outcome == K.RUNNING).sum())
        group = two.parent * len(PILLS) + two.pill  # children come grouped by (board, pill)
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        best = np.full(len(top) * len(PILLS), cfg.topout)  # a pill with no legal move: a top out
        best[group[starts]] = np.maximum.reduceat(v2, starts)
        boards[top] = best.reshape(len(top), len(PILLS)) @ pill_distribution(cfg.pill_probs)
        values = _move_values(boards, one, cfg)
        candidates = allowed & ~running  # finished children (exact values) and the searched ones
        candidates[top] = True
    choice = int(np.argmax(np.where(candidates, values, -np.inf)))
    return TDSearch(one.moves, values, candidates, choice, positions)


def _outcome_value(game: Game, cfg: TDConfig) -> float:
    if game.outcome is None:
        raise ValueError("the game is not over: it has no outcome value")
    return {Outcome.WON: cfg.win, Outcome.TOPPED_OUT: cfg.topout, Outcome.STALEMATE: cfg.stalemate}[game.outcome]


class TDAgent:
    """Plays by `td_search` with a trained value network; implements the `Agent` protocol.
    depth and top_k default to the training run's."""

    def __init__(self, net: ValueNet, cfg: TDConfig | None = None, *, name: str = "td", **search: Any) -> None:
        self.net, self.name = net.eval(), name
        self.cfg = TDConfig.from_dict({**(cfg or TDConfig()).to_dict(), **search, "progress": False})
        self.net.to(resolve_device(self.cfg.device))
        self._expander = _Expander()

    @classmethod
    def load(cls, path: str | Path, *, name: str = "td", **search: Any) -> TDAgent:
        """From any checkpoint of `train_td`; search: depth, top_k, device, ... overrides."""
        net, cfg = load_baseline_net(path, "td", TDConfig, lambda c: ValueNet(c.hidden), "net")
        return cls(net, cfg, name=name, **search)

    def choose(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[Decision]:
        out = []
        for pos in positions:  # the game's stall rule and timing, not the training's
            cfg = self.cfg if pos.stall_limit == self.cfg.stall_limit else self.cfg.replace(stall_limit=pos.stall_limit)
            pill = np.array([pos.pill.left, pos.pill.right], np.uint8)
            cells = np.ascontiguousarray(pos.cells)
            res = td_search(self.net, cells, pill, pos.stall, cfg, self._expander, legal_mask_of(pos))
            out.append(Decision(Move(*res.moves[res.best].tolist())))
        return out


class TDResult(RunResult):
    """What `train_td` did; ``step`` counts decisions (in-game updates)."""


class _TDRun(TrainingRun):
    """A TD run in progress: everything a checkpoint holds, and the steps of training."""

    def __init__(self, cfg: TDConfig, run_dir: str | Path) -> None:
        super().__init__(run_dir, "td", cfg, cfg.seed, COLUMNS, RESUMABLE)
        self.cfg = cfg
        self.net = ValueNet(cfg.hidden).to(resolve_device(cfg.device))
        elapsed = 0.0
        ck = self.files.resume()
        if ck is not None:
            self.net.load_state_dict(ck["net"])
            self.step, self.games, elapsed = ck["step"], ck["games"], ck["time_s"]
            self.rng.bit_generator.state = ck["rng"]
        self.start(self.step, elapsed)
        self.expander, self.feats = _Expander(), np.empty((1, N_FEATURES), np.float32)

    def play_game(self, win: Window) -> Game | None:
        """Play one training game, one TD step after each decision; None if a value turns
        non-finite (the game is abandoned)."""
        cfg = self.cfg
        game = Game(*draw_game(self.rng, cfg.levels), pill_mode=cfg.pill_mode, stall_limit=cfg.stall_limit)
        while not game.over and game.pills_used < cfg.max_pills:
            pill = np.array([game.pill.left, game.pill.right], np.uint8)
            res = td_search(self.net, game._cells, pill, game.stall, cfg, self.expander)
            target = float(res.values[res.best])
            board_features(game._cells[None], self.feats)
            before = td_update(self.net, self.feats[0], target, cfg.lr_game)
            if not np.isfinite(before):
                return None
            win.losses.append((before - target) ** 2)
            win.positions += res.positions
            game.play(Move(*res.moves[res.best].tolist()))
            self.step += 1
        return game

    def end_game(self, game: Game, win: Window) -> None:
        """The after-game step toward the outcome (none for a game cut by max_pills), and count it."""
        outcome = float("nan")
        if game.over:
            outcome = _outcome_value(game, self.cfg)
            board_features(game._cells[None], self.feats)
            td_update(self.net, self.feats[0], outcome, self.cfg.lr_after)
        win.add_game(outcome, game)
        self.games += 1

    def checkpoint(self) -> Path:
        agent = {"config": self.cfg.to_dict(), "net": self.net.state_dict(), "step": self.step, "games": self.games}
        more = {"time_s": self.time_s(), "rng": self.rng.bit_generator.state}
        return self.files.checkpoint(agent, more, self.cfg.keep_checkpoints)

    def log(self, win: Window) -> dict:
        """Write one metrics.csv row about the window since the last one; returns it."""
        dt = win.seconds()
        return self.write_row(
            win,
            lr=self.cfg.lr_game,
            lr_after=self.cfg.lr_after,
            loss=float(np.mean(win.losses)) if win.losses else float("nan"),
            mean_outcome=win.game_means()[0],
            samples_per_s=round((self.step - win.step) / dt, 1),
            positions_per_s=round(win.positions / dt, 1),
        )


def train_td(cfg: TDConfig, run_dir: str | Path) -> TDResult:
    """Train (or continue) a TD player in run_dir; see the module docstring.
    run_dir has one owner: while this runs, another run on it is refused at once (`drmario.files.lock_run_dir`)."""
    with lock_run_dir(run_dir, "TD learner"):
        return _train_td(cfg, run_dir)


def _train_td(cfg: TDConfig, run_dir: str | Path) -> TDResult:
    run = _TDRun(cfg, run_dir)
    win = Window(run.step)
    path, last, stopped = run.files.existing(), {}, None
    bar = progress_bar(cfg.games, run.games, "td", cfg.progress)
    while run.games < cfg.games:
        game = run.play_game(win)
        if game is None:
            stopped = f"game {run.games + 1}, decision {run.step + 1}: non-finite value; the last checkpoint is {path}"
            break
        run.end_game(game, win)
        bar.update(1)
        at_checkpoint = run.games % cfg.checkpoint_every == 0 or run.games == cfg.games
        if run.games % cfg.log_every == 0 or at_checkpoint:
            last = run.log(win)
            bar.set_postfix(cleared=f"{last['cleared_share']:.0%}", loss=f"{last['loss']:.3g}")
            win = Window(run.step)
        if at_checkpoint:
            path = run.checkpoint()
    run.finish(bar, stopped)
    files = run.files
    return TDResult(run.step, run.games, files.run_dir, files.metrics.path, path, run.time_s(), stopped, last)
