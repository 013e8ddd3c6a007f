"""Search: compiled MCTS with chance nodes for the next pill (`mcts`), and its Python interface
(`searcher`): positions, settings, evaluators, results. Torch-free."""

from drmario.search.searcher import (
    Evaluator,
    Position,
    Prediction,
    RolloutEvaluator,
    SearchConfig,
    Searcher,
    SearchResult,
    search,
)

__all__ = [
    "Evaluator",
    "Position",
    "Prediction",
    "RolloutEvaluator",
    "SearchConfig",
    "SearchResult",
    "Searcher",
    "search",
]
