"""The searches' utility: one scale in [0, 1] for every search, **outcome first**.

A game that ends (or is cut off) p pills after the root, having cleared c of the root's V viruses,
with s = p / (p + P) and the pill scale P = k * V (k = `Utility.pills_per_virus`), is worth

- a win:        WIN_FLOOR + (1 - WIN_FLOOR) * (1 - s)          (fewer pills is better)
- otherwise:    TOPOUT_CEILING * (c + s) / (V + 1)              (more cleared, then longer survival)

with TOPOUT_CEILING (0.5) < WIN_FLOOR (0.6), so any finished win is worth more than any finished
top-out. A top-out, a stalemate and a rollout cut off by the horizon all take the second form: none
of them is a win. At a network leaf c is the viruses cleared on the path plus the network's predicted
rest, not capped at V, so a leaf's failure value can pass 0.5 (capping it was measured and not kept:
bench/README.md, "A cap on the network's predicted viruses cleared").

Why P = k * V: the value of a win then depends on p only through p / V, the pills per virus. A
fixed P (it was 20) made a pill at level 20 (p around 160) worth 0.0005, below the noise of a value
head, while the same efficiency gain at level 5 was worth four times as much; with P = k * V an
efficiency gain (pills per virus saved) is worth the same at every level, and k = 2, about the
expert's pills per virus, puts a typical win at s = 1/2, where s changes fastest per relative change in
pills (ds / d ln p = s (1 - s)).

The option **centred** (KataGo's dynamic score utility, Wu 2019) keeps the failure form and
values a win by how its pills compare with the pills the root is expected to need (the centre E: the
network's prediction at the root; k * V without a network):

- a win:        WIN_FLOOR + (1 - WIN_FLOOR) * (1/2 - atan((p - E) / w) / pi),   w = width * sqrt(V)

Why: with P = k * V a pill at level 20 is still worth only about 0.0006 (the slope of s, P / (p + P)^2, is 1 /
(4 P) at p = P and less beyond, where a level's wins lie), less than a 1% difference in the predicted P(win)
of two moves, which is the value head's noise; so the search kept the prior's moves and saved no pills.
Centred on what the root expects, the utility is steepest where the candidate moves' pills actually lie; w
grows like the spread of a game's remaining pills (a sum of roughly independent costs per virus, so like
sqrt(V)). Measured with the shipped network and 100 simulations at level 20, it saves pills where it wins
(0.25 pills per virus on 50 tuning games; 0.13 on 100 evaluation games, not significant) but runs into more
end games it cannot finish (5 of 100 evaluation games at the pill cap, against 2), so it is an option, not the
default.

The option **discounted** (the value idea of design note 002) is gamma ** p for a win and 0
otherwise. With a network the utility is its expectation under the predicted P(win) = (won + 1) / 2,
with the pills actually placed along the path plus the leaf's predicted rest (`expected_utility`):
the win's pills and the loss's cleared viruses and pills each from the network's outputs for that
outcome where it has them (`NetConfig.outcome_values`), else from its means over both.
The settings travel to compiled code as one float64 array (`Utility.params`); the centre travels
per game (a negative centre means none is known: k * V).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numba import njit

from drmario.engine.kernels import WON
from drmario.settings import Settings, setting

WIN_FLOOR = 0.6  # a win is worth at least this
TOPOUT_CEILING = 0.5  # a game that is not won is worth at most this
OUTCOME, DISCOUNTED, CENTRED = 0, 1, 2  # utility kinds: each has its branch in win_value (failure_value: if it differs)
_KINDS = {"outcome": OUTCOME, "discounted": DISCOUNTED, "centred": CENTRED}  # the names of Utility.kind's Literal


@dataclass(frozen=True)
class Utility(Settings):
    """How a search values a finished game (module docstring)."""

    kind: Literal["outcome", "discounted", "centred"] = setting(
        "outcome",
        "outcome: any win beats any top-out, then fewer pills (the pill scale k * V); centred: the same, a win's "
        "pills compared with the root's expected pills (KataGo's dynamic score utility); discounted: a win is "
        "gamma ** pills, else 0. Shipped network, 100 simulations, level 20: centred (width 4) won 50 of 50 tuning "
        "games with 0.25 fewer pills per virus than outcome (search100-centred-tuning) but 94 against 97 of 100 "
        "evaluation games, 5 at the pill cap against 2 (search100-centred); discounted 49 against 50 tuning games, "
        "0.21 more (search100-utility-tuning)",
    )
    pills_per_virus: float = setting(
        2.0,
        "k of the pill scale P = k * V (V: viruses at the root) of outcome's wins and of every failure's survival; "
        "without a network also the centred utility's centre; about the expert's pills per virus (outcome with "
        "k = 1, 50 tuning games at level 20: 47 against 50 wins, 3 at the pill cap; search100-utility-tuning)",
        gt=0,
    )
    gamma: float = setting(0.98, "discounted: a win p pills away is worth gamma ** p", gt=0, le=1)
    width: float = setting(
        4.0,
        "centred: the win's pill term is 1/2 - atan((p - centre) / w) / pi with w = width * sqrt(V) pills "
        "(50 tuning games at level 20: width 4 won 50 with 2.03 pills per virus; 8 won 48, 1.5 won 47 and 0.5 "
        "won 48, the others at the 2,000-pill cap; search100-centred-tuning, search100-centred8-tuning; "
        "with it c_puct 4 beat 2 and 8, search100-centred-cpuct-tuning)",
        gt=0,
    )

    rest_scale: float = setting(
        1.0,
        "network searches: a leaf's predicted pills to the end, taken as the root's prediction plus this times "
        "the leaf's difference from it. Along the expert's games the networks' predictions fall by only 0.73 "
        "(a round-0 network) to 0.86 (shipped) pills per pill placed (value-consistency), so placed pills plus "
        "a leaf's prediction overstate deep lines; 1 / that rate makes them agree on average. Measured, shipped "
        "network, 100 simulations, level 20: 1.16 won 97 of the 100 evaluation games as 1 did, 0.25 fewer pills "
        "per virus on the 95 both won (95% 0.77 fewer to 0.04 more; search100-rest-shipped); on 100 other tuning "
        "games 98 against 97, 0.03 fewer (0.47 fewer to 0.40 more; search100-rest-shipped-tuning100); on 50 "
        "tuning games 1.08, 1.16, 1.3 won 49, 48, 49 against 46; with the round-0 network 1.37 used 0.17 more "
        "(0.03 to 0.30). No gain shown, so 1 stays",
        gt=0,
    )

    @property
    def params(self) -> np.ndarray:
        """float64[5] (kind, pills_per_virus, gamma, width, rest_scale) for the compiled functions."""
        return np.array([_KINDS[self.kind], self.pills_per_virus, self.gamma, self.width, self.rest_scale])


@njit(cache=True, inline="always")
def _survival(up, pills, root_left):
    scale = up[1] * max(root_left, 1)
    return pills / (pills + scale)


@njit(cache=True, inline="always")
def win_value(up, pills, root_left, centre=-1.0):
    """The utility of a win after `pills` pills from a root with root_left viruses (centre: the
    pills the root is expected to need, negative if unknown; only `centred` reads it)."""
    if up[0] == DISCOUNTED:
        return up[2] ** pills
    if up[0] == CENTRED:
        v = max(root_left, 1)
        expected = centre if centre >= 0 else up[1] * v
        return WIN_FLOOR + (1.0 - WIN_FLOOR) * (0.5 - np.arctan((pills - expected) / (up[3] * np.sqrt(v))) / np.pi)
    if up[0] != OUTCOME:
        raise ValueError("a utility kind without its branch in win_value")
    return WIN_FLOOR + (1.0 - WIN_FLOOR) * (1.0 - _survival(up, pills, root_left))


@njit(cache=True, inline="always")
def failure_value(up, cleared, pills, root_left):
    """The utility of a game that ends without a win (or is cut off) after clearing `cleared`."""
    if up[0] == DISCOUNTED:
        return 0.0
    return TOPOUT_CEILING * (cleared + _survival(up, pills, root_left)) / (root_left + 1.0)


@njit(cache=True, inline="always")
def utility(up, cleared, pills, outcome, root_left, centre=-1.0):
    """Value of a finished (or horizon-cut) game: cleared viruses and pills counted from the root."""
    if outcome == WON:
        return win_value(up, pills, root_left, centre)
    return failure_value(up, cleared, pills, root_left)


@njit(cache=True, inline="always")
def expected_utility(up, p_win, win_pills, loss_cleared, loss_pills, root_left, centre=-1.0):
    """The utility with the game's end uncertain: p_win the probability it ends in a win (the
    network's won output mapped from [-1, 1] to [0, 1]); win_pills the pills a win takes; loss_cleared
    and loss_pills the viruses a loss clears and the pills it lasts. A network with outcome_values
    predicts each on its own outcome's futures; otherwise its means over both outcomes stand in, which
    read a position whose losses come early as needing fewer pills to win (measured in bench/README.md,
    "Values conditioned on the outcome")."""
    win = win_value(up, win_pills, root_left, centre)
    return p_win * win + (1.0 - p_win) * failure_value(up, loss_cleared, loss_pills, root_left)
