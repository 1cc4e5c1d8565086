#!/usr/bin/env python3
"""vfs as a service (issue 12): latency while a long call runs, cancellation, concurrent sessions.

Three measurements, each against a baseline taken in the same run, all through the official
Python `mcp` SDK (the client of tests/requirements.txt):

  ping under load      `ping` round trips, one every 20 ms, while a long `grep` runs on the same
                       stdio connection; p50 and p99 against pings on the idle server
  cancellation         a long `grep` cancelled by the client (`notifications/cancelled`) 0.5 s
                       in; the latency is from the cancel leaving the client to the call's end
                       as the exchange log records it (its start plus its duration); against an
                       idle ping round trip
  HTTP sessions        `vfs serve --listen`: N sessions (default 16) each reading small files
                       in a loop, against one session doing the same: calls/s, p99, and the
                       daemon's own CPU time per call (/proc), which the Python client's
                       limits do not blur: on 2 cores, the one-process client saturates first

The long grep searches a generated corpus (--corpus-mb of text, default 576; about 10 s with
the release build here) for a pattern that no literal or DFA can speed up (see SLOW_PATTERN).

usage:
  python3 bench/service.py                  # release build, 576 MiB corpus, 16 sessions
  python3 bench/service.py --smoke          # debug build, 4 MiB corpus, 4 sessions (CI)
  python3 bench/service.py --json out.json

Everything it needs goes under bench/.cache (git-ignored), like bench/mcp_peers.py; the script
re-runs itself inside that virtual environment.
"""

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CACHE = BENCH / ".cache"
CORPORA = CACHE / "corpus"
TOKEN = "bench-token-0123456789abcdef"
# No literal a search could jump to, and a Unicode word boundary over text with non-ASCII
# letters: the regex crate's DFAs give up on it, so every byte goes through its slower engine
# (about 30 MB/s here), which makes a long call out of a corpus that fits on any disk.
SLOW_PATTERN = r"(?i)\b\w{3}[0-9]"


def bootstrap():
    """Runs inside the benchmarks' virtual environment (bench/benchenv.py)."""
    sys.path.insert(0, str(BENCH))
    from benchenv import bootstrap as enter

    enter(__file__)

def log(message: str):
    print(message, file=sys.stderr, flush=True)


def corpus(megabytes: int) -> Path:
    """A directory of text files totalling `megabytes` MiB (deterministic; made once)."""
    dest = CORPORA / f"mb-{megabytes}-v2"
    done = CORPORA / f"mb-{megabytes}-v2.done"
    if done.exists():
        return dest.resolve()
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "big").mkdir(parents=True)
    rng = random.Random(42)
    words = "alpha beta gamma café delta naïve mount virtual path résumé handle agent tool".split()
    block = "".join(" ".join(rng.choice(words) for _ in range(10)) + "\n" for _ in range(2000)).encode()
    per_file = 16 * 1024 * 1024
    total = megabytes * 1024 * 1024
    index = 0
    while total > 0:
        size = min(per_file, total)
        with open(dest / "big" / f"part-{index:03}.txt", "wb") as file:
            written = 0
            while written < size:
                chunk = block[: size - written]
                file.write(chunk)
                written += len(chunk)
        total -= size
        index += 1
    for number in range(64):
        (dest / "small").mkdir(exist_ok=True)
        (dest / "small" / f"f{number:02}.txt").write_text(f"small file {number}\n" * 20)
    done.write_text("seed 42\n")
    return dest.resolve()


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[rank]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# --- stdio: ping under load, cancellation ------------------------------------------------------


async def stdio_session(binary: Path, tree: Path, logs: Path, stack: contextlib.AsyncExitStack):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=str(binary),
        args=["serve", "--mount", f"{tree}:/data:ro", "--llm-log", str(logs), "--call-timeout", "600"],
        env={"VFS_LOG": "error"},
    )
    errlog = stack.enter_context(open(CACHE / "service-stderr.txt", "w"))
    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def pings(session, count: int, gap: float) -> list[float]:
    import anyio

    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await session.send_ping()
        samples.append(time.perf_counter() - started)
        await anyio.sleep(gap)
    return samples


