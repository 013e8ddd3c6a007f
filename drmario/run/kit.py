"""Where the kit's own files are: its notebooks, profiles and shipped networks, in a checkout or
installed with the wheel (``<prefix>/share/drmario-kit/``)."""

from __future__ import annotations

import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout, when the package runs from one
KIT_FOLDERS = {"networks": "data/networks"}  # where a kit folder is in a checkout, if not at the top


def kit_dir(kind: str) -> Path:
    """The kit's ``notebooks``, ``params`` or ``networks`` folder: the checkout's when this package runs from
    one, else the installed copy (a wheel puts them in ``<prefix>/share/drmario-kit/``)."""
    source = ROOT / KIT_FOLDERS.get(kind, kind)
    if (ROOT / "pyproject.toml").is_file() and source.is_dir():
        return source
    installed = Path(sysconfig.get_path("data")) / "share" / "drmario-kit" / kind
    if installed.is_dir():
        return installed
    raise FileNotFoundError(f"the kit's {kind}/ folder is neither in a checkout ({source}) nor installed ({installed})")


def shipped_network(name: str = "small") -> Path:
    """A network shipped with the kit (``data/networks/NAME.pt``, its card beside it)."""
    path = kit_dir("networks") / f"{name}.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no shipped network {path}")
    return path


def kit_profiles() -> list[str]:
    """The names of the kit's profiles (``params/*.yaml``: ci, cpu, gpu, ...)."""
    return sorted(p.stem for p in kit_dir("params").glob("*.yaml"))


def profile_path(name: str | Path) -> Path:
    """A profile file: a path, or the name of one of the kit's profiles (`kit_profiles`)."""
    path = Path(name)
    if path.is_file():
        return path
    if path.suffix == "" and path.parent == Path("."):
        shipped = kit_dir("params") / f"{name}.yaml"
        if shipped.is_file():
            return shipped
    kits = ", ".join(kit_profiles())
    raise FileNotFoundError(f"no profile {name!r}: give a YAML file or one of the kit's profiles: {kits}")
