"""The storage benchmark's conveyor throughput, run in a child process that imports only the broker.

The benchmark's own process imports the CLI, the simulator and every client library (about 85,000
objects the garbage collector walks): each full collection while a run queues 100,000 messages took
~90 ms there, ~5 ms in a process with the broker, its storage and the runtime only, as a broker's
process holds. RabbitMQ's node runs apart from the benchmark too; pika, its client, runs inside it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import attrs

from ._storage_throughput import Phases, conveyor_phases


def conveyor_phases_apart(messages: int, body_size: int, window: int, prefetch: int, ack_every: int,
                          directory: str | None = None) -> Phases:
    """``conveyor_phases`` with a body of ``body_size`` zero bytes, in a fresh Python process; its figures."""
    arguments = [sys.executable, "-m", __name__, "--messages", str(messages), "--size", str(body_size),
                 "--window", str(window), "--prefetch", str(prefetch), "--ack-every", str(ack_every)]
    if directory is not None:
        arguments += ["--dir", directory]
    done = subprocess.run(arguments, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        msg = f"conveyor's throughput run failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}"
        raise RuntimeError(msg)
    return Phases(**json.loads(done.stdout.strip().splitlines()[-1]))


def _cli() -> None:
    parser = argparse.ArgumentParser(description="conveyor's side of the storage benchmark's throughput row")
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--size", type=int, required=True, help="body bytes")
    parser.add_argument("--window", type=int, required=True, help="unconfirmed publishes at most")
    parser.add_argument("--prefetch", type=int, required=True)
    parser.add_argument("--ack-every", type=int, required=True)
    parser.add_argument("--dir", default=None, help="parent of the data directory (default: the temp dir)")
    arguments = parser.parse_args()
    phases = conveyor_phases(arguments.messages, bytes(arguments.size), arguments.window, arguments.prefetch,
                             arguments.ack_every, arguments.dir)
    print(json.dumps(attrs.asdict(phases)))


if __name__ == "__main__":
    _cli()
