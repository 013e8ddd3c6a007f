"""One settings object for whichever search a run uses, and the one place a mode picks its function.

Each algorithm is its own function with keyword-only settings: `expert.expert_search`,
`round0.round0_search`, `network.puct_search` and `network.gumbel_search`. `SearchConfig` holds the
settings of all four (each algorithm's in its own section) so that self-play, profiles and the
command line can name a search by its ``mode``; `SearchConfig.run` calls the mode's function with
exactly the settings it reads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from drmario.engine.game import Game
from drmario.search.core import Evaluator, Position, SearchResult, Steps, pill_probs_problems, run
from drmario.search.expert import ExpertSettings, expert_search
from drmario.search.network import GumbelSettings, PuctSettings, gumbel_steps, puct_steps
from drmario.search.round0 import Round0Settings, round0_search
from drmario.search.utility import Utility
from drmario.settings import Settings, setting

Mode = Literal["expert", "round0", "puct", "gumbel"]
NO_NETWORK = ("expert", "round0")  # the modes that need no evaluator
_TREE = ("simulations", "utility", "pill_probs")  # what every tree search reads
# the settings each mode's function reads: its own section (spread into keyword settings), and the tree's
MODE_READS: dict[str, tuple[str, ...]] = {
    "expert": ("expert",),
    "round0": (*_TREE, "round0"),
    "puct": (*_TREE, "puct"),
    "gumbel": (*_TREE, "gumbel"),
}


@dataclass(frozen=True)
class SearchConfig(Settings):
    """The search that chooses every move of a run (recorded with the examples it makes)."""

    mode: Mode = setting(
        "round0",
        "expert: the heuristic search (depth 2, or 3); round0: MCTS with rollouts; puct or gumbel: with a network",
    )
    simulations: int = setting(200, "simulations per decision (round 0: after the root evaluation)", ge=0, le=10**6)
    pill_probs: tuple[float, ...] | None = setting(
        None, "probabilities of the 9 next pills (r, y, b order of the left then right half); None: uniform", ge=0
    )
    utility: Utility = setting(Utility(), "how the tree searches value a finished game", prefix=True)
    expert: ExpertSettings = setting(ExpertSettings(), "mode expert", prefix=True)
    round0: Round0Settings = setting(Round0Settings(), "mode round0")
    puct: PuctSettings = setting(PuctSettings(), "mode puct")
    gumbel: GumbelSettings = setting(GumbelSettings(), "mode gumbel", prefix=True)

    def check(self) -> list[str]:
        return pill_probs_problems(self.pill_probs)

    @property
    def needs_network(self) -> bool:
        return self.mode not in NO_NETWORK

    @property
    def summary(self) -> str:
        """The search in a few words: "expert, depth 2", "gumbel, 8 simulations"."""
        if self.mode == "expert":
            return f"expert, depth {self.expert.depth}"
        return f"{self.mode}, {self.simulations} simulations"

    def unread(self) -> dict[str, str]:
        """The settings this mode never reads (field name -> why): another mode's section, and for the
        expert the tree's (`Settings.unread`); a profile that sets one has likely named the wrong mode."""
        reads = MODE_READS[self.mode]
        return super().unread() | {
            name: f"mode {self.mode!r} does not read it" + (f" (mode {name}'s setting)" if name in MODE_READS else "")
            for name in (*_TREE, *MODE_READS)
            if name not in reads
        }

    def _function(self) -> Callable[..., Any]:
        """The mode's function with exactly the settings it reads (`MODE_READS`) bound."""
        functions: dict[str, Callable[..., Any]] = {
            "expert": expert_search,
            "round0": round0_search,
            "puct": puct_steps,
            "gumbel": gumbel_steps,
        }
        settings: dict[str, Any] = {}
        for name in MODE_READS[self.mode]:
            value = getattr(self, name)
            settings.update(value.to_dict() if name == self.mode else {name: value})
        return functools.partial(functions[self.mode], **settings)

    def steps(self, positions: Sequence[Position], seeds: Sequence[int]) -> Steps:
        """A network search (puct, gumbel) as `core.Steps`, to drive with an evaluator."""
        if not self.needs_network:
            raise ValueError(f"search mode {self.mode!r} needs no evaluator: call run()")
        return self._function()(positions, seeds)

    def run(
        self, positions: Sequence[Position], seeds: Sequence[int], evaluator: Evaluator | None = None
    ) -> list[SearchResult]:
        """Search each position (seeds make each search reproducible on its own)."""
        if not self.needs_network:
            return self._function()(positions, seeds)
        if evaluator is None:
            raise ValueError(f"search mode {self.mode!r} needs an evaluator (a network)")
        return run(self.steps(positions, seeds), evaluator)


def search(
    position: Position | Game, config: SearchConfig, evaluator: Evaluator | None = None, seed: int = 0
) -> SearchResult:
    """Search one position (a convenience over `SearchConfig.run`); a `Game` is taken as its position."""
    if isinstance(position, Game):
        position = Position.of(position)
    return config.run([position], [seed], evaluator)[0]
