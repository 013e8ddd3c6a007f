"""Plots of run outputs: training curves from metrics.csv, arena results, calibration.

Figures are built as ``matplotlib.figure.Figure`` objects rather than through pyplot: a notebook
shows a returned Figure once (pyplot would show it a second time), headless runs need no backend,
and nothing piles up in pyplot's figure list. Save one with ``fig.savefig(path)``.
"""

from __future__ import annotations

import io
import math
import os
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from drmario.viz.views import Panel, ipywidgets_or_none

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

METRIC_COLUMNS = (
    "step",
    "epoch",
    "samples",
    "time_s",
    "split",
    "lr",
    "samples_per_s",
    "loss",
    "won",
    "cleared",
    "duration",
    "moves",
    "reg",
)
LOSS_TERMS = ("loss", "won", "cleared", "duration", "moves", "reg", "future", "next")  # the last two: auxiliary heads
X_COLUMNS = ("step", "total_step", "epoch", "samples", "time_s")
# ... the training curves' x columns ...
X_LABELS = {
    "step": "training step (optimiser updates)",
    "total_step": "optimiser updates from fresh weights (warm starts and refits continue)",
    "epoch": "epoch (passes over the training set)",
    "samples": "training samples seen",
    "time_s": "training time (s)",
    "games": "training games played",
    "updates": "updates",
}
# ... and their terms (the losses are per example; the value terms are squared errors, for cleared and
# duration relative to the target or over 100, as the network's count_error says; the moves term is
# a cross-entropy in nats).
TERM_LABELS = {
    "loss": "total loss (the terms' weighted sum)",
    "won": "won loss (ŵ − won)²",
    "cleared": "cleared loss ((ĉ − c) / s)², s = c or 100",
    "duration": "duration loss ((d̂ − d) / s)², s = d or 100",
    "moves": "moves loss: cross-entropy (nats)",
    "reg": "weight penalty c·‖θ‖²",
    "lr": "learning rate",
    "lr_after": "learning rate (after the game)",
    "samples_per_s": "samples / s (test rows: evaluation's)",
    "steps_per_s": "steps / s",
    "positions_per_s": "positions / s",
    "q_mean": "mean Q(s, a) (reward units)",
    "mean_reward": "mean reward per game (its total)",
    "mean_outcome": "mean outcome target",
    "viruses_per_game": "viruses cleared per game",
    "cleared_share": "share of the level's viruses cleared",
    "clear_rate": "games won (share)",
    "epsilon": "exploration ε",
}

PathLike = str | os.PathLike


# ------------------------------------------------------------------------------------------------
# Training curves


def _metrics_file(path: Path) -> Path:
    return path / "metrics.csv" if path.is_dir() else path


def _run_names(paths: list[Path]) -> list[str]:
    """A run is named after its directory; names that collide fall back to the full path."""
    dirs = [p if p.is_dir() or p.name != "metrics.csv" else p.parent for p in paths]
    names = [d.name if d.is_dir() else d.stem for d in dirs]
    return [str(d) if names.count(name) > 1 else name for d, name in zip(dirs, names)]


