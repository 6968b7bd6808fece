"""tools/mutants.py: mutants compile and change one thing, samples replay, the tree is never touched, kills count."""

from __future__ import annotations

import ast
import hashlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import mutants  # tools/ is not a package: it is put on the path above

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = "actors/broker/_entries.py"


def _tree_digest() -> str:
    """A hash of every code file of the working tree, to show a run left it as it was."""
    digest = hashlib.sha256()
    for folder in mutants.FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            digest.update(str(path).encode() + path.read_bytes())
    return digest.hexdigest()


def test_every_mutant_compiles_and_changes_exactly_its_span() -> None:
    source = (ROOT / ENTRIES).read_bytes()
    found = mutants.mutants_of(ENTRIES)
    assert len(found) > 100
    assert len({mutant.ident for mutant in found}) == len(found), "mutant ids must be unique"
    operators = {mutant.operator for mutant in found}
    assert {"compare", "arith", "constant", "boolean", "boolop", "negate", "remove", "return"} <= operators
    original = ast.dump(ast.parse(source))
    for mutant in found[::10]:  # every tenth: each parse of the whole module costs milliseconds
        mutated = mutant.source(source)
        assert mutated[: mutant.start] == source[: mutant.start]
        assert mutated.count(b"\n") == source.count(b"\n"), f"{mutant.ident} moved later lines"
        assert ast.dump(ast.parse(mutated)) != original, f"{mutant.ident} changes nothing"


def test_input_validation_and_docstrings_are_left_alone() -> None:
    source = (ROOT / ENTRIES).read_text()
    lines = source.splitlines()
    for mutant in mutants.mutants_of(ENTRIES):
        line = lines[mutant.line - 1].strip()
        assert not line.startswith(("raise ", "msg = ", '"""', "import ", "from ")), mutant.ident


def test_a_sample_is_deterministic_and_spread_over_every_module() -> None:
    modules = ("actors/pubsub/_ackid.py", "runtime/_supervision.py", "actors/subscriber/_flow.py")
    first = mutants.sample(modules, 6, seed=3)
    again = mutants.sample(modules, 6, seed=3)
    other = mutants.sample(modules, 6, seed=4)
    assert [m.ident for m in first] == [m.ident for m in again]
    assert [m.ident for m in first] != [m.ident for m in other]
    assert sorted(m.path for m in first) == sorted(modules * 2)
    assert len(mutants.sample(modules, 0, seed=3)) == sum(len(mutants.mutants_of(path)) for path in modules)


def test_every_reviewed_equivalent_or_unreachable_mutant_still_exists() -> None:
    reviewed = {**mutants.equivalents(), **mutants.unreachables()}
    assert not set(mutants.equivalents()) & set(mutants.unreachables()), "a mutant is in one list only"
    paths = {ident.split(":", 1)[0] for ident in reviewed}
    every = {mutant.ident for path in paths for mutant in mutants.mutants_of(path)}
    stale = sorted(set(reviewed) - every)
    assert stale == [], "tools/mutants_equivalent.py names mutants that no longer exist"
    assert all(why.strip() for why in reviewed.values()), "each reviewed mutant says why"


def test_unreachable_mutants_are_scored_apart_and_counted_as_survivors_in_the_second_score() -> None:
    reached = mutants.sample(("runtime/_supervision.py",), 2, seed=3)
    killed = mutants.Verdict(True, "failed", 1.0, "FAILED x seed 0 (random, faults none)")
    survived = mutants.Verdict(False, "survived", 1.0)
    outcomes = [mutants.Outcome(reached[0], sweep=killed), mutants.Outcome(reached[1], sweep=survived),
                mutants.Outcome(reached[1], unreachable="a query no actor calls")]
    lines = mutants.summary(outcomes, 60.0)
    assert "1 unreachable" in lines[0]
    assert any(line.startswith("killed by the sweep: 1/2 = 50.0%") for line in lines)
    assert any(line.startswith("counting the unreachable as survivors: 1/3 = 33.3%") for line in lines)
    assert "unreachable: a query no actor calls" in "\n".join(mutants.table(outcomes))


def test_the_tests_side_runs_the_package_or_the_modules_own_file() -> None:
    assert mutants.test_target(ENTRIES, "package") == "tests/actors/broker"
    assert mutants.test_target(ENTRIES, "quick") == "tests/actors/broker/test_entries.py"
    assert mutants.test_target("actors/broker/_queue.py", "quick") == "tests/actors/broker"
    assert mutants.test_target(ENTRIES, "none") is None
    assert mutants.module_name("runtime/_cell.py") == "conveyor.runtime._cell"


def test_the_frozen_tree_is_a_copy_that_imports_as_conveyor() -> None:
    with mutants.frozen_tree() as tree:
        assert (tree / ENTRIES).read_bytes() == (ROOT / ENTRIES).read_bytes()
        assert (tree / "site" / "conveyor" / ENTRIES).resolve() == (tree / ENTRIES).resolve()
        assert (tree / "tests" / "conftest.py").is_file()
        assert (tree / "pyproject.toml").is_file()
    assert not tree.exists()


def test_bad_arguments_name_the_option() -> None:
    with pytest.raises(SystemExit):
        mutants.main(["--count", "-1"])
    with pytest.raises(SystemExit):
        mutants.main(["--modules", "actors/broker/nothing.py", "--list"])


@pytest.mark.slow
def test_a_mutant_is_killed_by_its_tests_and_the_tree_is_untouched() -> None:
    """A sample of two with the module's own tests (also make test-slow's run of the tool): a real kill."""
    before = _tree_digest()
    plain = next(m for m in mutants.mutants_of(ENTRIES) if m.operator == "remove" and "append" in m.change)
    with mutants.frozen_tree() as tree:
        times = mutants.baseline(tree, [ENTRIES], "quick")
        outcome = mutants.judge(tree, plain, times, factor=4.0, tests="quick")
    assert outcome.sweep is not None and outcome.tests is not None
    assert outcome.tests.killed, outcome.tests
    assert outcome.sweep.how != "not imported"
    assert _tree_digest() == before
    lines = mutants.summary([outcome], 1.0)
    assert lines[0].startswith("1 mutants: 0 equivalent, 0 unreachable, 1 judged")
