"""The notebook pictures run headless and draw what they say (drmario.viz)."""

from __future__ import annotations

import importlib.util
import io
import os
import random
import re
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")  # this process only: the notebooks the tests run get the kernel's own backend

import numpy as np
import pandas as pd
import pytest
from IPython.lib.pretty import pretty
from matplotlib.figure import Figure
from pandas.io.formats.style import Styler

import drmario as dm
from drmario import viz
from drmario.engine.rules import symmetrize
from drmario.viz.plots import METRIC_COLUMNS

# The widget tests need the notebooks extra (ipywidgets, IPython); without it the panels degrade to
# static views, which test_widgets_degrade_without_ipywidgets covers.
needs_widgets = pytest.mark.skipif(
    importlib.util.find_spec("ipywidgets") is None or importlib.util.find_spec("IPython") is None,
    reason="needs ipywidgets and IPython (pip install drmario-kit[notebooks])",
)


@pytest.fixture(scope="module")
def record() -> dm.GameRecord:
    game = dm.Game(seed=1234, level=5)
    rng = random.Random(0)
    for _ in range(15):
        if game.over:
            break
        game.play(rng.choice(game.legal_moves()))
    return game.record()


@pytest.fixture(scope="module")
def position() -> tuple[dm.Board, dm.Pill]:
    game = dm.Game(seed=1234, level=5)
    rng = random.Random(3)
    for _ in range(6):
        game.play(rng.choice(game.legal_moves()))
    return game.board, dm.Pill(dm.Colour.BLUE, dm.Colour.YELLOW)


def labels(svg: str) -> list[str]:
    return re.findall(r'<text class="label"[^>]*>([^<]*)</text>', svg)


def data_board(svg: str) -> str:
    return re.search(r'data-board="([^"]*)"', svg).group(1)


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=40)
    return buf.getvalue()


def assert_labelled(fig: Figure) -> None:
    """Every visible panel has a y label and an x label (or shares x with a panel that has one)."""
    fig.canvas.draw()  # as it is saved: labels and legends in place
    panels = [a for a in fig.axes if a.get_visible()]
    assert panels
    for a in panels:
        assert a.get_ylabel(), f"panel {a.get_title()!r} has no y label"
        shared = a.get_shared_x_axes().get_siblings(a)
        assert any(b.get_xlabel() for b in shared), f"panel {a.get_title()!r} has no x label"


