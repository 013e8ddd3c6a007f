"""What the pictures return: SVG and HTML views that Jupyter shows inline, and widget panels."""

from __future__ import annotations

from collections.abc import Sequence
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
    """An ipywidgets UI (``.widget``) with its controls by name, e.g. ``panel.slider``."""

    def __init__(self, widget: Any, **controls: Any) -> None:
        self.widget = widget
        self.controls = controls

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["controls"][name]
        except KeyError:
            raise AttributeError(name) from None

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

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
