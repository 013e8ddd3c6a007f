"""numba's cache of compiled kernels, kept true to the package's sources.

numba checks a cached kernel against its own source file only (its modification time and size). A
kernel that calls a kernel of another file, or reads a constant from it, keeps its compiled copy of
the callee when only the callee's file changes: after `search.tree.backup` was edited, the searches
in `search.network` still ran the old `backup`. So the package records a hash of the sources kernels
can read (`kernel_sources`) beside the cache, and when they differ from the recorded ones it drops
every cached kernel before any is loaded (`drmario/__init__.py` calls `drop_stale_kernels` first;
the check takes about 2 ms). A fresh checkout or install compiles everything anyway; only a changed
source costs a recompile. The cache is looked for where numba keeps it (`cache_folder`): the
package's `__pycache__` folders, or NUMBA_CACHE_DIR when that is set, or numba's user-wide cache
where the package cannot be written.

Not covered: a process that imported the sources before an edit (a notebook kernel left running) and
compiles a kernel for the first time after another process dropped the cache saves the old code
under the new stamp. Restart such kernels after editing the package, or delete the cached kernels
(``find drmario -name '*.nb[ic]' -delete``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

PACKAGE = Path(os.path.abspath(__file__)).parent  # as imported, links unresolved: numba names its caches so
STAMP_NAME = "sources.sha256"  # beside the cached kernels of the package's top folder


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


def cache_folder(folder: Path) -> Path:
    """Where numba keeps the compiled kernels of the modules in `folder`, chosen as numba chooses (its
    locators, in numba's order): under NUMBA_CACHE_DIR when that is set, else the folder's `__pycache__`
    when it can be written, else numba's user-wide cache."""
    from numba.core.caching import InTreeCacheLocator, UserProvidedCacheLocator, UserWideCacheLocator

    source = str(next(folder.glob("*.py")))  # numba places a kernel's cache by its file's folder
    for locator in (UserProvidedCacheLocator, InTreeCacheLocator, UserWideCacheLocator):
        found = locator.from_function(cache_folder, source)
        if found is not None:
            return Path(found.get_cache_path())
    raise OSError(f"numba has no place to cache the kernels of {folder}")


def drop_stale_kernels(package: Path = PACKAGE) -> bool:
    """Delete the cached kernels (*.nbi, *.nbc) of the modules under `package` unless its sources are
    the ones they were compiled from; return whether any sources had changed. Another process loading
    a kernel while it is dropped only recompiles it (numba treats a missing cache file as a miss)."""
    digest = sources_digest(package)
    try:
        stamp = cache_folder(package) / STAMP_NAME
    except OSError:
        return True  # numba can cache nothing either
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass
    try:
        for folder in sorted({path.parent for path in package.rglob("*.py")}):
            cache = cache_folder(folder)
            for cached in [*cache.glob("*.nbi"), *cache.glob("*.nbc")]:
                cached.unlink(missing_ok=True)
        partial = stamp.with_name(f"{STAMP_NAME}.{os.getpid()}.tmp")
        partial.write_text(digest)
        os.replace(partial, stamp)  # last, so an interrupted drop is done again next time
    except OSError:
        pass
    return True