def legend_texts(fig: Figure) -> list[str]:
    legends = [a.get_legend() for a in fig.axes if a.get_legend() is not None] + list(fig.legends)
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def scale_ticks(html: str) -> list[list[str]]:
    """The numbers of each colour scale in html."""
    scales = re.findall(r'<svg class="colour-scale".*?</svg>', html)
    return [re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', s) for s in scales]


# ------------------------------------------------------------------------------------------------
# Boards and heatmaps


def test_board_view_and_row(record):
    game = record.new_game()
    view = viz.board_view(game, title="start")
    assert view._repr_svg_().startswith("<svg") and view._repr_html_() == view.svg
    assert data_board(view.svg) == game.board.to_string()
    row = viz.board_row([game, game.board, view], captions=["game", "board", None], title="three")
    assert len(row.svgs) == 3 and row._repr_html_().count("<svg") == 3
    assert row.html.count("<figcaption") == 2
    with pytest.raises(ValueError, match="captions"):
        viz.board_row([game], captions=["a", "b"])


def test_a_loose_pill_half_is_not_drawn_as_a_virus():
    from drmario.engine import kernels as K
    from drmario.engine.svg import board_svg

    def pieces(shape: int) -> tuple[int, list[tuple[float, float]]]:
        """A board of one red piece of this shape: its circles, and its rounded squares' (rx, width)."""
        cells = np.zeros((8, 16), np.uint8)
        cells[3, 8] = (shape << 2) | int(dm.Colour.RED)
        svg = board_svg(cells, cell=20)
        rects = re.findall(r'<rect [^>]*width="([\d.]+)"[^>]*rx="([\d.]+)"', svg)
        return svg.count("<circle"), [(float(rx), float(w)) for w, rx in rects if float(w) < 20]  # not the bottle

    circles, rounded = pieces(K.VIRUS)
    assert circles == 3 and not rounded  # round, with two eyes
    circles, rounded = pieces(K.DISCONNECTED)
    assert circles == 0 and len(rounded) == 1 and rounded[0][0] < 0.4 * rounded[0][1]  # a square, not a disc


def test_a_long_title_shrinks_to_fit_its_board():
    from drmario.engine.svg import board_svg

    def title_size(cell: int, title: str) -> tuple[float, float]:
        svg = board_svg(np.zeros((8, 16), np.uint8), cell=cell, title=title)
        width = float(re.search(r'width="([\d.]+)"', svg).group(1))
        return float(re.search(r'font-size="([\d.]+)" fill="#ddd"', svg).group(1)), width

    assert title_size(18, "start")[0] == 11
    size, width = title_size(12, "topped out, 1 cleared")  # a replay strip's last board
    assert size < 11 and 0.55 * size * len("topped out, 1 cleared") <= width  # about 0.55 em a character


def test_heatmap_numbers_top_legal_moves_and_outlines_legal_cells(position):
    board, pill = position
    legal = dm.legal_mask(board, pill)
    m = np.random.default_rng(0).random((4, 8, 16)) * legal
    m[0, 0, 0] = 50.0 if not legal[0, 0, 0] else m[0, 0, 0]  # heavy mass on an illegal move
    assert not legal[0, 0, 0]
    view = viz.move_heatmap(board, pill, m, top=4, title="test")
    assert len(view.svgs) == 4 and view.html.count("<svg") == 4 + 1  # the boards and the colour scale
    # The colour scale's numbers: shares of the total mass, up to the largest entry's.
    assert scale_ticks(view.html) == [["0.0%", f"{m.max() / m.sum() / 2:.1%}", f"{m.max() / m.sum():.1%}"]]
    assert view.html.count('class="outline"') == legal.sum()
    for r in range(4):
        assert view.svgs[r].count('class="outline"') == legal[r].sum()
    # The 4 numbered moves are the 4 best legal ones, each on its own plane and cell.
    masked = np.where(legal, m, -1.0)
    best = [np.unravel_index(i, m.shape) for i in np.argsort(-masked, axis=None)[:4]]
    assert sorted(sum((labels(s) for s in view.svgs), [])) == ["1", "2", "3", "4"]
    for k, (r, x, y) in enumerate(best, 1):
        assert [mv for mv, _ in viz.top_moves(board, pill, m, n=4)][k - 1] == dm.Move(r, x, y)
        assert str(k) in labels(view.svgs[r])
    assert "illegal moves hold" in view.html
    assert "r=1 R under L" in view.svgs[1] and "r=2 [R L]" in view.svgs[2]
    # Coordinates to read the caption's (r, x, y) by: x under the columns, y beside the rows.
    coordinates = re.findall(r'<text class="coordinate"[^>]*>(\d+)</text>', view.svgs[0])
    assert coordinates == [str(x) for x in range(8)] + [str(y) for y in range(16)]
    assert 'class="coordinate"' not in viz.board_view(board).svg


def test_heatmap_same_colour_and_few_moves(position):
    board, _ = position
    pill = dm.Pill(dm.Colour.RED, dm.Colour.RED)
    legal = dm.legal_mask(board, pill)
    assert np.array_equal(legal[:2], legal[2:])
    m = np.zeros((4, 8, 16))
    moves = dm.legal_moves(board, pill)[:2]  # only 2 moves have mass: only 2 numbers
    for i, (r, x, y) in enumerate(moves):
        m[r, x, y] = i + 1.0
    m = symmetrize(m, True)
    view = viz.move_heatmap(board, pill, m, top=3, chosen=moves[1])
    assert sum(len(labels(s)) for s in view.svgs) == 2
    assert scale_ticks(view.html)[0][-1] == "66.7%"  # the best placement's share, as its number says
    assert not labels(view.svgs[2]) and not labels(view.svgs[3])  # a placement is numbered once
    assert "(= r=0)" in view.svgs[2] and "planes r and r+2 are equal, one placement" in view.html
    assert view.html.count('class="ghost"') == 2  # the chosen placement on both of its planes
    assert view.html.count('class="outline"') == legal.sum()
    top = viz.top_moves(board, pill, m, n=3)
    assert [mv for mv, _ in top] == [moves[1], moves[0]] and top[0][1] == pytest.approx(2 / 3)


def test_heatmap_rejects_bad_shapes(position):
    board, pill = position
    with pytest.raises(ValueError, match=r"float\[4, 8, 16\]"):
        viz.move_heatmap(board, pill, np.zeros((4, 8)))
    with pytest.raises(ValueError, match="logits"):
        viz.move_heatmap(board, pill, -np.ones((4, 8, 16)))
    assert "zero mass" in viz.move_heatmap(board, pill, np.zeros(512)).html
    assert not scale_ticks(viz.move_heatmap(board, pill, np.zeros(512)).html)  # no mass: nothing to scale
    with pytest.raises(ValueError, match="share"):
        viz.colour_scale(1.5)


def test_compare_heatmaps(position):
    board, pill = position
    legal = dm.legal_mask(board, pill).astype(float)
    view = viz.compare_heatmaps(board, pill, {"network": legal, "search": legal * np.arange(16)})
    assert len(view.svgs) == 8 and "network" in view.html and "overlap with network" in view.html
    assert len(scale_ticks(view.html)) == 2  # a colour scale for each heatmap


def test_compare_heatmaps_overlap_is_by_placement():
    """A same-colour pill's planes r and r + 2 are one placement: mass on one or split on both agree."""
    board, pill = dm.Board(np.zeros((8, 16), np.uint8)), dm.Pill.from_string("qu")
    r, x, y = dm.legal_moves(board, pill)[0]
    network, search = np.zeros((4, 8, 16)), np.zeros((4, 8, 16))
    network[r, x, y] = 1.0
    search[r, x, y] = search[r + 2, x, y] = 0.5
    view = viz.compare_heatmaps(board, pill, {"network": network, "search": search})
    assert "overlap with network 1.00" in view.html


# ------------------------------------------------------------------------------------------------
# Replays


def test_replay_frames(record):
    n = len(record.moves)
    frames = viz.replay_frames(record)
    assert len(frames) == n + 1 and all(f.startswith("<svg") for f in frames)
    assert data_board(frames[0]) == record.new_game().board.to_string()
    assert data_board(frames[-1]) == record.replay().board.to_string()
    assert sum('class="ghost"' in f for f in frames) == n  # the move about to be played, not at the end
    sparse = viz.replay_frames(record, every=4)
    assert len(sparse) == len(range(0, n + 1, 4)) + (n % 4 != 0)
    assert sparse[-1] == frames[-1]


def test_replay_strip(record):
    strip = viz.replay_strip(record, steps=[0, 3, -1])
    assert len(strip.svgs) == 3 and data_board(strip.svgs[2]) == record.replay().board.to_string()
    assert len(viz.replay_strip(record).svgs) == 6
    with pytest.raises(ValueError, match="outside"):
        viz.replay_strip(record, steps=[len(record.moves) + 1])


@needs_widgets
def test_replay_widget_steps_the_board(record):
    n = len(record.moves)
    games = [g for g, _, _ in record.steps()]
    targets = [symmetrize(g.legal_mask().astype(float), g.pill.same_colour) for g in games]
    panel = viz.replay_widget(record, targets=targets)
    assert isinstance(panel, viz.Panel) and panel.slider.max == n
    assert "_ipython_display_" in dir(panel)
    first = panel.picture.value
    assert data_board(first) == games[0].board.to_string() and "search target" in first
    panel.slider.value = 3
    assert panel.picture.value != first and data_board(panel.picture.value) == games[3].board.to_string()
    assert "pill" in panel.info.value and "cleared" in panel.info.value
    panel.target.value = False
    assert panel.picture.value.count("<svg") == 1 and 'class="coordinate"' in panel.picture.value  # x, y to read by
    panel.play.value = n  # the play button drives the slider
    assert panel.slider.value == n and data_board(panel.picture.value) == record.replay().board.to_string()
    with pytest.raises(ValueError, match="one per move"):
        viz.replay_widget(record, network_moves=targets[:-1])
    assert not hasattr(viz.replay_widget(record), "target")


def test_widgets_degrade_without_ipywidgets(record, tmp_path, monkeypatch):
    write_metrics(tmp_path / "a")
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets now raises ImportError
    with pytest.warns(UserWarning, match="ipywidgets"):
        assert isinstance(viz.replay_widget(record), viz.HTMLView)
    with pytest.warns(UserWarning, match="ipywidgets"):
        assert isinstance(viz.curve_explorer(tmp_path / "a"), Figure)


# ------------------------------------------------------------------------------------------------
# Training curves, arena, calibration


def write_metrics(run_dir, steps=12, seed=0, scale=1.0):
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = []
    for step in range(0, steps * 10, 10):
        for split in ("train", "test") if step % 30 == 0 else ("train",):
            terms = dict(won=0.5, cleared=0.3, duration=0.2, moves=1.5, reg=0.01)
            terms = {k: scale * v * np.exp(-step / 80) * (1 + 0.1 * rng.random()) for k, v in terms.items()}
            rows.append(
                dict(step=step, epoch=step // 40, samples=step * 64, time_s=step / 10, split=split, lr=1e-3)
                | dict(samples_per_s=640.0, loss=sum(terms.values()), **terms)
            )
    pd.DataFrame(rows, columns=list(METRIC_COLUMNS)).to_csv(run_dir / "metrics.csv", index=False)
    return run_dir


def test_read_metrics_combines_runs(tmp_path):
    a, b = write_metrics(tmp_path / "a", steps=12), write_metrics(tmp_path / "b", steps=6, seed=1)
    df = viz.read_metrics([a, b / "metrics.csv"])
    assert list(df.columns) == ["run", *METRIC_COLUMNS]
    assert list(dict.fromkeys(df["run"])) == ["a", "b"]
    assert (df["run"] == "a").sum() == 12 + 4 and (df["run"] == "b").sum() == 6 + 2
    assert set(viz.read_metrics({"first": a})["run"]) == {"first"}
    assert len(viz.read_metrics(str(a))) == 16
    write_metrics(tmp_path / "x" / "a")
    assert set(viz.read_metrics([a, tmp_path / "x" / "a"])["run"]) == {str(a), str(tmp_path / "x" / "a")}
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "metrics.csv").write_text("")  # a run that has not logged yet
    assert (viz.read_metrics([a, tmp_path / "new"])["run"] == "a").all()
    with pytest.raises(FileNotFoundError):
        viz.read_metrics([tmp_path / "missing"])


def test_plot_curves(tmp_path):
    df = viz.read_metrics([write_metrics(tmp_path / "a"), write_metrics(tmp_path / "b", scale=2.0)])
    fig = viz.plot_curves(df)
    assert isinstance(fig, Figure) and len([a for a in fig.axes if a.get_visible()]) == 1
    assert fig.axes[0].get_yscale() == "log" and png(fig)  # drawn: its tick labels are set
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels(which="both") if t.get_text()]
    assert ticks and all(re.fullmatch(r"[\d.e−-]+", t) for t in ticks), ticks  # 0.2, not 2×10⁻¹
    fig = viz.plot_curves(df, terms=("loss", "won", "moves", "reg"), smoothing=0.9, log_scale=False, x="samples")
    visible = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in visible] == ["loss", "won", "moves", "reg"]
    # per axis: 2 runs x (raw train + smoothed train + test)
    assert len(visible[0].lines) == 6 and visible[0].get_yscale() == "linear"
    assert png(fig)
    outer = Figure()
    ax = outer.subplots()
    assert viz.plot_curves(df, terms="won", ax=ax) is outer
    with pytest.raises(ValueError, match="no column 'nope'"):
        viz.plot_curves(df, terms=("nope",))
    with pytest.raises(ValueError, match="smoothing"):
        viz.plot_curves(df, smoothing=1.0)


