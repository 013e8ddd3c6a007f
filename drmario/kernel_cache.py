"""numba's cache of compiled kernels, kept true to the package's sources.

numba checks a cached kernel against its own source file only (its modification time and size). A
kernel that calls a kernel of another file, or reads a constant from it, keeps its compiled copy of
the callee when only the callee's file changes: after `search.tree.backup` was edited, the searches
in `search.network` still ran the old `backup`. So the package records a hash of the sources kernels
can read (`kernel_sources`) beside the cache, and when they differ from the recorded ones it drops
every cached kernel before any is loaded (`drmario/__init__.py` calls `drop_stale_kernels` first;
the check takes about 1 ms). A fresh checkout or install compiles everything anyway; only a changed
source costs a recompile. Only numba's default place is kept so, the package's `__pycache__`
folders: a cache moved elsewhere with NUMBA_CACHE_DIR is not checked.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
STAMP_NAME = "sources.sha256"  # in the package's own __pycache__, beside the cached kernels


# The folders of every module with numba kernels and of every module those import (a test checks
# it): no other source can change a compiled kernel, so editing one (play, runs, plots, the notebooks'
# helpers) costs no recompile.
KERNEL_FOLDERS = ("engine", "search", "learn", "baselines")


def kernel_sources(package: Path = PACKAGE) -> list[Path]:
    """The package's top-level modules and those under KERNEL_FOLDERS, in path order."""
    folders = [package / folder for folder in KERNEL_FOLDERS]
    return sorted([*package.glob("*.py"), *(path for folder in folders for path in folder.rglob("*.py"))])


def sources_digest(package: Path = PACKAGE) -> str:
    """sha256 over `kernel_sources`: each relative path and content."""
    digest = hashlib.sha256()
    for path in kernel_sources(package):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def drop_stale_kernels(package: Path = PACKAGE) -> bool:
    """Delete the cached kernels (*.nbi, *.nbc) under `package` unless its sources are the ones they
    were compiled from; return whether any sources had changed. Another process loading a kernel
    while it is dropped only recompiles it (numba treats a missing cache file as a miss). Where the
    package is read-only numba caches elsewhere, and nothing is dropped."""
    stamp = package / "__pycache__" / STAMP_NAME
    digest = sources_digest(package)
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass
    try:
        for cached in [*package.rglob("*.nbi"), *package.rglob("*.nbc")]:
            cached.unlink(missing_ok=True)
        stamp.parent.mkdir(exist_ok=True)
        partial = stamp.with_name(f"{STAMP_NAME}.{os.getpid()}.tmp")
        partial.write_text(digest)
        os.replace(partial, stamp)  # last, so an interrupted drop is done again next time
    except OSError:
        pass
    return True
