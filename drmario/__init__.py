"""drmario-kit: an AlphaZero-style Dr. Mario player and the tools to study it.

The engine (NES rules, maryodel formats, level generation, legal and frame-exact placements) is importable from
the top level; encoders, search, network and training live in submodules.
"""

from drmario.kernel_cache import drop_stale_kernels

drop_stale_kernels()  # before any kernel is loaded from numba's cache

from drmario.engine.board import ALL_PILLS, Board, Colour, FormatError, Move, Pill, Shape, move_cells
from drmario.engine.game import DEFAULT_STALL_LIMIT, Game, GameRecord, Outcome
from drmario.engine.level import Level, PillSequence, new_level, virus_count
from drmario.engine.rules import PlaceResult, canonical, is_legal, legal_mask, legal_moves, place
from drmario.engine.timing import Reach, reachable

__version__ = "0.1.0"

__all__ = [
    "ALL_PILLS",
    "Board",
    "Colour",
    "DEFAULT_STALL_LIMIT",
    "FormatError",
    "Game",
    "GameRecord",
    "Level",
    "Move",
    "Outcome",
    "Pill",
    "PillSequence",
    "PlaceResult",
    "Reach",
    "Shape",
    "canonical",
    "is_legal",
    "legal_mask",
    "legal_moves",
    "move_cells",
    "new_level",
    "place",
    "reachable",
    "virus_count",
]
