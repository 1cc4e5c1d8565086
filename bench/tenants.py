"""How much one crew's load slows another's calls on one daemon (issue 20's CPU share).

Two crews, `alpha` and `beta`, on one `vfs serve --listen`, each with a token, both speaking the
2026-07-28 protocol by raw HTTP (no SDK: the load generator must cost the two cores as little
as it can; it runs in a process of its own, so that beta's timing never waits for its
threads). `beta` makes one-line reads one after another and times them: first on an idle
daemon, then while `alpha` runs `--loops` clients, each sending reads as fast as it is answered
on a kept-alive connection. Prints beta's p50/p99 in both phases, their ratio, and alpha's
throughput and refusals (`503`); figures are ratios of the same run.

    python3 bench/tenants.py [--binary target/release/vfs] [--loops 32] [--reads 200] [-- DAEMON ARGS]
"""

import argparse
import http.client
import json
import multiprocessing
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKENS = {"alpha": "alpha-token-0123456789abcdef", "beta": "beta-token-0123456789abcdefg"}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tenants-bench", "version": "0"},
}


def call_body(path: str) -> bytes:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "read_text_file", "arguments": {"path": path}, "_meta": META}}
    return json.dumps(call).encode()


def headers(crew: str) -> dict:
    return {"Authorization": f"Bearer {TOKENS[crew]}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call", "Mcp-Name": "read_text_file"}


def read_once(connection: http.client.HTTPConnection, crew: str, body: bytes) -> int:
    connection.request("POST", f"/mcp/{crew}", body=body, headers=headers(crew))
    response = connection.getresponse()
    text = response.read()
    if response.status == 200 and b"one line" not in text:
        raise SystemExit(f"unexpected answer: {text[:200]!r}")
    return response.status


def timed_reads(host: str, port: int, count: int) -> list[float]:
    connection = http.client.HTTPConnection(host, port, timeout=60)
    body = call_body("/data/line.txt")
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        status = read_once(connection, "beta", body)
        samples.append(time.perf_counter() - started)
        if status != 200:
            raise SystemExit(f"beta's read was answered {status}")
    connection.close()
    return samples


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def load(host: str, port: int, loops: int, stop, answered, refused) -> None:
    """`loops` clients of alpha, each sending reads as fast as it is answered."""

    def client() -> None:
        connection = http.client.HTTPConnection(host, port, timeout=60)
        body = call_body("/data/line.txt")
        while not stop.is_set():
            try:
                status = read_once(connection, "alpha", body)
            except (OSError, http.client.HTTPException):
                connection.close()
                connection = http.client.HTTPConnection(host, port, timeout=60)
                continue
            counter = answered if status == 200 else refused
            with counter.get_lock():
                counter.value += 1

    threads = [threading.Thread(target=client, daemon=True) for _ in range(loops)]
    for thread in threads:
        thread.start()
    stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "vfs"))
    parser.add_argument("--loops", type=int, default=32)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("daemon_args", nargs="*")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="vfs-tenants-") as work:
        work = Path(work)
        (work / "data").mkdir()
        (work / "data" / "line.txt").write_text("one line\n")
        for crew in TOKENS:
            (work / "crews" / crew).mkdir(parents=True)
            (work / "crews" / crew / "crew.yaml").write_text("mounts: [/data]\n")
        (work / "tokens").write_text("".join(f"{crew} {token}\n" for crew, token in TOKENS.items()))
        command = [args.binary, "serve", "--listen", "127.0.0.1:0", "--mount", "data:/data:ro",
                   "--token-file", "tokens", "--crew", "crews/alpha", "--crew", "crews/beta", *args.daemon_args]
        daemon = subprocess.Popen(command, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        try:
            line = daemon.stderr.readline().decode()
            found = re.search(r"at http://(\S+):(\d+)", line)
            if not found:
                raise SystemExit(f"no address in the start-up line: {line!r}")
            host, port = found.group(1), int(found.group(2))
            threading.Thread(target=daemon.stderr.read, daemon=True).start()
            timed_reads(host, port, 20)
            idle = summary(timed_reads(host, port, args.reads))

            # The load runs in a process of its own: beta's timed reads must not wait for
            # the load's threads to let go of this interpreter's lock.
            stop = multiprocessing.Event()
            answered = multiprocessing.Value("q", 0)
            refused = multiprocessing.Value("q", 0)
            loader = multiprocessing.Process(target=load, args=(host, port, args.loops, stop, answered, refused))
            loader.start()
            time.sleep(1.0)
            started = time.perf_counter()
            before = (answered.value, refused.value)
            loaded = summary(timed_reads(host, port, args.reads))
            elapsed = time.perf_counter() - started
            after = (answered.value, refused.value)
            stop.set()
            loader.join(timeout=30)
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)

    rate = (after[0] - before[0]) / elapsed
    refused = after[1] - before[1]
    print(f"| beta's one-line read | p50 ms | p99 ms |")
    print("|---|---|---|")
    print(f"| idle daemon | {idle[0]:.2f} | {idle[1]:.2f} |")
    print(f"| alpha running {args.loops} clients | {loaded[0]:.2f} | {loaded[1]:.2f} |")
    print(f"| ratio | {loaded[0] / idle[0]:.2f}x | {loaded[1] / idle[1]:.2f}x |")
    print(f"\nalpha: {rate:.0f} reads/s answered, {refused} refused (503) while beta was timed")


if __name__ == "__main__":
    sys.exit(main())