def read_metrics(
    runs: PathLike | Iterable[PathLike] | Mapping[str, PathLike], *, total_steps: bool = False
) -> pd.DataFrame:
    """The metrics.csv of one or several runs in one DataFrame with a ``run`` column first.

    runs: a run directory or CSV file, a list of them, or {name: path} to choose the names
    (otherwise a run is named after its directory). The other columns are the files' own (the
    trainer writes `METRIC_COLUMNS`); ``step`` and ``split`` are required. total_steps: add
    ``total_step``, the step counted from fresh weights (`drmario.learn.train.steps_before`: a warm
    start or a values refit continues its network's count; NaN where that cannot be read), so runs
    that continue one another line up.
    """
    import pandas as pd

    if isinstance(runs, (str, os.PathLike)):
        runs = [runs]
    if isinstance(runs, Mapping):
        names, paths = [str(k) for k in runs], [Path(v) for v in runs.values()]
    else:
        paths = [Path(p) for p in runs]
        names = _run_names(paths)
    if not paths:
        raise ValueError("read_metrics: no runs given")
    frames = []
    for name, path in zip(names, paths):
        file = _metrics_file(path)
        if not file.is_file():
            raise FileNotFoundError(f"no metrics file at {file}")
        try:
            df = pd.read_csv(file)
        except pd.errors.EmptyDataError:  # a run that has not logged yet
            df = pd.DataFrame(columns=list(METRIC_COLUMNS))
        missing = [c for c in ("step", "split") if c not in df.columns]
        if missing:
            raise ValueError(f"{file}: missing column(s) {', '.join(missing)} (has {', '.join(df.columns)})")
        df.insert(0, "run", name)
        if total_steps:
            from drmario.learn.train import steps_before

            before = steps_before(file.parent)
            df["total_step"] = df["step"] + (np.nan if before is None else before)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def _register_inline() -> None:
    """Let a running kernel show the Figures made here. Without pyplot, the inline backend never
    registers its formatters, and a returned Figure would only show as text."""
    if "IPython" not in sys.modules:
        return
    from IPython import get_ipython
    from matplotlib.figure import Figure

    shell = get_ipython()
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters:
        return
    for mime in ("image/png", "image/svg+xml", "image/jpeg", "application/pdf"):
        try:
            formatters[mime].lookup_by_type(Figure)
            return  # the user's own set-up (e.g. %matplotlib inline, retina) already shows figures
        except KeyError:
            continue
    from IPython.core.pylabtools import select_figure_formats

    try:  # honour InlineBackend.figure_formats and print_figure_kwargs where they are set
        from matplotlib_inline.backend_inline import InlineBackend

        config = InlineBackend.instance(parent=shell)
        select_figure_formats(shell, config.figure_formats, **config.print_figure_kwargs)
    except ImportError:
        select_figure_formats(shell, {"png"}, bbox_inches="tight")


def figure(**kwargs: Any) -> Figure:
    from matplotlib.figure import Figure

    _register_inline()
    return Figure(layout="constrained", **kwargs)


def new_figure(n: int, width: float = 4.2, height: float = 3.2) -> tuple[Figure, list[Axes]]:
    """A figure of n small multiples, at most 3 per row (4 as 2 by 2, not 3 and 1 beside two blanks)."""
    ncols = 2 if n == 4 else max(1, min(n, 3))
    nrows = max(1, math.ceil(n / ncols))
    fig = figure(figsize=(width * ncols, height * nrows))
    axes = list(fig.subplots(nrows, ncols, squeeze=False).ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def given_axes(ax: Any, n: int) -> tuple[Figure, list[Axes]]:
    axes = list(np.atleast_1d(np.asarray(ax, dtype=object)).ravel())
    if len(axes) < n:
        raise ValueError(f"need {n} axes (one per term), got {len(axes)}")
    return figure_of(axes[0]), axes[:n]


def figure_of(ax: Axes) -> Figure:
    """The figure ax is drawn on (the root figure, if ax is on a subfigure)."""
    fig = ax.get_figure(root=True)
    if fig is None:
        raise ValueError("the axes given are not on a figure")
    return fig


def plot_curves(
    df: pd.DataFrame,
    terms: str | Sequence[str] = ("loss",),
    smoothing: float = 0.0,
    log_scale: bool = True,
    x: str = "step",
    ax: Axes | Sequence[Axes] | None = None,
    x_label: str | None = None,
    y_labels: Mapping[str, str] | None = None,
) -> Figure:
    """Train and test curves per loss term (one panel each) and per run (one colour each).

    df: from `read_metrics` (a ``run`` column is optional). Train is a solid line, test dashed
    with markers. smoothing in [0, 1): EMA weight of the past (debiased, as in TensorBoard),
    applied to train only, with the raw train curve kept faint behind; test points are sparse and
    would lag. log_scale: a log y axis for panels whose values are all positive and span a factor
    of 3 or more. x_label, y_labels (by term): what the columns mean where they are not a training's
    (`X_LABELS`, `TERM_LABELS`), e.g. a baseline's decisions and its loss.
    """
    terms = (terms,) if isinstance(terms, str) else tuple(terms)
    if not terms:
        raise ValueError("plot_curves: no terms given")
    for col in (*terms, x, "split"):
        if col not in df.columns:
            raise ValueError(f"plot_curves: no column {col!r} (columns: {', '.join(map(str, df.columns))})")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    fig, axes = new_figure(len(terms)) if ax is None else given_axes(ax, len(terms))
    runs = list(dict.fromkeys(df["run"])) if "run" in df.columns else [None]
    for term, a in zip(terms, axes):
        _draw_curves(a, df, runs, term, x, smoothing, log_scale, (y_labels or {}).get(term))
        a.set_xlabel(x_label or X_LABELS.get(x, x.replace("_", " ")))
    handles = _curve_legend(runs, smoothing > 0, tested=bool((df["split"] == "test").any()))
    if ax is None:
        fig.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False)
    else:
        axes[0].legend(handles=handles, fontsize=8)
    return fig