async def ping_under_load(session, idle_count: int) -> dict:
    import anyio

    idle = await pings(session, idle_count, 0.02)
    loaded: list[float] = []
    grep_seconds = 0.0
    done = anyio.Event()

    async def long_grep():
        nonlocal grep_seconds
        started = time.perf_counter()
        result = await session.call_tool("grep", {"path": "/data/big", "pattern": SLOW_PATTERN})
        grep_seconds = time.perf_counter() - started
        assert not result.is_error, result
        done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(long_grep)
        await anyio.sleep(0.05)
        while not done.is_set():
            loaded.extend(await pings(session, 1, 0.02))
    if not loaded:
        raise SystemExit(f"the grep took {grep_seconds:.2f} s: too short to ping during it; give a bigger --corpus-mb")
    return {
        "grep_seconds": round(grep_seconds, 2),
        "idle_p50_ms": ms(percentile(idle, 50)),
        "idle_p99_ms": ms(percentile(idle, 99)),
        "loaded_pings": len(loaded),
        "loaded_p50_ms": ms(percentile(loaded, 50)),
        "loaded_p99_ms": ms(percentile(loaded, 99)),
        "loaded_max_ms": ms(max(loaded)),
    }


async def cancellation(session, logs: Path, rounds: int, after: float) -> dict:
    import anyio

    latencies = []
    for _ in range(rounds):
        before = set(logs.rglob("*.jsonl"))
        assert len(before) == 1
        log_file = next(iter(before))
        lines_before = len(log_file.read_text().splitlines())
        with anyio.move_on_after(after) as scope:
            await session.call_tool("grep", {"path": "/data/big", "pattern": SLOW_PATTERN})
        if not scope.cancelled_caught:
            raise SystemExit(f"the grep finished before {after} s: give a bigger --corpus-mb")
        cancelled_at = time.time()
        # The call's record appears when it ends.
        deadline = time.monotonic() + 30
        while len(log_file.read_text().splitlines()) == lines_before and time.monotonic() < deadline:
            await anyio.sleep(0.005)
        record = json.loads(log_file.read_text().splitlines()[lines_before])
        started = datetime.fromisoformat(record["time"].replace("Z", "+00:00")).timestamp()
        ended = started + record["durationMs"] / 1000
        latencies.append(max(0.0, ended - cancelled_at))
        await session.send_ping()
    idle = await pings(session, 20, 0.01)
    return {
        "rounds": rounds,
        "p50_ms": ms(percentile(latencies, 50)),
        "max_ms": ms(max(latencies)),
        "idle_ping_p50_ms": ms(percentile(idle, 50)),
    }


# --- HTTP: concurrent sessions -----------------------------------------------------------------


