"""Deep Q-learning with experience replay (design note 003), for Dr. Mario placements.

Q-network (`QNet`): the 18x8x16 input planes (`drmario.encode`) -> Q float[B, 512], one value per
placement slot ``r * 128 + x * 16 + y``, masked to the canonical legal moves (same-colour pills: r in
{0, 1}). Two fixed planes computed from the input (where the board has the colour of each pill half)
join the 18, then a few 3x3 convolutions, then a 1x1 convolution to the 4 rotation planes (a
placement is judged by the cells around it) plus a scalar from the whole board (how safe the stack
is) added to every slot.

Learning follows the note: epsilon-greedy play, every transition (state, move, reward, next state,
done) into a fixed-size replay memory, uniform mini-batches from it, regression of Q(s, a) toward
``r + gamma * (1 - done) * V(s')``. Rewards come only from events (`reward_virus` per virus cleared,
`reward_win`, `reward_topout`). A state is the board and the pill to place, so V(s') depends on the
next pill, which the player does not know: ``next_pill="expected"`` averages max_a' Q(s', p', a')
over the 9 pills with their probabilities (one batched call of 9 * B positions), ``"sampled"`` uses
the pill the game really threw next. A stalemate ends a game but is not terminal for learning (the
stall counter is not in the state, so it bootstraps like a time limit).

Differences from the note's author (a fully connected tanh net, plain backprop of the corrected
Q-vector, gamma 0.95, targets from the network being trained): a target network (a copy of the
Q-network refreshed every `target_every` updates) gives the bootstrap values, a standard improvement
the note does not have; Adam and a Huber loss on the taken slot only (the same gradient direction as
the note's corrected vector); each replayed transition with its colours randomly renamed (`augment`,
an exact symmetry of the game); optional double DQN.
The memory is stored compact (cells uint8[8, 16] + pill uint8[2] per state, 267 bytes a transition).

`train_dqn(cfg, run_dir)` writes config.json, metrics.csv and checkpoints/{latest,step-N}.pt; a
run_dir with latest.pt resumes exactly (network, target, optimiser, replay memory, the games in
progress, RNG states). `DQNAgent.load(path)` plays from any of the checkpoints (step-N.pt files hold
the network alone). metrics.csv, one row per `log_every` transitions: step (transitions), updates,
games (finished), time_s, split ("train", for `drmario.viz`), epsilon, lr, loss and q_mean (means
over the updates since the last row), mean_reward, viruses_per_game, cleared_share (the share of
each level's viruses) and clear_rate (over the games finished since the last row, exploration
included), samples_per_s (replayed transitions per second
of wall time) and steps_per_s (transitions played per second).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from drmario.baselines.common import (
    PILLS,
    SLOTS,
    RunResult,
    TrainingRun,
    Window,
    config_problems,
    draw_game,
    legal_slots,
    legal_slots_all_pills,
    load_baseline_net,
    next_multiple,
    progress_bar,
    slot_move,
)
from drmario.engine import kernels as K
from drmario.engine.board import Move
from drmario.engine.game import DEFAULT_STALL_LIMIT, Game
from drmario.engine.level import MAX_LEVEL
from drmario.files import lock_run_dir
from drmario.learn.device import resolve_device
from drmario.learn.encode import DESIGN_PLANES, planes_torch
from drmario.play.agents import Decision
from drmario.search.core import Position, legal_mask_of, pill_distribution
from drmario.settings import Settings, setting

COLUMNS = (
    *("step", "updates", "games", "time_s", "split", "epsilon", "lr", "loss", "q_mean", "mean_reward"),
    *("viruses_per_game", "cleared_share", "clear_rate", "samples_per_s", "steps_per_s"),
)
RESUMABLE = {"steps", "log_every", "checkpoint_every", "keep_checkpoints", "device", "progress"}


@dataclass(frozen=True)
class DQNConfig(Settings):
    """Every setting of a DQN run (saved in config.json and in every checkpoint)."""

    seed: int = setting(0, "network initialisation, games, exploration, replay sampling", ge=0)
    levels: tuple[int, ...] = setting(
        tuple(range(21)), "training games: a level drawn uniformly from these", ge=0, le=MAX_LEVEL
    )
    pill_mode: Literal["nes", "iid"] = setting("nes", "the pill sequence of the training games")
    stall_limit: int | None = setting(DEFAULT_STALL_LIMIT, "ends training games (not terminal for learning)", ge=1)
    max_pills: int = setting(400, "a training game is cut after this many pills (not terminal either)", ge=1, le=10**5)
    envs: int = setting(8, "games played in lockstep (one batched forward per step)", ge=1, le=4096)
    steps: int = setting(50_000, "transitions (pills placed) in the whole run", ge=1, le=10**9)
    filters: int = setting(16, "Q-network: convolution filters", ge=1, le=1024)
    layers: int = setting(3, "Q-network: 3x3 convolutions", ge=1, le=64)
    lr: float = setting(1e-3, "Adam learning rate", gt=0, le=10)
    batch_size: int = setting(32, "transitions per update", ge=1)
    buffer_size: int = setting(50_000, "replay memory capacity (transitions); the oldest are overwritten", ge=1)
    learning_starts: int = setting(500, "transitions before the first update (>= batch_size)", ge=1)
    train_every: int = setting(4, "transitions per gradient update", ge=1)
    target_every: int = setting(100, "updates between target-network refreshes", ge=1)
    gamma: float = setting(0.9, "discount", ge=0, le=1)
    eps_start: float = setting(1.0, "epsilon-greedy: first epsilon", ge=0, le=1)
    eps_end: float = setting(0.05, "epsilon-greedy: final epsilon", ge=0, le=1)
    eps_decay_steps: int = setting(5_000, "linear decay of epsilon over this many transitions", ge=1)
    reward_virus: float = setting(1.0, "reward per virus cleared")
    reward_win: float = setting(3.0, "reward for clearing every virus")
    reward_topout: float = setting(-3.0, "reward for topping out")
    next_pill: Literal["expected", "sampled"] = setting(
        "sampled", "bootstrap over the next pill: its expectation (2x the cost per update) or the sampled one"
    )
    pill_probs: tuple[float, ...] | None = setting(None, "of the 9 pills for 'expected'; None: uniform", ge=0)
    double: bool = setting(False, "double DQN: the online network picks a', the target network values it")
    augment: bool = setting(True, "each sampled transition gets a random permutation of the 3 colours")
    huber: bool = setting(True, "Huber (smooth L1) loss; false: squared error")
    grad_clip: float = setting(10.0, "max gradient norm (0: off)", ge=0)
    log_every: int = setting(1_000, "transitions between metrics.csv rows", ge=1)
    checkpoint_every: int = setting(10_000, "transitions between checkpoints (and one at the end)", ge=1)
    keep_checkpoints: int = setting(0, "step-*.pt files kept (0: all)", ge=0)
    device: str = setting("auto", "auto (cuda if available), cpu, cuda or cuda:N")
    progress: bool = setting(True, "show a progress bar")

    def check(self) -> list[str]:
        problems = config_problems(self.levels, self.pill_probs)
        if self.eps_end > self.eps_start:
            problems.append(f"eps_end = {self.eps_end}: expected <= eps_start ({self.eps_start})")
        if self.learning_starts < self.batch_size:
            problems.append(f"learning_starts = {self.learning_starts}: expected >= batch_size ({self.batch_size})")
        return problems


class QNet(nn.Module):
    """planes float[B, 18, 8, 16] -> Q float[B, 512] (slot r * 128 + x * 16 + y).

    Before the convolutions it adds 2 fixed planes computed from the 18: where the board holds the
    colour of the pill's left half, and of its right half. A placement is worth something when its
    colours meet their own; these planes make that a linear function, where the raw planes need
    a product of a cell's colour and the pill's, which plain Q-learning found slowly."""

    def __init__(self, filters: int = 16, layers: int = 3) -> None:
        super().__init__()
        convs: list[nn.Module] = []
        for i in range(layers):
            convs += [nn.Conv2d(DESIGN_PLANES + 2 if i == 0 else filters, filters, 3, padding=1), nn.ReLU()]
        self.trunk = nn.Sequential(*convs)
        self.local = nn.Conv2d(filters, 4, 1)  # per placement: the 4 rotations at each cell
        self.board = nn.Linear(filters * K.WIDTH * K.HEIGHT, 1)  # per board, added to every slot

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        colour = x[:, 0:3] + x[:, 3:6] + x[:, 6:9] + x[:, 9:12]  # [B, 3, 8, 16]: any cell of each colour
        left = (colour * x[:, 12:15, :1, :1]).sum(1, keepdim=True)  # [B, 1, 8, 16]
        right = (colour * x[:, 15:18, :1, :1]).sum(1, keepdim=True)
        h = self.trunk(torch.cat([x, left, right], 1))
        return (self.local(h) + self.board(h.flatten(1))[:, :, None, None]).flatten(1)


def epsilon(step: int, cfg: DQNConfig) -> float:
    """Linear decay from eps_start to eps_end over eps_decay_steps transitions, then constant."""
    return cfg.eps_end + (cfg.eps_start - cfg.eps_end) * max(0.0, 1 - step / cfg.eps_decay_steps)


class Replay:
    """A ring buffer of transitions in compact numpy arrays: the oldest is overwritten when full.

    cells, next_cells uint8[C, 8, 16]; pill, next_pill uint8[C, 2]; move int16[C] (slot);
    reward float32[C]; done bool[C]. `sample` draws uniformly from the filled slots.
    """

    FIELDS = ("cells", "pill", "move", "reward", "next_cells", "next_pill", "done")

    def __init__(self, capacity: int) -> None:
        self.capacity, self.pos, self.size = capacity, 0, 0
        self.cells = np.zeros((capacity, K.WIDTH, K.HEIGHT), np.uint8)
        self.pill = np.zeros((capacity, 2), np.uint8)
        self.move = np.zeros(capacity, np.int16)
        self.reward = np.zeros(capacity, np.float32)
        self.next_cells = np.zeros((capacity, K.WIDTH, K.HEIGHT), np.uint8)
        self.next_pill = np.zeros((capacity, 2), np.uint8)
        self.done = np.zeros(capacity, bool)

    def __len__(self) -> int:
        return self.size

    def add(self, **batch: np.ndarray) -> None:
        """Append n transitions: one array per field, first axis n (n may exceed the capacity)."""
        n = len(batch["move"])
        idx = (self.pos + np.arange(n)) % self.capacity
        for name in self.FIELDS:
            getattr(self, name)[idx] = batch[name]
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """n transitions drawn uniformly (with replacement) from the filled slots."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay memory")
        idx = rng.integers(0, self.size, n)
        return {name: getattr(self, name)[idx] for name in self.FIELDS}

    def state_dict(self) -> dict:
        return {"capacity": self.capacity, "pos": self.pos, "size": self.size} | {
            name: torch.from_numpy(getattr(self, name)[: self.size].copy()) for name in self.FIELDS
        }

    def load_state_dict(self, state: dict) -> None:
        if state["capacity"] != self.capacity:
            raise ValueError(f"replay memory of capacity {state['capacity']} cannot load into {self.capacity}")
        self.pos, self.size = int(state["pos"]), int(state["size"])
        for name in self.FIELDS:
            getattr(self, name)[: self.size] = state[name].numpy()


