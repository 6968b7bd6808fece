"""``conveyor serve``: the Pub/Sub front as a process that drains on SIGTERM and SIGINT alike.

Python leaves SIGTERM to kill the process outright, and turns SIGINT into ``KeyboardInterrupt``
only if SIGINT was not ignored when the process started; a job started with ``&`` from a script
inherits it ignored. Either way the server would vanish with its streams cut and its publishes
unanswered. So both signals get a handler here, whatever was inherited, and the main thread
waits on a pipe that the signal wakes (``signal.set_wakeup_fd``): the handler itself does
nothing, so it can take no lock the interrupted code holds.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Iterable
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Final

import typer

from ._logging import LogLevel, logging_to_stderr

if TYPE_CHECKING:  # imported when the endpoint starts: `conveyor serve` without metrics needs no OpenTelemetry
    from conveyor.actors.broker import QueueStats
    from conveyor.actors.metrics import PrometheusEndpoint

log = logging.getLogger("conveyor.serve")

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
"""The signals that drain and stop ``conveyor serve``."""


def _noted(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: nothing to do, the wake-up byte already names the signal."""


class StopSignals:
    """Handlers for ``STOP_SIGNALS`` while inside the block; ``wait()`` blocks until one arrives.

    A signal that arrives before ``wait()`` (while the server starts) is kept and returned then.
    The previous handlers and wake-up fd are restored on exit.
    """

    def __init__(self) -> None:
        self._read_fd = -1
        self._write_fd = -1
        self._previous: dict[signal.Signals, object] = {}
        self._previous_wakeup = -1

    def __enter__(self) -> StopSignals:
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._previous_wakeup = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, _noted)
        return self

    def wait(self) -> signal.Signals:
        """Block until SIGTERM or SIGINT arrives; return which."""
        while True:
            for byte in os.read(self._read_fd, 64):
                if byte in STOP_SIGNALS:
                    return signal.Signals(byte)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        signal.set_wakeup_fd(self._previous_wakeup)
        os.close(self._read_fd)
        os.close(self._write_fd)


def parse_host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8085`` for IPv6) as the gcloud emulator's ``--host-port`` takes it."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        msg = (f"--host-port must be HOST:PORT with a port from 0 to 65535 (for example 127.0.0.1:8085), "
               f"got {value[:80]!r}")
        raise typer.BadParameter(msg)
    return host.strip("[]"), int(port_text)


def _metrics_endpoint(queues: Callable[[], Iterable[QueueStats]], host: str, port: int) -> PrometheusEndpoint:
    """Start the Prometheus endpoint beside the front; a port that cannot be bound is a bad --metrics-port."""
    from conveyor.actors.metrics import PrometheusEndpoint

    try:
        return PrometheusEndpoint(queues=queues, host=host, port=port).start()
    except RuntimeError as error:
        raise typer.BadParameter(str(error), param_hint="--metrics-port") from error


def run_serve(
    host_port: str, *, max_streams: int, log_level: LogLevel, max_memory: str | None = None,
    data_dir: str | None = None, metrics_port: int | None = None, rest_port: int | None = None,
) -> None:
    """Serve until SIGTERM or SIGINT, then drain: streams end with UNAVAILABLE, calls in flight are answered.

    With ``data_dir`` the server keeps its state there and starts from what it holds.
    """
    from conveyor.actors.pubsub import PubSubServer, RestBindError, parse_byte_size
    from conveyor.runtime import freeze_start_up_heap

    host, port = parse_host_port(host_port)
    try:
        budget = None if max_memory is None else parse_byte_size(max_memory)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--max-memory") from None
    with logging_to_stderr(log_level):  # noqa: SIM117 (the body keeps its place) every command's set-up
        with StopSignals() as signals:
            try:
                server = PubSubServer(host, port, max_streams=max_streams, max_memory=budget, data_dir=data_dir,
                                      rest_port=rest_port)
            except ValueError as error:
                raise typer.BadParameter(str(error), param_hint="--max-memory") from None
            try:
                server.start()
            except RuntimeError as error:
                server.close()
                hint = "--rest-port" if isinstance(error, RestBindError) else "--host-port"
                raise typer.BadParameter(str(error), param_hint=hint) from error
            freeze_start_up_heap()  # full collections then skip the modules and types: pauses of ms, not 50-75 ms
            typer.echo(f"conveyor Pub/Sub front on {server.address}; export PUBSUB_EMULATOR_HOST={server.address}")
            if server.rest_port is not None:
                typer.echo(f"REST on http://{server.rest_address}/v1/ (curl http://{server.rest_address}/ answers Ok)")
            endpoint = None
            try:
                if metrics_port is not None:
                    endpoint = _metrics_endpoint(server.queue_stats, host, metrics_port)
                    typer.echo(f"Prometheus metrics on http://{endpoint.address}/metrics")
                received = signals.wait()
                log.info("received %s: draining", received.name)
            finally:
                if endpoint is not None:
                    endpoint.close()
                server.close()
            log.info("conveyor serve stopped")
