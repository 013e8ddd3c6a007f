"""The gate of the AlphaZero loop: a new network replaces the best one so far only if it plays at
least as well on the same fixed games.

Both networks play the same gating games (training seeds kept for gating, `level.GATING_SEEDS`:
self-play never plays them, and evaluation never uses them either), as the same agent (the network
alone by default, `GateConfig.agent`). The comparison is paired, game by game:

- **wins**: McNemar's exact test on the games one network won and the other lost;
- **pills per virus**: on the games both won, the mean of the per-game difference, with a paired
  bootstrap 95% interval and a one-sided sign-flip (permutation) test of "the new one uses more";
- **viruses cleared**: on every game, the share of the level's viruses each cleared, with a one-sided
  sign-flip test of "the new one clears fewer". It weighs only where wins are level and no game was won
  by both (weak networks, hard levels), so there are no pills to compare.

The decision (`GateConfig.rule`):

- ``wins-and-pills`` (the default): promoted when the new network wins at least as many games and does
  not use significantly more pills per virus (one-sided p < `alpha`); where no game was won by both,
  when it wins more, or as many and does not clear significantly fewer viruses;
- ``wins-first``: promoted when it wins more games, whatever its pills; when it wins as many, as
  above; never when it wins fewer (wins are the first aim, pills per virus the second).
- ``wins-or-pills``: as ``wins-and-pills``, and also promoted when it wins fewer games but not
  significantly fewer (one-sided McNemar p >= `alpha`) and uses significantly fewer pills per virus
  (one-sided sign-flip p < `alpha`). On 100 gating games the strict rules turn on one or two games:
  replayed on 400 (bench/README.md, "How sure is the gate?"), the default turned down a network that
  used 0.2 fewer pills per virus with wins level, on the gating games and on the evaluation games alike.

Round 0's network has nothing to beat and is promoted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal, get_args

import numpy as np

from drmario.engine.game import GameRecord
from drmario.engine.level import GATING_SEEDS, MAX_LEVEL
from drmario.play.agents import Agent
from drmario.play.lockstep import GameSpec, play_lockstep
from drmario.settings import Settings, setting

GateRule = Literal["wins-and-pills", "wins-first", "wins-or-pills"]  # the decisions (module docstring)


@dataclass(frozen=True)
class GateConfig(Settings):
    """The gate: which games, which agent, how sure."""

    agent: str = setting("policy", "the agent both networks play as: policy (alone), net-mcts-N or net-gumbel-N")
    levels: list[int] = setting([15, 20], "levels of the gating games", ge=0, le=MAX_LEVEL)
    games_per_level: int = setting(50, "gating games at each level", ge=1, le=4096)
    seed: int = setting(0, "fixes the gating games (drawn from the gating seeds)", ge=0)
    max_pills: int = setting(2000, "pill cap: a game still running after this many pills is a loss", ge=1, le=10**5)
    lockstep: int = setting(50, "games played at once", ge=1, le=4096)
    alpha: float = setting(
        0.05,
        "one-sided significance of 'the new network uses more pills per virus' (where no game was won by both: "
        "'clears fewer viruses'); with wins-or-pills also of 'wins fewer games' and 'uses fewer pills per virus'",
        gt=0,
        lt=1,
    )
    rule: GateRule = setting(
        "wins-and-pills",
        "the decision: wins-and-pills (at least as many wins, not significantly more pills per virus) or "
        "wins-first (more wins promote whatever the pills; as many: as wins-and-pills) or wins-or-pills (as "
        "wins-and-pills, or fewer wins, not significantly fewer, with significantly fewer pills per virus)",
    )

    def check(self) -> list[str]:
        return [] if self.levels else ["levels = []: expected at least one level"]

    def games_settings(self) -> dict:
        """The settings that make the gating games and how they are played (not the decision, nor how
        many play at once): two rounds' records compare only if these are the same."""
        return {k: v for k, v in self.to_dict().items() if k not in ("alpha", "rule", "lockstep")}

    def games(self) -> list[GameSpec]:
        """The fixed gating games: per level, distinct gating seeds drawn with `seed`."""
        rng = np.random.default_rng([self.seed, 4])
        specs: list[GameSpec] = []
        for level in self.levels:
            for s in rng.choice(GATING_SEEDS, self.games_per_level, replace=False):
                specs.append(GameSpec(len(specs), int(s), int(level)))
        return specs


