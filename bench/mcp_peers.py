#!/usr/bin/env python3
"""vfs next to its peer MCP filesystem servers (issue 5, section 3).

One workload, run in turn against `vfs serve`, the MCP reference filesystem server (npm
`@modelcontextprotocol/server-filesystem`) and `rust-mcp-filesystem` (crates.io), each driven
over stdio by the official Python `mcp` SDK:

  initialize           spawn of the server process to the end of the MCP handshake
  bare pipe            the handshake and the read loop again over a plain pipe without the SDK
                       (one JSON line out, one back): the server's own share of those figures
  idle RSS             VmRSS of the server process right after initialize
  trivial call         vfs `list_mounts`, the peers' `list_allowed_directories` (the round-trip
                       floor: client, transport and dispatch, no file system work)
  read_text_file       --calls calls cycling through a fixed list of files; p50, p99, calls/s
  list_directory       of the tree's root
  search_files         `**/*.rs` under the root
  directory_tree       of the root, with each server's own bounds (vfs stops at 2,000 entries,
                       the peers return the whole tree), and of the largest top-level subtree
                       under 1,800 entries, which every server answers in full (like for like)
  content search       vfs `grep` vs rust-mcp-filesystem `search_files_content`; the reference
                       server has none (n/a)
  peak RSS             VmHWM of the server process after the workload

vfs gets virtual paths (/data/...); the peers get absolute host paths into the same tree.
Single-shot operations run --reps times (the sub-millisecond ones, the trivial call and
list_directory, ten times as many) and report the median (every sample is in the JSON). The
whole workload runs --rounds times per server, the servers taking turns in alternating order,
and each figure is the median over the rounds.
Times are wall-clock round trips seen by the client (time.perf_counter), so they include the
Python SDK's own cost, the same for every server.

usage:
  python3 bench/mcp_peers.py                         # all three servers, 5,000 files, 1,000 calls, 3 rounds
  python3 bench/mcp_peers.py --servers vfs,reference --files 2000 --calls 500 --json out.json
  python3 bench/mcp_peers.py --smoke                 # vfs only, 200 files, 50 calls (CI)

Everything it needs goes under bench/.cache (git-ignored): the Python virtual environment
(`mcp` pinned as in tests/requirements.txt, psutil), the reference server (npm), the Rust peer
(`cargo install`), the generated trees and the servers' stderr logs. The script re-runs itself
inside that virtual environment. A peer that cannot be installed or started is reported as
unavailable; the run goes on.
"""

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CACHE = BENCH / ".cache"
# The virtual environment: bench/.cache/venv, or the one VFS_BENCH_VENV names (scripts/test
# passes the test suite's .venv, which has the same `mcp` pin, so CI builds one environment).
VENV = Path(os.environ.get("VFS_BENCH_VENV") or CACHE / "venv")
NODE_PREFIX = CACHE / "node"
CARGO_ROOT = CACHE / "cargo"
TREES = CACHE / "trees"
LOGS = CACHE / "logs"

PSUTIL_VERSION = "7.2.2"
REFERENCE_PACKAGE = "@modelcontextprotocol/server-filesystem"
REFERENCE_VERSION = "2026.8.31"
RUST_CRATE = "rust-mcp-filesystem"
RUST_VERSION = "0.4.5"

VIRTUAL_ROOT = "/data"
# vfs bounds directory_tree at 2,000 entries by default; the like-for-like subtree stays below.
SUBTREE_BOUND = 1800
NAME_GLOB = "**/*.rs"
# Literal text that matches a few dozen lines of the generated tree: well under vfs `grep`'s
# default 200-match bound, so every server has to read every file.
CONTENT_QUERY = "needle haystack context"
ALL_SERVERS = ["vfs", "reference", "rust"]
# Sub-millisecond single-shot operations are sampled ten times as often: five samples of a
# 0.5 ms call on a shared machine say more about the machine than about the server.
CHEAP_OPS = ("trivial", "list_directory")
CHEAP_REPS_FACTOR = 10
LABELS = {"vfs": "vfs", "reference": "reference", "rust": "rust-mcp-filesystem"}


