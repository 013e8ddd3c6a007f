"""Arena plots and tables: win rates by level with Wilson 95% intervals, the leaderboard across
agents and runs, the rounds of a run and their gates, and the styled arena table."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from drmario.play.arena import ARENA_COLUMNS, all_levels, wilson
from drmario.viz.plots import figure, given_axes, new_figure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from pandas.io.formats.style import Styler

RATES = ("win_rate", "topout_rate", "capped_rate", "stalemate_rate", "cleared_fraction")
METRIC_LABELS = {
    "win_rate": "win rate (every virus cleared)",
    "cleared_fraction": "viruses cleared (share of the level's)",
    "pills_per_virus": "pills per virus cleared",
    "topout_rate": "top-out rate",
    "capped_rate": "share stopped at the pill cap",
    "stalemate_rate": "stalemate rate",
    "ms_per_move": "ms per move",
}
# Axis labels with units: the arena's metrics (y) ...
METRIC_AXES = {
    "win_rate": "win rate (% of games)",
    "cleared_fraction": "viruses cleared (% of the level's)",
    "pills_per_virus": "pills placed per virus cleared",
    "topout_rate": "top-outs (% of games)",
    "capped_rate": "stopped at the pill cap (% of games)",
    "stalemate_rate": "stalemates (% of games)",
    "ms_per_move": "time to choose a move (ms)",
}


def _check_columns(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {', '.join(missing)} (has {', '.join(map(str, df.columns))})")


LINE_STYLES = ("-", "--", ":", "-.")
ROUND_TAG = re.compile(r" r(\d+)\b")  # a network's round in an agent's name (`drmario.run.compare`)


def _agent_styles(agents: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each agent's colour and line style: 10 colours, then the next line style. A player keeps its
    colour whatever its round ("policy r0", "policy r1"), so a round's arena and the leaderboard of
    all rounds agree; its newest round is drawn solid, older ones dashed, dotted, ..."""
    players: dict[str, list[str]] = {}
    for name in agents:
        players.setdefault(ROUND_TAG.sub("", name), []).append(name)
    styles = {}
    for k, names in enumerate(players.values()):
        newest = sorted(names, key=lambda n: -int(m.group(1)) if (m := ROUND_TAG.search(n)) else 0)
        for j, name in enumerate(newest):
            styles[name] = {"color": f"C{k % 10}", "ls": LINE_STYLES[(k // 10 + j) % 4]}
    return styles


def _draw_arena(a: Axes, df: pd.DataFrame, name: str, agents: list) -> list[Any]:
    """One panel of `plot_arena`: a line per agent over the level; returns the legend entries of
    what else it drew. On rates each agent sits a little to the side at a level (ties at 0% or 100%
    would hide each other), with the win rate's Wilson intervals as error bars (bands of several
    agents would merge into one block). Pills per virus where the agent won no game are hollow: a
    player that tops out early uses few pills for the few viruses it clears; where it cleared none
    there is no point, and the legend says so."""
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    banded = name == "win_rate" and {"ci_low", "ci_high"} <= set(df.columns)
    levels_all = np.unique(df["level"].to_numpy(float))
    gap = float(np.diff(levels_all).min()) if len(levels_all) > 1 else 1.0
    # agents side by side within half a level step: rates often tie (0%, 100%) and would hide each other
    dodge = 0.5 * gap / max(len(agents), 1) if name in RATES else 0.0
    hollow, unplotted, styles = False, False, _agent_styles(agents)
    for k, agent in enumerate(agents):
        rows = df[df["agent"] == agent].sort_values("level")
        levels, values = rows["level"].to_numpy(float), rows[name].to_numpy(float)
        levels = levels + (k - (len(agents) - 1) / 2) * dodge
        style = styles[agent]
        a.plot(levels, values, marker="o", ms=4, label=str(agent), **style)
        if name == "pills_per_virus" and "wins" in rows.columns:
            lost = rows["wins"].to_numpy() == 0
            a.plot(levels[lost], values[lost], "o", ms=4, mfc="white", ls="", color=style["color"], zorder=3)
            hollow = hollow or bool(lost.any())
        if name == "pills_per_virus":
            unplotted = unplotted or bool(np.isnan(values).any())
        if banded:
            low, high = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
            err = np.clip([values - low, high - values], 0, None)
            a.errorbar(
                levels, values, yerr=err, fmt="none", ecolor=style["color"], elinewidth=1.2, capsize=2, alpha=0.5
            )
    if name in RATES:
        a.set_ylim(-0.02, 1.02)
        a.yaxis.set_major_formatter(PercentFormatter(1.0))
    if len(levels_all) <= 13:  # ticks at the levels played: agents sit beside them, not at other levels
        a.set_xticks(levels_all.astype(int))
    else:
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
    a.set_xlabel("virus level")
    a.set_ylabel(METRIC_AXES.get(name, name.replace("_", " ")))
    a.set_title(METRIC_LABELS.get(name, name.replace("_", " ")))
    a.grid(alpha=0.3)
    return (
        [_band_handle()] * banded
        + [_hollow_handle()] * hollow
        + [_note_handle("no point: no virus cleared")] * unplotted
    )


def _band_handle(label: str = "Wilson 95% interval") -> Any:
    from matplotlib.lines import Line2D

    return Line2D([], [], color="grey", marker="|", ms=12, mew=1.2, ls="", alpha=0.6, label=label)


def _note_handle(label: str) -> Any:
    """A legend entry that is only text."""
    from matplotlib.lines import Line2D

    return Line2D([], [], ls="", label=label)


def _hollow_handle() -> Any:
    from matplotlib.lines import Line2D

    return Line2D([], [], color="grey", marker="o", ms=4, mfc="white", ls="", label="hollow: no game won")


def plot_arena(df: pd.DataFrame, metric: str | Sequence[str] = "win_rate", ax: Axes | None = None) -> Figure:
    """One line per agent over the virus level, with markers; one panel per metric.

    df: one row per (agent, level) with the arena's columns (`ARENA_COLUMNS`). Rates get a 0-100 %
    axis; the win rate gets its Wilson 95% interval as error bars (from ci_low, ci_high). One
    legend, beside the last panel: inside a panel it would cover the curves.
    """
    metrics = (metric,) if isinstance(metric, str) else tuple(metric)
    _check_columns(df, ("agent", "level", *metrics), "plot_arena")
    fig, axes = new_figure(len(metrics), 5.0, 3.4) if ax is None else given_axes(ax, len(metrics))
    agents = list(dict.fromkeys(df["agent"]))
    extra = [h for name, a in zip(metrics, axes) for h in _draw_arena(a, df, name, agents)]
    if agents:
        handles, labels = axes[0].get_legend_handles_labels()
        for handle in {h.get_label(): h for h in extra}.values():  # each once
            handles.append(handle)
            labels.append(handle.get_label())
        axes[-1].legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    return fig


def plot_leaderboard(df: pd.DataFrame, *, title: str | None = None) -> Figure:
    """A leaderboard as a picture: the win rate of every agent by virus level (left, Wilson 95%
    intervals as error bars) and over all levels together (right: wins / games with its Wilson 95% interval, best at
    the top). df: an arena table, one row per (agent, level) with games and wins (the long form,
    e.g. `drmario.run.compare.arena_results`)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import PercentFormatter

    _check_columns(df, ("agent", "level", "games", "wins", "win_rate"), "plot_leaderboard")
    if "cleared_fraction" not in df.columns:
        df = df.assign(cleared_fraction=np.nan)
    if not {"ci_low", "ci_high"} <= set(df.columns):
        lo, hi = wilson(df["wins"].to_numpy(), df["games"].to_numpy())
        df = df.assign(ci_low=lo, ci_high=hi)
    agents = list(dict.fromkeys(df["agent"]))
    total = all_levels(df).sort_values(["win_rate", "ci_low", "cleared_fraction"], ascending=False, kind="stable")
    fig = figure(figsize=(12.0, max(3.6, 0.3 * len(agents) + 1.6)))
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    _draw_arena(left, df, "win_rate", agents)
    order, styles = list(total["agent"])[::-1], _agent_styles(agents)  # the best at the top
    ys = np.arange(len(order))
    for y, agent in zip(ys, order):
        row = total[total["agent"] == agent].iloc[0]
        colour = styles[agent]["color"]
        err = [[row["win_rate"] - row["ci_low"]], [row["ci_high"] - row["win_rate"]]]
        right.errorbar([row["win_rate"]], [y], xerr=err, fmt="o", color=colour, capsize=3, ms=5)
        right.annotate(
            f"{int(row['wins'])}/{int(row['games'])}",
            (min(row["ci_high"], 1.0), y),
            xytext=(4, -3),
            textcoords="offset points",
            fontsize=7,
            color="grey",
        )
    right.set_yticks(ys, [str(a) for a in order], fontsize=8)
    right.set_xlim(-0.02, 1.12)
    right.xaxis.set_major_formatter(PercentFormatter(1.0))
    right.set_xlabel("win rate over all levels (% of games)")
    right.set_ylabel("agent (best at the top)")
    right.set_title("all levels: wins / games")
    right.grid(alpha=0.3, axis="x")
    right.legend(
        handles=[
            Line2D([], [], color="grey", marker="o", ls="", label="win rate"),
            Line2D([], [], color="grey", marker="|", ms=10, ls="-", label="Wilson 95% interval"),
        ],
        fontsize=8,
        loc="lower right",
    )
    handles, labels = left.get_legend_handles_labels()  # below the panels: many agents would hide the lines
    handles.append(_band_handle("Wilson 95% interval (by level)"))
    labels.append("Wilson 95% interval (by level)")
    fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(handles)), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title)
    return fig


@functools.cache
def _text_styler() -> type[Styler]:
    """pandas' Styler with a plain-text form (made lazily: the Styler needs jinja2)."""
    from pandas.io.formats.style import Styler

    class TextStyler(Styler):
        """A Styler whose plain text (a notebook's text/plain output, which text exports and
        terminals show) is its table as text rather than the object's address."""

        text = ""  # set by _styled (pandas copies a Styler as type(self)(data))

        def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
            printer.text(self.text)

    return TextStyler


def _styled(table: pd.DataFrame, caption: str, formats: Mapping[str, str] | None = None, index: bool = True) -> Styler:
    """table.style with its caption and number formats, whose plain text is the caption over the
    formatted table."""
    shown: dict[Any, Any] = {c: f for c, f in (formats or {}).items() if c in table.columns}
    text = table.copy()
    for c, f in shown.items():
        text[c] = [f.format(v) if v == v else "-" for v in table[c]]  # v != v: NaN
    styler = _text_styler()(table)
    styler.text = f"{caption}\n{text.to_string(index=index)}"  # type: ignore[attr-defined]  # (TextStyler's)
    styler = styler.format(shown, na_rep="-")
    return styler.set_caption(caption) if index else styler.hide(axis="index").set_caption(caption)


def arena_table(df: pd.DataFrame) -> Styler:
    """The arena results as a styled table: rows by level then agent, rates in percent, the win rate
    shaded, and the best win rate at each level in bold; columns with no value are left out."""
    _check_columns(df, ("agent", "level"), "arena_table")
    columns = [c for c in ARENA_COLUMNS if c in df.columns and c not in ("agent", "level")]
    columns += [c for c in df.columns if c not in ARENA_COLUMNS]
    columns = [c for c in columns if df[c].notna().any()]  # e.g. frames without NES timing: a column of "-"
    table = df.sort_values(["level", "agent"], kind="stable").set_index(["level", "agent"])[columns]
    formats = {c: "{:.1%}" for c in (*RATES, "ci_low", "ci_high", "cleared_fraction")}
    formats.update(games="{:,.0f}", wins="{:,.0f}", pills_per_virus="{:.2f}", ms_per_move="{:.2f}")
    caption = (
        "Arena: one row per level and agent; win rate = every virus cleared, with its Wilson 95% interval "
        "(ci_low, ci_high); bold: the best win rate at the level"
    )
    styler = _styled(table, caption, formats)
    if "win_rate" in table.columns:
        styler = styler.background_gradient(cmap="Greens", subset=["win_rate"], vmin=0.0, vmax=1.0)

        def bold_best(col: pd.Series) -> list[str]:
            best = col.groupby(level="level").transform("max")
            return ["font-weight: bold" if v == b and b > 0 else "" for v, b in zip(col, best)]  # no bold ties at 0

        styler = styler.apply(bold_best, subset=["win_rate"], axis=0)
    return styler


def gates_table(gates: Sequence[Mapping[str, Any]]) -> Styler:
    """The gates' decisions as a styled table, a row per round: the network, the round it was played
    against, the decision, both networks' wins on the gating games with McNemar's p, the pills per
    virus on the games both won and the paired difference's 95% interval, the share of the viruses
    each cleared (what weighs where no game was won by both), and the reason in full.
    gates: `drmario.run.rounds.gate_table`, or [`gate_round`'s record]."""
    import pandas as pd

    def ppv(g: Mapping[str, Any]) -> tuple[str, str]:
        if not g.get("both_won"):
            return "-", "-"
        diff = f"{g['ppv_diff']:+.2f} [{g['ppv_diff_low']:+.2f}, {g['ppv_diff_high']:+.2f}]"
        return f"{g['new_ppv']:.2f} vs {g['old_ppv']:.2f}", diff

    def cleared(g: Mapping[str, Any]) -> str:
        if "new_cleared" not in g:  # a gate from before the viruses cleared were weighed
            return "-"
        return f"{g['new_cleared']:.1%}" + (f" vs {g['old_cleared']:.1%}" if "old_cleared" in g else "")

    rows = []
    for g in gates:
        first = g.get("against") is None  # the first network has nothing to beat
        wins = f"{g['wins']} of {g['games']}" if first else f"{g['new_wins']} vs {g['old_wins']} of {g['games']}"
        pills, diff = ("-", "-") if first else ppv(g)
        rows.append(
            {
                "round": g["round"],
                "network": g["network"],
                "against": "-" if first else f"round {g['against']}",
                "promoted": "yes" if g["promoted"] else "no",
                "wins": wins,
                "McNemar p": "-" if first else f"{g['wins_p']:.3g}",
                "pills per virus, games both won": pills,
                "new − old [95%]": diff,
                "viruses cleared": cleared(g),
                "reason": g["reason"],
            }
        )
    table = pd.DataFrame(
        rows,
        columns=["round", "network", "against", "promoted", "wins", "McNemar p"]
        + ["pills per virus, games both won", "new − old [95%]", "viruses cleared", "reason"],
    )
    caption = "Gates: each round's network against the best before it on the same gating games (paired)"
    return _styled(table, caption, index=False)


def plot_rounds(df: pd.DataFrame) -> Figure:
    """Does each round's network beat the last? Per level, the win rate (Wilson 95% intervals as
    error bars) and, when df has them, the pills per virus (ppv_low, ppv_high: their interval) of
    every agent with a network by round, and the agents without one as dashed flat lines; a hollow
    marker is a round its gate did not promote (column ``promoted``). df:
    `drmario.run.rounds.play_rounds` or `drmario.run.compare.rounds_table` (round -1: no network)."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import PercentFormatter

    _check_columns(df, ("round", "agent", "level", "win_rate", "ci_low", "ci_high"), "plot_rounds")
    levels = sorted(df["level"].unique())
    metrics = [("win_rate", "ci_low", "ci_high")]
    if {"pills_per_virus", "ppv_low", "ppv_high"} <= set(df.columns):
        metrics.append(("pills_per_virus", "ppv_low", "ppv_high"))
    fig, axes = new_figure(len(levels) * len(metrics), 4.4, 3.6)
    networks = list(dict.fromkeys(df.loc[df["round"] >= 0, "agent"]))
    others = list(dict.fromkeys(df.loc[df["round"] < 0, "agent"]))
    rounds = sorted(df.loc[df["round"] >= 0, "round"].unique())
    panels = [(level, metric) for level in levels for metric in metrics]
    styles = _agent_styles(networks + others)
    for ax, (level, (value, low, high)) in zip(axes, panels):
        here = df[df["level"] == level]
        for k, agent in enumerate(networks):
            rows = here[here["agent"] == agent].sort_values("round")
            style = styles[agent]
            err = np.array([rows[value] - rows[low], rows[high] - rows[value]])
            x = rows["round"] + 0.08 * (k - (len(networks) - 1) / 2)  # side by side: no marker hides another
            ax.errorbar(x, rows[value], yerr=err, fmt="o", capsize=3, label=agent, **style)
            if "promoted" in rows.columns:
                rejected = rows["promoted"].eq(False).to_numpy()  # None: not gated
                # above the error bar's own filled marker (zorder 2.1), which would hide it
                ax.plot(x[rejected], rows[value][rejected], "o", mfc="white", color=style["color"], zorder=3)
        for agent in others:
            row = here[here["agent"] == agent]
            if len(row):
                ax.axhline(float(row[value].iloc[0]), ls="--", lw=1, color=styles[agent]["color"], label=agent)
        ax.set_title(f"level {level}")
        ax.set_xlabel("round (the network trained after it)")
        ax.set_ylabel(METRIC_AXES[value])
        if value == "win_rate":
            ax.set_ylim(-0.02, 1.02)
            ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_xticks(rounds)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(Patch(color="none"))
    labels.append("bars: 95% intervals; dashed: no network; hollow: not promoted")
    axes[0].legend(handles, labels, fontsize=7)
    return fig


def plot_selfplay_rounds(rounds: pd.DataFrame) -> Figure:
    """The self-play games of each round, as bars: the share won (Wilson 95% intervals), the pills
    per virus, and the share of each game's viruses cleared; under each round, the search that
    played it and its games. These are the games the next network learns from, at the round's own
    levels, by its own player (round 0 often the expert): for strength, see the gates and the
    arena. rounds: `drmario.run.notebook.selfplay_rounds_table` (index: round)."""
    import textwrap

    from matplotlib.ticker import PercentFormatter

    columns = ("games", "wins", "cleared_share", "pills_per_virus", "search")
    _check_columns(rounds, columns, "plot_selfplay_rounds")
    fig, axes = new_figure(3, 4.4, 3.4)
    x = [
        f"{k}\n" + textwrap.fill(str(search), 18) + f"\n{games} games"
        for k, search, games in zip(rounds.index, rounds["search"], rounds["games"])
    ]
    games, wins = rounds["games"].to_numpy(), rounds["wins"].to_numpy()
    share = wins / np.maximum(games, 1)
    low, high = wilson(wins, games)
    axes[0].bar(x, share, yerr=[share - low, high - share], capsize=3, color="C2")
    axes[0].set(title="games won", ylabel="share of the games (Wilson 95%)", ylim=(0, 1.02))
    axes[1].bar(x, rounds["pills_per_virus"], color="C0")
    axes[1].set(title="pills per virus", ylabel="pills per virus cleared (lower is better)")
    axes[2].bar(x, rounds["cleared_share"], color="C1")
    axes[2].set(title="viruses cleared", ylabel="share of each game's viruses", ylim=(0, 1.02))
    for ax in (axes[0], axes[2]):
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    for ax in axes:
        ax.set_xlabel("self-play round: its player, its games")
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    return fig
