"""Pictures for notebooks: boards, move-probability heatmaps, game replays, training curves, arena,
leaderboard, rounds, gates and calibration plots (design section 4), and a game a person plays beside an agent.

Every function returns something Jupyter shows inline (an object with ``_repr_svg_`` or
``_repr_html_``, an ipywidgets UI, or a matplotlib Figure) and also runs headless, so CI executes
each picture once in a plain cell. Import this package; matplotlib and ipywidgets load on first use.
"""

from drmario.viz.arena_plots import (
    arena_table,
    gates_table,
    plot_arena,
    plot_leaderboard,
    plot_rounds,
    plot_selfplay_rounds,
)
from drmario.viz.boards import (
    ORIENTATION,
    board_row,
    board_view,
    colour_scale,
    compare_heatmaps,
    move_heatmap,
    top_moves,
)
from drmario.viz.outcomes import example_title, outcome_text, record_outcome, target_outcome, target_text
from drmario.viz.play import PlaySession, play_widget
from drmario.viz.plots import curve_explorer, plot_calibration, plot_curves, read_metrics
from drmario.viz.replay import ReplayState, replay_frames, replay_states, replay_strip, replay_widget
from drmario.viz.views import HTMLView, Panel, SVGView

__all__ = [
    "HTMLView",
    "ORIENTATION",
    "Panel",
    "PlaySession",
    "ReplayState",
    "SVGView",
    "arena_table",
    "board_row",
    "board_view",
    "colour_scale",
    "compare_heatmaps",
    "curve_explorer",
    "example_title",
    "gates_table",
    "move_heatmap",
    "outcome_text",
    "play_widget",
    "plot_arena",
    "plot_calibration",
    "plot_curves",
    "plot_leaderboard",
    "plot_rounds",
    "plot_selfplay_rounds",
    "read_metrics",
    "record_outcome",
    "replay_frames",
    "replay_states",
    "replay_strip",
    "replay_widget",
    "target_outcome",
    "target_text",
    "top_moves",
]
