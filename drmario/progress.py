"""Progress bars: ``tqdm.auto``'s, except that a notebook bar's saved output ends as its final line.

In a Jupyter kernel (papermill runs included) ``tqdm.auto`` shows an ipywidgets bar, and the
output it leaves in the notebook is the widget plus a text copy made when the bar was first shown
(``0/96``); the updates reach the widget only. So an executed notebook saves the start of every
bar, and an HTML export (which draws the widget, not its text) shows nothing where the widget
scripts cannot load. Here a notebook bar is shown under a display id, and when it closes that
output is replaced by the bar's final line as plain text (e.g. ``arena: greedy: 100%|██████████|
40/40 [00:05<00:00, 7.61game/s]``, or the count it stopped at), which every viewer shows. This
holds for ``leave=False`` bars too: in a notebook they leave that line instead of vanishing.
Outside a kernel this is ``tqdm.auto.tqdm`` itself (a terminal bar).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm as _auto_tqdm

__all__ = ["final_line", "tqdm"]


def final_line(bar: Any) -> str:
    """The bar as one line of text in its current state (unicode blocks, 10 wide)."""
    return str(bar.format_meter(**{**bar.format_dict, "ncols": None, "ascii": False}))


def _is_notebook_bar(cls: type) -> bool:
    try:
        from tqdm.notebook import tqdm_notebook
    except ImportError:  # pragma: no cover - tqdm.notebook imports without ipywidgets too
        return False
    return issubclass(cls, tqdm_notebook)


def _final_text_bar(base: Any) -> Any:
    """A subclass of tqdm's notebook bar whose output becomes its final line when it closes."""

    class FinalTextBar(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._handle: Any = None
            show = kwargs.pop("display", True)
            super().__init__(*args, display=False, **kwargs)
            if show and not self.disable and self.delay <= 0:
                self._show()

        def _show(self) -> None:
            from IPython.display import display

            self._handle = display(self.container, display_id=True)
            self.displayed = True

        def display(
            self,
            msg: str | None = None,
            pos: int | None = None,
            close: bool = False,
            bar_style: str | None = None,
            check_delay: bool = True,
        ) -> None:
            super().display(msg, pos, close=close, bar_style=bar_style, check_delay=False)
            if check_delay and self.delay > 0 and not self.displayed:
                self._show()

        def close(self) -> None:
            if self.disable:
                return
            super().close()  # sets disable, so a second close returns above
            if self._handle is not None:
                self._handle.update({"text/plain": final_line(self)}, raw=True)
                self._handle = None

    FinalTextBar.__name__ = FinalTextBar.__qualname__ = "tqdm"
    FinalTextBar.__module__ = __name__
    return FinalTextBar


if TYPE_CHECKING:
    from tqdm.auto import tqdm
else:
    tqdm = _final_text_bar(_auto_tqdm) if _is_notebook_bar(_auto_tqdm) else _auto_tqdm
