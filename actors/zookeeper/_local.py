"""ZooKeeper servers on loopback for tests and benchmarks: one standalone server, or a three-node ensemble.

Each server is a ``java`` process of Debian's ``zookeeper`` package (``make zookeeper`` installs it),
started by hand (no systemd) on free loopback ports with a private data directory, and stopped by
its pid. ``kill`` (SIGKILL) then ``start`` again brings a server back on the same data directory and
port, as a crashed server comes back, so crash tests can take ZooKeeper itself down.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
"""Where Debian's ``zookeeper`` package puts the server; its manifest names the jars it needs."""
ZOOKEEPER_CONF = Path("/etc/zookeeper/conf")
"""On the class path for the package's ``log4j.properties``."""
INSTALL_HINT = "run `make zookeeper` (apt-get install --no-install-recommends zookeeper; needs root or sudo)"
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""A small heap and a quick start: several test servers may share a 2-core machine."""
POLL_S = 0.1
"""How often a starting server is asked whether it serves."""


class ZooKeeperNotInstalled(RuntimeError):
    """The ``zookeeper`` package or ``java`` is missing, so no local server can start."""


def zookeeper_missing() -> str | None:
    """Why no local ZooKeeper can start here (with the fix), or None when it can."""
    if shutil.which("java") is None:
        return f"java is not on the PATH, so ZooKeeper cannot run: {INSTALL_HINT}"
    if not ZOOKEEPER_JAR.is_file():
        return f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): {INSTALL_HINT}"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    """ZooKeeper's answer to a four-letter command (``ruok``, ``srvr``) on ``port``; "" when it does not answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.sendall(word.encode("ascii"))
            chunks = []
            while chunk := conn.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode("utf-8", "replace")


def server_mode(port: int) -> str | None:
    """The server's ``Mode:`` line from ``srvr`` (standalone, leader, follower) or None while it is not serving."""
    for line in four_letter_word(port, "srvr").splitlines():
        if line.startswith("Mode: "):
            return line.removeprefix("Mode: ").strip()
    return None


class _ServerProcess:
    """One ZooKeeper JVM: its config file, data directory, log file and pid."""

    def __init__(self, directory: Path, client_port: int, main_class: str, config: str) -> None:
        self.directory = directory
        self.client_port = client_port
        self.main_class = main_class
        self.config_path = directory / "zoo.cfg"
        self.log_path = directory / "server.log"
        self.config_path.write_text(config, encoding="utf-8")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The running JVM's pid, or None when it is not running."""
        process = self.process
        return None if process is None or process.poll() is not None else process.pid

    def start(self) -> None:
        """Start the JVM (no wait for it to serve); a running one is left alone."""
        if self.pid is not None:
            return
        missing = zookeeper_missing()
        if missing is not None:
            raise ZooKeeperNotInstalled(missing)
        class_path = f"{ZOOKEEPER_JAR}:{ZOOKEEPER_CONF}"
        command = ["java", *JVM_OPTIONS, "-cp", class_path, self.main_class, str(self.config_path)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                            cwd=self.directory)

    def signal(self, signum: int, timeout: float = 15.0) -> None:
        """Send ``signum`` to the JVM by its pid and wait for it to exit (SIGKILL past ``timeout``)."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signum)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()

    def log_tail(self, lines: int = 20) -> str:
        """The end of the server's output, for error messages."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _wait_serving(servers: list[_ServerProcess], timeout: float, modes: tuple[str, ...]) -> None:
    """Until every server answers ``ruok`` with ``imok`` and ``srvr`` with one of ``modes`` (polled every 0.1 s)."""
    waiting = list(servers)
    polls_left = int(timeout / POLL_S)
    while waiting:
        server = waiting[0]
        if server.pid is None:
            msg = (f"ZooKeeper on port {server.client_port} exited at start (code "
                   f"{server.process.returncode if server.process else None}); its output:\n{server.log_tail()}")
            raise RuntimeError(msg)
        if four_letter_word(server.client_port, "ruok") == "imok" and server_mode(server.client_port) in modes:
            waiting.pop(0)
            continue
        if polls_left <= 0:
            msg = (f"ZooKeeper on port {server.client_port} did not serve within {timeout} s; "
                   f"its output:\n{server.log_tail()}")
            raise TimeoutError(msg)
        polls_left -= 1
        time.sleep(POLL_S)


def _base_config(data_dir: Path, client_port: int, tick_ms: int, force_sync: bool) -> list[str]:
    return [
        f"tickTime={tick_ms}",
        f"dataDir={data_dir}",
        f"clientPort={client_port}",
        "clientPortAddress=127.0.0.1",
        "admin.enableServer=false",
        "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons",
        "maxClientCnxns=0",  # many client processes share 127.0.0.1 in the crash tests (the default is 60)
        f"maxSessionTimeout={max(60_000, 20 * tick_ms)}",
        f"forceSync={'yes' if force_sync else 'no'}",
    ]


