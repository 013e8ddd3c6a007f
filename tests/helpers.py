"""Independent, slow, plain-Python references, board generators, a subprocess helper, the tiny
pipeline run's settings and an executed notebook's check for the tests."""

from __future__ import annotations

import re
import signal
from collections import deque
from pathlib import Path

import nbformat
import numpy as np

import drmario as dm
from drmario.engine import kernels as K
from drmario.run.pipeline import notebook_completed

# The CI profile cut to the smallest run that still goes through 01 -> 02 -> 03.
TINY = [
    "round0_data.games=8",  # 4 shards: Ctrl-C after the first leaves 01 half done (the kernel dies first)
    "round0_data.games_per_shard=2",
    "train.steps=20",
    "train.checkpoint_every=5",
    "train.eval_every=10",
    "train.log_every=5",
    "train.warmup_steps=5",
    "round0_data.value_games=2",  # and a values refit of 5 steps on them
    "train.value_steps=5",
    "analysis.levels=[0]",
    "analysis.games_per_level=1",
    "analysis.top_level_games=1",
    "analysis.agents=[random, greedy, policy]",  # no search: the chain's analysis has it
    "analysis.calibration_agents=[policy]",
]


def reference_resting(board: dm.Board) -> set[tuple[int, int, int]]:
    """Breadth-first search over (r, x, y), written from rules.md section 4 without the kernels."""
    cells = board.cells

    def free(x, y):
        return 0 <= x < 8 and y >= 0 and (y >= 16 or cells[x, y] == 0)

    def fits(r, x, y):
        if not (0 <= y < 16):
            return False
        return free(x, y) and (free(x, y + 1) if r % 2 else free(x + 1, y))

    if cells[3, 15] or cells[4, 15]:
        return set()
    start = (0, 3, 15)
    seen, todo, resting = {start}, deque([start]), set()
    while todo:
        r, x, y = todo.popleft()
        nexts = [(r, x - 1, y), (r, x + 1, y)]
        if fits(r, x, y - 1):
            nexts.append((r, x, y - 1))
        else:
            resting.add((r, x, y))
        for nr in ((r + 1) % 4, (r + 3) % 4):
            if fits(nr, x, y):  # pivot on the bottom-left cell
                nexts.append((nr, x, y))
            elif r % 2 == 1 and fits(nr, x - 1, y):  # vertical to horizontal kicks one column left
                nexts.append((nr, x - 1, y))
        for s in nexts:
            if s not in seen and fits(*s):
                seen.add(s)
                todo.append(s)
    return resting


def reference_legal(board: dm.Board, pill: dm.Pill) -> set[dm.Move]:
    return {dm.canonical(pill, dm.Move(*s)) for s in reference_resting(board)}


def random_board(seed: int, fill: float = 0.5) -> dm.Board:
    """A random board with valid pill pairs (not necessarily settled)."""
    rng = np.random.default_rng(seed)
    cells = np.zeros((8, 16), np.uint8)
    for y in range(16):
        for x in range(8):
            if cells[x, y] or rng.random() > fill:
                continue
            kind = rng.integers(4)
            colour, other = rng.integers(1, 4, 2)
            if kind == 0:
                cells[x, y] = K.VIRUS << 2 | colour
            elif kind == 1:
                cells[x, y] = K.DISCONNECTED << 2 | colour
            elif kind == 2 and x < 7 and not cells[x + 1, y]:
                cells[x, y], cells[x + 1, y] = K.LEFT << 2 | colour, K.RIGHT << 2 | other
            elif kind == 3 and y < 15 and not cells[x, y + 1]:
                cells[x, y], cells[x, y + 1] = K.BOTTOM << 2 | colour, K.TOP << 2 | other
    return dm.Board(cells)


def random_game(seed: int, level: int, pills: int, rng_seed: int = 0, **kwargs) -> dm.Game:
    """A game played for up to `pills` random legal moves (stops early if it ends)."""
    rng = np.random.default_rng(rng_seed)
    game = dm.Game(seed, level, **kwargs)
    for _ in range(pills):
        if game.over:
            break
        moves = game.legal_moves()
        game.play(moves[rng.integers(len(moves))])
    return game


def lines_of_four(cells: np.ndarray) -> bool:
    colours = cells & 3
    for x in range(8):
        for y in range(16):
            c = colours[x, y]
            if c and x <= 4 and all(colours[x + i, y] == c for i in range(4)):
                return True
            if c and y <= 12 and all(colours[x, y + i] == c for i in range(4)):
                return True
    return False


def something_can_fall(cells: np.ndarray) -> bool:
    for x in range(8):
        for y in range(1, 16):
            c = cells[x, y]
            shape = c >> 2
            if not c or shape in (K.VIRUS, K.TOP, K.RIGHT):
                continue
            if shape == K.LEFT:
                if not cells[x, y - 1] and not cells[x + 1, y - 1]:
                    return True
            elif not cells[x, y - 1]:
                return True
    return False


def ctrl_c_as_in_a_terminal() -> None:
    """A `subprocess.Popen` preexec_fn: the child gets SIGINT's default action, as under a terminal.
    A shell without job control (a CI script run in the background, nohup) starts its children with
    SIGINT ignored, and Python then raises no KeyboardInterrupt: a Ctrl-C test would test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def executed_without_errors(path: Path) -> None:
    """The notebook papermill wrote completed, every code cell ran, and none left an error or printed
    a Python warning (noise to its reader, and a deprecation is tomorrow's error: pandas' fillna("-")
    on a float column was one)."""
    nb = nbformat.read(path, as_version=4)
    assert notebook_completed(path), f"{path.name} did not complete"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.source.strip():
            assert cell.execution_count is not None, f"{path.name}: a cell did not run"
            assert not [o for o in cell.outputs if o.output_type == "error"], f"{path.name}: {cell.source[:60]}"
            streams = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            warnings = re.findall(r"^.*\b\w*Warning: .*$", streams, re.M)
            assert not warnings, f"{path.name} cell {i}: {warnings}"


# How numpy and Python begin a ValueError where a check of the kit's was missing: naming nothing.
GENERIC = re.compile(
    r"(The )?truth value of an array|setting an array element with a sequence|invalid literal for int\(\)|could "
    r"not convert|cannot convert float|operands could not be broadcast|cannot reshape array|Expecting .*: line \d+"
)


def assert_kit_message(e: ValueError) -> None:
    """A message that begins with what the kit checked (it may go on with numpy's words)."""
    assert str(e) and not GENERIC.match(str(e)), f"a bare {type(e).__name__} from deep inside: {e}"
