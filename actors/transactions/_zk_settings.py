"""A queue's settings as the data of its ZooKeeper node ``/<root>/<queue>``, so every process reads the same ones.

The first declare writes them; a later declare with other settings is refused; a process that never
declared the queue reads them before it serves the queue (``docs/transactions.md``, "Queue settings").
JSON, one object: ``{"policy": {"kind": ..., ...}, "backoff": null | {"min_s": ..., "max_s": ...}}``.
"""

from __future__ import annotations

import json
from typing import Any

from ._values import AtLeastOnce, ConsumeOnce, ConsumePolicy, ConsumeTimes, RedeliveryBackoff, TxQueueSettings


def _policy_fields(policy: ConsumePolicy) -> dict[str, Any]:
    if isinstance(policy, ConsumeOnce):
        return {"kind": "ConsumeOnce"}
    if isinstance(policy, ConsumeTimes):
        return {"kind": "ConsumeTimes", "times": policy.times}
    return {"kind": "AtLeastOnce", "max_rollbacks": policy.max_rollbacks}


def settings_to_bytes(settings: TxQueueSettings) -> bytes:
    """The data of ``/<root>/<queue>``: the queue's policy and backoff (the name is the node's own)."""
    backoff = settings.backoff
    fields = {"policy": _policy_fields(settings.policy),
              "backoff": None if backoff is None else {"min_s": backoff.min_s, "max_s": backoff.max_s}}
    return json.dumps(fields, sort_keys=True).encode()


def _policy_of(fields: Any) -> ConsumePolicy:
    kind = fields["kind"]
    if kind == "ConsumeOnce":
        return ConsumeOnce()
    if kind == "ConsumeTimes":
        return ConsumeTimes(fields["times"])
    if kind == "AtLeastOnce":
        return AtLeastOnce(fields["max_rollbacks"])
    msg = f"policy.kind must be ConsumeOnce, ConsumeTimes or AtLeastOnce, got {kind!r}"
    raise ValueError(msg)


def settings_from_bytes(name: str, data: bytes) -> TxQueueSettings:
    """Read back what ``settings_to_bytes`` wrote for queue ``name``; ``ValueError`` naming the problem otherwise."""
    try:
        fields = json.loads(data)
        backoff = fields["backoff"]
        return TxQueueSettings(name, _policy_of(fields["policy"]),
                               None if backoff is None else RedeliveryBackoff(backoff["min_s"], backoff["max_s"]))
    except (ValueError, KeyError, TypeError) as error:
        msg = f"the settings of queue {name!r} in ZooKeeper are not readable ({error!r}): {data[:200]!r}"
        raise ValueError(msg) from error