# --- bootstrap: run inside bench/.cache/venv --------------------------------------------------


def venv_python() -> Path:
    return VENV / "bin" / "python"


def requirements() -> list[str]:
    pin = None
    for line in (ROOT / "tests" / "requirements.txt").read_text().splitlines():
        if line.strip().startswith("mcp=="):
            pin = line.strip()
    if pin is None:
        raise SystemExit("tests/requirements.txt has no `mcp==` pin")
    return [pin, f"psutil=={PSUTIL_VERSION}"]


def bootstrap():
    """Creates or refreshes the virtual environment, then re-executes this script inside it."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    wanted = requirements()
    stamp = VENV / ".bench-requirements"
    if not venv_python().exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if not stamp.exists() or stamp.read_text().split() != wanted:
        subprocess.run([str(venv_python()), "-m", "pip", "install", "-q", *wanted], check=True)
        stamp.write_text("\n".join(wanted) + "\n")
    os.execv(str(venv_python()), [str(venv_python()), str(Path(__file__).resolve()), *sys.argv[1:]])


# --- preparation: tree, binaries ---------------------------------------------------------------


def log(message: str):
    print(message, file=sys.stderr, flush=True)


def make_tree(files: int) -> Path:
    """The generated tree of `files` files (deterministic; made once, marked done beside it)."""
    dest = TREES / f"files-{files}"
    done = TREES / f"files-{files}.done"
    if not done.exists():
        if dest.exists():
            shutil.rmtree(dest)
        TREES.mkdir(parents=True, exist_ok=True)
        log(f"generating a {files}-file tree in {dest}")
        subprocess.run([sys.executable, str(BENCH / "gen_tree.py"), str(dest), str(files)], check=True)
        done.write_text("gen_tree.py seed 42\n")
    return dest.resolve()


def read_list(tree: Path, count: int) -> list[str]:
    """A fixed list of text files (relative paths), evenly spread over the sorted tree."""
    texts = []
    for directory, subdirs, names in os.walk(tree):
        subdirs.sort()
        for name in sorted(names):
            if name.rsplit(".", 1)[-1] in ("rs", "py", "md", "txt"):
                texts.append(os.path.relpath(os.path.join(directory, name), tree))
    texts.sort()
    step = max(1, len(texts) // count)
    return texts[::step][:count]


def subtree(tree: Path, bound: int) -> str:
    """The top-level directory (not ignored) with the most entries below `bound`: a tree every
    server answers in full, for a like-for-like directory_tree."""
    best, best_count = "", -1
    for child in sorted(tree.iterdir()):
        if not child.is_dir() or child.name == "ignored":
            continue
        count = sum(len(dirs) + len(names) for _, dirs, names in os.walk(child))
        if best_count < count < bound:
            best, best_count = child.name, count
    return best


def run_logged(command: list[str], logfile: Path, timeout: float) -> bool:
    LOGS.mkdir(parents=True, exist_ok=True)
    with open(logfile, "w") as out:
        try:
            return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode == 0
        except (OSError, subprocess.TimeoutExpired) as error:
            out.write(f"\n{error}\n")
            return False


def prepare_vfs(args) -> tuple[list[str] | None, str]:
    binary = Path(args.vfs_bin).resolve() if args.vfs_bin else ROOT / "target" / "release" / "vfs"
    if not binary.exists() and not args.vfs_bin and not args.no_install:
        log("building vfs: cargo build --release -p vfs-cli")
        command = ["cargo", "build", "--release", "-p", "vfs-cli"]
        if not run_logged(command, LOGS / "vfs-build.log", 3600):
            return None, f"cargo build failed (see {LOGS / 'vfs-build.log'})"
    if not binary.exists():
        return None, f"no vfs binary at {binary}"
    return [str(binary)], ""


def prepare_reference(args) -> tuple[list[str] | None, str]:
    entry = NODE_PREFIX / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
    node = shutil.which("node")
    if node is None:
        return None, "node is not installed"
    if not entry.exists() and not args.no_install:
        npm = shutil.which("npm")
        if npm is None:
            return None, "npm is not installed"
        log(f"installing {REFERENCE_PACKAGE}@{REFERENCE_VERSION} with npm into {NODE_PREFIX}")
        NODE_PREFIX.mkdir(parents=True, exist_ok=True)
        command = [npm, "install", "--prefix", str(NODE_PREFIX), "--no-audit", "--no-fund",
                   f"{REFERENCE_PACKAGE}@{REFERENCE_VERSION}"]
        if not run_logged(command, LOGS / "reference-install.log", 900):
            return None, f"npm install failed (see {LOGS / 'reference-install.log'})"
    if not entry.exists():
        return None, f"not installed ({entry} missing)"
    # node runs the entry point itself, so the server is the client's direct child.
    return [node, str(entry)], ""


def prepare_rust(args) -> tuple[list[str] | None, str]:
    binary = CARGO_ROOT / "bin" / RUST_CRATE
    if not binary.exists() and not args.no_install:
        log(f"installing {RUST_CRATE}@{RUST_VERSION} with cargo into {CARGO_ROOT} (slow: many minutes)")
        command = ["cargo", "install", "--locked", "--root", str(CARGO_ROOT), f"{RUST_CRATE}@{RUST_VERSION}"]
        if not run_logged(command, LOGS / "rust-install.log", 7200):
            return None, f"cargo install failed (see {LOGS / 'rust-install.log'})"
    if not binary.exists():
        return None, f"not installed ({binary} missing)"
    return [str(binary)], ""


# --- the workload ------------------------------------------------------------------------------


def percentile(samples: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in bytes."""
    figures = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                figures[key] = int(value.split()[0]) * 1024
    return figures


