"""A TCP proxy on loopback that can cut a client off its ZooKeeper while the server runs on (a partition).

A server restarted on its data directory gives its sessions a fresh timeout, so only a client kept
away from a *running* server sees its session expire: the proxy's ``cut`` closes every connection
through it and refuses new ones (accepted, then closed at once) until ``heal``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class PartitionProxy:
    """Forwards ``127.0.0.1:<port>`` to ``upstream`` (``host:port``) until cut."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.open = True
        self.closed = False
        self.sockets: list[socket.socket] = []  # the test's threads only append and close: no lock needed
        self.sent_upstream = 0
        """Bytes forwarded from clients to the server (one pump thread adds to it per connection)."""
        self.thread = threading.Thread(target=self._accept, name="partition-proxy", daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        """Drop every connection through the proxy and refuse new ones."""
        self.open = False
        for sock in list(self.sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def heal(self) -> None:
        """Let connections through again."""
        self.open = True

    def close(self) -> None:
        self.closed = True
        self.cut()
        self.listener.close()

    def __enter__(self) -> PartitionProxy:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=2)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            self.sockets += [client, server]
            for source, target, upstream in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pump, args=(source, target, upstream), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, upstream: bool) -> None:
        try:
            while chunk := source.recv(65536):
                target.sendall(chunk)
                if upstream:
                    self.sent_upstream += len(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
