#!/usr/bin/env python3
"""An agent's `undo_changes` of a recursive delete, or of many changes (issue 24), one vfs
build against another.

For each round and each binary in turn: a tree of --files small files is written and synced to
the disk, `vfs serve --journal` deletes it with `delete_file` (recursive), the disk is synced
again (so that the delete's own writeback is not counted), and `undo_changes` is timed from
request to answer over stdio (raw JSON-RPC lines, no SDK). Every file must be back with its
content after each undo, or the run stops.

With --writes N, the session instead writes N new files, one `write_file` each (N entries),
and one `undo_changes {count: N}` undoes them all: what it costs to undo many entries rather
than one large one. Every file must be gone after it.

usage:
  python3 bench/agent_undo.py --vfs OLD --vfs NEW          # 10,000 files, 3 rounds
  python3 bench/agent_undo.py --vfs target/release/vfs --files 1000 --rounds 1
  python3 bench/agent_undo.py --vfs OLD --vfs NEW --writes 1000
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time


def tree(directory, files):
    for index in range(files):
        folder = os.path.join(directory, f"d{index // 100}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"f{index}.txt"), "w") as out:
            out.write(f"file {index}\n")


def same_tree(directory, files):
    for index in range(files):
        path = os.path.join(directory, f"d{index // 100}", f"f{index}.txt")
        with open(path) as found:
            if found.read() != f"file {index}\n":
                return False
    return sum(len(names) for _, _, names in os.walk(directory)) == files


def one_round(binary, base, files, writes):
    work, journal = os.path.join(base, "w"), os.path.join(base, "j")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(work)
    os.makedirs(journal)
    if not writes:
        tree(os.path.join(work, "tree"), files)
    subprocess.run(["sync"], check=True)
    server = subprocess.Popen(
        [binary, "serve", "--mount", f"{work}:/w:rw", "--journal", journal, "--no-read-before-edit"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def send(message):
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    def call(ident, name, arguments):
        send({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
              "params": {"name": name, "arguments": arguments}})
        started = time.perf_counter()
        answer = json.loads(server.stdout.readline())
        took = time.perf_counter() - started
        result = answer["result"]
        if result.get("isError"):
            raise SystemExit(f"{name} failed: {result['content'][0]['text'][:300]}")
        return took

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "agent_undo", "version": "1"}}})
    server.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    if writes:
        made = sum(call(index + 1, "write_file", {"path": f"/w/f{index}.txt", "content": f"file {index}\n"})
                   for index in range(writes))
        undone = call(writes + 1, "undo_changes", {"count": writes})
        server.stdin.close()
        server.wait()
        if os.listdir(work):
            raise SystemExit(f"{binary}: {len(os.listdir(work))} files were left after the undo")
        return made, undone
    deleted = call(1, "delete_file", {"path": "/w/tree", "recursive": True})
    subprocess.run(["sync"], check=True)
    undone = call(2, "undo_changes", {})
    server.stdin.close()
    server.wait()
    if not same_tree(os.path.join(work, "tree"), files):
        raise SystemExit(f"{binary}: the tree is not what was deleted")
    return deleted, undone


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vfs", action="append", required=True, help="a vfs binary (give two to compare)")
    parser.add_argument("--files", type=int, default=10_000, help="files in the tree (default 10,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per binary (default 3)")
    parser.add_argument("--writes", type=int, default=0,
                        help="instead of a tree's delete, undo this many writes of one file each")
    args = parser.parse_args()
    undone = {binary: [] for binary in args.vfs}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for binary in args.vfs:
                change, undo = one_round(binary, os.path.join(scratch, "run"), args.files, args.writes)
                undone[binary].append(undo)
                what = f"{args.writes} writes" if args.writes else "delete"
                print(f"round {round_ + 1}: {binary}: {what} {change * 1e3:.0f} ms, undo {undo * 1e3:.0f} ms",
                      flush=True)
    print()
    print("| binary | undo_changes, median | range |")
    print("|---|---|---|")
    for binary, samples in undone.items():
        print(f"| `{binary}` | {statistics.median(samples):.2f} s | {min(samples):.2f}–{max(samples):.2f} s |")


if __name__ == "__main__":
    main()
