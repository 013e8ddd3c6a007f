"""Does an executed notebook, exported to HTML, show its pictures offline?

An HTML export (nbconvert) draws each widget output with the widget scripts, which the page loads
from a CDN; offline, or saved without widget state, those outputs are blank. The kit puts a static
copy of each widget UI (`drmario.viz.Panel`) in an output of its own, and a progress bar's output
ends as its final line (`drmario.progress`). This script checks both on a real notebook:

1. export: the notebook to HTML with nbconvert (the lab template, as ``jupyter nbconvert --to html``);
2. static: in that HTML, each widget output and what follows it in its cell (a static copy, with how
   many <svg>/<img> pictures) and each progress bar line (finished or not);
3. browser: the page opened by headless Chromium with the network cut off (a dead proxy and a host
   resolver that finds no host, so only the file itself loads), and a probe script added to the
   page counting, after load, the pictures a reader sees (an <svg> or a loaded <img> with a non-zero
   box), those in cells with a widget, and the progress lines shown. ``cdn_loaded`` says whether any
   CDN script ran (it must not, offline). ``--screenshot`` also saves the top of the page.

Run: ``python bench/offline_export.py runs/cpu/notebooks/03_analysis.ipynb`` (add ``--html PATH``
to keep the export, ``--chromium PATH`` for the browser; without one found, step 3 is skipped and
said so). It prints a JSON report and exits 1 if a widget cell shows no picture, or a bar is not
final. tests/test_offline_export.py runs the same steps on a small notebook it makes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell")
# a tqdm line: "desc:  40%|████      | 16/40 [00:01<00:02, 9.1game/s]" (the counts may carry k/M/G)
BAR = re.compile(r"(\d+(?:\.\d+)?[kMGT]?)/(\d+(?:\.\d+)?[kMGT]?) \[")


def export_html(notebook: str | Path) -> str:
    """The notebook file as nbconvert's HTML export (lab template, outputs as saved)."""
    import nbformat

    return export_html_node(nbformat.read(str(notebook), as_version=4))


def export_html_node(nb: Any) -> str:
    """A notebook (nbformat's NotebookNode) as nbconvert's HTML export."""
    from nbconvert import HTMLExporter

    html, _ = HTMLExporter().from_notebook_node(nb)
    return str(html)


def bar_lines(text: str) -> list[str]:
    """The progress bar counts in text, e.g. ["40/40", "3/96"]."""
    return [f"{a}/{b}" for a, b in BAR.findall(text)]


def static_report(html: str) -> dict[str, Any]:
    """What the exported HTML holds, read as text: per widget output, the static copy after it in its
    cell and that copy's pictures; the progress bar counts in outputs that are not widgets."""
    widgets: list[dict[str, Any]] = []
    bars: list[str] = []
    for area in html.split('<div class="jp-OutputArea jp-Cell-outputArea">')[1:]:
        area = re.split(r'<div class="jp-Cell |</main>', area, maxsplit=1)[0]  # up to the next cell
        children = area.split('<div class="jp-OutputArea-child')[1:]
        for k, child in enumerate(children):
            if WIDGET_VIEW in child:
                after = children[k + 1] if k + 1 < len(children) else ""
                copy = after if "drmario-static" in after else ""
                widgets.append({"static_copy": bool(copy), "svg": copy.count("<svg"), "img": copy.count("<img")})
            else:
                bars += bar_lines(re.sub(r"<[^>]+>", "", child))
    return {
        "widget_outputs": len(widgets),
        "widgets": widgets,
        "bars": bars,
        "bars_unfinished": [b for b in bars if b.split("/")[0] != b.split("/")[1]],
        "cdn_scripts": sorted(set(re.findall(r"https://[^\s'\"<>]+\.js", html))),
    }