def _draw_curves(
    a: Axes, df: pd.DataFrame, runs: list, term: str, x: str, smoothing: float, log_scale: bool, label: str | None
) -> None:
    """One panel of `plot_curves`: the train and test curves of one term, a colour per run."""
    positive, drawn, low, high = True, False, np.inf, 0.0
    for k, run in enumerate(runs):
        colour = f"C{k % 10}"
        rows = df if run is None else df[df["run"] == run]
        for split, style in (("train", "-"), ("test", "--")):
            s = rows.loc[rows["split"] == split, [x, term]].dropna().sort_values(x, kind="stable")
            if s.empty:
                continue
            xs, ys = s[x].to_numpy(float), s[term].to_numpy(float)
            positive &= bool((ys > 0).all())
            low, high = min(low, float(ys.min())), max(high, float(ys.max()))
            drawn = True
            if split == "train" and smoothing > 0:
                a.plot(xs, ys, "-", color=colour, alpha=0.25, lw=0.8)
                ys = s[term].ewm(alpha=1.0 - smoothing, adjust=True).mean().to_numpy(float)
            a.plot(xs, ys, style, color=colour, lw=1.4, marker="o" if split == "test" else None, ms=3)
    if not drawn:
        a.text(0.5, 0.5, "no data", ha="center", va="center", transform=a.transAxes, color="grey")
    elif log_scale and positive and high >= 3 * low:  # over a shorter range a log axis has too few ticks
        a.set_yscale("log")
        a.yaxis.set_major_formatter(_plain_log_formatter())
        a.yaxis.set_minor_formatter(_plain_log_formatter(minor=True))
    a.set_title(term)
    label = label or TERM_LABELS.get(term, term.replace("_", " "))
    a.set_ylabel(label + (", log scale" if a.get_yscale() == "log" else ""))
    a.grid(alpha=0.3, which="both" if log_scale else "major")


def _plain_log_formatter(minor: bool = False) -> Any:
    """A log axis's tick labels as plain numbers (4.8 and 0.0224, not 4.8×10⁰), on the ticks
    matplotlib would label (over a short range, the minor ones too)."""
    from matplotlib.ticker import LogFormatterSciNotation

    class Plain(LogFormatterSciNotation):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return f"{x:.3g}" if super().__call__(x, pos) else ""

    return Plain(labelOnlyBase=not minor)


def _curve_legend(runs: list, smoothed: bool = False, tested: bool = True) -> list:
    """Legend handles of `plot_curves`: a colour per named run, then the train and (if tested) test
    styles, and the faint raw train curve behind a smoothed one."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color=f"C{k % 10}", lw=2, label=str(run)) for k, run in enumerate(runs) if run is not None
    ]
    handles.append(Line2D([], [], color="grey", ls="-", label="train (smoothed)" if smoothed else "train"))
    if smoothed:
        handles.append(Line2D([], [], color="grey", ls="-", alpha=0.25, lw=0.8, label="train (raw)"))
    if tested:
        handles.append(Line2D([], [], color="grey", ls="--", marker="o", ms=3, label="test"))
    return handles


def _figure_png(fig: Figure, dpi: int = 90) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")  # no label cut at the edge
    return buf.getvalue()


def curve_explorer(
    run_dirs: PathLike | Iterable[PathLike] | Mapping[str, PathLike], terms: Sequence[str] = ("loss",)
) -> Panel | Figure:
    """An ipywidgets UI over the runs' training curves: select runs and loss terms, smoothing,
    log scale, x axis, and a reload button (for runs still training). Returns a Panel (controls
    ``runs``, ``terms``, ``smoothing``, ``log``, ``x``, ``reload``, ``image``, ``message``);
    without ipywidgets, the `plot_curves` figure of every loss term, with a warning."""
    df = read_metrics(run_dirs, total_steps=True)
    widgets = ipywidgets_or_none()
    available = [t for t in (*LOSS_TERMS, "lr", "samples_per_s") if t in df.columns]
    if widgets is None:
        warnings.warn("ipywidgets is not installed: showing a static figure of every loss term", stacklevel=2)
        return plot_curves(df, terms=[t for t in available if t in LOSS_TERMS] or available[:1])

    c = _explorer_controls(widgets, df, terms, available)
    state = {"df": df}

    def redraw(_: Any = None) -> None:
        if not c["runs"].value or not c["terms"].value:
            c["message"].value = "select at least one run and one term"
            return
        data = state["df"]
        fig = plot_curves(
            data[data["run"].isin(c["runs"].value)],
            terms=c["terms"].value,
            smoothing=c["smoothing"].value,
            log_scale=c["log"].value,
            x=c["x"].value,
        )
        c["image"].value = _figure_png(fig)
        c["message"].value = ""

    def reload(_: Any = None) -> None:
        state["df"] = read_metrics(run_dirs, total_steps=True)
        names = list(dict.fromkeys(state["df"]["run"]))
        keep = [r for r in c["runs"].value if r in names] or names
        c["runs"].options = names
        c["runs"].value = keep
        x = c["x"].value
        c["x"].options = _x_columns(state["df"])  # a run that continues another may have appeared
        c["x"].value = x if x in c["x"].options else "step"
        redraw()

    for name in ("runs", "terms", "smoothing", "log", "x"):
        c[name].observe(redraw, names="value")
    c["reload"].on_click(reload)
    redraw()
    controls = widgets.HBox([c["runs"], c["terms"], widgets.VBox([c["smoothing"], c["x"], c["log"], c["reload"]])])
    return Panel(widgets.VBox([controls, c["message"], c["image"]]), snapshot=lambda: _png_html(c["image"].value), **c)


def _png_html(png: bytes) -> str:
    """An <img> of PNG bytes, inline (the static copy of `curve_explorer`'s picture)."""
    import base64

    return f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}"/>' if png else ""