def result_text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def count_entries(text: str) -> int:
    """Entries in a tree or list answer: JSON nodes, or non-empty lines that are not notes."""
    try:
        data = json.loads(text)
    except ValueError:
        lines = text.splitlines()
        if lines and lines[0].startswith("/"):  # a text tree's root header, not an entry
            lines = lines[1:]
        return sum(1 for line in lines if line.strip() and not line.lstrip().startswith("["))

    def walk(node) -> int:
        if isinstance(node, list):
            return sum(walk(child) for child in node)
        if isinstance(node, dict):
            return 1 + walk(node.get("children", []))
        return 0

    return walk(data)


def count_lines(text: str, needle: str) -> int:
    return sum(1 for line in text.splitlines() if needle in line)


class Workload:
    def __init__(self, key: str, command: list[str], tree: Path, files: list[str], sub: str, args):
        self.key = key
        self.sub = sub
        self.command = command
        self.tree = tree
        self.files = files
        self.args = args
        if key == "vfs":
            self.root = VIRTUAL_ROOT
            self.argv = ["serve", "--mount", f"{tree}:{VIRTUAL_ROOT}:ro"]
            self.env = {"VFS_LOG": "warn"}
        else:
            self.root = str(tree)
            self.argv = [str(tree)]
            self.env = {}

    def path(self, relative: str) -> str:
        return f"{self.root}/{relative}" if relative else self.root

    def calls(self) -> dict[str, tuple[str, dict] | None]:
        root = self.root
        trivial = ("list_mounts", {}) if self.key == "vfs" else ("list_allowed_directories", {})
        if self.key == "vfs":
            content = ("grep", {"pattern": CONTENT_QUERY, "path": root, "literal": True})
        elif self.key == "rust":
            content = ("search_files_content", {"path": root, "pattern": "*", "query": CONTENT_QUERY})
        else:
            content = None
        return {
            "trivial": trivial,
            "list_directory": ("list_directory", {"path": root}),
            "search_files": ("search_files", {"path": root, "pattern": NAME_GLOB}),
            "directory_tree": ("directory_tree", {"path": root}),
            "directory_tree_sub": ("directory_tree", {"path": self.path(self.sub)}) if self.sub else None,
            "content_search": content,
        }

    def params(self):
        from mcp import StdioServerParameters

        return StdioServerParameters(
            command=self.command[0], args=[*self.command[1:], *self.argv], env=self.env, cwd=str(self.tree.parent)
        )

    async def open(self, stack, errlog):
        """Spawns and initializes; returns (session, pid, init seconds, init result)."""
        import psutil
        from mcp import ClientSession, stdio_client

        me = psutil.Process()
        before = {child.pid for child in me.children()}
        start = time.perf_counter()
        read, write = await stack.enter_async_context(stdio_client(self.params(), errlog=errlog))
        session = await stack.enter_async_context(ClientSession(read, write))
        init = await session.initialize()
        elapsed = time.perf_counter() - start
        spawned = [child.pid for child in me.children() if child.pid not in before]
        if len(spawned) != 1:
            raise RuntimeError(f"expected one server process, found {spawned}")
        return session, spawned[0], elapsed, init

    async def run(self) -> dict:
        from contextlib import AsyncExitStack

        LOGS.mkdir(parents=True, exist_ok=True)
        figures: dict = {"samples": {}}
        with open(LOGS / f"{self.key}-stderr.txt", "w") as errlog:
            # Extra handshakes first, each in a fresh process, for a steadier initialize figure.
            init_samples = []
            for _ in range(max(0, self.args.reps - 1)):
                async with AsyncExitStack() as stack:
                    _, _, elapsed, _ = await self.open(stack, errlog)
                    init_samples.append(elapsed)
            raw = [self.raw_session(0, errlog)[0] for _ in range(max(1, self.args.reps) - 1)]
            first, reads, cheap = self.raw_session(self.args.calls, errlog)
            for op, samples in cheap.items():
                figures["samples"][f"raw_{op}"] = samples
                figures[f"raw_{op}_s"] = statistics.median(samples)
            raw.insert(0, first)
            figures["samples"]["raw_initialize"] = raw
            figures["raw_initialize_s"] = statistics.median(raw)
            figures["samples"]["raw_read_text_file"] = reads
            figures["raw_read"] = {"p50_s": percentile(reads, 50), "p99_s": percentile(reads, 99),
                                   "calls_per_s": len(reads) / sum(reads)}
            async with AsyncExitStack() as stack:
                session, pid, elapsed, init = await self.open(stack, errlog)
                idle = proc_status(pid)
                init_samples.insert(0, elapsed)
                figures["server"] = f"{init.server_info.name} {init.server_info.version}"
                figures["pid"] = pid
                figures["samples"]["initialize"] = init_samples
                figures["initialize_s"] = statistics.median(init_samples)
                figures["initialize_first_s"] = init_samples[0]
                figures["idle_rss_bytes"] = idle["VmRSS"]
                # List the tools untimed: the SDK fetches them (for output-schema validation)
                # on the first call of a tool it has not seen, which would land in a timing.
                tools = {tool.name for tool in (await session.list_tools()).tools}
                figures["tools"] = sorted(tools)
                await self.workload(session, tools, figures)
                status = proc_status(pid)
                figures["peak_rss_bytes"] = status["VmHWM"]
                figures["final_rss_bytes"] = status["VmRSS"]
        return figures

    def raw_session(self, reads: int, errlog) -> tuple[float, list[float], dict[str, list[float]]]:
        """A bare pipe, without the SDK: spawn to the initialize answer, then `reads` read_text_file
        round trips (one line out, one line back) and, when `reads` is not 0, the cheap
        operations (the trivial call, list_directory) as often as the SDK workload samples them.
        The server's own share of the SDK figures."""
        env = {**os.environ, **self.env}
        errlog.flush()
        start = time.perf_counter()
        process = subprocess.Popen([*self.command, *self.argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=errlog, env=env, cwd=str(self.tree.parent))

        def exchange(message: dict) -> bytes:
            process.stdin.write((json.dumps(message) + "\n").encode())
            process.stdin.flush()
            return process.stdout.readline() if "id" in message else b""

        try:
            answer = exchange({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "mcp_peers", "version": "0"}}})
            initialize = time.perf_counter() - start
            if b'"result"' not in answer:
                raise RuntimeError(f"raw initialize: unexpected answer {answer[:200]!r}")
            exchange({"jsonrpc": "2.0", "method": "notifications/initialized"})
            samples = []
            for index in range(reads):
                arguments = {"path": self.path(self.files[index % len(self.files)])}
                begin = time.perf_counter()
                answer = exchange({"jsonrpc": "2.0", "id": index + 1, "method": "tools/call",
                                   "params": {"name": "read_text_file", "arguments": arguments}})
                samples.append(time.perf_counter() - begin)
                if b'"isError":true' in answer or b'"result"' not in answer:
                    raise RuntimeError(f"raw read_text_file: unexpected answer {answer[:200]!r}")
            cheap = {}
            calls = self.calls()
            for op in CHEAP_OPS if reads else ():
                name, arguments = calls[op]
                cheap[op] = []
                for index in range(self.args.reps * CHEAP_REPS_FACTOR):
                    begin = time.perf_counter()
                    answer = exchange({"jsonrpc": "2.0", "id": reads + 1 + index, "method": "tools/call",
                                       "params": {"name": name, "arguments": arguments}})
                    cheap[op].append(time.perf_counter() - begin)
                    if b'"isError":true' in answer or b'"result"' not in answer:
                        raise RuntimeError(f"raw {name}: unexpected answer {answer[:200]!r}")
        finally:
            try:
                process.stdin.close()
            except OSError:
                pass
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return initialize, samples, cheap

    async def timed(self, session, name: str, arguments: dict):
        start = time.perf_counter()
        result = await session.call_tool(name, arguments)
        return time.perf_counter() - start, result

    async def workload(self, session, tools: set[str], figures: dict):
        # read_text_file: a fixed list, cycled; the first pass checks the text against the file.
        expected = {rel: (self.tree / rel).read_text() for rel in self.files}
        samples, errors, mismatches = [], 0, 0
        loop_start = time.perf_counter()
        for index in range(self.args.calls):
            rel = self.files[index % len(self.files)]
            elapsed, result = await self.timed(session, "read_text_file", {"path": self.path(rel)})
            samples.append(elapsed)
            if result.is_error:
                errors += 1
            elif index < len(self.files) and result_text(result) != expected[rel]:
                mismatches += 1
        loop = time.perf_counter() - loop_start
        figures["samples"]["read_text_file"] = samples
        figures["read"] = {
            "calls": len(samples),
            "files": len(self.files),
            "p50_s": percentile(samples, 50),
            "p99_s": percentile(samples, 99),
            "mean_s": statistics.fmean(samples),
            "max_s": max(samples),
            "calls_per_s": len(samples) / loop,
            "errors": errors,
            "text_mismatches": mismatches,
        }

        ops = {}
        for op, call in self.calls().items():
            if call is None or call[0] not in tools:
                ops[op] = {"tool": call[0] if call else None, "available": False}
                continue
            name, arguments = call
            op_samples, result = [], None
            for _ in range(self.args.reps * (CHEAP_REPS_FACTOR if op in CHEAP_OPS else 1)):
                elapsed, result = await self.timed(session, name, arguments)
                op_samples.append(elapsed)
            text = result_text(result)
            entry = {
                "tool": name,
                "arguments": arguments,
                "available": True,
                "median_s": statistics.median(op_samples),
                "min_s": min(op_samples),
                "first_s": op_samples[0],
                "is_error": bool(result.is_error),
                "output_bytes": len(text.encode()),
            }
            if result.is_error:
                entry["error"] = text[:300]
            structured = result.structured_content
            if isinstance(structured, dict) and "truncated" in structured:
                entry["truncated"] = structured["truncated"]
            if op == "search_files":
                entry["matches"] = count_lines(text, ".rs")
            elif op in ("directory_tree", "directory_tree_sub"):
                entry["entries"] = count_entries(text)
                entry["truncated"] = entry.get("truncated", "truncated" in text.lower())
            elif op == "list_directory":
                entry["entries"] = count_lines(text, "[")
            elif op == "content_search":
                entry["matches"] = text.count(CONTENT_QUERY) if not result.is_error else 0
            figures["samples"][op] = op_samples
            ops[op] = entry
        figures["ops"] = ops


