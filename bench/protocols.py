#!/usr/bin/env python3
"""vfs under both protocol generations, and the daemon's cost per session and per token
(issues 20 and 21), each figure against a baseline of the same run.

  generations     read_text_file p50/p99 and a read-then-edit pair through the official
                  Python SDK's `Client` in its default mode (2026-07-28, no sessions) and in
                  `mode="legacy"` (the handshake), over stdio and over HTTP, and
                  rust-mcp-filesystem over stdio in the same run (the SDK falls back to the
                  handshake with it)
  memory          the daemon's resident memory after 1,000 idle sessions (handshake, no call)
                  and after 1,000 principals (tokens, one 2026-07-28 call each), per session
                  and per principal, against the daemon at rest
  fairness        p99 of a one-line read by one client while another runs as many long greps
                  as the pool holds, against the same reads on the idle daemon

usage:
  python3 bench/protocols.py                # release build, 300 calls per row, 1,000 sessions
  python3 bench/protocols.py --smoke        # debug build, a handful of calls (CI)
  python3 bench/protocols.py --json out.json

Everything goes under bench/.cache, like bench/mcp_peers.py (whose virtual environment and
rust-mcp-filesystem it uses; without that peer its row says so).
"""

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CACHE = BENCH / ".cache"
RUST_PEER = CACHE / "cargo" / "bin" / "rust-mcp-filesystem"
TOKEN = "bench-token-0123456789abcdef"


def bootstrap():
    """Runs inside the benchmarks' virtual environment (bench/benchenv.py)."""
    sys.path.insert(0, str(BENCH))
    from benchenv import bootstrap as enter

    enter(__file__)

def log(message: str):
    print(message, file=sys.stderr, flush=True)


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def tree(base: Path) -> Path:
    """Small files to read and edit, and a tree a grep takes a while over."""
    (base / "small").mkdir(parents=True)
    for index in range(64):
        (base / "small" / f"f{index:02}.txt").write_text(f"small file {index}\n" * 20)
    (base / "edit").mkdir()
    (base / "big").mkdir()
    line = "alpha beta gamma café delta naïve mount virtual path résumé\n"
    for index in range(200):
        (base / "big" / f"b{index:03}.txt").write_text(line * 4000)
    return base