@needs_widgets
def test_curve_explorer_redraws(tmp_path):
    runs = [write_metrics(tmp_path / "a"), write_metrics(tmp_path / "b", scale=2.0)]
    panel = viz.curve_explorer(runs)
    assert isinstance(panel, viz.Panel) and panel.runs.value == ("a", "b")
    assert "total_step" not in panel.x.options  # no run continues another
    before = panel.image.value
    assert before[:4] == b"\x89PNG"
    panel.log.value = False
    assert panel.image.value != before
    panel.terms.value = ()
    assert "select at least one" in panel.message.value
    panel.terms.value = ("won", "cleared")
    write_metrics(tmp_path / "a", steps=20)
    panel.reload.click()
    assert panel.message.value == "" and panel.runs.value == ("a", "b")


def arena_frame() -> pd.DataFrame:
    from drmario.play.arena import wilson

    rows = []
    for i, agent in enumerate(["random", "greedy"]):
        for level in (0, 5, 10):
            wins = round(40 * max(0.0, 1 - level / (8 + 6 * i)))
            lo, hi = wilson(wins, 40)
            rows.append(
                dict(agent=agent, level=level, games=40, wins=wins, win_rate=wins / 40, ci_low=lo, ci_high=hi)
                | dict(cleared_fraction=0.9, pills_per_virus=2.5, topout_rate=1 - wins / 40, ms_per_move=0.5 + 10 * i)
            )
    return pd.DataFrame(rows)


