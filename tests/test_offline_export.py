"""An executed notebook exported to HTML shows its pictures and final progress bars with no widget
script (offline): the static copy beside each widget UI, and each bar's last line. The notebook is
made here with the kit's display calls (a replay, the play widget, the curve explorer, progress
bars), executed with nbclient (widget state saved, as papermill does), exported with nbconvert and
read as text; then, where a Chromium binary is found, opened in headless Chromium offline
(bench/offline_export.py, which also checks a real run: see its docstring)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import nbformat
import pytest

import drmario

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("offline_export", REPO / "bench" / "offline_export.py")
assert spec is not None and spec.loader is not None
offline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(offline)

CELLS = [
    """\
import random
import drmario as dm
from drmario import viz
from drmario.play.agents import GreedyAgent
from drmario.progress import tqdm""",
    """\
for _ in tqdm(range(3), desc="games"):
    pass
with tqdm(total=5, desc="inner", leave=False) as bar:  # leave=False: its last line stays too
    bar.update(5)""",
    """\
game, rng = dm.Game(seed=1234, level=5), random.Random(0)
for _ in range(8):
    game.play(rng.choice(game.legal_moves()))
viz.replay_widget(game.record())""",
    "viz.play_widget(GreedyAgent(), seed=1234, level=3)",
    "viz.curve_explorer({'a': RUN})",
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[nbformat.NotebookNode, str]:
    from nbclient import NotebookClient

    tmp = tmp_path_factory.mktemp("offline")
    run = tmp / "run"
    run.mkdir()
    rows = ["step,split,loss"] + [f"{s},train,{1.0 / (1 + s)}" for s in range(0, 50, 10)]
    (run / "metrics.csv").write_text("\n".join(rows) + "\n")
    cells = [nbformat.v4.new_code_cell(f"RUN = {str(run)!r}")] + [nbformat.v4.new_code_cell(c) for c in CELLS]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    env = dict(os.environ)  # the kernel imports this checkout's drmario
    paths = (str(Path(drmario.__file__).parent.parent), env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp)}})
    client.execute(env=env)
    assert "widgets" in nb.metadata  # saved widget state: the export loads the widget scripts from a CDN
    return nb, offline.export_html_node(nb)


def test_the_saved_bars_are_final(exported):
    nb, _ = exported
    bars = [o for c in nb.cells for o in c.outputs if offline.bar_lines(o.get("data", {}).get("text/plain", ""))]
    assert [offline.bar_lines(o.data["text/plain"]) for o in bars] == [["3/3"], ["5/5"]]
    assert all(list(o.data) == ["text/plain"] for o in bars)  # no widget view left for an export to draw


def test_the_export_shows_the_pictures_without_widget_scripts(exported):
    _, html = exported
    report = offline.static_report(html)
    assert report["widget_outputs"] == 3 and all(w["static_copy"] for w in report["widgets"])
    assert [(w["svg"], w["img"]) for w in report["widgets"]] == [(1, 0), (2, 0), (0, 1)]  # replay, play, curves
    assert report["bars"] == ["3/3", "5/5"] and not report["bars_unfinished"]
    assert any("html-manager" in s for s in report["cdn_scripts"])  # what would be blank offline


def test_headless_chromium_offline_sees_the_pictures(exported):
    chromium = offline.find_chromium()
    if chromium is None:
        pytest.skip(f"no Chromium binary found (looked for $CHROMIUM and {', '.join(offline.CHROMIUM_NAMES)})")
    _, html = exported
    report = offline.browser_report(html, chromium)
    assert not report["cdn_loaded"], json.dumps(report)  # offline indeed: no CDN script ran
    assert report["widget_cells"] == [1, 2, 1], json.dumps(report)  # each widget's cell shows its pictures
    assert report["bars"] == ["3/3", "5/5"], json.dumps(report)


def test_the_static_copy_hides_where_the_widget_is_drawn(exported):
    """Where the widget scripts do run (Jupyter, an export online), the copy is hidden: shown here by
    a drawn widget's class put into each widget output, then counting in Chromium as above. Without
    Chromium, only that the hiding rule travels with each static copy."""
    from drmario.viz.views import _HIDE_WHEN_DRAWN

    _, html = exported
    assert html.count(f"<style>{_HIDE_WHEN_DRAWN}</style>") == 3  # one per widget output's copy
    chromium = offline.find_chromium()
    if chromium is None:
        pytest.skip(f"no Chromium binary found (looked for $CHROMIUM and {', '.join(offline.CHROMIUM_NAMES)})")
    drawn = html.replace(
        '<script type="application/vnd.jupyter.widget-view+json">',
        '<div class="widget-box" style="height: 10px"></div><script type="application/vnd.jupyter.widget-view+json">',
    )
    assert offline.browser_report(drawn, chromium)["widget_cells"] == [0, 0, 0]
