"""The README's example runs as written, and the demo does what it says."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent


def test_readme_example_runs_as_written() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) == 1
    assert len(blocks[0].strip().splitlines()) <= 45
    exec(compile(blocks[0], "README.md", "exec"), {"__name__": "readme"})


def test_readme_names_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text


def test_demo_agrees_across_backends_and_replays() -> None:
    from conveyor.cli._demo import run_demo

    buffer = io.StringIO()
    run_demo(items=40, workers=3, seed=5, console=Console(file=buffer, width=200))
    output = buffer.getvalue()
    assert "identical trace" in output
    digests = set(re.findall(r"│ \d+\s+│ ([0-9a-f]{12}) │", output))
    assert len(digests) == 1, output
