"""What the pictures return: SVG and HTML views that Jupyter shows inline, and widget panels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


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

    snapshot: returns static HTML of what the UI shows now (its pictures as inline SVG or PNG). When
    the panel is displayed, that goes into the output beside the widget view, so a notebook exported
    to HTML without widget state (papermill, nbconvert) shows the pictures as they were then, not a
    blank cell. (Saved with widget state, the export shows the live widget instead, which needs the
    widget scripts from the network.) ``panel.snapshot()`` in a later cell keeps the state of then.
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

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if self._snapshot is None:
            return bundle
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, None)
        data = {**data, "text/html": self._snapshot()}  # shown where the widget view cannot be
        return data if metadata is None else (data, metadata)

    def __repr__(self) -> str:
        return f"<Panel {', '.join(self.controls)}>"


def save_text(path: str | Path, text: str, page: bool = False) -> Path:
    path = Path(path)
    if page or path.suffix.lower() in (".html", ".htm"):
        text = f'<!doctype html>\n<html><head><meta charset="utf-8"></head><body>{text}</body></html>\n'
    path.write_text(text, encoding="utf-8")
    return path


def ipywidgets_or_none() -> Any:
    """The ipywidgets module, or None where it is not installed (callers fall back to static)."""
    try:
        import ipywidgets
    except ImportError:
        return None
    return ipywidgets
