"""Every code block of docs/guides/ runs as the guide says, so a guide a user follows cannot rot.

A block is marked by an HTML comment on the line before its fence (invisible on GitHub); an
unmarked block fails the test, so no new block goes untested by accident:

- ``<!-- test: run -->``: a complete Python program, run in a subprocess in the guide's folder;
- ``<!-- test: file NAME -->``: written to ``NAME`` in that folder, for the blocks after it;
- ``<!-- test: append NAME -->``: added at the end of ``NAME`` (a module shown in parts);
- ``<!-- test: edit NAME -->``: Python whose top-level classes and functions replace the ones of
  the same names in ``NAME`` (a guide's "fix the bug" step);
- ``<!-- test: pytest NAME -->``: a test file, written to ``NAME`` and run by pytest;
- ``<!-- test: shell -->``: shell commands (``conveyor`` is the suite's), run by ``bash -e``;
- ``<!-- test: serve -->``: a shell block or a compose file; its ``conveyor serve`` command runs, on a free loopback
  port and a folder of the test's, for the blocks after it (``PUBSUB_EMULATOR_HOST`` set to it),
  and must drain and exit 0 on SIGTERM at the end;
- ``<!-- test: fragment -->``: Python that only has to compile; ``<!-- test: skip -->``: not code.

Options after the kind: ``exit=N`` (the status expected, 0 by default), ``expect=TEXT`` (in its
output; shell-quoted), ``timeout=S`` and ``slow``
(run only by the slow variant of the test, which runs the whole guide).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDES = ROOT / "docs" / "guides"
BIN = Path(sys.executable).parent
KINDS = ("run", "file", "append", "edit", "pytest", "shell", "serve", "fragment", "skip")
BLOCK = re.compile(r"(?:<!-- test: (?P<marker>[^>]*?) -->\n)?```(?P<lang>[\w-]*)\n(?P<code>.*?)```", re.DOTALL)
DEFAULT_TIMEOUT_S = 180.0
SERVE_WAIT_S = 60.0


@attrs.frozen
class Block:
    """One fenced block of a guide and what its marker asks."""

    guide: str
    line: int
    lang: str
    code: str
    kind: str
    target: str = ""
    exit_status: int = 0
    timeout_s: float = DEFAULT_TIMEOUT_S
    slow: bool = False
    expect: str = ""

    @property
    def where(self) -> str:
        return f"{self.guide}:{self.line}"


def parse_marker(guide: str, line: int, lang: str, code: str, marker: str | None) -> Block:
    """The block, with the options its marker names; an unmarked or misspelt marker is an error."""
    if marker is None:
        msg = f"{guide}:{line}: a ```{lang} block without a '<!-- test: KIND -->' marker (one of {', '.join(KINDS)})"
        raise ValueError(msg)
    kind, *words = shlex.split(marker)
    if kind not in KINDS:
        msg = f"{guide}:{line}: unknown marker kind {kind!r}; expected one of {', '.join(KINDS)}"
        raise ValueError(msg)
    options: dict[str, object] = {}
    for word in words:
        if word == "slow":
            options["slow"] = True
        elif word.startswith("exit="):
            options["exit_status"] = int(word.removeprefix("exit="))
        elif word.startswith("expect="):
            options["expect"] = word.removeprefix("expect=")
        elif word.startswith("timeout="):
            options["timeout_s"] = float(word.removeprefix("timeout="))
        elif "target" not in options and kind in ("file", "append", "edit", "pytest"):
            options["target"] = word
        else:
            msg = f"{guide}:{line}: unknown marker option {word!r} (slow, exit=N, timeout=S, or a file name)"
            raise ValueError(msg)
    if kind in ("file", "append", "edit", "pytest") and "target" not in options:
        msg = f"{guide}:{line}: '{kind}' needs a file name"
        raise ValueError(msg)
    return Block(guide, line, lang, code, kind, **options)  # type: ignore[arg-type]


def guide_blocks(path: Path) -> list[Block]:
    """Every fenced block of a guide, in order."""
    text = path.read_text(encoding="utf-8")
    return [
        parse_marker(path.name, text.count("\n", 0, match.start("code")), match["lang"], match["code"], match["marker"])
        for match in BLOCK.finditer(text)
    ]


def guide_names() -> list[str]:
    return sorted(path.name for path in GUIDES.glob("*.md") if path.name != "README.md")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def replace_definitions(source: str, replacement: str) -> str:
    """``source`` with each top-level class or function that ``replacement`` defines swapped for its new text."""
    new = {node.name: ast.get_source_segment(replacement, node) for node in ast.parse(replacement).body
           if isinstance(node, ast.ClassDef | ast.FunctionDef)}
    lines = source.splitlines(keepends=True)
    old = [node for node in ast.parse(source).body
           if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in new]
    assert {node.name for node in old} == set(new), f"edit defines {sorted(new)}, the file has {[n.name for n in old]}"
    for node in sorted(old, key=lambda n: n.lineno, reverse=True):
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        assert node.end_lineno is not None
        lines[first - 1:node.end_lineno] = [f"{new[node.name]}\n"]
    return "".join(lines)


class GuideRun:
    """Runs a guide's blocks in order in one folder, with the suite's ``conveyor`` first on PATH."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.env.pop("PUBSUB_EMULATOR_HOST", None)
        self.servers: list[subprocess.Popen[str]] = []

    def check(self, block: Block, command: list[str]) -> None:
        result = subprocess.run(command, cwd=self.folder, env=self.env, capture_output=True, text=True,
                                timeout=block.timeout_s, check=False)
        assert result.returncode == block.exit_status, (
            f"{block.where}: exit status {result.returncode}, expected {block.exit_status}\n"
            f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
        )
        assert block.expect in result.stdout, f"{block.where}: {block.expect!r} not in its output:\n{result.stdout}"

    def run(self, block: Block) -> None:
        path = self.folder / block.target if block.target else self.folder / f"block_{block.line}.py"
        if block.kind == "file":
            path.write_text(block.code, encoding="utf-8")
        elif block.kind == "append":
            path.write_text(path.read_text(encoding="utf-8") + "\n\n" + block.code, encoding="utf-8")
        elif block.kind == "edit":
            path.write_text(replace_definitions(path.read_text(encoding="utf-8"), block.code), encoding="utf-8")
        elif block.kind == "fragment":
            compile(block.code, block.where, "exec")
        elif block.kind == "run":
            path.write_text(block.code, encoding="utf-8")
            self.check(block, [sys.executable, path.name])
        elif block.kind == "pytest":
            path.write_text(block.code, encoding="utf-8")
            self.check(block, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path.name])
        elif block.kind == "shell":
            self.check(block, ["bash", "-e", "-o", "pipefail", "-c", block.code])
        elif block.kind == "serve":
            self.serve(block)

    def serve(self, block: Block) -> None:
        """Start the ``conveyor serve`` a block runs, on loopback, and point the next blocks at it.

        A server started earlier by the guide is stopped first (SIGTERM, exit 0); every server of a
        guide keeps its data in the same folder, so a later one shows what ``--data-dir`` kept.
        """
        self.stop_servers()
        found = re.search(r"(conveyor serve [^\"'\n&]*)", block.code)
        assert found, f"{block.where}: no 'conveyor serve' command in the compose file"
        words = shlex.split(found[1])
        port = free_port()
        words[words.index("--host-port") + 1] = f"127.0.0.1:{port}"
        words[words.index("--data-dir") + 1] = str(self.folder / "pubsub-data")
        log = self.folder / f"serve-{port}.log"
        with log.open("w") as sink:
            server = subprocess.Popen([str(BIN / "conveyor"), *words[1:]], cwd=self.folder, env=self.env,
                                      stdout=sink, stderr=subprocess.STDOUT, text=True)
        self.servers.append(server)
        deadline = time.monotonic() + SERVE_WAIT_S
        while "listening on" not in log.read_text():  # the server says when it listens
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{block.where}: conveyor serve did not listen (exit {server.poll()}): {log.read_text()}")
            time.sleep(0.05)
        self.env["PUBSUB_EMULATOR_HOST"] = f"127.0.0.1:{port}"

    def stop_servers(self) -> None:
        """SIGTERM drains each server; it must exit 0."""
        servers, self.servers = self.servers, []
        for server in servers:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
            try:
                code = server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                raise
            assert code == 0, f"conveyor serve exited {code} after SIGTERM"


