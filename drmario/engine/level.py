"""NES level generation: the 16-bit RNG, the 128-pill list and virus placement (rules.md section 6),
and the i.i.d. pill mode for experiments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from drmario.engine import kernels as K
from drmario.engine.board import ALL_PILLS, Board, Pill, as_pill, integer

MIN_SEED, MAX_SEED = 2, 0xFFFF
MAX_LEVEL = 24
# Evaluation games use only NES seeds that are multiples of 8; self-play, training and tuning use
# only the others, so no evaluation game is ever trained or tuned on. Of those, the seeds that are
# 4 mod 8 are kept for the games that gate a new network (`play.gate`): self-play never plays them,
# so a network is never gated on a game it trained on.
EVALUATION_SEED_STEP = 8
EVALUATION_SEEDS = np.arange(EVALUATION_SEED_STEP, MAX_SEED + 1, EVALUATION_SEED_STEP)
TRAINING_SEEDS = np.setdiff1d(np.arange(MIN_SEED, MAX_SEED + 1), EVALUATION_SEEDS)
GATING_SEEDS = TRAINING_SEEDS[TRAINING_SEEDS % EVALUATION_SEED_STEP == 4]
SELFPLAY_SEEDS = np.setdiff1d(TRAINING_SEEDS, GATING_SEEDS)
PillMode = Literal["nes", "iid"]
PILL_MODES = ("nes", "iid")


def check_seed_level(seed: int, level: int) -> None:
    """ValueError unless seed is a NES RNG state (an int in MIN_SEED..MAX_SEED) and level an int in
    0..MAX_LEVEL (bools refused)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not MIN_SEED <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer in {MIN_SEED}..{MAX_SEED} (the NES RNG state), got {seed!r}")
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"level must be an integer in 0..{MAX_LEVEL}, got {level!r}")


def _level(level: object) -> int:
    """level as an int in 0..MAX_LEVEL; ValueError otherwise (FormatError where it is not an integer)."""
    value = integer(level, "level")
    if not 0 <= value <= MAX_LEVEL:
        raise ValueError(f"level must be an integer in 0..{MAX_LEVEL}, got {value}")
    return value


def is_evaluation_seed(seed: int) -> bool:
    """Whether seed (an NES seed, 2..65535) is kept for evaluation (never used for self-play,
    training or tuning); ValueError for anything else."""
    value = integer(seed, "seed")
    if not MIN_SEED <= value <= MAX_SEED:
        raise ValueError(f"seed must be an integer in {MIN_SEED}..{MAX_SEED} (the NES RNG state), got {value}")
    return value % EVALUATION_SEED_STEP == 0


def virus_count(level: int) -> int:
    """How many viruses level (0..24) starts with: min(84, 4 * (level + 1))."""
    return int(K.virus_count(_level(level)))


def max_virus_row(level: int) -> int:
    """The highest row (from the bottom, inclusive) a virus may be placed in at level (0..24)."""
    return int(K.max_virus_row(_level(level)))


def pill_array(pills: tuple[Pill, ...] | list[Pill]) -> np.ndarray:
    """Pills as a uint8[N, 2] array of (left, right) colours, the form the kernels take."""
    if isinstance(pills, (str, bytes)) or not isinstance(pills, (tuple, list)):
        raise ValueError(f"pills: expected a list of Pills, got {type(pills).__name__}")
    checked = [as_pill(p, f"pills[{i}]") for i, p in enumerate(pills)]
    return np.array([(p.left, p.right) for p in checked], np.uint8).reshape(-1, 2)


def _pills_from_array(array: np.ndarray) -> tuple[Pill, ...]:
    return tuple(ALL_PILLS[3 * (a - 1) + (b - 1)] for a, b in array.tolist())


@dataclass(frozen=True)
class Level:
    """A generated level: the starting board and the 128 pills in the order they are thrown.

    The k-th pill of a game is ``pills[k % 128]``; while it is placed the NES previews
    ``pills[(k + 1) % 128]``.
    """

    seed: int
    level: int
    board: Board
    pills: tuple[Pill, ...]
    rng_after_pills: int

    @property
    def pill_array(self) -> np.ndarray:
        return pill_array(self.pills)


def new_level(seed: int, level: int) -> Level:
    """Generate level from the RNG state seed (2..65535): 128 pills first, then the viruses."""
    check_seed_level(seed, level)
    pills = np.empty((128, 2), np.uint8)
    state = K.generate_pills(np.int64(seed), pills)
    cells = np.zeros((K.WIDTH, K.HEIGHT), np.uint8)
    K.place_viruses(state, virus_count(level), max_virus_row(level), cells)
    return Level(int(seed), int(level), Board._wrap(cells), _pills_from_array(pills), int(state))


def viruses_only(seed: int, level: int) -> Board:
    """The board made by placing viruses straight from seed, with no pill draws before (the
    vectors' ``board_only``: it pins down the order of the RNG stream)."""
    check_seed_level(seed, level)
    cells = np.zeros((K.WIDTH, K.HEIGHT), np.uint8)
    K.place_viruses(np.int64(seed), virus_count(level), max_virus_row(level), cells)
    return Board._wrap(cells)


def check_pill_mode(mode: object) -> None:
    """ValueError unless mode is one of `PILL_MODES`."""
    if not isinstance(mode, str) or mode not in PILL_MODES:
        raise ValueError(f"pill_mode must be one of {list(PILL_MODES)}, got {mode!r:.80}: an unknown pill mode")


class PillSequence:
    """The pills of one game: the NES list of a level repeating every 128, or i.i.d. uniform pills.

    ``sequence[k]`` is the k-th pill thrown. The i.i.d. mode draws from ``numpy`` seeded with the
    level's (seed, level), in blocks, so any prefix is reproducible from the two alone.
    """

    _BLOCK = 256

    def __init__(self, mode: PillMode, level: Level) -> None:
        check_pill_mode(mode)
        self.mode = mode
        if mode == "nes":
            self._array = level.pill_array
        else:
            self._rng = np.random.default_rng([level.seed, level.level])
            self._array = np.empty((0, 2), np.uint8)

    def _extend(self, k: int) -> None:
        while k >= len(self._array):
            idx = self._rng.integers(0, 9, self._BLOCK)
            block = np.stack([idx // 3 + 1, idx % 3 + 1], axis=1).astype(np.uint8)
            self._array = np.concatenate([self._array, block])

    def colours(self, k: int) -> tuple[int, int]:
        k = integer(k, "pill index")
        if k < 0:
            raise ValueError(f"pill index must be >= 0 (the k-th pill thrown), got {k}")
        if self.mode == "nes":
            row = self._array[k % 128]
        else:
            self._extend(k)
            row = self._array[k]
        return int(row[0]), int(row[1])

    def __getitem__(self, k: int) -> Pill:
        a, b = self.colours(k)
        return ALL_PILLS[3 * (a - 1) + (b - 1)]