def test_arena_plot_and_table():
    df = arena_frame()
    fig = viz.plot_arena(df)
    ax = fig.axes[0]
    assert isinstance(fig, Figure) and [line.get_label() for line in ax.lines if line.get_marker() == "o"] == [
        "random",
        "greedy",
    ]
    assert png(fig)
    assert ax.get_xlabel() == "virus level" and "win rate" in ax.get_ylabel()
    assert list(ax.get_xticks()) == [0, 5, 10]  # the levels played: dodged agents sit beside them
    assert "Wilson 95% interval" in [t.get_text() for t in ax.get_legend().get_texts()]  # the band is labelled
    fig = viz.plot_arena(df, metric=["win_rate", "ms_per_move"])
    assert [a.get_title() for a in fig.axes if a.get_visible()] == ["win rate (every virus cleared)", "ms per move"]
    styler = viz.arena_table(df.assign(frames_median=np.nan))  # no NES timing: no frames column
    assert isinstance(styler, Styler)
    html = styler.to_html()
    assert "font-weight: bold" in html and "100.0%" in html and "Wilson" in html and "frames_median" not in html
    text = pretty(styler)  # a notebook's text/plain output: the formatted table, not the object's address
    assert text.startswith("Arena: one row") and "100.0%" in text and "Styler" not in text
    assert text.splitlines()[-1].split()[:4] == ["random", "40", "0", "0.0%"]  # level 10: agent, games, wins, rate
    with pytest.raises(ValueError, match="missing column"):
        viz.plot_arena(df.drop(columns="win_rate"))


