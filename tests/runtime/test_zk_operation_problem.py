"""``zk_operation_problem``: the session protocol's edge check that both backends' session actors use."""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.runtime.lowlevel import (
    ZK_MAX_DATA_BYTES,
    ZkCheck,
    ZkCreate,
    ZkDelete,
    ZkExists,
    ZkGetChildren,
    ZkGetData,
    ZkMulti,
    ZkSetData,
    zk_operation_problem,
)

segments = st.text(st.characters(exclude_characters="/\x00", exclude_categories=["Cs"]), min_size=1,
                   max_size=8).filter(lambda s: s not in {".", ".."})
paths = st.lists(segments, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))
writes = st.one_of(
    st.builds(ZkCreate, paths, st.binary(max_size=16), st.booleans(), st.booleans()),
    st.builds(ZkDelete, paths, st.integers(-1, 10)),
    st.builds(ZkSetData, paths, st.binary(max_size=16), st.integers(-1, 10)),
    st.builds(ZkCheck, paths, st.integers(-1, 10)),
)
reads = st.one_of(st.builds(ZkGetChildren, paths, st.booleans()), st.builds(ZkGetData, paths, st.booleans()),
                  st.builds(ZkExists, paths, st.booleans()))


@given(st.one_of(writes, reads, st.builds(ZkMulti, st.lists(writes, max_size=5).map(tuple))))
def test_every_well_formed_operation_passes(operation: object) -> None:
    assert zk_operation_problem(operation) is None


@given(paths, st.sampled_from(["", "x", "//", "/", "/.", "/..", "\x00"]))
def test_a_malformed_path_is_named_wherever_it_sits(path: str, damage: str) -> None:
    bad = damage + path.lstrip("/") if damage in {"", "x"} else path + damage
    for operation, field in [
        (ZkGetData(bad), "operation.path"),
        (ZkDelete(bad), "operation.path"),
        (ZkMulti((ZkCheck("/ok", 0), ZkSetData(bad, b""))), "operation.operations[1].path"),
    ]:
        problem = zk_operation_problem(operation)
        assert problem is not None and problem.startswith(field), (operation, problem)


def test_each_field_is_named_with_what_it_allows() -> None:
    cases: list[tuple[object, str]] = [
        (ZkCreate("/a", "text"), "operation.data must be bytes, got str"),  # type: ignore[arg-type]
        (ZkCreate("/a", b"x" * (ZK_MAX_DATA_BYTES + 1)), "operation.data is 1048576 bytes"),
        (ZkCreate("/a", ephemeral=1), "operation.ephemeral must be a bool"),  # type: ignore[arg-type]
        (ZkDelete("/a", version=-2), "operation.version must be an int >= -1, got -2"),
        (ZkSetData("/a", b"", version=True), "operation.version must be an int >= -1"),
        (ZkExists("/a", watch="yes"), "operation.watch must be a bool"),  # type: ignore[arg-type]
        (ZkMulti([ZkCheck("/a", 0)]), "operation.operations must be a tuple"),  # type: ignore[arg-type]
        (ZkMulti((ZkCreate("/a", make_parents=True),)), "operation.operations[0].make_parents must be False"),
        (ZkMulti((ZkGetData("/a"),)), "operation.operations[0] must be a ZkCreate"),  # type: ignore[arg-type]
        (ZkMulti(tuple(ZkSetData(f"/n{i}", b"x" * 400_000) for i in range(3))), "operation holds"),
        (b"/a", "operation must be a ZkCreate"),
    ]
    for operation, words in cases:
        problem = zk_operation_problem(operation)
        assert problem is not None and problem.startswith(words), (operation, problem)


def test_a_sequential_create_may_end_with_a_slash_and_only_it() -> None:
    assert zk_operation_problem(ZkCreate("/queue/", sequential=True)) is None
    assert zk_operation_problem(ZkCreate("/queue/")) is not None
    assert zk_operation_problem(ZkGetChildren("/")) is None


def _well_formed(path: str, *, trailing_slash: bool) -> bool:
    """ZooKeeper's path rules as the docstrings state them, written plainly."""
    if not path.startswith("/") or "\x00" in path:
        return False
    if path == "/":
        return True
    if trailing_slash and path.endswith("/"):
        return all(part not in {".", ".."} for part in path.split("/")[1:])
    parts = path.split("/")[1:]
    return all(parts) and all(part not in {".", ".."} for part in parts)


@given(st.text(st.sampled_from("/.a\x00"), max_size=8), st.booleans())
def test_the_quick_path_check_agrees_with_the_rules(path: str, sequential: bool) -> None:
    """The check returns early for a plainly good path; any other path goes through every rule."""
    problem = zk_operation_problem(ZkCreate(path, sequential=sequential))
    assert (problem is None) == _well_formed(path, trailing_slash=sequential), problem



bad_values = {
    "path": st.one_of(st.text(st.sampled_from("/.a\x00"), max_size=6), st.integers(), st.none(),
                      paths.map(lambda path: path + "/"), paths.map(lambda path: path.replace("/", "//", 1)),
                      paths.map(lambda path: path + "/."), paths.map(lambda path: "/.." + path)),
    "data": st.one_of(st.text(max_size=2), st.none(), st.just(b"x" * (ZK_MAX_DATA_BYTES + 1))),
    "ephemeral": st.one_of(st.integers(0, 1), st.none()),
    "sequential": st.one_of(st.integers(0, 1), st.none()),
    "make_parents": st.one_of(st.just(True), st.integers(0, 1), st.none()),
    "version": st.one_of(st.integers(-5, -2), st.text(max_size=1), st.none(), st.booleans(), st.floats(-1, 1)),
}


@st.composite
def writes_with_a_bad_field(draw: st.DrawFn) -> ZkCreate | ZkDelete | ZkSetData | ZkCheck:
    """A well-formed write with (mostly) one field given a messy value."""
    write = draw(writes)
    fields = [field.name for field in attrs.fields(type(write))]
    for name in draw(st.lists(st.sampled_from(fields), max_size=2, unique=True)):
        write = attrs.evolve(write, **{name: draw(bad_values[name])})
    return write


@settings(max_examples=300)
@given(writes_with_a_bad_field())
def test_a_write_inside_a_multi_is_judged_as_alone(write: ZkCreate | ZkDelete | ZkSetData | ZkCheck) -> None:
    """A multi's writes go through a quick check first; it never lets through what the full rules refuse.

    Alone or in a multi a write meets the same rules, but for ``make_parents`` (refused in a multi)."""
    alone = zk_operation_problem(write)
    in_multi = zk_operation_problem(ZkMulti((write,)))
    if isinstance(write, ZkCreate) and write.make_parents is True:
        assert in_multi is not None
    else:
        assert (in_multi is None) == (alone is None), (alone, in_multi)
        if alone is not None:
            assert in_multi == alone.replace("operation.", "operation.operations[0].", 1)
