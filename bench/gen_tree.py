#!/usr/bin/env python3
"""Generates a deterministic source-like tree for the search benchmarks.

usage: gen_tree.py DEST FILES [SEED]

DEST gets FILES files spread over nested directories (up to 4 levels, about 40 files per
directory): mostly text files of Rust-, Python- and Markdown-like lines, 2% binary files (with
NUL bytes), and an `ignored/` directory plus `*.log` files that a top-level .gitignore excludes.
The same FILES and SEED always give the same tree, byte for byte.
"""

import os
import random
import sys

WORDS = (
    "alpha beta gamma delta mount virtual path resolve handle confine agent tool search "
    "buffer reader writer option result error kind rights visibility crew output source "
    "vendor module function struct impl trait match needle haystack context window"
).split()


def line(rng):
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
    kind = rng.random()
    if kind < 0.4:
        return f"    let {rng.choice(WORDS)} = {words};\n"
    if kind < 0.7:
        return f"def {rng.choice(WORDS)}_{rng.randint(0, 999)}(): return '{words}'\n"
    return f"{words}\n"


def main():
    dest, count = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 42
    rng = random.Random(seed)
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, ".gitignore"), "w") as handle:
        handle.write("ignored/\n*.log\n")
    directories = [""]
    for index in range(count):
        if index % 40 == 0:
            parent = rng.choice(directories)
            depth = parent.count("/") + (1 if parent else 0)
            name = f"d{index // 40:04d}"
            directory = f"{parent}/{name}" if parent and depth < 4 else name
            if index % 400 == 0:
                directory = f"ignored/{name}"
            directories.append(directory)
            os.makedirs(os.path.join(dest, directory), exist_ok=True)
        roll = rng.random()
        directory = directories[-1]
        if roll < 0.02:
            path = os.path.join(dest, directory, f"blob{index}.bin")
            with open(path, "wb") as handle:
                handle.write(bytes(rng.getrandbits(8) for _ in range(2048)) + b"\0" * 64)
            continue
        extension = "log" if roll < 0.05 else rng.choice(["rs", "py", "md", "txt"])
        path = os.path.join(dest, directory, f"file{index}.{extension}")
        with open(path, "w") as handle:
            handle.writelines(line(rng) for _ in range(rng.randint(10, 120)))


if __name__ == "__main__":
    main()
