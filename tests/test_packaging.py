"""``pip install .`` and ``pip install -e .`` both give ``import conveyor.runtime`` from any directory."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runtime", "actors", "simulation", "cli", "benchmarks")


def _import_from(directory: Path, extra_path: Path | None = None) -> str:
    env = {"PATH": "/usr/bin:/bin"}
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    code = "import conveyor.runtime, conveyor.actors, conveyor.simulation; print(conveyor.runtime.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=directory, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_editable_install_imports_from_any_directory(tmp_path: Path) -> None:
    location = _import_from(tmp_path)
    assert location.endswith("conveyor/runtime/__init__.py")


def test_wheel_maps_the_top_level_folders_into_the_conveyor_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("conveyor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in PACKAGES:
        assert f"conveyor/{package}/__init__.py" in names
        assert f"conveyor/{package}/py.typed" in names
    assert not any(name.startswith(("runtime/", "simulation/", "actors/", "tests/")) for name in names)
    assert "conveyor/__init__.py" not in names  # a namespace package, as PLATFORM.md prescribes
    # Installed (unpacked) elsewhere, it imports from an unrelated directory.
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _import_from(elsewhere, target).startswith(str(target))
