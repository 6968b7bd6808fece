"""``pip install .`` and ``pip install -e .`` both give ``import conveyor.runtime`` from any directory."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conveyor.runtime.extras import EXTRAS

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


# The light install: `pip install conveyor` without extras (pyproject's optional-dependencies; docs/install.md).

HEAVY = ("pyspark", "py4j", "numpy", "matplotlib", "grpc", "grpc_status", "google", "kazoo", "opentelemetry", "pandas")
"""Top-level modules that only the extras bring (and what they pull in): none may load without them."""
LIGHT_PACKAGES = (
    "conveyor.runtime", "conveyor.runtime.extras", "conveyor.actors.broker", "conveyor.actors.storage",
    "conveyor.actors.subscriber", "conveyor.actors.pubsub", "conveyor.actors.zookeeper",
    "conveyor.actors.transactions", "conveyor.actors.metrics", "conveyor.simulation", "conveyor.simulation.checkers",
    "conveyor.simulation.scenarios", "conveyor.simulation.sweep", "conveyor.cli",
)
"""What imports without any extra: every package (the pubsub, zookeeper and sweep ones export their heavy
names lazily)."""
BLOCK_HEAVY = f"import sys\nfor name in {HEAVY!r}:\n    sys.modules[name] = None\n"
"""Python that makes every heavy module unimportable in this process, as if its extra were not installed."""


def _run_light(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter of this venv with every extra's modules blocked."""
    return subprocess.run(
        [sys.executable, "-c", BLOCK_HEAVY + code, *args], capture_output=True, text=True, timeout=120, check=False
    )


LAZY_NAMES = {
    "conveyor.actors.pubsub.PubSubServer": "pubsub",
    "conveyor.actors.pubsub.subscribe_remote": "pubsub",
    "conveyor.actors.zookeeper.KazooSession": "zookeeper",
    "conveyor.simulation.sweep.execute_sweep": "spark",
    "conveyor.actors.metrics.PrometheusEndpoint": "metrics",
}
"""Public names that need an extra, each with its extra."""


def test_every_package_and_the_pytest_plugins_import_without_any_extra() -> None:
    """And a name that needs a missing extra raises ``MissingExtra`` naming it."""
    done = _run_light(
        f"import importlib, pytest\nfor name in {LIGHT_PACKAGES!r}:\n    importlib.import_module(name)\n"
        "import conveyor.actors.pubsub.pytest_plugin, conveyor.actors.zookeeper.pytest_plugin\n"
        f"print(sorted(name for name in sys.modules if name.partition('.')[0] in {HEAVY!r} and sys.modules[name]))\n"
        f"for name in {list(LAZY_NAMES)!r}:\n"
        "    package, _, attribute = name.rpartition('.')\n"
        "    try:\n        getattr(importlib.import_module(package), attribute)\n"
        "    except ImportError as error:\n        print(type(error).__name__, error)\n"
    )
    assert done.returncode == 0, done.stderr
    loaded, *errors = done.stdout.splitlines()
    assert loaded == "[]"
    assert len(errors) == len(LAZY_NAMES)
    for error, (name, extra) in zip(errors, LAZY_NAMES.items(), strict=True):
        assert error.startswith(f"MissingExtra {name} needs the '{extra}' extra: pip install 'conveyor[{extra}]' (")
        assert EXTRAS[extra][0].partition(".")[0] in error  # the missing distribution, by its top-level module


