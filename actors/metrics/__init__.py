"""conveyor's metrics: queue depth, in flight, deliveries, acks, nacks, redeliveries, dead letters,
lease extensions and flow-control pauses, as OpenTelemetry instruments and on a Prometheus endpoint.

The figures come from the actors' own answers (``GetStats``, ``GetSubscriptionStats``,
``GetFlowStats``), asked when metrics are collected: nothing is shared with the actors.
"""

import typing

from conveyor.runtime.extras import lazy_exports as _lazy_exports

from ._figures import MetricsSnapshot as MetricsSnapshot
from ._figures import SubscriberFigures as SubscriberFigures
from ._figures import queue_stats_of as queue_stats_of
from ._figures import subscriber_figures_of as subscriber_figures_of

if typing.TYPE_CHECKING:
    from ._instruments import QUEUE_INSTRUMENTS as QUEUE_INSTRUMENTS
    from ._instruments import SUBSCRIBER_INSTRUMENTS as SUBSCRIBER_INSTRUMENTS
    from ._instruments import ConveyorMetrics as ConveyorMetrics
    from ._instruments import Instrument as Instrument
    from ._instruments import observations as observations
    from ._prometheus import CONTENT_TYPE as CONTENT_TYPE
    from ._prometheus import PrometheusEndpoint as PrometheusEndpoint
    from ._prometheus import escape_label_value as escape_label_value
    from ._prometheus import prometheus_name as prometheus_name
    from ._prometheus import prometheus_text as prometheus_text
else:  # OpenTelemetry comes with the ``metrics`` extra (and the ``pubsub`` one)
    __getattr__ = _lazy_exports(__name__, "metrics", {
        "._instruments": ("QUEUE_INSTRUMENTS", "SUBSCRIBER_INSTRUMENTS", "ConveyorMetrics", "Instrument",
                          "observations"),
        "._prometheus": ("CONTENT_TYPE", "PrometheusEndpoint", "escape_label_value", "prometheus_name",
                         "prometheus_text"),
    })

__all__ = [
    "CONTENT_TYPE",
    "QUEUE_INSTRUMENTS",
    "SUBSCRIBER_INSTRUMENTS",
    "ConveyorMetrics",
    "Instrument",
    "MetricsSnapshot",
    "PrometheusEndpoint",
    "SubscriberFigures",
    "escape_label_value",
    "observations",
    "prometheus_name",
    "prometheus_text",
    "queue_stats_of",
    "subscriber_figures_of",
]