class Daemon:
    def __init__(self, binary: Path, data: Path, tokens: Path, *extra: str):
        self.process = subprocess.Popen(
            [str(binary), "serve", "--listen", "127.0.0.1:0", "--mount", f"{data}:/data:rw", "--token-file", str(tokens),
             "--max-sessions", "5000", "--max-sessions-per-token", "5000", "--no-read-before-edit", *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={"VFS_LOG": "error", "PATH": os.environ.get("PATH", "")},
        )
        status = self.process.stderr.readline().decode()
        match = re.search(r"at http://(\S+) ", status)
        assert match, status
        self.base = f"http://{match.group(1)}"

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


@contextlib.asynccontextmanager
async def connect(kind: str, mode: str, binary: Path, data: Path, url: str | None):
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    if url is not None:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                yield client
        return
    if kind == "rust":
        params = StdioServerParameters(command=str(RUST_PEER), args=["--allow-write", str(data)], env={})
    else:
        params = StdioServerParameters(
            command=str(binary), args=["serve", "--mount", f"{data}:/data:rw", "--no-read-before-edit"], env={"VFS_LOG": "error"}
        )
    async with Client(params, mode=mode) as client:
        yield client


async def generation(kind: str, mode: str, binary: Path, data: Path, url: str | None, calls: int) -> dict:
    root = str(data) if kind == "rust" else "/data"
    reads, pairs = [], []
    async with connect(kind, mode, binary, data, url) as client:
        target = f"{root}/edit/{kind}-{mode}-{'http' if url else 'stdio'}.txt"
        await client.call_tool("write_file", {"path": target, "content": "x 0\n"})
        for call in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("read_text_file", {"path": f"{root}/small/f{call % 64:02}.txt"})
            reads.append(time.perf_counter() - started)
            assert not result.is_error, result
        for call in range(calls // 4):
            started = time.perf_counter()
            await client.call_tool("read_text_file", {"path": target})
            edited = await client.call_tool(
                "edit_file", {"path": target, "edits": [{"oldText": f"x {call}\n", "newText": f"x {call + 1}\n"}]}
            )
            pairs.append(time.perf_counter() - started)
            assert not edited.is_error, edited
        version = client.protocol_version
    return {"protocol": version, "read_p50_ms": ms(percentile(reads, 50)), "read_p99_ms": ms(percentile(reads, 99)),
            "pair_p50_ms": ms(percentile(pairs, 50))}


def memory(binary: Path, data: Path, count: int, work: Path) -> dict:
    import httpx2

    tokens = work / "tokens"
    tokens.write_text("".join(f"token-{index:06}-0123456789abcdef\n" for index in range(count)) + f"{TOKEN}\n")
    daemon = Daemon(binary, data, tokens)
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}}
    try:
        with httpx2.Client(timeout=30) as http:
            url = f"{daemon.base}/mcp"
            # Warm: one session and one principal, so that what grows is per session.
            http.post(url, headers={**accept, "Authorization": f"Bearer {TOKEN}"}, json=init)
            time.sleep(0.5)
            rest = daemon.rss_kib()
            for _ in range(count):
                answer = http.post(url, headers={**accept, "Authorization": f"Bearer {TOKEN}"}, json=init)
                assert answer.status_code == 200, answer.text
            time.sleep(0.5)
            sessions = daemon.rss_kib()
            for index in range(count):
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "read_text_file", "arguments": {"path": "/data/small/f00.txt"}, "_meta": meta}}
                headers = {**accept, "Authorization": f"Bearer token-{index:06}-0123456789abcdef",
                           "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "read_text_file"}
                answer = http.post(url, headers=headers, json=call)
                assert answer.status_code == 200, answer.text
            time.sleep(0.5)
            principals = daemon.rss_kib()
    finally:
        daemon.stop()
    return {"count": count, "rest_kib": rest, "per_session_kib": round((sessions - rest) / count, 1),
            "per_principal_kib": round((principals - sessions) / count, 1)}


async def fairness(binary: Path, data: Path, work: Path, reads: int, pool: int) -> dict:
    import anyio

    tokens = work / "fair-tokens"
    tokens.write_text(f"{TOKEN}\n")
    daemon = Daemon(binary, data, tokens)
    url = f"{daemon.base}/mcp"
    try:
        async with connect("vfs", "legacy", binary, data, url) as greedy, connect("vfs", "auto", binary, data, url) as reader:
            async def timed_reads() -> list[float]:
                samples = []
                for call in range(reads):
                    started = time.perf_counter()
                    await reader.call_tool("read_text_file", {"path": f"/data/small/f{call % 64:02}.txt"})
                    samples.append(time.perf_counter() - started)
                return samples

            idle = await timed_reads()
            loaded: list[float] = []

            async def grep():
                await greedy.call_tool("grep", {"pattern": r"(?i)\b\w{3}[0-9]", "path": "/data/big"})

            async with anyio.create_task_group() as group:
                for _ in range(pool):
                    group.start_soon(grep)
                await anyio.sleep(0.2)
                loaded = await timed_reads()
    finally:
        daemon.stop()
    return {"greps": pool, "idle_p99_ms": ms(percentile(idle, 99)), "loaded_p50_ms": ms(percentile(loaded, 50)),
            "loaded_p99_ms": ms(percentile(loaded, 99))}


def report(results: dict) -> str:
    lines = ["| row | protocol | read p50 (ms) | read p99 (ms) | read+edit p50 (ms) | read p50 vs vfs stdio default |",
             "|---|---|---|---|---|---|"]
    base = results["generations"]["vfs stdio auto"]["read_p50_ms"]
    for name, row in results["generations"].items():
        if "unavailable" in row:
            lines.append(f"| {name} | unavailable: {row['unavailable']} | | | | |")
            continue
        lines.append(f"| {name} | {row['protocol']} | {row['read_p50_ms']} | {row['read_p99_ms']} | {row['pair_p50_ms']} | "
                     f"{row['read_p50_ms'] / base:.2f}× |")
    memory = results["memory"]
    lines += ["", "| daemon memory | KiB |", "|---|---|", f"| at rest | {memory['rest_kib']} |",
              f"| per idle session (of {memory['count']}) | {memory['per_session_kib']} |",
              f"| per principal (of {memory['count']}) | {memory['per_principal_kib']} |"]
    fair = results["fairness"]
    lines += ["", "| fairness: one-line reads | ms |", "|---|---|", f"| p99, idle daemon | {fair['idle_p99_ms']} |",
              f"| p50 while another client runs {fair['greps']} greps | {fair['loaded_p50_ms']} |",
              f"| p99 while another client runs {fair['greps']} greps | {fair['loaded_p99_ms']} ({fair['loaded_p99_ms'] / fair['idle_p99_ms']:.2f}× idle) |"]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vfs", default=str(ROOT / "target" / "release" / "vfs"))
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.smoke:
        args.vfs, args.calls, args.sessions = str(ROOT / "target" / "debug" / "vfs"), 8, 20
    bootstrap()
    import anyio

    binary = Path(args.vfs).resolve()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        data = tree(work / "data")
        tokens = work / "tokens-one"
        tokens.write_text(f"{TOKEN}\n")
        results: dict = {"binary": str(binary), "generations": {}}
        daemon = Daemon(binary, data, tokens)
        try:
            rows = [("vfs stdio auto", "vfs", "auto", None), ("vfs stdio legacy", "vfs", "legacy", None),
                    ("vfs http auto", "vfs", "auto", f"{daemon.base}/mcp"), ("vfs http legacy", "vfs", "legacy", f"{daemon.base}/mcp"),
                    ("rust-mcp-filesystem stdio auto", "rust", "auto", None)]
            for name, kind, mode, url in rows:
                if kind == "rust" and not RUST_PEER.exists():
                    results["generations"][name] = {"unavailable": f"{RUST_PEER} missing (bench/mcp_peers.py installs it)"}
                    continue
                log(name)
                results["generations"][name] = anyio.run(generation, kind, mode, binary, data, url, args.calls)
        finally:
            daemon.stop()
        log("memory")
        results["memory"] = memory(binary, data, args.sessions, work)
        log("fairness")
        cores = os.cpu_count() or 1
        results["fairness"] = anyio.run(fairness, binary, data, work, max(args.calls // 3, 5), min(max(cores * 4, 4), 64))
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
