"""Pictures for notebooks: boards, move-probability heatmaps, game replays, training curves, arena
and calibration plots (design section 4).

Every function returns something Jupyter shows inline (an object with ``_repr_svg_`` or
``_repr_html_``, an ipywidgets UI, or a matplotlib Figure) and also runs headless, so CI executes
each picture once in a plain cell. Import this package; matplotlib and ipywidgets load on first use.
"""

from drmario.viz.boards import ORIENTATION, board_row, board_view, compare_heatmaps, move_heatmap, top_moves
from drmario.viz.plots import arena_table, curve_explorer, plot_arena, plot_calibration, plot_curves, read_metrics
from drmario.viz.replay import ReplayState, replay_frames, replay_states, replay_strip, replay_widget
from drmario.viz.views import HTMLView, Panel, SVGView

__all__ = [
    "HTMLView",
    "ORIENTATION",
    "Panel",
    "ReplayState",
    "SVGView",
    "arena_table",
    "board_row",
    "board_view",
    "compare_heatmaps",
    "curve_explorer",
    "move_heatmap",
    "plot_arena",
    "plot_calibration",
    "plot_curves",
    "read_metrics",
    "replay_frames",
    "replay_states",
    "replay_strip",
    "replay_widget",
    "top_moves",
]
