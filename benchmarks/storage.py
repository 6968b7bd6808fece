"""Durable storage on disk (issue 18 item 8), in one run: throughput beside RabbitMQ, memory, recovery.

1. **Throughput.** 1 KiB persistent messages, published with confirms (``window`` unconfirmed at a
   time), then consumed with a prefetch of 100 and acked 50 at a time: conveyor on ``TrioSystem`` with
   the disk journal (``DiskJournalStore``), in a child process that imports only the broker
   (``_throughput_child``), beside RabbitMQ 3.x driven by pika on the same machine
   (``_rabbitmq``: a private node on loopback, started and stopped here; "not available" when the
   package or pika is missing). Targets: >= 50,000 msg/s end to end (publish phase plus consume
   phase), and a confirmed-publish rate >= 3x RabbitMQ's.
2. **Memory.** ``memory_messages`` messages queued under a memory target of ``memory_target_mib``;
   the peak resident size of each child process must stay under target + 80 MiB. Sampled every
   50 ms and drawn as a PNG of RSS over time. Paths: the storage layer (``_storage_core``: the
   ``VariableQueue`` core over real segment files, its target as bodies = target bytes / body size),
   and the broker queue: with its memory target when ``QueueConfig`` has one (``memory_option``),
   else without paging, which the row says.
3. **Recovery.** The storage layer's queue left by (2) is reopened, after a clean stop and as after
   a crash (no saved tables: every segment scanned), until its first message is in hand (target
   <= 10 s); then drained, 90% acked, and garbage-collected: bytes on disk per live byte before the
   acks and after the GC (target <= 1.3).

Every row prints its ratio against its peer or its limit, measured in the same run. The full-size
run takes minutes and stays out of CI (``tests/benchmarks/test_storage_bench.py`` runs tiny sizes).
Run: ``conveyor bench storage`` or ``make bench-storage`` (installs RabbitMQ and pika first).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import attrs

from ._storage_throughput import Phases, memory_option, rabbitmq_phases
from ._throughput_child import conveyor_phases_apart

MIB: Final = 1024 * 1024
END_TO_END_TARGET: Final = 50_000.0
RABBITMQ_FACTOR_TARGET: Final = 3.0
RSS_HEADROOM_MIB: Final = 80
REOPEN_TARGET_S: Final = 10.0
DISK_PER_LIVE_TARGET: Final = 1.3
PREFETCH: Final = 100
ACK_EVERY: Final = 50
SAMPLE_S: Final = 0.05


@attrs.frozen
class RssRun:
    """One child process's figures (its JSON line) and its resident size sampled over time."""

    label: str
    figures: dict[str, float]
    seconds: tuple[float, ...]
    rss: tuple[int, ...]

    @property
    def peak(self) -> float:
        """The highest resident size seen: sampled, or the child's own high-water mark."""
        return max([self.figures.get("peak_rss", 0.0), *map(float, self.rss)])