def _x_columns(df: pd.DataFrame) -> list[str]:
    """The x axes `curve_explorer` offers: those df has, total_step only where a run continues
    another (elsewhere it is the step)."""
    continues = "total_step" in df.columns and bool(np.nan_to_num(df["total_step"] - df["step"]).any())
    return [c for c in X_COLUMNS if c in df.columns and (c != "total_step" or continues)]


def _explorer_controls(widgets: Any, df: pd.DataFrame, terms: Sequence[str], available: list[str]) -> dict[str, Any]:
    """The widgets of `curve_explorer` by control name, set to their first values."""
    run_names = list(dict.fromkeys(df["run"]))
    return {
        "runs": widgets.SelectMultiple(
            options=run_names, value=run_names, description="runs", rows=min(6, max(2, len(run_names)))
        ),
        "terms": widgets.SelectMultiple(
            options=available, value=[t for t in terms if t in available] or available[:1], description="terms", rows=6
        ),
        "smoothing": widgets.FloatSlider(value=0.0, min=0.0, max=0.99, step=0.01, description="smoothing"),
        "log": widgets.Checkbox(value=True, description="log scale", indent=False),
        "x": widgets.Dropdown(options=_x_columns(df), value="step", description="x"),
        "reload": widgets.Button(description="reload", tooltip="read the metrics files again"),
        "image": widgets.Image(format="png"),
        "message": widgets.HTML(),
    }


# ------------------------------------------------------------------------------------------------
# Calibration

DISC_AREA = 250.0  # points², the largest bin's disc where the counts are drawn as discs
# The units of the network's value outputs, for the calibration axes.
CALIBRATION_UNITS = {
    "won": " (−1 top-out … +1)",
    "cleared": " (viruses to the end)",
    "duration": " (pills to the end)",
}