class _StartedUntilClosed:
    """``with`` starts it and closes it at the end; a start that fails closes what it began."""

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class LocalZooKeeper(_StartedUntilClosed):
    """A standalone ZooKeeper on 127.0.0.1, a free port and a temporary data directory.

    Use as a context manager (started, then stopped and its directory removed), or call ``start`` /
    ``stop``. ``kill`` is a crash (SIGKILL); ``start`` after it brings the server back on the same
    port and data, so sessions whose timeout has not run out reconnect.

    Args:
        tick_ms: ZooKeeper's ``tickTime``; sessions may last 2 to 20 ticks (at least 60 s is allowed).
        force_sync: fsync the transaction log before answering (ZooKeeper's default). Tests may turn
            it off: a killed server's writes are still in the page cache, only a machine crash loses them.
    """

    def __init__(self, *, tick_ms: int = 500, force_sync: bool = True, port: int | None = None) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="conveyor-zookeeper-"))
        self.port = free_port() if port is None else port
        data_dir = self.directory / "data"
        data_dir.mkdir()
        config = "\n".join(_base_config(data_dir, self.port, tick_ms, force_sync)) + "\n"
        self._server = _ServerProcess(self.directory, self.port, "org.apache.zookeeper.server.ZooKeeperServerMain",
                                      config)

    @property
    def address(self) -> str:
        """``host:port``, what ``KazooSession(hosts=...)`` and kazoo take."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs."""
        return self._server.pid

    @property
    def running(self) -> bool:
        """True while the server process is alive (serving or not)."""
        return self._server.pid is not None

    @property
    def serving(self) -> bool:
        """True when the server answers ``ruok`` within a second (not when killed, stopped or paused)."""
        return self.running and four_letter_word(self.port, "ruok") == "imok"

    def start(self, timeout: float = 30.0) -> LocalZooKeeper:
        """Start the server (again, after ``kill`` or ``stop``) and wait until it serves.

        Raises:
            ZooKeeperNotInstalled: no ``java`` or no ``zookeeper`` package (the message says how to install).
            TimeoutError: it did not answer ``ruok`` within ``timeout`` seconds.
        """
        self._server.start()
        _wait_serving([self._server], timeout, ("standalone",))
        return self

    def kill(self) -> None:
        """Crash the server: SIGKILL by its pid, and wait for it to be gone."""
        self._server.signal(signal.SIGKILL)

    def restart(self, timeout: float = 30.0) -> None:
        """``kill`` then ``start``: the same port, the same data directory."""
        self.kill()
        self.start(timeout)

    def stop(self) -> None:
        """Stop the server (SIGTERM by its pid); its data stays until ``close``."""
        self._server.signal(signal.SIGTERM)

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)



class LocalZooKeeperEnsemble(_StartedUntilClosed):
    """Three (or ``size``) ZooKeeper servers in one quorum on loopback, each its own JVM and data directory.

    ``address`` names every member (kazoo tries them in turn); ``kill(n)`` crashes member ``n``
    (0-based) and ``start_member(n)`` brings it back on its data. ``leader()`` says which one leads.
    """

    def __init__(self, size: int = 3, *, tick_ms: int = 500, force_sync: bool = True) -> None:
        if size < 1:
            msg = f"an ensemble needs size >= 1 members, got {size}"
            raise ValueError(msg)
        self.directory = Path(tempfile.mkdtemp(prefix="conveyor-zookeeper-ensemble-"))
        ports = [(free_port(), free_port(), free_port()) for _ in range(size)]
        self.ports = tuple(client for client, _, _ in ports)
        peers = [f"server.{n + 1}=127.0.0.1:{peer}:{election}" for n, (_, peer, election) in enumerate(ports)]
        self._members: list[_ServerProcess] = []
        for n, (client, _, _) in enumerate(ports):
            member_dir = self.directory / f"node{n + 1}"
            data_dir = member_dir / "data"
            data_dir.mkdir(parents=True)
            (data_dir / "myid").write_text(f"{n + 1}\n", encoding="ascii")
            lines = [*_base_config(data_dir, client, tick_ms, force_sync), "initLimit=10", "syncLimit=5", *peers]
            self._members.append(_ServerProcess(member_dir, client, "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                                                "\n".join(lines) + "\n"))

    @property
    def address(self) -> str:
        """Every member's ``host:port``, comma-separated (kazoo's ``hosts``)."""
        return ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def start(self, timeout: float = 60.0) -> LocalZooKeeperEnsemble:
        """Start every member and wait until each serves as leader or follower."""
        for member in self._members:
            member.start()
        _wait_serving(self._members, timeout, ("leader", "follower"))
        return self

    def leader(self) -> int | None:
        """The leading member's index, or None while there is no quorum."""
        for n, member in enumerate(self._members):
            if member.pid is not None and server_mode(member.client_port) == "leader":
                return n
        return None

    def pid(self, n: int) -> int | None:
        """Member ``n``'s pid while it runs (to pause it with SIGSTOP, say)."""
        return self._members[n].pid

    def running(self, n: int) -> bool:
        """True while member ``n``'s process is alive."""
        return self._members[n].pid is not None

    def kill(self, n: int) -> None:
        """Crash member ``n`` (SIGKILL by its pid)."""
        self._members[n].signal(signal.SIGKILL)

    def start_member(self, n: int, timeout: float = 60.0) -> None:
        """Bring member ``n`` back on its data directory and wait until it serves in the quorum."""
        member = self._members[n]
        member.start()
        _wait_serving([member], timeout, ("leader", "follower"))

    def close(self) -> None:
        """Stop every member and remove the ensemble's directory."""
        for member in self._members:
            member.signal(signal.SIGTERM)
        shutil.rmtree(self.directory, ignore_errors=True)