# Added before </body>: after load, counts what a reader sees and writes it into <pre id=offline-check>.
PROBE = """
<script>
window.addEventListener('load', function () { setTimeout(function () {
  function seen(el) {
    var r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none';
  }
  function pictures(root) {
    var n = 0;
    root.querySelectorAll('svg, img').forEach(function (el) {
      if (el.tagName.toLowerCase() === 'svg' && el.parentElement.closest('svg')) return;  // a nested svg
      if (el.tagName.toLowerCase() === 'img' && !(el.complete && el.naturalWidth > 0)) return;
      if (seen(el)) n += 1;
    });
    return n;
  }
  var report = {pictures: pictures(document.body), widget_cells: [], bars: [],
                cdn_loaded: typeof window.require !== 'undefined' || typeof window.MathJax !== 'undefined'};
  document.querySelectorAll('.jp-OutputArea').forEach(function (area) {
    if (area.querySelector('script[type="application/vnd.jupyter.widget-view+json"]'))
      report.widget_cells.push(pictures(area));
    area.querySelectorAll('.jp-OutputArea-output').forEach(function (out) {
      if (!seen(out)) return;
      var m, re = /(\\d+(?:\\.\\d+)?[kMGT]?)\\/(\\d+(?:\\.\\d+)?[kMGT]?) \\[/g, text = out.innerText;
      while ((m = re.exec(text)) !== null) report.bars.push(m[1] + '/' + m[2]);
    });
  });
  var pre = document.createElement('pre');
  pre.id = 'offline-check';
  pre.textContent = JSON.stringify(report);
  document.body.appendChild(pre);
}, 300); });
</script>
"""


def find_chromium(explicit: str | None = None) -> str | None:
    """A Chromium or Chrome binary: explicit, $CHROMIUM, or the first of CHROMIUM_NAMES on PATH."""
    for name in (explicit, os.environ.get("CHROMIUM"), *CHROMIUM_NAMES):
        if name and (path := shutil.which(name)):
            return path
    return None


def chromium_command(chromium: str, profile: Path) -> list[str]:
    """Headless Chromium with the network cut off: every http(s) request goes to a dead proxy and no
    host name resolves, so only file:// loads."""
    return [
        chromium,
        "--headless",
        "--no-sandbox",  # as root in a container
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--proxy-server=127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--window-size=1280,2000",
        "--virtual-time-budget=10000",
    ]


def browser_report(
    html: str, chromium: str, screenshot: str | Path | None = None, timeout: float = 120
) -> dict[str, Any]:
    """Open html (an export) in headless Chromium offline; what the probe counted (see the module)."""
    with tempfile.TemporaryDirectory(prefix="offline-check-") as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(html.replace("</body>", PROBE + "</body>", 1), encoding="utf-8")
        base = chromium_command(chromium, Path(tmp) / "profile")
        run = subprocess.run(
            [*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=timeout, check=False
        )
        found = re.search(r'<pre id="offline-check">(.*?)</pre>', run.stdout, re.S)
        if found is None:
            raise RuntimeError(f"{chromium}: no probe report (exit {run.returncode}): {run.stderr[-2000:]}")
        import html as html_lib

        report: dict[str, Any] = json.loads(html_lib.unescape(found.group(1)))
        if screenshot is not None:
            shot = Path(screenshot).resolve()
            subprocess.run(
                [*base, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=timeout, check=False
            )
            report["screenshot"] = str(shot) if shot.exists() else None
    report["blank_widget_cells"] = sum(1 for n in report["widget_cells"] if n == 0)
    report["bars_unfinished"] = [b for b in report["bars"] if b.split("/")[0] != b.split("/")[1]]
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook", help="an executed notebook, e.g. runs/cpu/notebooks/03_analysis.ipynb")
    ap.add_argument("--html", help="keep the export here (default: a temporary file)")
    ap.add_argument("--chromium", help="the browser binary (default: $CHROMIUM, or chromium etc. on PATH)")
    ap.add_argument("--screenshot", help="also save a screenshot of the top of the page (PNG)")
    args = ap.parse_args(argv)

    html = export_html(args.notebook)
    if args.html:
        Path(args.html).write_text(html, encoding="utf-8")
    report: dict[str, Any] = {"notebook": str(args.notebook), "static": static_report(html)}
    chromium = find_chromium(args.chromium)
    if chromium is None:
        report["browser"] = f"skipped: no Chromium binary found ({', '.join(CHROMIUM_NAMES)}, $CHROMIUM)"
        ok = True
    else:
        report["browser"] = browser_report(html, chromium, args.screenshot)
        report["browser"]["chromium"] = chromium
        b = report["browser"]
        ok = b["blank_widget_cells"] == 0 and not b["bars_unfinished"] and not b["cdn_loaded"]
    s = report["static"]
    ok = ok and all(w["static_copy"] for w in s["widgets"]) and not s["bars_unfinished"]
    print(json.dumps(report, indent=1))
    print("offline check:", "passed" if ok else "FAILED", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