class Daemon:
    def __init__(self, binary: Path, tree: Path):
        self.process = subprocess.Popen(
            [str(binary), "serve", "--listen", "127.0.0.1:0", "--mount", f"{tree}:/data:ro"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={"VFS_LOG": "error", "VFS_TOKEN": TOKEN, "PATH": os.environ.get("PATH", "")},
        )
        status = self.process.stderr.readline().decode()
        match = re.search(r"at http://(\S+) ", status)
        assert match, status
        self.url = f"http://{match.group(1)}/mcp"

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


async def http_reads(daemon: "Daemon", sessions: int, calls: int) -> dict:
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    samples: list[float] = []

    async def one(index: int, ready: anyio.Event, go: anyio.Event, counter: list):
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            async with streamable_http_client(daemon.url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    counter.append(index)
                    if len(counter) == sessions:
                        ready.set()
                    await go.wait()
                    for call in range(calls):
                        started = time.perf_counter()
                        result = await session.call_tool("read_text_file", {"path": f"/data/small/f{(index + call) % 64:02}.txt"})
                        samples.append(time.perf_counter() - started)
                        assert not result.is_error

    ready, go, counter = anyio.Event(), anyio.Event(), []
    async with anyio.create_task_group() as group:
        for index in range(sessions):
            group.start_soon(one, index, ready, go, counter)
        await ready.wait()
        cpu_start = daemon.cpu_seconds()
        wall_start = time.perf_counter()
        go.set()
        # The group waits for every session to finish its calls.
    wall = time.perf_counter() - wall_start
    cpu = daemon.cpu_seconds() - cpu_start
    return {
        "sessions": sessions,
        "calls": len(samples),
        "calls_per_s": round(len(samples) / wall, 1),
        "p50_ms": ms(percentile(samples, 50)),
        "p99_ms": ms(percentile(samples, 99)),
        "daemon_cpu_us_per_call": round(cpu / len(samples) * 1e6, 1),
    }


# --- report ------------------------------------------------------------------------------------


def report(results: dict) -> str:
    load, cancel, one, many = results["ping"], results["cancel"], results["http_one"], results["http_many"]
    rows = [
        ("ping p50, idle (ms)", load["idle_p50_ms"], ""),
        (f"ping p50 during a {load['grep_seconds']} s grep (ms)", load["loaded_p50_ms"], f"{load['loaded_p50_ms'] / load['idle_p50_ms']:.2f}× idle"),
        (f"ping p99 during the grep (ms, {load['loaded_pings']} pings)", load["loaded_p99_ms"], f"{load['loaded_p99_ms'] / load['idle_p99_ms']:.2f}× idle p99"),
        ("cancellation: cancel sent to call ended, p50 (ms)", cancel["p50_ms"], f"{cancel['p50_ms'] / cancel['idle_ping_p50_ms']:.2f}× an idle ping"),
        (f"cancellation, worst of {cancel['rounds']} (ms)", cancel["max_ms"], ""),
        ("HTTP, 1 session: read_text_file calls/s", one["calls_per_s"], ""),
        (f"HTTP, {many['sessions']} sessions: read_text_file calls/s", many["calls_per_s"], f"{many['calls_per_s'] / one['calls_per_s']:.2f}× one session"),
        ("HTTP, 1 session: p99 (ms)", one["p99_ms"], ""),
        (f"HTTP, {many['sessions']} sessions: p99 (ms)", many["p99_ms"], f"{many['p99_ms'] / one['p99_ms']:.2f}× one session"),
        ("HTTP, 1 session: daemon CPU per call (µs)", one["daemon_cpu_us_per_call"], ""),
        (
            f"HTTP, {many['sessions']} sessions: daemon CPU per call (µs)",
            many["daemon_cpu_us_per_call"],
            f"{many['daemon_cpu_us_per_call'] / one['daemon_cpu_us_per_call']:.2f}× one session",
        ),
    ]
    lines = ["| metric | value | against the baseline |", "|---|---|---|"]
    lines += [f"| {name} | {value} | {ratio} |" for name, value, ratio in rows]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vfs", default=str(ROOT / "target" / "release" / "vfs"))
    parser.add_argument("--corpus-mb", type=int, default=576)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--calls", type=int, default=200, help="calls per HTTP session")
    parser.add_argument("--cancel-rounds", type=int, default=10)
    parser.add_argument("--cancel-after", type=float, default=0.5, help="seconds into the grep")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.smoke:
        args.vfs = str(ROOT / "target" / "debug" / "vfs")
        args.corpus_mb, args.sessions, args.calls, args.cancel_rounds, args.cancel_after = 4, 4, 10, 2, 0.05
    bootstrap()
    import anyio

    binary = Path(args.vfs).resolve()
    tree = corpus(args.corpus_mb)
    results: dict = {"corpus_mb": args.corpus_mb, "binary": str(binary)}

    async def stdio_part():
        with tempfile.TemporaryDirectory() as logs:
            async with contextlib.AsyncExitStack() as stack:
                session = await stdio_session(binary, tree, Path(logs), stack)
                log("ping under load")
                results["ping"] = await ping_under_load(session, 200)
                log("cancellation")
                results["cancel"] = await cancellation(session, Path(logs), args.cancel_rounds, args.cancel_after)

    anyio.run(stdio_part)
    daemon = Daemon(binary, tree)
    try:
        log("HTTP: one session")
        results["http_one"] = anyio.run(http_reads, daemon, 1, args.calls * 4)
        log(f"HTTP: {args.sessions} sessions")
        results["http_many"] = anyio.run(http_reads, daemon, args.sessions, args.calls)
    finally:
        daemon.stop()
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
