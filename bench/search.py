#!/usr/bin/env python3
"""Search, tree and listing costs of the `vfs` binary, as whole processes, against ripgrep.

Sections 2 and 4 of the performance issue:
  * content search through vfs (`vfs call grep`) next to `rg` with equivalent flags on a
    generated tree (20,000 files by default), plus `search_files` and `directory_tree` times;
  * how cost grows: the same operations on trees of 1,000, 10,000 and 100,000 files (time,
    output bytes and peak resident memory of each process);
  * a line window read beyond a 4 GiB hole of a sparse file, with its peak resident memory.

Every figure is the median of several runs measured in this run on this machine; ratios are
against a baseline from the same run. `--smoke` shrinks everything to seconds for CI.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PATTERN = "impl trait match"


GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def run(command, cwd=None):
    """Runs a command; returns (seconds, stdout bytes, peak RSS in KiB, exit code).

    Peak RSS comes from GNU time when present: a child forked straight from this Python
    process would report Python's own pages as its peak (the maximum survives exec).
    """
    with tempfile.NamedTemporaryFile("r") as report:
        wrapped = [GNU_TIME, "-f", "%M", "-o", report.name, *command] if GNU_TIME else command
        started = time.perf_counter()
        process = subprocess.Popen(wrapped, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd)
        output = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        rss = usage.ru_maxrss
        if GNU_TIME:
            text = report.read().strip().splitlines()
            rss = int(text[-1]) if text and text[-1].isdigit() else rss
    return elapsed, output, rss, code


def median_run(command, repeat):
    runs = [run(command) for _ in range(repeat)]
    seconds = statistics.median(r[0] for r in runs)
    return {"seconds": seconds, "bytes": len(runs[0][1]), "rss_kib": max(r[2] for r in runs), "code": runs[0][3], "output": runs[0][1]}


def generate(dest, files):
    if not os.path.isdir(dest):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_tree.py"), dest, str(files)], check=True)
    return dest


# Extra launch options for every vfs call (`--vfs-arg=--no-default-hide` measures without the
# default name rules).
EXTRA_VFS_ARGS: list[str] = []


def vfs_call(vfs, tree, tool, arguments):
    return [vfs, "call", tool, json.dumps(arguments), "--mount", f"{tree}:/data:ro", *EXTRA_VFS_ARGS]


def section_search(vfs, rg, tree, repeat):
    rows = []
    grep = median_run(vfs_call(vfs, tree, "grep", {"pattern": PATTERN, "path": "/data", "maxResults": 1000}), repeat)
    rows.append(("grep (vfs call)", grep))
    if rg:
        baseline = median_run([rg, "--hidden", "--no-require-git", "-n", PATTERN, tree], repeat)
        rows.append(("rg --hidden --no-require-git -n", baseline))
        vfs_lines = grep["output"].count(b"\n")
        rg_lines = baseline["output"].count(b"\n")
        rows.append(("matching lines (vfs / rg)", {"text": f"{vfs_lines} / {rg_lines}"}))
        rows.append(("ratio grep / rg", {"text": f"{grep['seconds'] / baseline['seconds']:.2f}x (target <= 1.25x)"}))
    rows.append(("search_files **/*.rs", median_run(vfs_call(vfs, tree, "search_files", {"path": "/data", "pattern": "**/*.rs"}), repeat)))
    rows.append(("directory_tree", median_run(vfs_call(vfs, tree, "directory_tree", {"path": "/data"}), repeat)))
    rows.append(("list_directory", median_run(vfs_call(vfs, tree, "list_directory", {"path": "/data"}), repeat)))
    return rows


def section_growth(vfs, base, sizes, repeat):
    table = []
    for size in sizes:
        tree = generate(os.path.join(base, f"tree-{size}"), size)
        for tool, arguments in [
            ("grep", {"pattern": PATTERN, "path": "/data", "maxResults": 1000}),
            ("search_files", {"path": "/data", "pattern": "**/*.rs"}),
            ("directory_tree", {"path": "/data"}),
            ("list_directory", {"path": "/data"}),
        ]:
            result = median_run(vfs_call(vfs, tree, tool, arguments), repeat)
            table.append((size, tool, result))
    return table


def section_sparse(vfs, base, gib):
    directory = os.path.join(base, "sparse")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "big.log")
    with open(path, "wb") as handle:
        handle.write(b"first line\nsecond line\n")
        handle.truncate(gib * 1024 * 1024 * 1024)
        handle.seek(0, os.SEEK_END)
        handle.write(b"\n" + b"".join(b"tail line %d\n" % index for index in range(10)))
    results = []
    for label, arguments in [
        ("head 2", {"path": "/data/big.log", "head": 2}),
        ("tail 3", {"path": "/data/big.log", "tail": 3}),
        ("offset past the hole", {"path": "/data/big.log", "offset": 4, "limit": 3}),
    ]:
        seconds, output, rss, code = run(vfs_call(vfs, directory, "read_text_file", arguments))
        results.append((label, seconds, rss, code, output.decode(errors="replace").strip().splitlines()[:3]))
    os.remove(path)
    return results


def fmt_row(name, result):
    if "text" in result:
        return f"| {name} | {result['text']} | | |"
    return f"| {name} | {result['seconds'] * 1000:.1f} ms | {result['bytes']:,} | {result['rss_kib'] / 1024:.1f} MiB |"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vfs", default=os.path.join(HERE, "..", "target", "release", "vfs"))
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--growth", default="1000,10000,100000")
    parser.add_argument("--sparse-gib", type=int, default=4)
    parser.add_argument("--work", default=os.path.join(HERE, ".cache", "trees"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds not minutes (CI)")
    parser.add_argument("--vfs-arg", action="append", default=[], help="an extra launch option for every vfs call")
    args = parser.parse_args()
    if args.smoke:
        args.files, args.repeat, args.growth, args.sparse_gib = 300, 1, "100,300", 1
        args.work = tempfile.mkdtemp(prefix="vfs-bench-")
    os.makedirs(args.work, exist_ok=True)
    vfs = os.path.abspath(args.vfs)
    EXTRA_VFS_ARGS.extend(args.vfs_arg)
    rg = shutil.which("rg")

    tree = generate(os.path.join(args.work, f"tree-{args.files}"), args.files)
    print(f"## Search on a {args.files:,}-file tree (median of {args.repeat}, whole processes)\n")
    print("| operation | wall time | output bytes | peak RSS |\n|---|---|---|---|")
    for name, result in section_search(vfs, rg, tree, args.repeat):
        print(fmt_row(name, result))
    if not rg:
        print("\n(rg not found: install Debian's `ripgrep` for the comparison)")

    sizes = [int(size) for size in args.growth.split(",")]
    print(f"\n## How cost grows (median of {args.repeat})\n")
    print("| files | operation | wall time | output bytes | peak RSS |\n|---|---|---|---|---|")
    for size, tool, result in section_growth(vfs, args.work, sizes, args.repeat):
        print(f"| {size:,} | {tool} | {result['seconds'] * 1000:.1f} ms | {result['bytes']:,} | {result['rss_kib'] / 1024:.1f} MiB |")

    print(f"\n## A window of a {args.sparse_gib} GiB sparse file\n")
    print("| window | wall time | peak RSS | exit | first lines |\n|---|---|---|---|---|")
    for label, seconds, rss, code, lines in section_sparse(vfs, args.work, args.sparse_gib):
        print(f"| {label} | {seconds * 1000:.1f} ms | {rss / 1024:.1f} MiB | {code} | {' / '.join(lines)} |")
    if args.smoke:
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