def test_plot_calibration():
    rng = np.random.default_rng(0)
    p = rng.uniform(-1, 1, 500)
    actual = np.where(rng.uniform(size=500) < (p + 1) / 2, 1.0, -1.0)
    p[0] = np.nan  # dropped
    fig = viz.plot_calibration(p, actual, "won", bins=8)
    assert isinstance(fig, Figure) and len(fig.axes) == 2 and "n=499" in fig.axes[0].get_title()
    assert sum(int(b.get_height()) for b in fig.axes[1].patches) == 499
    assert png(fig)
    outer = Figure()
    assert viz.plot_calibration(p, actual, "won", strategy="quantile", ax=outer.subplots()) is outer
    assert png(viz.plot_calibration(np.ones(10), np.ones(10), "cleared"))
    near = viz.plot_calibration(0.999 + rng.uniform(0, 0.001, 500), actual, "won", bins=8)  # one value, nearly
    assert sum(b.get_height() > 0 for b in near.axes[1].patches) == 1 and "one bin" in near.axes[0].texts[-1].get_text()
    assert png(viz.plot_calibration([], [], "duration"))
    with pytest.raises(ValueError, match="differ in length"):
        viz.plot_calibration([1, 2], [1], "won")


def test_calibration_bins_hold_the_mean_prediction_and_the_mean_outcome():
    from drmario.viz.plots import _binned_means

    p, actual = np.array([0.0, 0.1, 0.9, 1.0]), np.array([1.0, -1.0, 0.0, 0.0])
    counts, mean_p, mean_a, se = _binned_means(p, actual, np.array([0.0, 0.5, 1.0]))
    assert counts.tolist() == [2, 2] and mean_p == pytest.approx([0.05, 0.95]) and mean_a == pytest.approx([0, 0])
    assert se == pytest.approx([np.sqrt(2 / 1) / np.sqrt(2), 0])  # the sample sd of (1, -1) over sqrt(2)
    counts, _, _, se = _binned_means(p[1:], actual[1:], np.array([0.0, 0.5, 1.0]))
    assert counts.tolist() == [1, 2] and np.isnan(se[0])  # one position: no standard error (not 0)


