"""What the pictures return: SVG and HTML views that Jupyter shows inline, and widget panels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from drmario.files import write_atomic


class SVGView:
    """One SVG picture that Jupyter shows inline; ``.svg`` is its text."""

    def __init__(self, svg: str) -> None:
        self.svg = svg

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        return self.svg  # inline SVG is valid HTML, and HTML export keeps it as text

    def save(self, path: str | Path) -> Path:
        """Write the picture to path (.svg, or .html for a page)."""
        return save_text(path, self.svg)

    def __repr__(self) -> str:
        return f"<SVGView {len(self.svg)} chars>"


class HTMLView:
    """An HTML fragment (boards in a row, a heatmap) that Jupyter shows inline.

    ``.html`` is the fragment; ``.svgs`` the board pictures in it, in order.
    """

    def __init__(self, html: str, svgs: Sequence[str] = ()) -> None:
        self.html = html
        self.svgs = list(svgs)

    def _repr_html_(self) -> str:
        return self.html

    def save(self, path: str | Path) -> Path:
        """Write a standalone HTML page (any suffix)."""
        return save_text(path, self.html, page=True)

    def __repr__(self) -> str:
        return f"<HTMLView {len(self.svgs)} boards, {len(self.html)} chars>"


class Panel:
    """An ipywidgets UI (``.widget``) with its controls by name, e.g. ``panel.slider``.

    snapshot: returns static HTML of what the UI shows now (its pictures as inline SVG or PNG).
    Displayed, a panel makes two outputs: the widget, then that static copy (`static_html`). An
    HTML export draws a widget output with the widget scripts, which it loads from a CDN (nothing
    shows offline, or where the notebook was saved without widget state), and never falls back to
    another type in the same output; so the copy is an output of its own, visible with no script.
    Where the widget is drawn (JupyterLab, Notebook 7, an export online), a CSS rule in the copy
    hides it. The copy shows the pictures of when the panel was displayed; ``panel.snapshot()`` in
    a later cell shows them as they are then.
    """

    def __init__(self, widget: Any, *, snapshot: Callable[[], str] | None = None, **controls: Any) -> None:
        self.widget = widget
        self.controls = controls
        self._snapshot = snapshot

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["controls"][name]
        except KeyError:
            raise AttributeError(name) from None

    def snapshot(self) -> HTMLView:
        """What the UI shows now, as static HTML (empty without a snapshot function)."""
        return HTMLView(self._snapshot() if self._snapshot is not None else "")

    def static_html(self) -> str:
        """The static copy shown beside the widget: `snapshot` with a note, in a ``drmario-static``
        block that hides itself where the widget before it is drawn (empty without a snapshot)."""
        if self._snapshot is None:
            return ""
        return static_copy(self._snapshot())

    def outputs(self) -> list[dict[str, Any]]:
        """The mime bundles that displaying the panel makes: the widget's, then the static copy's."""
        bundle = self.widget._repr_mimebundle_()
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        copy = self.static_html()
        return [data] + ([{"text/html": copy, "text/plain": "<static copy of the widget>"}] if copy else [])

    def _ipython_display_(self) -> None:
        from IPython.display import display

        for data in self.outputs():
            display(data, raw=True)

    def __repr__(self) -> str:
        return f"<Panel {', '.join(self.controls)}>"


STATIC_CLASS = "drmario-static"
# Hides the static copy where the output just before it holds a drawn widget (ipywidgets gives
# every box view the class widget-box; an undrawn widget output holds only its <script> tags):
# JupyterLab and Notebook 7 (jp-OutputArea-child), the classic notebook (output_area), and HTML
# exports (the lab and classic templates use the same classes).
_HIDE_WHEN_DRAWN = (
    f".jp-OutputArea-child:has(.widget-box) + .jp-OutputArea-child .{STATIC_CLASS},"
    f" .output_area:has(.widget-box) + .output_area .{STATIC_CLASS} {{display: none}}"
)


def static_copy(html: str) -> str:
    """html in a ``drmario-static`` block with a note saying what it is (see `Panel`)."""
    note = (
        '<div style="font-size: smaller; color: grey">static copy of the widget above'
        " (shown where the widget scripts cannot load)</div>"
    )
    return f'<div class="{STATIC_CLASS}"><style>{_HIDE_WHEN_DRAWN}</style>{note}{html}</div>'


def save_text(path: str | Path, text: str, page: bool = False) -> Path:
    path = Path(path)
    if page or path.suffix.lower() in (".html", ".htm"):
        text = f'<!doctype html>\n<html><head><meta charset="utf-8"></head><body>{text}</body></html>\n'
    return write_atomic(path, text)


def ipywidgets_or_none() -> Any:
    """The ipywidgets module, or None where it is not installed (callers fall back to static)."""
    try:
        import ipywidgets
    except ImportError:
        return None
    return ipywidgets
