"""Do short-horizon targets rank moves better than pills-to-the-end? A probe on the network's trunk.

`value_ranking.py` found that the network's value picks the expert's best move in about a quarter
of decisions where its move output does in over half. Its pills-to-the-end target is one game's
count, which varies by tens of pills from game to game where two moves differ by a pill or two; a
target over a short horizon is far less noisy (as KataGo's short-term value targets are). This probe keeps the
network's trunk (its features) fixed and trains two fresh heads of the value head's shape on the
same positions, steps and seed, differing only in the target:

- "pills to the end": the pills from the decision (included) to the game's end (the design's
  duration target), in units of 100;
- "cleared in H": the viruses cleared by the next --horizon decisions (the decision included).

Data: --games expert games (one move in ten random, as round 0's) at --levels on training seeds
that are none of value_ranking.py's or the tuning games; one game in ten held out. Then on
value_ranking.py's games (the expert's decisions at --rank-levels) every legal move's position is
valued by each head (a win first, a top-out last; "cleared in H" adds the viruses the move itself
clears) and each chooser is scored by the expert's depth-2 scores as value_ranking.py does, beside
the network's own duration output ("pills, network") and a control that counts only the viruses
the move itself clears, ties broken at random ("cleared by the move").

Run: `python bench/short_targets.py --games 600 --horizon 16`. Writes bench/results/NAME-MACHINE.json.
"""

from __future__ import annotations

import argparse
import functools
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from common import report
from search_vs_expert import tuning_games
from torch import nn
from value_ranking import candidates, expert_decisions, ranking_games, summarise

from drmario.engine import kernels as K
from drmario.engine.game import Game
from drmario.engine.level import SELFPLAY_SEEDS
from drmario.learn.checkpoint import load_net
from drmario.learn.encode import planes_torch
from drmario.learn.net import ConvBN, DrMarioNet, NetConfig
from drmario.run.agents import make_agents, resolve_checkpoint
from drmario.search.core import Position, Prediction
from drmario.search.expert import expert_search, load_weights

RUNS = Path(__file__).resolve().parent.parent / "runs" / "bench-short"