@dataclass
class GateResult:
    """The paired comparison of a new network with the best one so far, and the decision."""

    promoted: bool
    reason: str
    games: int
    new_wins: int
    old_wins: int
    new_only: int  # games the new network won and the old one lost
    old_only: int
    wins_p: float  # McNemar's exact two-sided p on new_only vs old_only
    both_won: int  # games both won (the pills-per-virus comparison)
    new_ppv: float  # pills per virus on those games
    old_ppv: float
    ppv_diff: float  # mean per-game difference new - old (negative: the new one uses fewer)
    ppv_diff_low: float  # paired bootstrap 95% interval
    ppv_diff_high: float
    ppv_worse_p: float  # one-sided sign-flip p of "the new one uses more pills per virus"
    new_cleared: float  # mean share of the level's viruses cleared, over every game
    old_cleared: float
    cleared_fewer_p: float  # one-sided sign-flip p of "the new one clears fewer viruses"
    # wins-or-pills, where the new network wins fewer games (None where not tested):
    wins_fewer_p: float | None = None  # McNemar's exact one-sided p of "the new one wins fewer games"
    ppv_fewer_p: float | None = None  # one-sided sign-flip p of "the new one uses fewer pills per virus"

    def to_dict(self) -> dict:
        """As JSON holds it: floats to 6 significant digits (a p of 5.8e-8 is not 0), and None for what
        could not be measured (NaN: the pills where no game was won by both), which JSON has no number for."""
        return {
            k: (float(f"{v:.6g}") if math.isfinite(v) else None) if isinstance(v, float) else v
            for k, v in asdict(self).items()
        }


def mcnemar_fewer_p(b: int, c: int) -> float:
    """McNemar's exact one-sided test of "b is fewer than c" discordant pairs: P(X <= b), X ~ Binomial(b + c, 1/2)."""
    return sum(math.comb(b + c, i) for i in range(b + 1)) / 2 ** (b + c)


def mcnemar_p(b: int, c: int) -> float:
    """McNemar's exact test: the two-sided binomial p of b against c discordant pairs (p = 1/2)."""
    return min(1.0, 2 * mcnemar_fewer_p(min(b, c), max(b, c)))


def sign_flip_p(diffs: np.ndarray, seed: int = 0, rounds: int = 20000) -> float:
    """One-sided p of mean(diffs) > 0 under random signs (a paired permutation test)."""
    if len(diffs) == 0:
        return 1.0
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(rounds, len(diffs)))
    null = (signs * np.abs(diffs)).mean(axis=1)
    return float((np.sum(null >= diffs.mean() - 1e-12) + 1) / (rounds + 1))


