"""The frame count of a one-player game under NES timing (`Game(timing="nes")`): what happens
between a pill's lock and the next pill's first frame, frame by frame, as the NTSC ROM does it.

RULES.md ("Frame-exact timing") gives the pill's own frames (`timing.reachable`: frame 1 to the
lock frame). This module adds the rest, read in the disassembly `Nostaljipi/dr-mario-disassembly`
(the original ROM: its build options ``optimize`` and ``removeMoreUnused`` off). Each frame the NMI
first draws one field row (`render_fieldRow`: the row ``status``, then ``status - 1``; ``$FF`` =
nothing to draw), then the game logic runs one step of the player's ``nextAction``
(`mainLoop_level`). With L the lock frame and y the pill's row (the lower row of a vertical one):

- **Lock** (`confirmPlacement`): ``status = 15 - y``, so the field is drawn from the pill's row
  up: the last row is drawn on frame L + 16 - y.
- **After the lock** (`toPillPlacedStep`): L + 1 `resetCombo`, L + 2 and L + 3 the two
  `incPillPlacedStep`, then `checkDrop`, which waits until the drawing is done: its first pass runs
  on frame D = L + max(4, 16 - y).
- **A round** (`checkDrop` that moved nothing on frame D): D + 1 `resetMatchFlag`, D + 2
  `checkHorMatch`, D + 3 `checkVerMatch` (a virus in a line is counted off on the frame its line
  is found, horizontal lines first, and `checkVirusLeft` ends the level on that frame), D + 4
  `updateField`, which sets ``status = 15`` (the whole field to redraw).
- **Clears and drops**: after a round with a clear, `checkDrop` waits for the 16 rows again, then
  moves every unsupported piece down one row per pass (the whole field, bottom row first, so a
  stack falls together), each pass followed by a full redraw: passes on U + 16, U + 32, ...
  (U = the `updateField` frame), the last one, which moves nothing, on U + 16 (h + 1) where h is
  the farthest any piece falls in that round. That pass is the next round's D.
- **No clear**: D + 5 `resetPillPlacedStep`, D + 6 `action_checkAttack` (one player: no attack),
  D + 7 `action_incNextAction`, then `action_sendPill` from D + 8: Mario's throw, 22 steps of
  `pillThrownAnim_XPos` (its ``$Fx`` entries advance within a frame; the ``$FF`` step calls
  `generateNextPill`, where a taken spawn cell ends the game), one step a frame on MED and HI,
  one on each odd frame on LOW (`spr_mario_throw_speed_low`). The frame after the last step runs
  `action_sendPillFinished`, and the one after it is the next pill's frame 1.

So the frame counter's parity on each pill's frame 1 follows from the frames before it.

What is approximate (or assumed):

- **The first pill's parity.** The level starts with Mario throwing the first pill; the frame
  counter then holds whatever the title screen, the menus and the virus intro left in it, which
  depends on how long the player spent there. The game assumes an odd first frame (parity 1, as
  LOW always gives) and counts frames from the first pill's frame 1 (frame 1): the intro and the
  first throw are not counted.
- **No lag frames**: one logic step every frame. The ROM's slow steps (a drop pass, a match scan)
  are assumed to end within their frame.
- **The player** starts each pill with nothing held and plays the fewest frames to the chosen
  lock (`timing.reachable`); a real player is slower.
- **One player** (two-player games have no throw, and attacks).
- **A won game** ends on the frame its last virus is counted off (its clear's `checkHorMatch` or
  `checkVerMatch`); "frames to clear" is that frame's number, from the first pill's frame 1.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from numba import njit

from drmario.engine import kernels as K
from drmario.engine.timing import SPEED_SETTINGS

Timing = Literal["free", "nes"]
Speed = Literal["low", "med", "hi"]
TIMINGS: tuple[str, ...] = ("free", "nes")
SPEEDS: tuple[str, ...] = tuple(SPEED_SETTINGS)  # ("low", "med", "hi")

FIRST_FRAME = 1  # the absolute frame number of the first pill's frame 1 (odd: parity 1)
AFTER_LOCK_STEPS = 4  # resetCombo and the two incPillPlacedStep run before the first checkDrop
ROUND_STEPS = 4  # checkDrop (nothing moved) -> resetMatchFlag, checkHorMatch, checkVerMatch, updateField
ROWS = K.HEIGHT  # one field row is drawn per frame: a full redraw takes 16 frames
BEFORE_THROW = 4  # updateField -> resetPillPlacedStep, checkAttack, incNextAction, then sendPill
THROW_STEPS = 22  # steps of Mario's throw (pillThrownAnim_XPos to its $FF, less the $Fx entries)
AFTER_THROW = 2  # sendPillFinished, then the next pill's frame 1

MAX_ROUNDS = 64


def check_timing(timing: object, speed: object) -> None:
    """ValueError unless timing is "free" or "nes" and speed is "low", "med" or "hi"."""
    if not isinstance(timing, str) or timing not in TIMINGS:
        raise ValueError(f"timing must be one of {list(TIMINGS)}, got {timing!r:.80}")
    if not isinstance(speed, str) or speed not in SPEEDS:
        raise ValueError(f"speed must be one of {list(SPEEDS)}, got {speed!r:.80}")


@njit(cache=True)
def _mark_runs(board, marked, horizontal):
    """Mark the runs of 4+ of one colour in one direction; returns the viruses newly marked."""
    viruses = 0
    outer, inner = (K.HEIGHT, K.WIDTH) if horizontal else (K.WIDTH, K.HEIGHT)
    for a in range(outer):
        i = 0
        while i < inner:
            x, y = (i, a) if horizontal else (a, i)
            c = board[x, y] & 3
            end = i + 1
            while end < inner and c != 0:
                ex, ey = (end, a) if horizontal else (a, end)
                if board[ex, ey] & 3 != c:
                    break
                end += 1
            if c != 0 and end - i >= 4:
                for j in range(i, end):
                    jx, jy = (j, a) if horizontal else (a, j)
                    if not marked[jx, jy]:
                        marked[jx, jy] = True
                        if board[jx, jy] >> 2 == K.VIRUS:
                            viruses += 1
            i = end
    return viruses


@njit(cache=True)
def _settle_depth(board):
    """`kernels._settle` that also returns the farthest any piece fell (rows)."""
    deepest = 0
    for y in range(1, K.HEIGHT):
        for x in range(K.WIDTH):
            c = board[x, y]
            shape = c >> 2
            if c == K.EMPTY or shape == K.VIRUS or shape == K.TOP or shape == K.RIGHT:
                continue
            ny = y
            if shape == K.LEFT:
                while ny > 0 and board[x, ny - 1] == K.EMPTY and board[x + 1, ny - 1] == K.EMPTY:
                    ny -= 1
                if ny != y:
                    board[x, ny], board[x + 1, ny] = c, board[x + 1, y]
                    board[x, y], board[x + 1, y] = K.EMPTY, K.EMPTY
            else:
                while ny > 0 and board[x, ny - 1] == K.EMPTY:
                    ny -= 1
                if ny != y:
                    board[x, ny] = c
                    board[x, y] = K.EMPTY
                    if shape == K.BOTTOM:
                        board[x, ny + 1] = board[x, y + 1]
                        board[x, y + 1] = K.EMPTY
            deepest = max(deepest, y - ny)
    return deepest


@njit(cache=True)
def place_and_resolve_rounds(board, left, right, r, x, y, rounds_out):
    """`kernels.place_and_resolve` (the same board and counts) that also describes each clear
    round k in rounds_out int64[>= MAX_ROUNDS, 3]: (viruses in its horizontal lines, viruses in its
    vertical lines only, the farthest any piece then falls). Returns (viruses, cells, rounds)."""
    K.write_pill(board, left, right, r, x, y)
    marked = np.zeros((K.WIDTH, K.HEIGHT), np.bool_)
    viruses = cells = rounds = 0
    while True:
        marked[:] = False
        hor = _mark_runs(board, marked, True)
        ver = _mark_runs(board, marked, False)
        n = 0
        for i in range(K.WIDTH):
            for j in range(K.HEIGHT):
                n += marked[i, j]
        if n == 0:
            break
        viruses += K._clear_marked(board, marked)
        depth = _settle_depth(board)
        if rounds < rounds_out.shape[0]:
            rounds_out[rounds, 0], rounds_out[rounds, 1], rounds_out[rounds, 2] = hor, ver, depth
        cells += n
        rounds += 1
    return viruses, cells, rounds


class AfterLock(NamedTuple):
    """The frames of one placement after its lock (absolute frame numbers)."""

    next_first: int  # the next pill's frame 1 (its parity is the next pill's)
    throw_end: int  # the frame of the throw's last step (generateNextPill: a top out shows here)
    cleared_at: tuple[int, ...]  # per clear round, the frame its last virus is counted off (0: none)


def throw_end(start: int, speed: str) -> int:
    """The frame of the last of Mario's 22 throw steps when `action_sendPill` first runs on frame
    `start`: one step a frame on MED and HI, one on each odd frame on LOW."""
    if speed == "low":
        first_odd = start + (1 - start % 2)
        return first_odd + 2 * (THROW_STEPS - 1)
    return start + THROW_STEPS - 1


def after_lock(lock: int, y: int, rounds: np.ndarray, speed: str) -> AfterLock:
    """The frames after a pill locks on frame `lock` in row y (its lower row), with its clear
    rounds (rows of `place_and_resolve_rounds`'s rounds_out) at `speed` (module docstring)."""
    d = lock + max(AFTER_LOCK_STEPS, ROWS - y)  # the first checkDrop: nothing to drop
    cleared = []
    for hor, ver, depth in np.asarray(rounds, np.int64).reshape(-1, 3).tolist():
        cleared.append(d + 3 if ver else d + 2 if hor else 0)
        u = d + ROUND_STEPS  # updateField
        d = u + ROWS * (depth + 1)  # the drop passes, the last one moves nothing
    end = throw_end(d + ROUND_STEPS + BEFORE_THROW, speed)
    return AfterLock(end + AFTER_THROW, end, tuple(cleared))