def test_import_stays_light():
    code = (
        "import sys, drmario, drmario.viz; print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------------------------------------
# Every plot reads right: axis labels with units, a legend entry for every line and band


def test_every_plot_is_labelled(tmp_path):
    df = viz.read_metrics([write_metrics(tmp_path / "a"), write_metrics(tmp_path / "b", scale=2.0)])
    for x in ("step", "epoch", "samples", "time_s"):
        fig = viz.plot_curves(df, terms=("loss", "won", "moves", "lr"), x=x, smoothing=0.5)
        assert_labelled(fig)
        panels = [a for a in fig.axes if a.get_visible()]
        assert "(s)" in panels[0].get_xlabel() if x == "time_s" else x.rstrip("s") in panels[0].get_xlabel()
        assert "cross-entropy (nats)" in panels[2].get_ylabel()
        assert panels[3].get_ylabel() == "learning rate"  # constant: a linear axis
        assert {"a", "b", "train (smoothed)", "train (raw)", "test"} <= set(legend_texts(fig))
    assert "train (raw)" not in legend_texts(viz.plot_curves(df))
    assert viz.plot_curves(df, log_scale=False).axes[0].get_ylabel() == "total loss (the terms' weighted sum)"
    fig = viz.plot_curves(
        df[df["split"] == "train"], terms=("loss", "lr"), x_label="decisions played", y_labels={"loss": "TD error"}
    )
    panels = [a for a in fig.axes if a.get_visible()]
    assert [a.get_xlabel() for a in panels] == ["decisions played"] * 2
    assert [a.get_ylabel() for a in panels] == ["TD error, log scale", "learning rate"]
    assert "test" not in legend_texts(fig)  # no test rows, no test line

    arena = arena_frame()
    fig = viz.plot_arena(arena, ["win_rate", "cleared_fraction", "pills_per_virus", "topout_rate", "ms_per_move"])
    assert_labelled(fig)
    ylabels = [a.get_ylabel() for a in fig.axes if a.get_visible()]
    assert ylabels[0] == "win rate (% of games)" and "(ms)" in ylabels[-1] and "%" in ylabels[1]
    assert legend_texts(fig).count("Wilson 95% interval") == 1  # only the win rate has a band
    assert legend_texts(fig).count("hollow: no game won") == 1  # random won nothing at level 10
    ppv = [a for a in fig.axes if a.get_visible()][2]
    hollow = [line for line in ppv.lines if line.get_markerfacecolor() == "white" and len(line.get_xdata())]
    assert [list(line.get_xdata()) for line in hollow] == [[10]]
    assert "no point: no virus cleared" not in legend_texts(fig)
    arena.loc[(arena["agent"] == "random") & (arena["level"] == 10), "pills_per_virus"] = np.nan  # cleared none
    assert legend_texts(viz.plot_arena(arena, "pills_per_virus")).count("no point: no virus cleared") == 1

    rng = np.random.default_rng(1)
    p = rng.uniform(0, 30, 300)
    fig = viz.plot_calibration(p, p + rng.normal(0, 2, 300), "duration")
    assert_labelled(fig)
    top, hist = fig.axes
    assert hist.get_xlabel() == "predicted duration (pills to the end)" and "observed duration" in top.get_ylabel()
    assert hist.get_ylabel() == "positions"
    texts = legend_texts(fig)
    assert "perfect calibration (y = x)" in texts and "bin mean ± 1 standard error" in texts
    assert "positions per bin" in texts
    outer = Figure()
    assert_labelled(viz.plot_calibration(p, p, "won", ax=outer.subplots()))
    counts = np.histogram(p, 10)[0]
    assert f"disc area ∝ positions per bin (this disc: {counts.max()})" in legend_texts(outer)
    discs = next(c for c in outer.axes[0].collections if hasattr(c, "get_sizes") and len(c.get_sizes()) == 10)
    assert np.allclose(discs.get_sizes(), 250 * counts / counts.max())  # area in proportion to the count
    legend_disc = outer.axes[0].get_legend().legend_handles[-1]
    assert legend_disc.get_sizes()[0] == 250  # as large as the largest bin's


def test_plot_selfplay_rounds_shows_the_share_won_with_its_interval():
    import pandas as pd

    rounds = pd.DataFrame(
        {"games": [10, 20], "wins": [10, 5], "cleared_share": [1.0, 0.4], "pills_per_virus": [1.8, 3.0]}
        | {"search": ["expert, depth 2", "puct, 16 simulations"]},
        index=pd.Index([0, 1], name="round"),
    )
    fig = viz.plot_selfplay_rounds(rounds)
    assert_labelled(fig)
    won, ppv, cleared = [a for a in fig.axes if a.get_visible()]
    assert [b.get_height() for b in won.patches] == [1.0, 0.25]
    assert [b.get_height() for b in cleared.patches] == [1.0, 0.4]
    assert [b.get_height() for b in ppv.patches] == [1.8, 3.0]
    segments = won.collections[0].get_segments()  # the error bars
    assert segments[0][0][1] == pytest.approx(0.7225, abs=1e-3) and segments[0][1][1] == pytest.approx(1.0)  # Wilson
    ticks = [t.get_text() for t in won.get_xticklabels()]
    assert ticks == ["0\nexpert, depth 2\n10 games", "1\npuct, 16\nsimulations\n20 games"]  # who played them
    with pytest.raises(ValueError, match="wins"):
        viz.plot_selfplay_rounds(rounds.drop(columns="wins"))


def test_plot_leaderboard():
    df = arena_frame()
    fig = viz.plot_leaderboard(df, title="two agents")
    assert_labelled(fig)
    left, right = fig.axes
    assert left.get_xlabel() == "virus level" and right.get_xlabel() == "win rate over all levels (% of games)"
    texts = legend_texts(fig)
    assert {"random", "greedy", "Wilson 95% interval (by level)", "win rate", "Wilson 95% interval"} <= set(texts)
    # Best at the top: greedy wins more (the last y tick is the top row).
    assert [t.get_text() for t in right.get_yticklabels()] == ["random", "greedy"]
    assert png(fig)
    assert_labelled(viz.plot_leaderboard(df.drop(columns=["ci_low", "ci_high", "cleared_fraction"])))
    # A player keeps its colour across rounds, as in a round's own arena; its newest round drawn solid.
    rounds = pd.concat([df.assign(agent=df["agent"] + tag) for tag in (" r0", " r1")], ignore_index=True)
    lines = {line.get_label(): line for line in viz.plot_leaderboard(rounds).axes[0].lines}
    arena = {line.get_label(): line for line in viz.plot_arena(df).axes[0].lines}
    for agent in ("random", "greedy"):
        newest, older = lines[f"{agent} r1"], lines[f"{agent} r0"]
        assert newest.get_color() == older.get_color() == arena[agent].get_color()
        assert (newest.get_linestyle(), older.get_linestyle()) == ("-", "--")


# ------------------------------------------------------------------------------------------------
# Stalemates are never shown as wins


@pytest.fixture(scope="module")
def stalemate() -> dm.GameRecord:
    game = dm.Game(seed=1234, level=5, stall_limit=3)
    rng = random.Random(0)
    while not game.over:
        game.play(rng.choice(game.legal_moves()))
    assert game.outcome == dm.Outcome.STALEMATE and game.viruses_left > 0
    return game.record()


@needs_widgets
def test_stalemates_read_as_stalemates(stalemate):
    from drmario.learn.examples import game_examples

    strip = viz.replay_strip(stalemate, steps=[0, -1])
    assert "stalemate" in strip.html and "won" not in strip.html
    assert "stalemate" in viz.replay_frames(stalemate)[-1]
    panel = viz.replay_widget(stalemate)
    panel.slider.value = panel.slider.max
    assert "end: stalemate" in panel.info.value and "won" not in panel.info.value
    assert viz.replay_states(stalemate)[-1].ended == "stalemate"
    # Its training examples: won = +1, captioned as a stalemate.
    targets = []
    for game, _, _ in stalemate.steps():
        m = symmetrize(game.legal_mask().astype(float), game.pill.same_colour)
        targets.append(m / m.sum())
    examples = game_examples(stalemate, targets)
    assert all(ex.won == 1 for ex in examples)
    for i, ex in enumerate(examples):
        title = viz.example_title(ex, i)
        assert title.startswith(f"example {i}: stalemate (won target +1)") and "won +1" not in title
        assert viz.target_outcome(ex.won, ex.cleared, ex.board.virus_count) == "stalemate"
        assert "stalemate" in viz.move_heatmap(ex.board, ex.pill, ex.moves, title=title).html
    # The other outcomes, and a game stopped at the pill cap.
    assert viz.target_text(1, 4, 4) == "won +1" and viz.target_text(-1, 0, 4) == "lost -1"
    assert viz.outcome_text("topped_out") == "topped out" and viz.outcome_text(None) == "unfinished"
    capped = dm.GameRecord(**{**stalemate.to_dict(), "outcome": None, "meta": {"unfinished": "max_pills=3"}})
    capped = dm.GameRecord.from_dict({**capped.to_dict(), "stall_limit": None})
    assert viz.record_outcome(capped).startswith("capped")
    assert "capped" in viz.replay_strip(capped).html and "capped" in viz.replay_frames(capped)[-1]


# ------------------------------------------------------------------------------------------------
# Exported notebooks keep a static copy of every widget UI


@needs_widgets
def test_panels_carry_a_static_snapshot(record, tmp_path):
    panel = viz.replay_widget(record)
    widget, copy = panel.outputs()  # two outputs: an export draws only the widget view of a bundle
    assert "application/vnd.jupyter.widget-view+json" in widget and "text/html" not in widget
    assert list(copy) == ["text/html", "text/plain"] and 'class="drmario-static"' in copy["text/html"]
    assert data_board(copy["text/html"]) == record.new_game().board.to_string()
    assert ":has(.widget-box)" in copy["text/html"]  # hidden where the widget is drawn
    panel.slider.value = 3
    assert panel.snapshot().html.count("<svg") == 1 and panel.snapshot().html not in copy["text/html"]
    explorer = viz.curve_explorer(write_metrics(tmp_path / "a"))
    assert '<img src="data:image/png;base64,' in explorer.outputs()[1]["text/html"]


@needs_widgets
def test_a_displayed_panel_makes_the_widget_then_its_static_copy(record):
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    had_shell = InteractiveShell.initialized()
    InteractiveShell.instance()  # display() needs a shell; a plain one, not a kernel's
    try:
        panel = viz.replay_widget(record)
        with capture_output() as shown:
            display(panel)
    finally:
        if not had_shell:
            InteractiveShell.clear_instance()
    assert [list(o.data) for o in shown.outputs] == [list(b) for b in panel.outputs()]
    assert "application/vnd.jupyter.widget-view+json" in shown.outputs[0].data
    assert shown.outputs[1].data["text/html"].count("<svg") == 1


# ------------------------------------------------------------------------------------------------
# Watch and play


def test_play_session_headless():
    from drmario.play.agents import GreedyAgent

    session = viz.PlaySession(GreedyAgent(), seed=1234, level=3, max_pills=40)
    assert session.you.pill == session.machine.pill
    with pytest.raises(ValueError, match="choose a placement"):
        session.step()
    with pytest.raises(ValueError, match="not legal"):
        session.choose((0, 7, 0))  # a horizontal pill's left half never sits in the last column
    with pytest.raises(ValueError, match="must be an integer"):
        session.choose((0.0, 3.0, 1.0))
    rng = random.Random(1)
    for k in range(1, 6):
        move = rng.choice(session.legal_moves())
        assert session.choose(move) == move
        assert 'class="ghost"' in session.view().svgs[0]
        session.step()
        assert session.you.pills_used == k and session.machine.pills_used == k  # one pill each
        if not session.you_done and not session.agent_done:
            assert session.you.pill == session.machine.pill  # the same pills
    seen = []
    session.finish_agent(lambda game: seen.append(game.pills_used))
    assert session.agent_done and seen == list(range(6, session.machine.pills_used + 1))
    you, agent = session.records()
    assert len(you.moves) == 5 and you.meta["agent"] == "you" and agent.meta["agent"] == "greedy"
    assert you.replay().pills_used == 5  # both records replay exactly
    if agent.outcome is None:
        assert agent.meta["unfinished"] and agent.pills_used == 40
    else:
        agent.replay()
    assert len(viz.replay_strip(agent).svgs) == 6 and session.agent_target() is None  # greedy has no target


@needs_widgets
def test_play_widget_plays_both_games():
    from drmario.play.agents import SearchAgent
    from drmario.search import SearchConfig

    panel = viz.play_widget(SearchAgent(SearchConfig(mode="expert"), name="expert"), seed=1234, level=3)
    session = panel.session
    assert isinstance(panel, viz.Panel) and panel.rotation.value == 0 and panel.column.value == 3
    before = panel.picture.value
    assert before.count("<svg") == 2 and 'class="outline"' in before and 'class="ghost"' in before
    assert panel.outputs()[1]["text/html"].count("<svg") == 2  # an exported notebook shows both boards
    panel.rotation.value = 1
    assert session.selected.r == 1 and set(panel.column.options) == {(str(x), x) for x in session.columns(1)}
    panel.column.value = panel.column.options[-1][1]
    panel.landing.value = panel.landing.options[-1][1]
    chosen = session.selected
    assert chosen == (1, panel.column.value, panel.landing.value)
    start = session.you.board
    panel.place.click()
    assert session.you.pills_used == 1 and session.machine.pills_used == 1
    assert session.you.moves[0] == chosen and session.you.board != start
    assert panel.picture.value != before and "pill 2" in panel.picture.value
    panel.show_target.value = True
    assert "search target" in panel.target.value
    for _ in range(3):
        panel.place.click()
    assert session.you.pills_used == session.machine.pills_used == 4
    panel.agent_next.click()
    assert session.machine.pills_used == 5 and session.you.pills_used == 4
    you, agent = session.records()
    assert you.replay().pills_used == 4 and agent.replay().pills_used == 5
    panel.agent_end.click()  # the agent plays its game to the end alone
    assert session.agent_done and session.you.pills_used == 4 and panel.agent_end.disabled
    assert session.records()[1].outcome is not None or session.machine.pills_used == session.max_pills


def test_play_widget_without_ipywidgets(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.warns(UserWarning, match="ipywidgets"):
        view = viz.play_widget(None, seed=1234, level=0)
    assert isinstance(view, viz.HTMLView) and len(view.svgs) == 1


def test_the_ghost_pill_keeps_its_halves_colours():
    from drmario.engine.svg import COLOURS, board_svg

    empty = np.zeros((8, 16), np.uint8)
    yellow_blue = dm.Pill(dm.Colour.YELLOW, dm.Colour.BLUE)
    for move, halves in (
        (dm.Move(0, 3, 0), [COLOURS[dm.Colour.YELLOW], COLOURS[dm.Colour.BLUE]]),  # left, then right
        (dm.Move(2, 3, 0), [COLOURS[dm.Colour.BLUE], COLOURS[dm.Colour.YELLOW]]),  # turned twice: swapped
    ):
        ghost = re.search(r'<g class="ghost"[^>]*>(.*?)</g>', board_svg(empty, ghost=(yellow_blue, move))).group(1)
        fills = re.findall(r'fill="(#[0-9a-f]{6})"', ghost)
        assert [f for i, f in enumerate(fills) if f not in fills[:i]] == halves, (move, fills)