def bootstrap_interval(values: np.ndarray, seed: int = 0, rounds: int = 5000) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean of values (NaN, NaN when empty)."""
    if len(values) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(rounds, len(values)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _against(p: float, alpha: float) -> str:
    """A p-value beside the level it is judged at: "0.012 < 0.05"."""
    return f"{p:.3g} {'<' if p < alpha else '>='} {alpha:g}"


def compare(
    new: Sequence[GameRecord], old: Sequence[GameRecord], alpha: float = 0.05, rule: GateRule = "wins-and-pills"
) -> GateResult:
    """The paired comparison of two networks' records of the same games (in the same order), and the
    decision by `rule` (module docstring)."""
    if rule not in get_args(GateRule):
        raise ValueError(f"rule = {rule!r}: expected one of {', '.join(map(repr, get_args(GateRule)))}")
    games_new, games_old = [(r.seed, r.level) for r in new], [(r.seed, r.level) for r in old]
    if games_new != games_old:
        i = next((i for i, (a, b) in enumerate(zip(games_new, games_old)) if a != b), min(len(new), len(old)))
        first = f"game {i}: (seed, level) {games_new[i] if i < len(new) else 'none'} against "
        first += f"{games_old[i] if i < len(old) else 'none'}"
        raise ValueError(
            f"the two networks' records are not of the same games in the same order ({len(new)} games against "
            f"{len(old)}; first difference at {first})"
        )
    new_won = np.array([r.outcome == "won" for r in new])
    old_won = np.array([r.outcome == "won" for r in old])
    both = new_won & old_won
    viruses = np.array([max(r.viruses_cleared, 1) for r in new], np.float64)
    new_ppv = np.array([r.pills_used for r in new], np.float64) / viruses
    old_ppv = np.array([r.pills_used for r in old], np.float64) / viruses
    diffs = (new_ppv - old_ppv)[both]
    new_cleared = np.array([r.cleared_share for r in new])
    old_cleared = np.array([r.cleared_share for r in old])
    fewer_p = sign_flip_p(old_cleared - new_cleared)
    low, high = bootstrap_interval(diffs)
    worse_p = sign_flip_p(diffs)
    b, c = int((new_won & ~old_won).sum()), int((old_won & ~new_won).sum())
    new_wins, old_wins = int(new_won.sum()), int(old_won.sum())
    wins = f"{new_wins} against {old_wins}"
    wins_p = mcnemar_p(b, c)
    wins_fewer_p: float | None = None
    ppv_fewer_p: float | None = None
    if new_wins < old_wins and rule != "wins-or-pills":
        promoted, reason = False, f"wins fewer games ({wins})"
    elif new_wins < old_wins:  # significantly fewer pills per virus may make up for wins not significantly fewer
        wins_fewer_p = mcnemar_fewer_p(b, c)
        promoted = False
        how = "significantly" if wins_fewer_p < alpha else "not significantly"
        reason = f"wins fewer games ({wins}), {how} (one-sided McNemar p = {_against(wins_fewer_p, alpha)})"
        if wins_fewer_p >= alpha:
            ppv_fewer_p = sign_flip_p(-diffs)
            promoted = ppv_fewer_p < alpha
            pills = "uses" if promoted else "does not use significantly"
            reason += f", and {pills} fewer pills per virus (one-sided p = {_against(ppv_fewer_p, alpha)})"
    elif new_wins > old_wins and rule == "wins-first":
        promoted, reason = True, f"wins more games ({wins}; rule wins-first: pills not weighed)"
    elif worse_p < alpha:
        promoted, reason = False, f"uses more pills per virus (one-sided p = {_against(worse_p, alpha)})"
    elif not both.any() and new_wins > old_wins:
        promoted, reason = True, f"wins more games ({wins}); none won by both, so no pills to weigh"
    elif not both.any():  # wins level and no pills to weigh: the viruses cleared decide
        cleared = f"clears {new_cleared.mean():.1%} of the viruses against {old_cleared.mean():.1%}"
        promoted = fewer_p >= alpha
        fewer = "fewer" if new_cleared.mean() < old_cleared.mean() else "no fewer"
        verdict = f"{fewer}, one-sided p = {_against(fewer_p, alpha)}"
        reason = f"wins {wins}, none won by both, so the viruses weigh: {cleared} ({verdict})"
    else:
        promoted, reason = True, f"wins at least as many games ({wins}), not significantly more pills per virus"
    return GateResult(
        promoted=promoted,
        reason=reason,
        games=len(new),
        new_wins=new_wins,
        old_wins=old_wins,
        new_only=b,
        old_only=c,
        wins_p=wins_p,
        both_won=int(both.sum()),
        new_ppv=float(new_ppv[both].mean()) if both.any() else float("nan"),
        old_ppv=float(old_ppv[both].mean()) if both.any() else float("nan"),
        ppv_diff=float(diffs.mean()) if len(diffs) else float("nan"),
        ppv_diff_low=low,
        ppv_diff_high=high,
        ppv_worse_p=worse_p,
        new_cleared=float(new_cleared.mean()),
        old_cleared=float(old_cleared.mean()),
        cleared_fewer_p=fewer_p,
        wins_fewer_p=wins_fewer_p,
        ppv_fewer_p=ppv_fewer_p,
    )


def play_gate(agent: Agent, cfg: GateConfig) -> list[GameRecord]:
    """One network's records of the gating games (NES rules: no stalemate)."""
    return play_lockstep(agent, cfg.games(), lockstep=cfg.lockstep, max_pills=cfg.max_pills)
