"""Frame-exact placements (RULES.md, "Frame-exact timing"): the lock poses a player with a standard
controller can reach at the NES game's real speed, each with its fewest frames and the inputs that
make it. The search itself is compiled (`timing_kernels`).

>>> import drmario as dm
>>> moves = dm.reachable(dm.Board.empty(), dm.Pill.from_string("qw"), speed_index=15, parity=1)  # LOW: parity 1
>>> len(moves), moves[dm.Move(0, 3, 0)].frames
(30, 31)
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from drmario.engine import kernels as K
from drmario.engine import timing_kernels as TK
from drmario.engine.board import Board, Move, Pill, as_pill, integer

# Base speed index of each setting (baseSpeedSettingValue) and the cap on speed-ups (speedUps_max).
SPEED_SETTINGS = {"low": 15, "med": 25, "hi": 31}
MAX_SPEED_UPS = 49
MAX_SPEED_INDEX = TK.MAX_SPEED_INDEX  # 80
SPEED_COUNTER = TK.SPEED_COUNTER  # int64[81], the ROM's speedCounterTable
FRAMES_PER_ROW = SPEED_COUNTER + 1  # int64[81]: 70, 68, ..., 20 (i = 25), 19, ..., 1 (i = 80)
NES_FPS = 60.0988  # frames a second of the NTSC NES
BUTTONS = "LRDAB"  # the order of the buttons in an input string; bit i of an input set is BUTTONS[i]


class Reach(NamedTuple):
    """How a move is reached: ``frames`` from the first frame the pill can move to the frame it locks
    (both counted), and ``inputs``, the buttons held on each of those frames (a subset of "LRDAB" in
    that order, "" for none)."""

    frames: int
    inputs: tuple[str, ...]


def speed_index(setting: str, level: int, pill_number: int) -> int:
    """The speed index (0..80) the ROM uses for pill `pill_number` (0 = the level's first) of a level.

    Base LOW 15, MED 25, HI 31, plus one speed-up every 10 pills thrown: the ROM's counter starts at
    1 and counts each pill as it is thrown, so pill n falls with min(49, (n + 2) // 10) speed-ups
    (the first at pill 8, the ninth). The level does not matter: levels 21-24 start at the same
    speed (RULES.md, "Frame-exact timing").
    """
    if not isinstance(setting, str) or setting not in SPEED_SETTINGS:
        raise ValueError(f"setting must be one of {sorted(SPEED_SETTINGS)}, got {setting!r:.80}")
    if not 0 <= integer(level, "level") <= 24:
        raise ValueError(f"level must be in 0..24, got {level}")
    if integer(pill_number, "pill_number") < 0:
        raise ValueError(f"pill_number must be >= 0, got {pill_number}")
    return SPEED_SETTINGS[setting] + min(MAX_SPEED_UPS, (pill_number + 2) // 10)


def frames_per_row(speed_index: int) -> int:
    """Frames a pill takes to fall one row by gravity at a speed index (speedCounterTable + 1)."""
    return int(FRAMES_PER_ROW[_speed(speed_index)])


def input_string(buttons: int) -> str:
    """An input bit set (L R D A B = 1, 2, 4, 8, 16) as a string such as "LA"."""
    if not 0 <= integer(buttons, "buttons") < 1 << len(BUTTONS):
        raise ValueError(f"buttons must be a bit set in 0..{(1 << len(BUTTONS)) - 1}, got {buttons}")
    return "".join(b for i, b in enumerate(BUTTONS) if buttons >> i & 1)


INPUT_STRINGS = tuple(input_string(b) for b in range(32))  # shared by every cached path


def input_bits(text: str) -> int:
    """The inverse of `input_string`."""
    if not isinstance(text, str) or any(c not in BUTTONS for c in text) or len(set(text)) < len(text):
        raise ValueError(f"an input is a string of the buttons {BUTTONS!r}, each at most once, got {text!r}")
    return sum(1 << BUTTONS.index(c) for c in set(text))


def _speed(value: object) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"speed_index must be an int in 0..{MAX_SPEED_INDEX}, got {value!r}")
    if not 0 <= value <= MAX_SPEED_INDEX:
        raise ValueError(f"speed_index must be an int in 0..{MAX_SPEED_INDEX}, got {value}")
    return int(value)


def _parity(value: object) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value not in (0, 1):
        raise ValueError(f"parity must be 0 or 1, got {value!r}")
    return int(value)


def _cells(board: object) -> np.ndarray:
    if isinstance(board, Board):
        return board.cells
    if isinstance(board, np.ndarray):
        return Board(board).cells  # validates (FormatError, a ValueError, names the problem)
    raise ValueError(f"board must be a Board or its cells uint8[8, 16], got {type(board).__name__}")


_workspace: np.ndarray | None = None


def _work() -> np.ndarray:
    global _workspace
    if _workspace is None:
        _workspace = TK.new_workspace()
    return _workspace


@lru_cache(maxsize=1024)
def _search(cells_bytes: bytes, v: int, parity: int, same: bool) -> tuple[tuple[Move, Reach], ...]:
    """Every reachable move with its reach, cached by (board, speed, parity, same colour): search
    trees revisit boards (about 10 kB an entry)."""
    cells = np.frombuffer(cells_bytes, np.uint8).reshape(K.WIDTH, K.HEIGHT).copy()  # writable, as the batch's
    best = np.empty((TK.N_POSES, 3), np.int32)
    queue = TK.plan(cells, v, parity, same, _work(), best)
    frames = best[:, 0].reshape(4, K.WIDTH, K.HEIGHT)
    if same:  # the faster of r and r + 2, under the canonical r
        frames = np.minimum(frames[:2], frames[2:])
    path = np.empty(int(frames[frames < TK.UNREACHED].max(initial=0)) + 1, np.int64)
    found = []
    for r, x, y in zip(*np.nonzero(frames < TK.UNREACHED)):
        pose = int(r) * 128 + int(x) * 16 + int(y)
        if same and best[pose + 256, 0] < best[pose, 0]:
            pose += 256
        n = TK.inputs_of(best, pose, queue, path)
        found.append((Move(int(r), int(x), int(y)), Reach(n, tuple(INPUT_STRINGS[b] for b in path[:n].tolist()))))
    return tuple(found)


def reachable(board: Board | np.ndarray, pill: Pill, speed_index: int, parity: int = 0) -> dict[Move, Reach]:
    """The moves a player can make at the NES game's real speed, each with its fewest frames.

    board: a `Board` (or its cells uint8[8, 16]); pill: the `Pill` to place; speed_index: 0..80
    (`speed_index()`: LOW 15, MED 25, HI 31 at a level's start); parity: the frame counter's parity
    on the pill's first frame (soft drops act on odd frames; on LOW it is always 1, as `Game` passes
    it). The pill spawns with nothing held. Returns {Move: Reach} for every lock pose some input
    sequence reaches, empty when a spawn cell is occupied; a same-colour pill gets canonical moves
    (r in {0, 1}, the faster of r and r + 2), as `legal_moves` does. Every move is one of `legal_moves`.
    """
    cells = _cells(board)
    pill = as_pill(pill)
    v = int(SPEED_COUNTER[_speed(speed_index)])
    return dict(_search(cells.tobytes(), v, _parity(parity), pill.same_colour))


def reachable_mask(
    board: Board | np.ndarray, pill: Pill, speed_index: int, parity: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`reachable` as arrays: bool[4, 8, 16] [r, x, y] and the fewest frames int32[4, 8, 16] (0 where
    unreachable); for a same-colour pill the planes r and r + 2 are equal, as in `legal_mask`."""
    cells, pill, speed = _cells(board), as_pill(pill), _speed(speed_index)
    mask = np.empty((4, K.WIDTH, K.HEIGHT), np.uint8)
    frames = np.empty((4, K.WIDTH, K.HEIGHT), np.int32)
    writable = cells.copy()  # as `_search` and the batch pass boards: the kernel compiles once
    TK.reachable_into(writable, int(pill.left), int(pill.right), speed, _parity(parity), mask, frames, _work())
    return mask.view(np.bool_), frames


def input_path(inputs: tuple[str, ...] | list[str]) -> str:
    """A pill's per-frame inputs (`Reach.inputs`) in short: each frame's buttons held (a
    subset of LRDAB, · for none), a run of one frame's buttons as X×n, a run of a repeated pair of
    frames as (X Y)×n, e.g. ``· L (D ·)×4 LA D``; `read_input_path` expands it back."""
    if not isinstance(inputs, (list, tuple)):
        raise ValueError(f"inputs must be a list of per-frame button strings, got {type(inputs).__name__}")
    for frame, buttons in enumerate(inputs):
        try:
            input_bits(buttons)
        except ValueError as e:
            raise ValueError(f"inputs[{frame}]: {e}") from None
    frames = [f or "·" for f in inputs]
    out, i = [], 0
    while i < len(frames):
        runs = {}
        for unit in (1, 2):  # the unit that covers the most frames, if it repeats
            head, n = frames[i : i + unit], 1
            while len(head) == unit and frames[i + n * unit : i + (n + 1) * unit] == head:
                n += 1
            runs[unit] = n
        unit = 2 if runs[2] > 1 and 2 * runs[2] > runs[1] else 1
        n = runs[unit]
        text = frames[i] if unit == 1 else f"({frames[i]} {frames[i + 1]})"
        out.append(f"{text}×{n}" if n > 1 else text)
        i += unit * n
    return " ".join(out)


_PATH_TOKEN = re.compile(r"\s*(?:\(([LRDAB·]+) ([LRDAB·]+)\)×(\d{1,6})|([LRDAB·]+)(?:×(\d{1,6}))?)\s*")
MAX_PATH_FRAMES = 1_000_000  # far above any pill's fall; stops "L×999999" × many from eating memory


def read_input_path(text: str) -> list[str]:
    """The per-frame inputs of an `input_path` text ("" for a frame with no buttons)."""
    if not isinstance(text, str):
        raise ValueError(f"an input path is a string such as '· L (D ·)×4', got {type(text).__name__}")
    frames: list[str] = []
    pos = 0
    while pos < len(text):
        m = _PATH_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"input path: cannot read {text[pos : pos + 20]!r} at character {pos + 1}")
        if int(m[3] or m[5] or 1) < 1:
            raise ValueError(f"input path: a run of 0 frames at character {m.start() + 1} ({m[0].strip()!r})")
        if m[1]:
            frames += [m[1], m[2]] * int(m[3])
        else:
            frames += [m[4]] * int(m[5] or 1)
        if len(frames) > MAX_PATH_FRAMES:
            raise ValueError(f"input path: more than {MAX_PATH_FRAMES} frames by character {m.end()}")
        pos = m.end()
    for frame, buttons in enumerate(frames):
        if buttons != "·" and (len(set(buttons)) < len(buttons) or "·" in buttons):
            raise ValueError(f"input path: frame {frame + 1} holds {buttons!r}; each button once, · alone")
    return ["" if f == "·" else f for f in frames]