@contextmanager
def guide_run(folder: Path) -> Iterator[GuideRun]:
    run = GuideRun(folder)
    try:
        yield run
    finally:
        run.stop_servers()


def run_guide(name: str, folder: Path, *, slow: bool) -> None:
    with guide_run(folder) as runner:
        for block in guide_blocks(GUIDES / name):
            if block.slow and not slow:
                continue
            runner.run(block)


def test_there_are_guides_and_the_readme_links_each() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(guide_names()) >= 4
    for name in guide_names():
        assert f"(docs/guides/{name})" in readme, f"README.md does not link docs/guides/{name}"


@pytest.mark.parametrize("name", guide_names())
def test_every_block_of_a_guide_is_marked(name: str) -> None:
    blocks = guide_blocks(GUIDES / name)
    assert blocks, f"{name} has no code"
    assert any(block.kind in ("run", "pytest", "shell") for block in blocks), f"{name} runs nothing"


@pytest.mark.parametrize("name", guide_names())
def test_guide_runs_as_written(name: str, tmp_path: Path) -> None:
    run_guide(name, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in guide_names() if any(b.slow for b in guide_blocks(GUIDES / n))])
def test_guide_runs_as_written_with_its_slow_blocks(name: str, tmp_path: Path) -> None:
    run_guide(name, tmp_path, slow=True)


def test_an_unmarked_block_or_a_bad_marker_is_refused() -> None:
    with pytest.raises(ValueError, match="without a '<!-- test: KIND -->' marker"):
        parse_marker("g.md", 3, "python", "x = 1\n", None)
    with pytest.raises(ValueError, match="unknown marker kind 'runn'"):
        parse_marker("g.md", 3, "python", "x = 1\n", "runn")
    with pytest.raises(ValueError, match="'file' needs a file name"):
        parse_marker("g.md", 3, "python", "x = 1\n", "file")
    block = parse_marker("g.md", 3, "sh", "false\n", "shell exit=1 timeout=5 slow")
    assert (block.exit_status, block.timeout_s, block.slow) == (1, 5.0, True)


def test_a_failing_block_fails_the_guide(tmp_path: Path) -> None:
    with guide_run(tmp_path) as runner:
        runner.run(parse_marker("g.md", 1, "sh", "true\n", "shell"))
        with pytest.raises(AssertionError, match="exit status 1, expected 0"):
            runner.run(parse_marker("g.md", 2, "python", "raise SystemExit(1)\n", "run"))


def test_an_edit_replaces_the_definitions_it_names() -> None:
    source = "import x\n\n\nclass A:\n    v = 1\n\n\ndef f():\n    return 1\n\n\nB = A\n"
    edited = replace_definitions(source, "def f():\n    return 2\n")
    assert edited == "import x\n\n\nclass A:\n    v = 1\n\n\ndef f():\n    return 2\n\n\nB = A\n"
    with pytest.raises(AssertionError, match="edit defines"):
        replace_definitions(source, "def g():\n    pass\n")