class Head(nn.Module):
    """A head of the value head's shape with one output, on a network's trunk features."""

    def __init__(self, cfg: NetConfig) -> None:
        super().__init__()
        self.leak = cfg.leak
        self.pool = ConvBN(cfg.filters, cfg.pooled_planes, 1)
        hidden = cfg.value_hidden
        self.fc = nn.Sequential(nn.Linear(2 * cfg.pooled_planes, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = F.leaky_relu(self.pool(x), self.leak).flatten(2)
        return self.fc(torch.cat([v.mean(dim=2), v.amax(dim=2)], dim=1))[:, 0]


@torch.no_grad()
def trunk(net: DrMarioNet, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> torch.Tensor:
    """The network's trunk features float[N, filters, 8, 16] of positions."""
    cells, pills, previews = (np.require(a, np.uint8, ["C", "W"]) for a in (cells, pills, previews))
    x = planes_torch(torch.from_numpy(cells), torch.from_numpy(pills), torch.from_numpy(previews), net.cfg.planes)
    return net.trunk(x)


class ShortHorizon:
    """An evaluator for the search: the network's won, cleared and moves, and for pills to the end a
    low-noise estimate from the short-horizon head (`main` trains and saves it): with s the viruses
    it expects cleared within the horizon H and v those left, H + (v - s) * rate where v > s, else
    H * v / s. (The first measurements, `search100-short-horizon-tuning` and `search100-short-horizon`,
    used H + max(v - s, 0) * rate, which values every leaf that is expected to finish within H alike.)"""

    def __init__(self, heads_file: str, rate: float) -> None:
        saved = torch.load(heads_file, weights_only=True)
        self.net = load_net(resolve_checkpoint(saved["network"])).eval()
        self.head = Head(self.net.cfg)
        self.head.load_state_dict(saved["short"])
        self.head.eval()
        self.horizon, self.rate = float(saved["horizon"]), rate

    def evaluate(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> Prediction:
        with torch.no_grad():  # one pass through the trunk for the network's heads and this one
            x = trunk(self.net, cells, pills, previews)
            out, soon = self.net.heads(x), self.head(x).numpy()
        left = ((cells != K.EMPTY) & (cells >> 2 == K.VIRUS)).sum(axis=(1, 2))
        soon = np.maximum(soon, 1e-3)
        # the viruses left after the horizon at `rate` pills each; a leaf expected to clear them all
        # within it at the rate it expects (so that finishing sooner is still worth something)
        rest = np.where(left > soon, self.horizon + (left - soon) * self.rate, self.horizon * left / soon)
        return Prediction(out.won.numpy(), out.cleared.numpy(), rest.astype(np.float32), out.moves.numpy())


def expert_games(specs: list[tuple[int, int, int]], epsilon: float, cap: int) -> dict[str, np.ndarray]:
    """The decisions of the expert's games (index, seed, level): the position before each move,
    the viruses the move cleared, the game's index."""
    rows: dict[str, list] = {k: [] for k in ("cells", "pills", "previews", "cleared", "game")}
    for index, seed, level in specs:
        rng = np.random.default_rng([seed, level, 1])
        game = Game(seed, level, stall_limit=None)
        while not game.over and game.pills_used < cap:
            (result,) = expert_search([Position.of(game)], [game.pills_used])
            move = result.moves[int(rng.integers(len(result.moves)))] if rng.random() < epsilon else result.best
            rows["cells"].append(game.board.cells.copy())
            rows["pills"].append(tuple(game.pill))
            rows["previews"].append(tuple(game.next_pill))
            before = game.viruses_left
            game.play(move)
            rows["cleared"].append(before - game.viruses_left)
            rows["game"].append(index)
    return {k: np.array(v) for k, v in rows.items()}


def targets(data: dict[str, np.ndarray], horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Per decision: pills to the end (included) and viruses cleared by the next `horizon` decisions
    (a game cut off at the pill cap counts as ending there)."""
    to_end, short = np.empty(len(data["game"])), np.empty(len(data["game"]))
    for g in np.unique(data["game"]):
        idx = np.nonzero(data["game"] == g)[0]
        n = len(idx)
        to_end[idx] = n - np.arange(n)
        c = np.concatenate([[0], np.cumsum(data["cleared"][idx])])
        short[idx] = c[np.minimum(np.arange(n) + horizon, n)] - c[:n]
    return to_end, short


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--network", default="small")
    parser.add_argument("--games", type=int, default=600)
    parser.add_argument("--levels", default="8,10,12,14,16,18,20,22,24")
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--horizon", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--rank-levels", default="12,20")
    parser.add_argument("--rank-games", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RUNS / "heads.pt"), help="the short-horizon head, for ShortHorizon")
    parser.add_argument("--name", default="short-targets")
    args = parser.parse_args()
    start = time.perf_counter()
    levels = [int(v) for v in args.levels.split(",")]
    rank_levels = [int(v) for v in args.rank_levels.split(",")]
    held = {s for s, _ in ranking_games(rank_levels, args.rank_games, 5)}
    held |= {g.seed for n in (20, 50, 100) for g in tuning_games(20, n, 11)}
    pool = [int(s) for s in np.random.default_rng(args.seed).permutation(SELFPLAY_SEEDS) if int(s) not in held]
    specs = [(i, pool[i], levels[i % len(levels)]) for i in range(args.games)]
    play = functools.partial(expert_games, epsilon=args.epsilon, cap=1000)
    with ProcessPoolExecutor(args.workers) as ex:
        parts = list(ex.map(play, [specs[w :: args.workers] for w in range(args.workers)]))
    data = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    to_end, short = targets(data, args.horizon)
    data_s = time.perf_counter() - start

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # 2 threads beside another process ran 100x slower
    net = load_net(resolve_checkpoint(args.network)).eval()
    cfg = net.cfg

    test = data["game"] % 10 == 0
    train_idx, test_idx = np.nonzero(~test)[0], np.nonzero(test)[0]
    cells, pills, previews = (data[k].astype(np.uint8) for k in ("cells", "pills", "previews"))
    heads: dict[str, tuple[Head, np.ndarray, float]] = {
        "pills to the end": (Head(cfg), to_end, 100.0),
        f"cleared in {args.horizon}": (Head(cfg), short, 1.0),
    }
    figures: dict = {"decisions": len(to_end), "held-out decisions": len(test_idx)}
    for name, (head, y, unit) in heads.items():
        torch.manual_seed(args.seed)
        head.train()
        opt = torch.optim.AdamW(head.parameters(), lr=args.lr)
        rng = np.random.default_rng(args.seed)
        target = torch.from_numpy(y / unit).float()
        for step in range(args.steps):
            idx = rng.choice(train_idx, args.batch_size, replace=False)
            for group in opt.param_groups:  # cosine decay
                group["lr"] = args.lr * 0.5 * (1 + np.cos(np.pi * step / args.steps))
            loss = (head(trunk(net, cells[idx], pills[idx], previews[idx])) - target[idx]).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        head.eval()
        with torch.no_grad():
            pred = torch.cat([head(trunk(net, cells[c], pills[c], previews[c])) for c in np.array_split(test_idx, 20)])
        err = pred.numpy() * unit - y[test_idx]
        rmse, std = float(np.sqrt(np.mean(err**2))), float(y[test_idx].std())
        figures[f"{name}: held-out RMSE, target std"] = [round(rmse, 3), round(std, 3)]

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    short_head = heads[f"cleared in {args.horizon}"][0]
    torch.save({"network": args.network, "horizon": args.horizon, "short": short_head.state_dict()}, out)
    figures["heads"] = str(out)

    weights = load_weights()
    (expert,) = make_agents(["expert"])
    rng = np.random.default_rng(args.seed)
    for level in rank_levels:
        rows = []
        level_games = [g for g in ranking_games(rank_levels, args.rank_games, 5) if g[1] == level]
        for game in expert_decisions(level_games, expert):
            scores, _, afters, leaves = candidates(game, weights)
            leaf = trunk(net, *leaves)
            with torch.no_grad():
                rest = {name: head(leaf).numpy() * unit for name, (head, _, unit) in heads.items()}
                own_pills = net.heads(leaf).duration.numpy()
            moved = np.array([game.viruses_left - g.viruses_left for g in afters], float)
            end = np.array([0.0 if not g.over else (1e6 if g.viruses_left == 0 else -1e6) for g in afters])
            row = {"expert": scores, "pills, network": end - own_pills}
            row["pills to the end"] = end - rest["pills to the end"]
            row[f"cleared in {args.horizon}"] = end + moved + rest[f"cleared in {args.horizon}"]
            row["cleared by the move"] = end + moved + rng.random(len(afters)) * 1e-3  # ties broken at random
            rows.append(row)
        figures[f"ranking, level {level}"] = summarise(rows, rng)
    figures["seconds: data, all"] = [round(data_s, 1), round(time.perf_counter() - start, 1)]
    report(args.name, vars(args), figures)


if __name__ == "__main__":
    main()
