"""The Prometheus face: OpenTelemetry's collected metrics as Prometheus' text format, served over HTTP.

Written here rather than taken from ``opentelemetry-exporter-prometheus``: that exporter needs
``prometheus_client``, a dependency for the forty lines of the text format this module holds.
The endpoint is a plain ``http.server`` on its own thread, serving one scrape at a time.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import TracebackType
from typing import Any, final

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader, MetricsData, Sum

from conveyor.actors.broker import QueueStats

from ._figures import SubscriberFigures
from ._instruments import ConveyorMetrics

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_:]")


def prometheus_name(name: str) -> str:
    """An OpenTelemetry instrument name as a Prometheus one: ``conveyor.queue.acks`` -> ``conveyor_queue_acks``."""
    cleaned = _NOT_NAME.sub("_", name)
    return "_" + cleaned if cleaned[:1].isdigit() else cleaned


def escape_label_value(value: str) -> str:
    """A label value as the text format quotes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(attributes: Mapping[str, Any] | None) -> str:
    if not attributes:
        return ""
    inner = ",".join(f'{prometheus_name(str(k))}="{escape_label_value(str(v))}"' for k, v in sorted(attributes.items()))
    return "{" + inner + "}"


def prometheus_text(data: MetricsData | None) -> str:
    """Render collected metrics: a counter (monotonic sum) as ``<name>_total``, a gauge or other sum as ``<name>``.

    Each family gets its ``# HELP`` and ``# TYPE`` lines, then one sample per data point.
    """
    lines: list[str] = []
    for resource in () if data is None else data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = metric.data
                if isinstance(points, Sum) and points.is_monotonic:
                    name, kind = prometheus_name(metric.name) + "_total", "counter"
                elif isinstance(points, (Sum, Gauge)):
                    name, kind = prometheus_name(metric.name), "gauge"
                else:
                    continue  # histograms: conveyor registers none
                help_text = (metric.description or metric.name).replace("\\", "\\\\").replace("\n", "\\n")
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
                lines += [f"{name}{_labels(point.attributes)} {_number(point.value)}" for point in points.data_points]
    return "\n".join(lines) + "\n"


@final
class PrometheusEndpoint:
    """conveyor's metrics on ``http://host:port/metrics``, collected when scraped.

    Builds its own OpenTelemetry ``MeterProvider`` with a reader collected on each scrape (the
    actors are asked then, once). ``start()`` listens; ``close()`` stops; a context manager too.

    Args:
        queues, subscribers: as ``ConveyorMetrics`` (at least one).
        host: loopback by default. port: 0 picks a free one (``address`` tells which).
    """

    def __init__(
        self,
        *,
        queues: Callable[[], Iterable[QueueStats]] | None = None,
        subscribers: Callable[[], Iterable[SubscriberFigures]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if type(port) is not int or not 0 <= port <= 65535:
            msg = f"PrometheusEndpoint port must be an int from 0 to 65535, got {port!r}"
            raise ValueError(msg)
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])
        self.metrics = ConveyorMetrics(queues=queues, subscribers=subscribers, meter_provider=self.provider)
        self.host = host
        self.port = port
        self._server: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def render(self) -> str:
        """Ask the actors now and return the text a scrape gets."""
        self.metrics.refresh()
        return prometheus_text(self.reader.get_metrics_data())

    @property
    def address(self) -> str:
        """``host:port`` it listens on (the port chosen when 0 was asked)."""
        return f"{self.host}:{self.port}"

    def start(self) -> PrometheusEndpoint:
        """Listen and serve scrapes on a daemon thread.

        Raises:
            RuntimeError: the address cannot be bound (in use, not local), naming it.
        """
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] not in ("/metrics", "/metrics/"):
                    self._send(404, "text/plain; charset=utf-8", "conveyor serves its metrics on /metrics\n")
                    return
                try:
                    body = endpoint.render()
                except Exception as error:
                    log.exception("collecting metrics failed")
                    self._send(500, "text/plain; charset=utf-8", f"collecting metrics failed: {error!r}\n")
                    return
                self._send(200, CONTENT_TYPE, body)

            def _send(self, status: int, content_type: str, body: str) -> None:
                data = body.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("metrics scrape: " + format, *args)

        try:
            server = HTTPServer((self.host, self.port), Handler)
        except OSError as error:
            msg = f"cannot serve metrics on {self.host}:{self.port}: {error.strerror or error}"
            raise RuntimeError(msg) from error
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, name="conveyor-metrics", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving (a scrape in progress finishes first) and release the port."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        self.provider.shutdown()

    def __enter__(self) -> PrometheusEndpoint:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