def plot_calibration(
    predicted: Any,
    actual: Any,
    name: str,
    bins: int = 10,
    *,
    strategy: Literal["uniform", "quantile"] = "uniform",
    ax: Axes | None = None,
) -> Figure:
    """How well a network output predicts the real outcome, e.g. won, cleared or duration.

    predicted, actual: float[N] (non-finite pairs are dropped). The predictions are cut into bins
    (equal width, or equal counts with strategy="quantile"); each bin's mean prediction is plotted
    against the mean outcome with a standard-error bar, beside the diagonal of perfect calibration,
    and a histogram below gives the counts. With ax, only the calibration panel is drawn there, and
    a disc's area at each point gives its bin's count. The title gives n, RMSE, bias and correlation.
    """
    p = np.asarray(predicted, dtype=float).ravel()
    a = np.asarray(actual, dtype=float).ravel()
    if p.shape != a.shape:
        raise ValueError(f"predicted and actual differ in length: {p.size} and {a.size}")
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    ok = np.isfinite(p) & np.isfinite(a)
    p, a = p[ok], a[ok]
    if ax is None:
        fig = figure(figsize=(5.0, 5.4))
        top, hist = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    else:
        fig, top, hist = figure_of(ax), ax, None
    unit = CALIBRATION_UNITS.get(name, "")
    top.set_ylabel(f"observed {name}{unit}")
    (hist or top).set_xlabel(f"predicted {name}{unit}")
    if p.size == 0:
        top.text(0.5, 0.5, "no data", ha="center", va="center", transform=top.transAxes, color="grey")
        top.set_title(name)
        return fig
    if np.ptp(p) < 0.01 * np.ptp(a):  # a near-constant output: bins would stack on one point
        bins = 1
        top.text(0.98, 0.04, f"predictions all within {np.ptp(p):.2g}: one bin", ha="right", transform=top.transAxes)
    edges = _calibration_edges(p, bins, strategy)
    counts, mean_p, mean_a, se = _binned_means(p, a, edges)
    filled = counts > 0
    span = (min(float(p.min()), float(a.min())), max(float(p.max()), float(a.max())))
    top.plot(span, span, ":", color="grey", lw=1, label="perfect calibration (y = x)")
    top.errorbar(
        mean_p[filled], mean_a[filled], yerr=se[filled], fmt="o-", ms=4, capsize=2, label="bin mean ± 1 standard error"
    )
    if hist is not None:
        width = np.diff(edges) * 0.9
        hist.bar((edges[:-1] + edges[1:]) / 2, counts, width=width, color="C0", alpha=0.6, label="positions per bin")
        hist.set_ylabel("positions")
        hist.legend(fontsize=7, loc="upper right")
        hist.grid(alpha=0.3)
    else:  # sizes, not numbers, which would overlap where bins crowd; under the means' markers
        area = DISC_AREA * counts[filled] / counts.max()
        top.scatter(mean_p[filled], mean_a[filled], s=area, color="C0", alpha=0.3, linewidths=0, zorder=1.5)
    top.set_title(_calibration_title(p, a, name), fontsize=10)
    top.grid(alpha=0.3)
    handles, labels = top.get_legend_handles_labels()
    if hist is None:  # say what the discs' sizes are, with a disc of the largest bin's size
        label = f"disc area ∝ positions per bin (this disc: {counts.max():,})"
        handles.append(top.scatter([], [], s=DISC_AREA, color="C0", alpha=0.3, linewidths=0, label=label))
        labels.append(label)
    top.legend(handles, labels, fontsize=8, loc="upper left")
    return fig


def _calibration_edges(p: np.ndarray, bins: int, strategy: str) -> np.ndarray:
    """Bin edges over the predictions p: equal width or equal counts; one bin if all are equal."""
    lo, hi = float(p.min()), float(p.max())
    if strategy == "quantile":
        edges = np.unique(np.quantile(p, np.linspace(0, 1, bins + 1)))
    elif strategy == "uniform":
        edges = np.linspace(lo, hi, bins + 1)
    else:
        raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}")
    if edges.size < 2 or edges[-1] <= edges[0]:  # all predictions equal
        edges = np.array([lo - 0.5, hi + 0.5])
    return edges


def _binned_means(p: np.ndarray, a: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per bin of p: (count, mean prediction, mean outcome, standard error of the mean outcome: from the
    sample variance, NaN for a bin of fewer than 2 positions, which has none)."""
    nb = edges.size - 1
    idx = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, nb - 1)
    counts = np.bincount(idx, minlength=nb)
    c = np.maximum(counts, 1)
    mean_p = np.bincount(idx, p, nb) / c
    mean_a = np.bincount(idx, a, nb) / c
    var = np.bincount(idx, (a - mean_a[idx]) ** 2, nb) / np.maximum(counts - 1, 1)
    se = np.where(counts >= 2, np.sqrt(var / c), np.nan)
    return counts, mean_p, mean_a, se


def _calibration_title(p: np.ndarray, a: np.ndarray, name: str) -> str:
    rmse = float(np.sqrt(np.mean((p - a) ** 2)))
    bias = float(np.mean(p - a))
    corr = float(np.corrcoef(p, a)[0, 1]) if p.size > 1 and p.std() > 0 and a.std() > 0 else float("nan")
    return f"{name}: n={p.size}, RMSE {rmse:.3g}, bias {bias:+.3g}, r={corr:.2f}"