def test_the_light_packages_load_no_heavy_module_even_when_installed() -> None:
    """Not only importable without the extras: importing them does not load the extras' modules."""
    code = (
        f"import importlib, sys\nfor name in {LIGHT_PACKAGES!r}:\n    importlib.import_module(name)\n"
        f"print(sorted({{name.partition('.')[0] for name in sys.modules}} & set({HEAVY!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


NEEDS_EXTRA = {
    "sweep --seeds 1": "spark",
    "analyze trace.jsonl --engine spark": "spark",
    "serve --host-port 127.0.0.1:0": "pubsub",
    "bench pubsub": "pubsub",
    "bench sweep": "spark",
    "bench storage": "plots",
}
"""Commands that need an extra, each with its extra."""
CONVEYOR = (
    "import contextlib, io, json\nfrom conveyor.cli import main\nsys.argv[0] = 'conveyor'\nresults = []\n"
    "for command in sys.argv[1:]:\n    sys.argv[1:] = command.split()\n    err = io.StringIO()\n"
    "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):\n"
    "        try:\n            main()\n        except SystemExit as done:\n"
    "            results.append((done.code, err.getvalue()))\n"
    "print(json.dumps(results))"
)
"""Python that runs each ``conveyor`` command line given after ``-c`` and prints [exit code, stderr] of each."""


def test_a_command_that_needs_a_missing_extra_says_which_and_exits_1() -> None:
    done = _run_light(CONVEYOR, "--help", *NEEDS_EXTRA)
    assert done.returncode == 0, done.stderr
    (help_code, _), *refusals = json.loads(done.stdout)
    assert help_code == 0
    for (code, stderr), (command, extra) in zip(refusals, NEEDS_EXTRA.items(), strict=True):
        name = " ".join(command.split()[: 2 if command.startswith("bench") else 1])
        assert code == 1
        assert stderr.startswith(f"Error: conveyor {name} needs the '{extra}' extra: pip install 'conveyor[{extra}]'")
        assert "Traceback" not in stderr


def test_simulate_runs_without_any_extra() -> None:
    done = _run_light("from conveyor.cli import main\nsys.argv[0] = 'conveyor'\nmain()", "simulate", "pubsub-front",
                      "--seeds", "2")
    assert done.returncode == 0, done.stderr
    assert "All 2 runs passed every checker." in done.stdout


def test_analyze_judges_a_small_trace_without_any_extra(tmp_path: Path) -> None:
    """Small traces are judged in process: no Spark, so no ``spark`` extra either."""
    from conveyor.runtime import write_jsonl
    from conveyor.simulation.scenarios import run_scenario

    trace = tmp_path / "fairness.jsonl"
    write_jsonl(run_scenario("fairness", 1).sim.trace, trace)
    done = _run_light("from conveyor.cli import main\nsys.argv[0] = 'conveyor'\nmain()", "analyze", str(trace))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "/queue" in done.stdout and "in process." in done.stdout and "VIOLATED" not in done.stdout


LIGHT_VENV_MAX_MB = 120
"""The light venv measured 64 MB (26 of them an empty venv's pip and setuptools); the full one, 792 MB."""


def _megabytes(folder: Path) -> float:
    """Bytes of the files under ``folder`` (links not followed), in MB (10**6)."""
    return sum(path.lstat().st_size for path in folder.rglob("*") if not path.is_dir()) / 1e6


@pytest.mark.slow
def test_a_fresh_venv_with_the_light_install(tmp_path: Path) -> None:
    """``pip install conveyor`` in a new venv: small, no extra's package, the light imports and commands work.

    About 20 s (a venv, a wheel built from this tree, five dependencies from pip's index): ``make test-light``.
    """
    venv = tmp_path / "light"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python, conveyor = venv / "bin" / "python", venv / "bin" / "conveyor"
    installed = subprocess.run(
        [python, "-m", "pip", "install", "-q", str(ROOT)], capture_output=True, text=True, check=False, timeout=600
    )
    assert installed.returncode == 0, installed.stderr
    size = _megabytes(venv)
    print(f"\nlight venv (python -m venv + pip install .): {size:.0f} MB")
    assert size < LIGHT_VENV_MAX_MB

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=elsewhere, capture_output=True, text=True, check=False, timeout=300)

    imports = run(
        python, "-c",
        f"import importlib, importlib.util, sys\nfor name in {LIGHT_PACKAGES!r}:\n    importlib.import_module(name)\n"
        f"print([name for name in {HEAVY!r} if importlib.util.find_spec(name)])",
    )
    assert imports.returncode == 0, imports.stderr
    assert imports.stdout.strip() == "[]"  # no extra's package is installed, and every light package imported
    simulated = run(conveyor, "simulate", "pubsub-front", "--seeds", "2")
    assert simulated.returncode == 0, simulated.stderr
    assert "All 2 runs passed every checker." in simulated.stdout
    swept = run(conveyor, "sweep", "--seeds", "1")
    assert swept.returncode == 1
    assert swept.stderr.startswith("Error: conveyor sweep needs the 'spark' extra: pip install 'conveyor[spark]'")
    assert "Traceback" not in swept.stderr


def test_a_missing_extra_found_inside_a_command_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The net in ``main``: a lazy name touched deep in a command, not by the command's own check."""
    from conveyor.cli import _app
    from conveyor.runtime.extras import MissingExtra

    def touches_a_lazy_name() -> None:
        raise MissingExtra("conveyor.actors.pubsub.PubSubServer", "pubsub", ("grpc",))

    monkeypatch.setattr(_app, "app", touches_a_lazy_name)
    with pytest.raises(SystemExit) as exited:
        _app.main()
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        "Error: conveyor.actors.pubsub.PubSubServer needs the 'pubsub' extra: pip install 'conveyor[pubsub]' "
        "(grpc not installed)\n"
    )
