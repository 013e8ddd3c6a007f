"""Search: one function per algorithm over shared compiled trees. Torch-free.

- `expert_search` (`expert`): the depth-2 heuristic search over the pill and the NES preview;
- `round0_search` (`round0`): MCTS with rollouts, no network;
- `puct_search`, `gumbel_search` (`network`): MCTS with an `Evaluator` (a network);

over `tree` (the compiled pools of decision and chance nodes), with `utility` (how a finished game
is valued) and `core` (positions, predictions, results). `SearchConfig` names any of them by mode.
"""

from drmario.search.config import NO_NETWORK, SearchConfig, search
from drmario.search.core import Evaluator, Leaves, Position, Prediction, SearchResult, run
from drmario.search.expert import ExpertSettings, expert_search
from drmario.search.network import GumbelSettings, PuctSettings, gumbel_search, puct_search
from drmario.search.round0 import RolloutEvaluator, Round0Settings, round0_search
from drmario.search.utility import Utility

__all__ = [
    "NO_NETWORK",
    "Evaluator",
    "ExpertSettings",
    "GumbelSettings",
    "Leaves",
    "Position",
    "Prediction",
    "PuctSettings",
    "RolloutEvaluator",
    "Round0Settings",
    "SearchConfig",
    "SearchResult",
    "Utility",
    "expert_search",
    "gumbel_search",
    "puct_search",
    "round0_search",
    "run",
    "search",
]
