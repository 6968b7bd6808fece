"""``kazoo_transaction`` builds the very request kazoo's ``client.transaction()`` builds, byte for byte."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.zookeeper import kazoo_transaction
from conveyor.runtime.lowlevel import ZkCheck, ZkCreate, ZkDelete, ZkSetData, zk_operation_problem

kazoo_client = pytest.importorskip("kazoo.client")
serialization = pytest.importorskip("kazoo.protocol.serialization")
security = pytest.importorskip("kazoo.security")

segments = st.text(alphabet="abc-_.0123456789", min_size=1, max_size=6).filter(lambda part: part not in {".", ".."})
paths = st.lists(segments, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))
versions = st.integers(min_value=-1, max_value=2**31 - 1)
writes = st.one_of(
    st.builds(ZkCreate, paths, st.binary(max_size=8), st.booleans(), st.booleans()),
    st.builds(ZkDelete, paths, versions),
    st.builds(ZkSetData, paths, st.binary(max_size=8), versions),
    st.builds(ZkCheck, paths, st.integers(min_value=0, max_value=2**31 - 1)),
    # a sequential create under a folder: a trailing '/', which kazoo normalises away
    st.builds(ZkCreate, paths.map(lambda path: path + "/"), st.binary(max_size=8), st.booleans(), st.just(True)),
)


class _Client:
    """What ``TransactionRequest`` reads of a ``KazooClient``."""

    def __init__(self, chroot: str, default_acl: Any) -> None:
        self.chroot = chroot
        self.default_acl = default_acl
        self.logger = logging.getLogger("kazoo.client")


def _through_kazoo(operations: tuple[Any, ...], chroot: str, default_acl: Any) -> Any:
    request = kazoo_client.TransactionRequest(_Client(chroot, default_acl))
    for write in operations:
        match write:
            case ZkCreate():
                request.create(write.path, write.data, ephemeral=write.ephemeral, sequence=write.sequential)
            case ZkDelete():
                request.delete(write.path, write.version)
            case ZkSetData():
                request.set_data(write.path, write.data, write.version)
            case ZkCheck():
                request.check(write.path, write.version)
    return serialization.Transaction(request.operations)


@given(st.lists(writes, max_size=12).map(tuple), st.sampled_from(["", "/app", "/app/q"]),
       st.sampled_from([None, [security.make_digest_acl("u", "p", all=True)]]))
def test_the_request_is_kazoos_own(operations: tuple[Any, ...], chroot: str, default_acl: Any) -> None:
    checked = tuple(op for op in operations if zk_operation_problem(op) is None or op.path.endswith("/"))
    built = kazoo_transaction(checked, chroot, default_acl)
    assert built.operations == _through_kazoo(checked, chroot, default_acl).operations
    assert built.serialize() == _through_kazoo(checked, chroot, default_acl).serialize()
