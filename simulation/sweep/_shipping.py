"""Conveyor's own code, zipped and shipped to a cluster's executors, so workers need not install it.

Spark's Python workers on a cluster import ``conveyor.simulation.sweep._rows`` to run a task;
without conveyor installed there they fail with ``ModuleNotFoundError: No module named 'conveyor'``.
``code_archive`` zips the package tree the driver imports (an editable install's links followed,
so the real files go in) and ``ship_code`` hands it to ``SparkContext.addPyFile``, with any
``--py-files`` of the user's own (scenario modules). The workers still need the same Python minor
version and conveyor's third-party dependencies (docs/spark.md, "Running on a cluster").
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

PACKAGE = "conveyor"
SHIPPED_SUFFIXES = (".py", ".typed")
"""The files of the package tree that go into the archive: the modules and their ``py.typed`` markers."""
STALE_ARCHIVE_S = 24 * 3600.0
"""An older archive unused this long is removed when a new one is written (a day: longer than any sweep)."""
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
"""Every entry's timestamp, so the same code gives the same bytes (and the same archive name)."""


def package_files(package: str = PACKAGE) -> Iterator[tuple[str, Path]]:
    """Each file of ``package`` as (name inside the archive, real path), from every folder of its ``__path__``.

    ``conveyor`` is a namespace package; in an editable (strict) install its folders hold links to
    the sources, which are followed, so the archive holds the files themselves.
    """
    module = __import__(package)
    seen: set[str] = set()
    for root in module.__path__:
        base = Path(root)
        for folder, directories, files in os.walk(base, followlinks=True):
            directories[:] = sorted(name for name in directories if name != "__pycache__")
            for name in sorted(files):
                if not name.endswith(SHIPPED_SUFFIXES):
                    continue
                inside = "/".join((package, *Path(folder, name).relative_to(base).parts))
                if inside not in seen:
                    seen.add(inside)
                    yield inside, Path(folder, name).resolve()


def archive_bytes(package: str = PACKAGE) -> bytes:
    """The zip of ``package``: its files plus an entry per folder (zipimport finds namespace packages by those)."""
    buffer = io.BytesIO()
    folders: set[str] = set()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for inside, real in package_files(package):
            parts = inside.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                folder = "/".join(parts[:depth]) + "/"
                if folder not in folders:
                    folders.add(folder)
                    archive.writestr(zipfile.ZipInfo(folder, _FIXED_TIME), b"")
            entry = zipfile.ZipInfo(inside, _FIXED_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, real.read_bytes())
    return buffer.getvalue()


def code_archive(folder: Path | None = None, package: str = PACKAGE) -> Path:
    """Write ``package``'s zip as ``FOLDER/conveyor-<content hash>.zip`` (kept when it is already there).

    The name changes with the code, so a SparkContext never sees two archives under one name.
    ``folder`` defaults to a per-user folder in the temporary directory. Using an archive refreshes
    its time; the folder's other archives unused for ``STALE_ARCHIVE_S`` are removed, so editing
    the code between sweeps does not pile up zips (a recent one may still serve a running sweep).
    """
    data = archive_bytes(package)
    folder = folder or Path(tempfile.gettempdir()) / f"conveyor-spark-code-{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{package}-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not target.exists() or target.read_bytes() != data:
        partial = target.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(data)
        partial.replace(target)
    else:
        target.touch()
    _remove_stale_archives(folder, package, keep=target)
    return target


def _remove_stale_archives(folder: Path, package: str, keep: Path) -> None:
    """Delete ``package``'s archives in ``folder`` other than ``keep`` not modified for ``STALE_ARCHIVE_S``.

    "Now" is ``keep``'s time, just written or touched: the file system's clock, not this process's.
    """
    now = keep.stat().st_mtime
    for old in folder.glob(f"{package}-*.zip"):
        if old == keep:
            continue
        with contextlib.suppress(FileNotFoundError):  # another driver removed it first
            if now - old.stat().st_mtime > STALE_ARCHIVE_S:
                old.unlink()


def check_py_files(py_files: Sequence[Path]) -> tuple[Path, ...]:
    """The user's ``--py-files`` as absolute paths.

    Raises:
        ValueError: a path that is not an existing ``.py``, ``.zip`` or ``.egg`` file, named.
    """
    checked = []
    for path in py_files:
        if not path.is_file() or path.suffix not in (".py", ".zip", ".egg"):
            msg = f"--py-files: {path} is not an existing .py, .zip or .egg file"
            raise ValueError(msg)
        checked.append(path.resolve())
    return tuple(checked)


def ship_code(spark: SparkSession, py_files: Sequence[Path] = (), *, conveyor: bool | None = None) -> Path | None:
    """Give the executors conveyor's code (``conveyor``: default, when the master is not local) and ``py_files``.

    The driver keeps importing its own installed conveyor: the archive's entry that ``addPyFile``
    puts on the driver's ``sys.path`` is taken off again. Returns the archive shipped, if any.

    Raises:
        ValueError: a ``py_files`` entry that is not an existing .py, .zip or .egg file.
    """
    context = spark.sparkContext
    user_files = check_py_files(py_files)
    master = context.master or ""
    if conveyor is None:
        conveyor = not (master == "local" or master.startswith("local["))
    archive = None
    if conveyor:
        archive = code_archive()
        before = list(sys.path)
        context.addPyFile(str(archive))
        sys.path[:] = [entry for entry in sys.path if entry in before or not entry.endswith(archive.name)]
    for path in user_files:
        context.addPyFile(str(path))
    return archive
