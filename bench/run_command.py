#!/usr/bin/env python3
"""`run_command` latency (issue 23), against a baseline of the same run.

  true            start-to-answer of `run_command {"command": "true"}` over the MCP round trip
                  (the official Python SDK over stdio), p50 and p99; target p50 under 50 ms
  baseline        `get_file_info` on one file through the same session: the round trip
                  without a command
  cancel          from `notifications/cancelled` (the SDK's cancel scope) to the moment no
                  process of the command is left, p50 and max

usage:
  python3 bench/run_command.py             # release build, 200 calls per row
  python3 bench/run_command.py --smoke     # debug build, a handful of calls

It needs what the sandbox needs (root, /dev/fuse, bwrap); without them it says so and exits 0.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


def bootstrap():
    sys.path.insert(0, str(BENCH))
    from benchenv import bootstrap as enter

    enter(__file__)


def processes_with(marker: str) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read():
                        count += 1
            except OSError:
                pass
    return count


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def measure(binary: Path, calls: int):
    import anyio
    from mcp import Client, StdioServerParameters

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch) / "w"
        work.mkdir()
        (work / "a.txt").write_text("a\n")
        params = StdioServerParameters(
            command=str(binary), args=["serve", "--allow-run", "--mount", "./w:/w:rw"], cwd=scratch, env={"VFS_LOG": "warn"}
        )
        async with Client(params) as client:
            rows = {}
            for name, tool, arguments in [
                ("baseline", "get_file_info", {"path": "/w/a.txt"}),
                ("true", "run_command", {"command": "true"}),
            ]:
                await client.call_tool(tool, arguments)
                times = []
                for _ in range(calls):
                    started = time.perf_counter()
                    result = await client.call_tool(tool, arguments)
                    times.append((time.perf_counter() - started) * 1000)
                    assert not result.is_error, result
                rows[name] = times
            gone = []
            for index in range(max(3, calls // 20)):
                marker = f"sleep 99{index:03d}"
                with anyio.move_on_after(0.3):
                    await client.call_tool("run_command", {"command": f"{marker} & {marker}"})
                cancelled = time.perf_counter()
                while processes_with(marker):
                    await anyio.sleep(0.001)
                gone.append((time.perf_counter() - cancelled) * 1000)
            rows["cancel"] = gone
            return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true")
    options = parser.parse_args()
    if not (os.geteuid() == 0 and os.path.exists("/dev/fuse") and shutil.which("bwrap")):
        print("run_command: not measured: the sandbox needs root, /dev/fuse and bwrap")
        return
    profile = "debug" if options.smoke else "release"
    build = ["cargo", "build", "--quiet", "--locked", "-p", "vfs-cli"] + ([] if options.smoke else ["--release"])
    subprocess.run(build, cwd=ROOT, check=True)
    import anyio

    rows = anyio.run(measure, ROOT / "target" / profile / "vfs", 5 if options.smoke else 200)
    base = statistics.median(rows["baseline"])
    print(f"# run_command ({profile} build, {len(rows['true'])} calls per row)")
    print("| row | p50 ms | p99 ms | p50 against the baseline |")
    print("|---|---|---|---|")
    for name in ["baseline", "true"]:
        values = rows[name]
        p50 = statistics.median(values)
        print(f"| {name} | {p50:.1f} | {percentile(values, 0.99):.1f} | {p50 / base:.1f}x |")
    print(f"| cancel to no process left | {statistics.median(rows['cancel']):.1f} | max {max(rows['cancel']):.1f} | |")


if __name__ == "__main__":
    bootstrap()
    main()