def measure(key: str, command: list[str], tree: Path, files: list[str], sub: str, args) -> dict:
    import anyio

    async def main():
        with anyio.fail_after(args.timeout):
            return await Workload(key, command, tree, files, sub, args).run()

    return anyio.run(main)


# --- report ------------------------------------------------------------------------------------


def ms(seconds):
    if seconds is None:
        return None
    return seconds * 1000


def rows_for(results: dict) -> list[tuple[str, dict, str]]:
    """(label, {server: value or str}, kind) rows; kind picks formatting and whether a ratio applies."""

    def get(key, *path):
        data = results.get(key, {})
        if data.get("status") != "ok":
            return "unavailable"
        node = data["figures"]
        for step in path:
            if not isinstance(node, dict) or step not in node:
                return "n/a"
            node = node[step]
        return node

    def op(key, name, field="median_s"):
        entry = get(key, "ops", name)
        if isinstance(entry, str):
            return entry
        if not entry.get("available"):
            return "n/a"
        if entry.get("is_error"):
            return "error"
        return entry.get(field, "n/a")

    keys = list(results)
    rows = [
        ("initialize, spawn to initialized (ms, median)", {k: get(k, "initialize_s") for k in keys}, "ms"),
        ("initialize, bare pipe without the SDK (ms, median)", {k: get(k, "raw_initialize_s") for k in keys}, "ms"),
        ("idle RSS after initialize (MiB)", {k: get(k, "idle_rss_bytes") for k in keys}, "mib"),
        ("trivial call round trip (ms, median)", {k: op(k, "trivial") for k in keys}, "ms"),
        ("read_text_file p50 (ms)", {k: get(k, "read", "p50_s") for k in keys}, "ms"),
        ("read_text_file p99 (ms)", {k: get(k, "read", "p99_s") for k in keys}, "ms"),
        ("read_text_file throughput (calls/s)", {k: get(k, "read", "calls_per_s") for k in keys}, "rate"),
        ("read_text_file p50, bare pipe without the SDK (ms)", {k: get(k, "raw_read", "p50_s") for k in keys}, "ms"),
        ("read_text_file p99, bare pipe without the SDK (ms)", {k: get(k, "raw_read", "p99_s") for k in keys}, "ms"),
        ("read_text_file throughput, bare pipe (calls/s)", {k: get(k, "raw_read", "calls_per_s") for k in keys}, "rate"),
        ("list_directory / (ms)", {k: op(k, "list_directory") for k in keys}, "ms"),
        ("trivial call, bare pipe without the SDK (ms, median)", {k: get(k, "raw_trivial_s") for k in keys}, "ms"),
        ("list_directory /, bare pipe without the SDK (ms, median)",
         {k: get(k, "raw_list_directory_s") for k in keys}, "ms"),
        (f"search_files `{NAME_GLOB}` (ms)", {k: op(k, "search_files") for k in keys}, "ms"),
        ("directory_tree / (ms)", {k: op(k, "directory_tree") for k in keys}, "ms"),
        ("directory_tree of a subtree all answer in full (ms)", {k: op(k, "directory_tree_sub") for k in keys}, "ms"),
        ("content search (ms)", {k: op(k, "content_search") for k in keys}, "ms"),
        ("peak RSS, VmHWM after workload (MiB)", {k: get(k, "peak_rss_bytes") for k in keys}, "mib"),
        ("· search_files matches", {k: op(k, "search_files", "matches") for k in keys}, "count"),
        ("· directory_tree entries returned", {k: op(k, "directory_tree", "entries") for k in keys}, "count"),
        ("· directory_tree output (KiB)", {k: op(k, "directory_tree", "output_bytes") for k in keys}, "kib"),
        ("· subtree entries returned", {k: op(k, "directory_tree_sub", "entries") for k in keys}, "count"),
        ("· content search matching lines", {k: op(k, "content_search", "matches") for k in keys}, "count"),
    ]
    return rows