def _rss(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def run_sampled(label: str, module: str, arguments: list[str]) -> RssRun:
    """Run ``python -m module arguments``, sampling its RSS; its last stdout line is its JSON figures."""
    process = subprocess.Popen([sys.executable, "-m", module, *arguments], stdout=subprocess.PIPE, text=True)
    start = time.perf_counter()
    seconds: list[float] = []
    rss: list[int] = []
    while process.poll() is None:
        size = _rss(process.pid)
        if size is not None:
            seconds.append(time.perf_counter() - start)
            rss.append(size)
        time.sleep(SAMPLE_S)
    out = process.stdout.read() if process.stdout is not None else ""
    if process.returncode != 0:
        msg = f"{label}: {module} exited with {process.returncode}"
        raise RuntimeError(msg)
    figures = json.loads(out.strip().splitlines()[-1])
    return RssRun(label, figures, tuple(seconds), tuple(rss))


def draw_rss(runs: list[RssRun], target_mib: int, path: Path, messages: int) -> None:
    """A PNG of each run's RSS over time, with the memory target and the limit (target + headroom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for run in runs:
        axes.plot(run.seconds, [size / MIB for size in run.rss], label=f"{run.label} (peak {run.peak / MIB:,.0f} MiB)")
    axes.axhline(target_mib, color="grey", linestyle=":", label=f"memory target {target_mib} MiB")
    axes.axhline(target_mib + RSS_HEADROOM_MIB, color="red", linestyle="--",
                 label=f"limit: target + {RSS_HEADROOM_MIB} MiB")
    axes.set_xlabel("seconds")
    axes.set_ylabel("resident size, MiB")
    axes.set_title(f"{messages:,} messages of 1 KiB queued under a {target_mib} MiB memory target")
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _best(runs: list[Phases]) -> Phases:
    return min(runs, key=lambda phases: phases.publish_s + phases.consume_s)


def _throughput(figures: dict[str, float], messages: int, body: bytes, window: int, repeat: int, rabbitmq: bool,
                directory: str | None) -> str | None:
    """The throughput figures; returns why RabbitMQ was not measured, or None."""
    # In a child process of its own, as a broker runs: not among the CLI's modules (see ``_throughput_child``).
    ours = _best([conveyor_phases_apart(messages, len(body), window, PREFETCH, ACK_EVERY, directory)
                  for _ in range(repeat)])
    figures["conveyor_publish_per_s"] = messages / ours.publish_s
    figures["conveyor_consume_per_s"] = messages / ours.consume_s
    figures["conveyor_end_to_end_per_s"] = messages / (ours.publish_s + ours.consume_s)
    figures["conveyor_publishes_per_sync"] = messages / max(1, ours.syncs)
    figures["conveyor_publish_cpu_us"] = ours.publish_cpu_s / messages * 1e6
    figures["conveyor_consume_cpu_us"] = ours.consume_cpu_s / messages * 1e6
    figures["ratio_end_to_end_vs_target"] = figures["conveyor_end_to_end_per_s"] / END_TO_END_TARGET
    if not rabbitmq:
        return "not asked for (--no-rabbitmq)"
    samples: list[Phases] = []
    for _ in range(repeat):
        theirs = rabbitmq_phases(messages, body, window, PREFETCH, ACK_EVERY)
        if isinstance(theirs, str):
            return theirs
        samples.append(theirs)
    theirs = _best(samples)
    figures["rabbitmq_publish_per_s"] = messages / theirs.publish_s
    figures["rabbitmq_consume_per_s"] = messages / theirs.consume_s
    figures["rabbitmq_end_to_end_per_s"] = messages / (theirs.publish_s + theirs.consume_s)
    figures["rabbitmq_publish_cpu_us"] = theirs.publish_cpu_s / messages * 1e6
    figures["rabbitmq_consume_cpu_us"] = theirs.consume_cpu_s / messages * 1e6
    figures["ratio_publish_cpu_vs_rabbitmq"] = figures["rabbitmq_publish_cpu_us"] / figures["conveyor_publish_cpu_us"]
    figures["ratio_publish_vs_rabbitmq"] = figures["conveyor_publish_per_s"] / figures["rabbitmq_publish_per_s"]
    figures["ratio_end_to_end_vs_rabbitmq"] = (figures["conveyor_end_to_end_per_s"]
                                               / figures["rabbitmq_end_to_end_per_s"])
    return None


def _memory_and_recovery(figures: dict[str, float], root: Path, messages: int, size: int, target_mib: int,
                         broker_messages: int, option: str | None) -> list[RssRun]:
    target_bytes = target_mib * MIB
    limit = (target_mib + RSS_HEADROOM_MIB) * MIB
    target_count = target_bytes // size
    core_dir = root / "core"
    core_dir.mkdir()
    common = ["--messages", str(messages), "--size", str(size), "--target-ram-count", str(target_count)]
    core = run_sampled("storage layer (VariableQueue + segment logs)", "conveyor.benchmarks._storage_core",
                       ["fill", "--dir", str(core_dir), *common])
    figures["core_fill_per_s"] = core.figures["publish_per_s"]
    figures["core_peak_rss_mib"] = core.peak / MIB
    figures["core_peak_vs_limit"] = core.peak / limit
    figures["core_queued_peak_rss_mib"] = core.figures["queued_peak_rss"] / MIB
    broker_dir = root / "broker"
    broker_dir.mkdir()
    paging = ["--option", option, "--target", str(target_bytes)] if option is not None else []
    label = (f"durable broker queue, bodies paged, {option}={target_mib} MiB"
             if option is not None else "broker queue, no paging yet")
    broker = run_sampled(label, "conveyor.benchmarks._storage_throughput",
                         ["--dir", str(broker_dir), "--messages", str(broker_messages), "--size", str(size),
                          *paging])
    figures["broker_fill_per_s"] = broker.figures["publish_per_s"]
    figures["broker_peak_rss_mib"] = broker.peak / MIB
    figures["broker_peak_vs_limit"] = broker.peak / limit
    if option is not None:  # the durable broker queue's million reopened by a new process (its recovery)
        reopened = run_sampled("durable broker queue reopened", "conveyor.benchmarks.durable_reopen",
                               ["--phase", "open", "--dir", str(broker_dir), "--messages", str(broker_messages),
                                "--size", str(size), "--target", str(target_bytes)])
        figures["broker_reopen_s"] = reopened.figures["reopen_s"]
        figures["broker_reopen_vs_limit"] = figures["broker_reopen_s"] / REOPEN_TARGET_S
        figures["broker_reopen_peak_rss_mib"] = reopened.peak / MIB
        figures["broker_reopen_peak_vs_limit"] = reopened.peak / limit
    recovered = run_sampled("recovery", "conveyor.benchmarks._storage_core", ["recover", "--dir", str(core_dir),
                                                                             *common])
    for key in ("reopen_clean_s", "reopen_crash_s", "drain_per_s", "gc_s", "disk_per_live_byte",
                "acked_disk_per_live_byte", "gc_disk_per_live_byte"):
        figures[key] = recovered.figures[key]
    figures["reopen_crash_vs_limit"] = figures["reopen_crash_s"] / REOPEN_TARGET_S
    figures["disk_per_live_vs_limit"] = figures["disk_per_live_byte"] / DISK_PER_LIVE_TARGET
    figures["gc_disk_per_live_vs_limit"] = figures["gc_disk_per_live_byte"] / DISK_PER_LIVE_TARGET
    return [core, broker]


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _report(figures: dict[str, float], rabbit_missing: str | None, runs: list[RssRun], *, messages: int,
            memory_messages: int, target_mib: int, window: int, png: Path) -> None:
    f = figures
    print(f"storage benchmark: 1 KiB persistent messages; throughput over {messages:,} "
          f"(confirm window {window:,}, prefetch {PREFETCH}, acks per {ACK_EVERY})")
    print(f"  {'':34}{'publish+confirm/s':>18}{'consume+ack/s':>15}{'end to end/s':>14}"
          f"{'CPU us/msg: publish':>21}{'consume':>9}")
    print(f"  {'conveyor, TrioSystem + disk journal':34}{f['conveyor_publish_per_s']:>18,.0f}"
          f"{f['conveyor_consume_per_s']:>15,.0f}{f['conveyor_end_to_end_per_s']:>14,.0f}"
          f"{f['conveyor_publish_cpu_us']:>21.1f}{f['conveyor_consume_cpu_us']:>9.1f}")
    if rabbit_missing is None:
        print(f"  {'RabbitMQ 3.x (pika), durable queue':34}{f['rabbitmq_publish_per_s']:>18,.0f}"
              f"{f['rabbitmq_consume_per_s']:>15,.0f}{f['rabbitmq_end_to_end_per_s']:>14,.0f}"
              f"{f['rabbitmq_publish_cpu_us']:>21.1f}{f['rabbitmq_consume_cpu_us']:>9.1f}")
    else:
        print(f"  {'RabbitMQ 3.x (pika)':34} not available: {rabbit_missing}")
    e2e = f["ratio_end_to_end_vs_target"]
    print(f"  end to end {f['conveyor_end_to_end_per_s']:,.0f}/s = {e2e:.2f}x the 50,000/s target "
          f"{_verdict(e2e >= 1)}; {f['conveyor_publishes_per_sync']:,.0f} publishes per fsync")
    if rabbit_missing is None:
        ratio = f["ratio_publish_vs_rabbitmq"]
        print(f"  confirmed publishes {ratio:.2f}x RabbitMQ's (target >= {RABBITMQ_FACTOR_TARGET:.0f}x) "
              f"{_verdict(ratio >= RABBITMQ_FACTOR_TARGET)}; end to end {f['ratio_end_to_end_vs_rabbitmq']:.2f}x; "
              f"RabbitMQ (server + pika) spends {f['ratio_publish_cpu_vs_rabbitmq']:.2f}x conveyor's CPU per "
              "confirmed publish")
    limit = target_mib + RSS_HEADROOM_MIB
    print(f"memory: {memory_messages:,} messages queued, {target_mib} MiB target, limit {limit} MiB peak RSS")
    for run, key in zip(runs, ("core", "broker"), strict=True):
        print(f"  {run.label:52} peak {f[f'{key}_peak_rss_mib']:>8,.0f} MiB = {f[f'{key}_peak_vs_limit']:.2f}x "
              f"the limit {_verdict(f[f'{key}_peak_vs_limit'] <= 1)}; filled at {f[f'{key}_fill_per_s']:,.0f}/s")
    print(f"  the storage layer's peak before its clean close (the message store saves its table; the index has none): "
          f"{f['core_queued_peak_rss_mib']:,.0f} MiB = {f['core_queued_peak_rss_mib'] / limit:.2f}x the limit")
    print(f"  RSS over time: {png}")
    if "broker_reopen_s" in f:
        print(f"recovery: the durable broker queue's {memory_messages:,} queued messages reopened by a new process "
              f"in {f['broker_reopen_s']:.2f} s = {f['broker_reopen_vs_limit']:.2f}x the {REOPEN_TARGET_S:.0f} s "
              f"limit {_verdict(f['broker_reopen_vs_limit'] <= 1)}; peak RSS {f['broker_reopen_peak_rss_mib']:,.0f} "
              f"MiB = {f['broker_reopen_peak_vs_limit']:.2f}x the memory limit")
    print(f"recovery: the storage layer's {memory_messages:,} queued messages")
    print(f"  reopen to the first message: {f['reopen_clean_s']:.2f} s after a clean stop, "
          f"{f['reopen_crash_s']:.2f} s after a crash (scan) = {f['reopen_crash_vs_limit']:.2f}x the "
          f"{REOPEN_TARGET_S:.0f} s limit {_verdict(f['reopen_crash_vs_limit'] <= 1)}")
    print(f"  disk per live byte: {f['disk_per_live_byte']:.3f} all queued = {f['disk_per_live_vs_limit']:.2f}x "
          f"the {DISK_PER_LIVE_TARGET} limit {_verdict(f['disk_per_live_vs_limit'] <= 1)}; "
          f"90% acked {f['acked_disk_per_live_byte']:.3f} before GC, {f['gc_disk_per_live_byte']:.3f} after "
          f"({f['gc_s']:.1f} s) = {f['gc_disk_per_live_vs_limit']:.2f}x the limit "
          f"{_verdict(f['gc_disk_per_live_vs_limit'] <= 1)}")
    print(f"  drained (fetch, 90% acked) at {f['drain_per_s']:,.0f}/s")


def main(messages: int = 100_000, memory_messages: int = 1_000_000, broker_messages: int | None = None,
         size: int = 1024, window: int = 1000, memory_target_mib: int = 64, repeat: int = 1, rabbitmq: bool = True,
         png: str = "reports/storage-rss.png", directory: str | None = None,
         broker_memory_option: str | None = None) -> dict[str, float]:
    """Run the three rows, print them with their ratios, draw the RSS PNG; return the figures by name.

    Args:
        messages: messages of the throughput row (each side, each of ``repeat`` runs; the best is kept).
        memory_messages: messages queued in the memory row, reopened in the recovery row.
        broker_messages: messages for the broker queue in the memory row (default ``memory_messages``).
        size: body bytes.
        window: unconfirmed publishes in flight, conveyor's and RabbitMQ's.
        memory_target_mib: the memory target.
        rabbitmq: measure RabbitMQ too (when installed).
        png: where the RSS picture goes.
        directory: where the data directories go (default: the temp dir).
        broker_memory_option: the ``QueueConfig`` field of the broker's memory target (default: detected).
    """
    for name, value in (("messages", messages), ("memory_messages", memory_messages), ("size", size),
                        ("window", window), ("memory_target_mib", memory_target_mib), ("repeat", repeat)):
        if value < 1:
            msg = f"{name} must be >= 1, got {value}"
            raise ValueError(msg)
    option = memory_option(broker_memory_option)
    body = bytes(size)
    figures: dict[str, float] = {}
    rabbit_missing = _throughput(figures, messages, body, window, repeat, rabbitmq, directory)
    with tempfile.TemporaryDirectory(dir=directory, prefix="storage-bench-") as root:
        runs = _memory_and_recovery(figures, Path(root), memory_messages, size, memory_target_mib,
                                    broker_messages or memory_messages, option)
    draw_rss(runs, memory_target_mib, Path(png), memory_messages)
    _report(figures, rabbit_missing, runs, messages=messages, memory_messages=memory_messages,
            target_mib=memory_target_mib, window=window, png=Path(png))
    return figures


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=100_000, help="messages of the throughput row")
    parser.add_argument("--memory-messages", type=int, default=1_000_000, help="messages of the memory row")
    parser.add_argument("--repeat", type=int, default=1, help="throughput runs per side; the best is kept")
    parser.add_argument("--no-rabbitmq", action="store_true", help="skip RabbitMQ")
    parser.add_argument("--png", default="reports/storage-rss.png", help="where the RSS picture goes")
    parser.add_argument("--broker-memory-option", default=None,
                        help="QueueConfig field of the broker queue's memory target (default: detected)")
    arguments = parser.parse_args()
    main(messages=arguments.messages, memory_messages=arguments.memory_messages, repeat=arguments.repeat,
         rabbitmq=not arguments.no_rabbitmq, png=arguments.png, broker_memory_option=arguments.broker_memory_option)


if __name__ == "__main__":
    _cli()
