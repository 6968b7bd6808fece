"""The Pub/Sub front's own files in a data directory: the ack-id key and the count of starts.

The key seals ack ids (``AckIdCodec``): kept in the directory, an ack id issued before a restart
verifies after it and names the same message. The count of starts makes every start's
subscription numbers new (``PubSubRegistry(start=)``), so such an id never names a live binding.
Both are written atomically (a temporary file, fsync, rename, fsync of the directory): a crash
leaves the old file or the new one, never a torn one. This is glue, run once before the actors
start; no actor touches these files.
"""

from __future__ import annotations

import os
import secrets
from typing import Final

from ._ackid import KEY_BYTES

DIRECTORY: Final = "pubsub"
"""The front's subdirectory of the data directory (the journal store's segment log ignores it)."""
KEY_FILE: Final = "ack-id-key"
STARTS_FILE: Final = "starts"


def _write_atomically(directory: str, name: str, data: bytes) -> None:
    """Replace ``directory/name`` by ``data``, owner-only, synced, in one rename."""
    path = os.path.join(directory, name)
    temporary = f"{path}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a temporary file left by a crash may have had other bits
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def ack_key(data_dir: str | os.PathLike[str]) -> bytes:
    """The data directory's ack-id key, drawn from the OS's secure source and saved (mode 0600) the first time.

    Raises:
        ValueError: the key file exists but does not hold a key (not ``KEY_BYTES`` bytes).
    """
    directory = os.path.join(os.fspath(data_dir), DIRECTORY)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, KEY_FILE)
    try:
        with open(path, "rb") as file:
            key = file.read()
    except FileNotFoundError:
        key = secrets.token_bytes(KEY_BYTES)
        _write_atomically(directory, KEY_FILE, key)
        return key
    if len(key) != KEY_BYTES:
        msg = (f"{path} holds {len(key)} bytes, not an ack-id key of {KEY_BYTES}: restore it, or delete it to "
               "draw a new one (every ack id issued before then stops verifying)")
        raise ValueError(msg)
    return key


def count_start(data_dir: str | os.PathLike[str]) -> int:
    """This start's number on the data directory (1 the first time), saved before it is returned.

    Raises:
        ValueError: the file of starts holds something other than a number.
    """
    directory = os.path.join(os.fspath(data_dir), DIRECTORY)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, STARTS_FILE)
    try:
        with open(path, "rb") as file:
            text = file.read().decode("ascii", "replace").strip()
    except FileNotFoundError:
        text = "0"
    if not text.isdecimal():
        msg = f"{path} must hold the number of earlier starts (decimal), got {text[:40]!r}"
        raise ValueError(msg)
    start = int(text) + 1
    _write_atomically(directory, STARTS_FILE, f"{start}\n".encode())
    return start