def combine(rounds: list):
    """One figure set from several rounds: the median of every number, samples pooled."""
    first = rounds[0]
    if isinstance(first, dict):
        return {key: combine([r[key] for r in rounds if isinstance(r, dict) and key in r]) for key in first}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return statistics.median(rounds)
    if isinstance(first, list) and all(isinstance(r, list) for r in rounds):
        return [item for r in rounds for item in r]
    return first


def fmt(value, kind: str) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "n/a"
    if kind == "ms":
        value = value * 1000
        return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 100 else f"{value:.0f}"
    if kind == "mib":
        return f"{value / 2**20:.1f}"
    if kind == "kib":
        return f"{value / 1024:.0f}"
    if kind == "rate":
        return f"{value:.0f}"
    return str(value)


def table(results: dict) -> str:
    keys = list(results)
    peers = [k for k in keys if k != "vfs"]
    header = ["metric", *(LABELS[k] for k in keys)]
    if "vfs" in keys:
        header += [f"{LABELS[k]} / vfs" for k in peers]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, values, kind in rows_for(results):
        cells = [label, *(fmt(values[k], kind) for k in keys)]
        if "vfs" in keys:
            for peer in peers:
                a, b = values[peer], values["vfs"]
                ok = kind in ("ms", "mib", "rate") and all(isinstance(v, (int, float)) for v in (a, b)) and b
                cells.append(f"{a / b:.2f}×" if ok else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> dict:
    model = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def version(command):
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return None

    vfs_binary = ROOT / "target" / "release" / "vfs"
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "node": version(["node", "--version"]),
        "git_head": version(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "vfs_binary_mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(vfs_binary.stat().st_mtime))
        if vfs_binary.exists() else None,
        "git_dirty": bool(version(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default=",".join(ALL_SERVERS), help="comma-separated: vfs,reference,rust")
    parser.add_argument("--files", type=int, default=5000, help="files in the generated tree (default 5000)")
    parser.add_argument("--calls", type=int, default=1000, help="read_text_file calls (default 1000)")
    parser.add_argument("--read-files", type=int, default=50, help="files the read loop cycles through (default 50)")
    parser.add_argument("--reps", type=int, default=5,
                        help="repetitions of each single-shot operation and of initialize (default 5)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="times each server runs the workload, in alternating order; figures are "
                             "medians over rounds (default 3)")
    parser.add_argument("--json", metavar="OUT", help="write the raw figures as JSON to OUT")
    parser.add_argument("--smoke", action="store_true", help="vfs only, 200 files, 50 calls, 2 reps: seconds")
    parser.add_argument("--vfs", "--vfs-bin", dest="vfs_bin", help="the vfs binary (default target/release/vfs, built if missing)")
    parser.add_argument("--no-install", action="store_true", help="never build or install; missing is unavailable")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed per server (default 900)")
    parser.add_argument("--no-sdk-validation", action="store_true",
                        help="turn off the SDK's check of structured content against each tool's outputSchema "
                             "(a client cost that only servers declaring output schemas pay)")
    args = parser.parse_args()
    if args.smoke:
        args.servers, args.files, args.calls, args.reps, args.rounds = "vfs", 200, 50, 2, 1
    chosen = [s.strip() for s in args.servers.split(",") if s.strip()]
    unknown = set(chosen) - set(ALL_SERVERS)
    servers = [s for s in ALL_SERVERS if s in chosen]
    if unknown:
        parser.error(f"unknown servers: {', '.join(sorted(unknown))} (choose from {', '.join(ALL_SERVERS)})")

    bootstrap()
    if args.no_sdk_validation:
        from mcp.client.session import ClientSession

        async def skip_validation(self, name, result):
            return None

        ClientSession.validate_tool_result = skip_validation

    tree = make_tree(args.files)
    files = read_list(tree, args.read_files)
    sub = subtree(tree, SUBTREE_BOUND)
    prepare = {"vfs": prepare_vfs, "reference": prepare_reference, "rust": prepare_rust}
    results = {}
    commands = {}
    for key in servers:
        command, reason = prepare[key](args)
        if command is None:
            log(f"{LABELS[key]}: unavailable: {reason}")
            results[key] = {"status": "unavailable", "reason": reason}
        else:
            commands[key] = command
    # The servers take turns, round after round, in alternating order: on a shared machine the
    # load drifts over a minute, and a server measured only at its start or end would carry it.
    rounds: dict[str, list] = {key: [] for key in commands}
    for index in range(args.rounds):
        order = list(commands) if index % 2 == 0 else list(reversed(commands))
        for key in order:
            if key in results:  # failed in an earlier round
                continue
            log(f"{LABELS[key]}: round {index + 1} of {args.rounds} ({' '.join(commands[key])})")
            try:
                rounds[key].append(measure(key, commands[key], tree, files, sub, args))
            except BaseException as error:  # a peer that fails must not end the run
                if isinstance(error, KeyboardInterrupt):
                    raise
                reason = f"{type(error).__name__}: {error}".strip()
                for inner in getattr(error, "exceptions", []):  # exception groups from anyio
                    reason += f" [{type(inner).__name__}: {inner}]"
                log(f"{LABELS[key]}: unavailable: {reason} (server stderr: {LOGS / f'{key}-stderr.txt'})")
                results[key] = {"status": "unavailable", "reason": reason, "command": commands[key]}
    for key in commands:
        if key not in results:
            results[key] = {"status": "ok", "command": commands[key], "figures": combine(rounds[key]),
                            "rounds": rounds[key]}
    results = {key: results[key] for key in servers}

    report = {
        "machine": machine(),
        "config": {
            "files": args.files, "calls": args.calls, "read_files": len(files), "reps": args.reps,
            "rounds": args.rounds, "sdk_validation": not args.no_sdk_validation,
            "tree": str(tree), "name_glob": NAME_GLOB, "content_query": CONTENT_QUERY, "subtree": sub,
            "reference": f"{REFERENCE_PACKAGE}@{REFERENCE_VERSION}", "rust": f"{RUST_CRATE}@{RUST_VERSION}",
        },
        "results": results,
    }
    m = report["machine"]
    print(f"## MCP servers side by side: {args.files} files, {args.calls} read calls, {args.reps} reps, "
          f"{args.rounds} rounds\n")
    print(f"Machine: {m['nproc']} × {m['cpu_model']}, Linux {m['kernel']}, Python {m['python']}, node {m['node']}; "
          f"vfs at {m['git_head']}{' (dirty tree)' if m['git_dirty'] else ''}.\n")
    print(table(results))
    print("\nRatios are peer / vfs: above 1 means vfs is faster or smaller, except for throughput, "
          "where below 1 means vfs is faster.")
    for key, data in results.items():
        if data["status"] != "ok":
            print(f"\n{LABELS[key]}: unavailable: {data['reason']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        log(f"raw figures: {args.json}")
    if args.smoke:
        vfs = results.get("vfs", {})
        if vfs.get("status") != "ok":
            sys.exit("smoke: vfs did not run")
        figures = vfs["figures"]
        problems = [op for op, entry in figures["ops"].items() if entry.get("available") and entry.get("is_error")]
        if figures["read"]["errors"] or figures["read"]["text_mismatches"] or problems:
            sys.exit(f"smoke: vfs answered with errors: read {figures['read']}, ops {problems}")


if __name__ == "__main__":
    main()