# The 6 permutations of (red, yellow, blue); index 0 (empty or no pill) maps to itself.
PERMUTATIONS = np.array([[0, *p] for p in ((1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1))], np.uint8)
# CODE_PERMUTED[k, code]: a cell code with its colour permuted by PERMUTATIONS[k] (the shape kept)
CODE_PERMUTED = (np.arange(256, dtype=np.uint8)[None] & 0xFC) | PERMUTATIONS[:, np.arange(256) & 3]


def permute_colours(batch: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A copy of a replay batch with one random colour permutation per transition. Dr. Mario is
    symmetric under renaming the colours (the moves, rewards and legality do not change), so this
    shows the network each situation in all 6 colourings."""
    k = rng.integers(0, len(PERMUTATIONS), len(batch["move"]))
    out = dict(batch)
    for name in ("cells", "next_cells"):
        out[name] = CODE_PERMUTED[k[:, None, None], batch[name]]
    for name in ("pill", "next_pill"):
        out[name] = PERMUTATIONS[k[:, None], batch[name]]
    return out


def masked_q(
    net: nn.Module, cells: np.ndarray, pills: np.ndarray, legal: np.ndarray, device: torch.device | str
) -> torch.Tensor:
    """Q float[N, 512] with illegal slots at -inf (cells uint8[N, 8, 16], pills uint8[N, 2], legal uint8[N, 512])."""
    x = planes_torch(
        torch.from_numpy(np.ascontiguousarray(cells)),
        torch.from_numpy(np.ascontiguousarray(pills)),
        None,
        DESIGN_PLANES,
    )
    q = net(x.to(device))
    return q.masked_fill(torch.from_numpy(legal == 0).to(device), float("-inf"))


@torch.no_grad()
def q_targets(
    target: nn.Module,
    batch: dict[str, np.ndarray],
    cfg: DQNConfig,
    device: torch.device | str,
    online: nn.Module | None = None,
) -> torch.Tensor:
    """Bootstrap targets float[B]: r + gamma * (1 - done) * V(s').

    expected: V(s') = sum_p prob_p * max_a' Q_target(s', p, a') over the 9 pills (9 * B positions in
    one call); sampled: V(s') = max_a' Q_target(s', next_pill, a'). With online (double DQN) the
    online network picks a' and the target network values it. A pill with no legal move counts 0.
    """
    reward = torch.from_numpy(batch["reward"]).to(device)
    value = torch.zeros_like(reward)
    live = np.flatnonzero(~batch["done"])
    if len(live):
        cells = batch["next_cells"][live]
        if cfg.next_pill == "expected":
            legal_all = np.empty((len(live), 9, SLOTS), np.uint8)
            legal_slots_all_pills(cells, legal_all)
            cells, pills, legal = (
                np.repeat(cells, 9, axis=0),
                np.tile(PILLS, (len(live), 1)),
                legal_all.reshape(-1, SLOTS),
            )
        else:
            pills = batch["next_pill"][live]
            legal = np.empty((len(live), SLOTS), np.uint8)
            legal_slots(cells, pills, legal)
        q = masked_q(target, cells, pills, legal, device)
        if online is not None:
            best = masked_q(online, cells, pills, legal, device).argmax(dim=1, keepdim=True)
            v = q.gather(1, best).squeeze(1)
        else:
            v = q.max(dim=1).values
        v = torch.where(torch.isfinite(v), v, torch.zeros_like(v))  # no legal move: nothing more to gain
        if cfg.next_pill == "expected":
            probs = torch.as_tensor(pill_distribution(cfg.pill_probs), dtype=v.dtype, device=device)
            v = v.view(len(live), 9) @ probs
        value[torch.from_numpy(live).to(device)] = v
    return reward + cfg.gamma * value


def td_loss(
    q: nn.Module, target: nn.Module, batch: dict[str, np.ndarray], cfg: DQNConfig, device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, mean Q(s, a)) of a mini-batch: Huber (or squared) error of Q(s, a) against `q_targets`."""
    y = q_targets(target, batch, cfg, device, q if cfg.double else None)
    x = planes_torch(torch.from_numpy(batch["cells"]), torch.from_numpy(batch["pill"]), None, DESIGN_PLANES).to(device)
    qa = q(x).gather(1, torch.from_numpy(batch["move"].astype(np.int64)).to(device)[:, None]).squeeze(1)
    loss = F.smooth_l1_loss(qa, y) if cfg.huber else F.mse_loss(qa, y)
    return loss, qa.detach().mean()


class DQNAgent:
    """Greedy play (or epsilon-greedy) from a Q-network; implements the `Agent` protocol."""

    def __init__(self, net: QNet, *, name: str = "dqn", device: str = "cpu", epsilon: float = 0.0) -> None:
        self.net, self.name, self.epsilon = net.to(resolve_device(device)).eval(), name, epsilon
        self.device = next(net.parameters()).device

    @classmethod
    def load(cls, path: str | Path, *, name: str = "dqn", device: str = "cpu", epsilon: float = 0.0) -> DQNAgent:
        """From any checkpoint of `train_dqn` (latest.pt or step-N.pt)."""
        net, _ = load_baseline_net(path, "dqn", DQNConfig, lambda c: QNet(c.filters, c.layers), "q")
        return cls(net, name=name, device=device, epsilon=epsilon)

    @torch.no_grad()
    def choose(self, positions: Sequence[Position], seeds: Sequence[int]) -> list[Decision]:
        cells = np.stack([p.cells for p in positions])
        pills = np.array([(p.pill.left, p.pill.right) for p in positions], np.uint8)
        legal = np.empty((len(positions), SLOTS), np.uint8)
        legal_slots(cells, pills, legal)
        for i, pos in enumerate(positions):  # under NES timing, only the moves reachable at the game's speed
            mask = legal_mask_of(pos)
            if mask is not None:
                legal[i] &= mask.reshape(SLOTS)
        q = masked_q(self.net, cells, pills, legal, self.device).cpu().numpy()
        out = []
        for i, seed in enumerate(seeds):
            slot = int(np.argmax(q[i]))
            if self.epsilon > 0:
                rng = np.random.default_rng(seed)
                if rng.random() < self.epsilon:
                    slot = int(rng.choice(np.flatnonzero(legal[i])))
            out.append(Decision(Move(*slot_move(slot))))
        return out


@dataclass
class DQNResult(RunResult):
    """What `train_dqn` did; ``step`` counts transitions."""

    updates: int = 0  # gradient updates


class _Slot:
    """One game in progress and what it has earned so far."""

    def __init__(self, seed: int, level: int, cfg: DQNConfig, moves: Sequence = (), reward: float = 0.0) -> None:
        self.game = Game(seed, level, pill_mode=cfg.pill_mode, stall_limit=cfg.stall_limit)
        for m in moves:  # resuming: replay the moves made before the checkpoint
            self.game.play(Move(*m))
        self.reward = reward

    def state(self) -> dict:
        g = self.game
        return {"seed": g.seed, "level": g.level, "moves": [list(m) for m in g.moves], "reward": self.reward}


class _DQNRun(TrainingRun):
    """A DQN run in progress: everything a checkpoint holds, and the steps of training."""

    def __init__(self, cfg: DQNConfig, run_dir: str | Path) -> None:
        super().__init__(run_dir, "dqn", cfg, cfg.seed, COLUMNS, RESUMABLE)
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.q = QNet(cfg.filters, cfg.layers).to(self.device)
        self.target = copy.deepcopy(self.q)
        self.opt = torch.optim.Adam(self.q.parameters(), lr=cfg.lr)
        self.replay = Replay(cfg.buffer_size)
        self.updates = 0
        elapsed = 0.0
        ck = self.files.resume()
        if ck is not None:
            self.q.load_state_dict(ck["q"])
            self.target.load_state_dict(ck["target"])
            self.opt.load_state_dict(ck["optimizer"])
            self.replay.load_state_dict(ck["replay"])
            self.step, self.updates, self.games, elapsed = ck["step"], ck["updates"], ck["games"], ck["time_s"]
            self.rng.bit_generator.state = ck["rng"]["numpy"]
            torch.set_rng_state(ck["rng"]["torch"])
            self.slots = [_Slot(s["seed"], s["level"], cfg, s["moves"], s["reward"]) for s in ck["slots"]]
        else:
            self.slots = [_Slot(*draw_game(self.rng, cfg.levels), cfg) for _ in range(cfg.envs)]
        self.start(self.step, elapsed)

    def act(self, win: Window) -> None:
        """One move in every game in progress (one batched forward, epsilon-greedy among the legal
        slots); the transitions go into the replay memory, finished games are replaced."""
        cfg, rng, slots = self.cfg, self.rng, self.slots
        cells = np.stack([s.game._cells for s in slots])
        pills = np.array([(s.game.pill.left, s.game.pill.right) for s in slots], np.uint8)
        legal = np.empty((len(slots), SLOTS), np.uint8)
        legal_slots(cells, pills, legal)
        with torch.no_grad():
            greedy = masked_q(self.q, cells, pills, legal, self.device).argmax(dim=1).cpu().numpy()
        explore = rng.random(len(slots)) < epsilon(self.step, cfg)
        uniform = np.argmax(rng.random(legal.shape) * legal, axis=1)  # a uniform legal slot per game
        chosen = np.where(explore, uniform, greedy)
        reward = np.zeros(len(slots), np.float32)
        done = np.zeros(len(slots), bool)
        next_cells, next_pills = np.empty_like(cells), np.empty_like(pills)
        for i, s in enumerate(slots):
            result = s.game.play(Move(*slot_move(chosen[i])))
            reward[i] = cfg.reward_virus * result.viruses_cleared
            reward[i] += cfg.reward_win * result.won + cfg.reward_topout * result.topped_out
            done[i] = result.won or result.topped_out
            next_cells[i], next_pills[i] = s.game._cells, (s.game.pill.left, s.game.pill.right)
            s.reward += float(reward[i])
            if s.game.over or s.game.pills_used >= cfg.max_pills:
                win.add_game(s.reward, s.game)
                self.games += 1
                slots[i] = _Slot(*draw_game(rng, cfg.levels), cfg)
        transition = {"cells": cells, "pill": pills, "move": chosen, "reward": reward, "done": done}
        self.replay.add(**transition, next_cells=next_cells, next_pill=next_pills)
        self.step += len(slots)

    def learn(self, win: Window) -> None:
        """The gradient updates due: one per train_every transitions once learning_starts are in
        memory; the target network is refreshed every target_every updates."""
        cfg = self.cfg
        while (
            self.step >= cfg.learning_starts and self.updates < (self.step - cfg.learning_starts) // cfg.train_every + 1
        ):
            batch = self.replay.sample(cfg.batch_size, self.rng)
            batch = permute_colours(batch, self.rng) if cfg.augment else batch
            loss, qa = td_loss(self.q, self.target, batch, cfg, self.device)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                nn.utils.clip_grad_norm_(self.q.parameters(), cfg.grad_clip)
            self.opt.step()
            self.updates += 1
            win.losses.append(loss.detach())
            win.q.append(qa)
            if self.updates % cfg.target_every == 0:
                self.target.load_state_dict(self.q.state_dict())

    def checkpoint(self) -> Path:
        agent = {"config": self.cfg.to_dict(), "q": self.q.state_dict(), "step": self.step}
        more = {
            "target": self.target.state_dict(),
            "optimizer": self.opt.state_dict(),
            "replay": self.replay.state_dict(),
            "updates": self.updates,
            "games": self.games,
            "time_s": self.time_s(),
            "rng": {"numpy": self.rng.bit_generator.state, "torch": torch.get_rng_state()},
            "slots": [s.state() for s in self.slots],
        }
        return self.files.checkpoint(agent, more, self.cfg.keep_checkpoints)

    def log(self, win: Window) -> dict:
        """Write one metrics.csv row about the window since the last one; returns it."""
        cfg, dt = self.cfg, win.seconds()
        return self.write_row(
            win,
            updates=self.updates,
            epsilon=round(epsilon(self.step, cfg), 5),
            lr=cfg.lr,
            loss=float(torch.stack(win.losses).mean()) if win.losses else float("nan"),
            q_mean=float(torch.stack(win.q).mean()) if win.q else float("nan"),
            mean_reward=win.game_means()[0],
            samples_per_s=round((self.updates - win.updates) * cfg.batch_size / dt, 1),
            steps_per_s=round((self.step - win.step) / dt, 1),
        )


def train_dqn(cfg: DQNConfig, run_dir: str | Path) -> DQNResult:
    """Train (or continue) a DQN player in run_dir; see the module docstring.
    run_dir has one owner: while this runs, another run on it is refused at once (`drmario.files.lock_run_dir`)."""
    with lock_run_dir(run_dir, "DQN learner"):
        return _train_dqn(cfg, run_dir)


def _train_dqn(cfg: DQNConfig, run_dir: str | Path) -> DQNResult:
    run = _DQNRun(cfg, run_dir)
    win = Window(run.step, run.updates)
    path, stopped, last = run.files.existing(), None, {}
    next_log, next_ckpt = next_multiple(run.step, cfg.log_every), next_multiple(run.step, cfg.checkpoint_every)
    bar = progress_bar(cfg.steps, run.step, "dqn", cfg.progress)
    while run.step < cfg.steps:
        run.act(win)
        bar.update(min(run.step, cfg.steps) - bar.n)  # the last act may pass steps (envs at a time)
        run.learn(win)
        if run.step >= next_log or run.step >= next_ckpt or run.step >= cfg.steps:
            last = run.log(win)
            share = last["cleared_share"]  # NaN while no game has ended in this window
            bar.set_postfix(loss=f"{last['loss']:.3g}", cleared=f"{share:.0%}" if np.isfinite(share) else "-")
            next_log = next_multiple(run.step, cfg.log_every)
            if win.losses and not np.isfinite(last["loss"]):
                stopped = f"step {run.step}: non-finite loss; training stopped; the last checkpoint is {path}"
                break
            win = Window(run.step, run.updates)
        if run.step >= next_ckpt or run.step >= cfg.steps:
            path = run.checkpoint()
            next_ckpt = next_multiple(run.step, cfg.checkpoint_every)
    run.finish(bar, stopped)
    files = run.files
    return DQNResult(
        run.step, run.games, files.run_dir, files.metrics.path, path, run.time_s(), stopped, last, run.updates
    )
