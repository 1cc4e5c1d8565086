"""Crash consistency and hostile input, driven over a raw stdio pipe (no SDK) so the test controls
exactly what is sent and when the server dies.

* SIGKILL in the middle of a stream of writes: every file holds one whole version (old or
  new, never a mix), no temporary file is visible, and the exchange log holds only whole lines.
* Huge and malformed input: a protocol error or a clean tool error, and the server keeps
  serving.
"""

import json
import os
import pathlib
import signal
import subprocess
import threading
import time

import pytest

from conftest import BINARY

FILES = 6


def start(root: pathlib.Path, *launch: str, warnings: bool = False) -> subprocess.Popen:
    """`vfs serve` over stdio; with `warnings`, its warnings on a pipe (else errors, dropped)."""
    assert BINARY.exists(), f"build the binary first: {BINARY}"
    return subprocess.Popen(
        [str(BINARY), "serve", *launch],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if warnings else subprocess.DEVNULL,
        env={"VFS_LOG": "warn" if warnings else "error", "PATH": os.environ.get("PATH", "")},
    )


def send(process: subprocess.Popen, message: dict) -> None:
    process.stdin.write((json.dumps(message) + "\n").encode())
    process.stdin.flush()


def receive(process: subprocess.Popen) -> dict:
    line = process.stdout.readline()
    assert line, "the server closed its output"
    return json.loads(line)


def initialize(process: subprocess.Popen) -> None:
    send(
        process,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "crash", "version": "1"}},
        },
    )
    assert receive(process)["id"] == 0
    send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})


def call(process: subprocess.Popen, ident: int, tool: str, arguments: dict) -> None:
    send(process, {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})


def content(file: int, version: int) -> str:
    # Distinct sizes and bodies, so a mix of two versions can never look whole.
    return f"file {file} version {version}\n" + (chr(ord("a") + version % 26) * (4096 * (1 + version % 7)))


def test_sigkill_mid_stream_leaves_whole_files_and_whole_log_lines(tmp_path):
    root = tmp_path / "root"
    (root / "out").mkdir(parents=True)
    written = {file: {content(file, 0)} for file in range(FILES)}
    for file in range(FILES):
        (root / "out" / f"f{file}.txt").write_text(content(file, 0))
    for round_number in range(3):
        # The writes overwrite files this session never read: the rule that asks for a read
        # first is not what this test is about.
        process = start(root, "--mount", "out:/output:rw", "--llm-log", "logs", "--no-read-before-edit")
        initialize(process)
        # A client reads its answers: the server stops reading requests while too many wait
        # to be written.
        drain = threading.Thread(target=lambda output=process.stdout: output.read(), daemon=True)
        drain.start()
        ident = 1
        deadline = time.monotonic() + 0.3 + 0.1 * round_number
        version = 1 + round_number * 1000
        while time.monotonic() < deadline:
            file = ident % FILES
            body = content(file, version)
            written[file].add(body)
            call(process, ident, "write_file", {"path": f"/output/f{file}.txt", "content": body, "overwrite": True})
            ident += 1
            version += 1
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        drain.join(timeout=10)
        for file in range(FILES):
            assert (root / "out" / f"f{file}.txt").read_text() in written[file], f"f{file}.txt holds a mix"
    names = sorted(path.name for path in (root / "out").iterdir() if not path.name.startswith(".vfs-tmp-"))
    assert names == [f"f{file}.txt" for file in range(FILES)]
    # A log file is made with its first record, so a round killed before any call ended has
    # none. A kill can cut the one write in progress (a record of more than a page is copied
    # into the file page by page, and SIGKILL stops it between two): the last line may be cut,
    # every line before it is whole.
    logs = sorted((root / "logs").iterdir())
    assert 1 <= len(logs) <= 3, logs
    records = 0
    for log in logs:
        lines = log.read_text().split("\n")
        for line in lines[:-1]:
            record = json.loads(line)
            assert record["tool"] == "write_file"
            records += 1
        if lines[-1]:
            with pytest.raises(json.JSONDecodeError):
                json.loads(lines[-1])
    assert records > 0, "no call was logged"
    # The survivors of the crashes are invisible to agents.
    process = start(root, "--mount", "out:/output:rw")
    initialize(process)
    call(process, 1, "list_directory", {"path": "/output"})
    listing = receive(process)["result"]["content"][0]["text"]
    assert listing == "".join(f"[FILE] f{file}.txt\n" for file in range(FILES))
    process.kill()
    process.wait()


def test_huge_and_malformed_input_gets_an_answer_and_the_server_keeps_serving(tmp_path):
    root = tmp_path / "root"
    (root / "out").mkdir(parents=True)
    process = start(root, "--mount", "out:/output:rw")
    initialize(process)

    process.stdin.write(b"{not json at all\n")
    process.stdin.flush()
    assert receive(process)["error"]["code"] == -32700

    # Five million tiny values (15 MiB, under the line bound) are refused before anything
    # parses them whole.
    junk = b"[" + b",".join([b"[]"] * 5_000_000) + b"]"
    process.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"ping","junk":' + junk + b"}\n")
    process.stdin.flush()
    assert receive(process)["error"] == {
        "code": -32600,
        "message": "invalid request: the message holds more than 100000 JSON values; send fewer items in one request",
    }

    call(process, 1, "write_file", {"path": "/output/a.txt", "content": 42})
    answer = receive(process)["result"]
    assert answer["isError"] is True
    assert answer["content"][0]["text"].startswith("invalid arguments for `write_file`: `content` must be a string")

    call(process, 2, "no_such_tool", {})
    assert receive(process)["error"]["code"] == -32602

    call(process, 3, "read_text_file", {"path": "/output/" + "a" * 200_000})
    answer = receive(process)["result"]
    assert answer["isError"] is True
    assert answer["content"][0]["text"] == "invalid path: the path is longer than 4096 bytes"

    call(process, 4, "write_file", {"path": "/output/big.txt", "content": "x" * (16 * 1024 * 1024 + 1)})
    # A message over the protocol's 16 MiB line bound is refused as a whole (the write cap is
    # the same 16 MiB, so this is where an oversized write ends), with the id at its head.
    answer = receive(process)
    assert (answer["id"], answer["error"]) == (4, {"code": -32700, "message": "parse error: the message is longer than 16 MiB"})
    assert not (root / "out" / "big.txt").exists()

    call(process, 5, "list_mounts", {})
    assert receive(process)["result"]["content"][0]["text"].startswith("/output")
    process.kill()
    process.wait()


def test_sigkill_mid_delete_keeps_what_the_delete_took_and_its_undo_puts_it_back(tmp_path):
    """A recursive delete killed part way: every file is still in the tree or in the journal's
    `images/` (its intent names none of them), beside the delete's record of which image is which
    file. The entry is incomplete, `--last` passes over it, the next server, alone on the journal,
    keeps those files and says so, and removes an image that no line names; `vfs undo --change`
    of the entry puts back every file the delete took."""
    root = tmp_path / "root"
    files = 20_000
    for index in range(files):
        directory = root / "out" / "tree" / f"d{index // 200}"
        if index % 200 == 0:
            directory.mkdir(parents=True)
        (directory / f"f{index}.txt").write_text(f"{index}\n")
    launch = ("--mount", "out:/output:rw", "--journal", "journal", "--no-read-before-edit")
    process = start(root, *launch)
    initialize(process)
    call(process, 1, "delete_file", {"path": "/output/tree", "recursive": True})
    images = root / "journal" / "images"
    deadline = time.monotonic() + 60
    while not (images.is_dir() and any(not entry.name.endswith(".taking") for entry in os.scandir(images))):
        assert time.monotonic() < deadline, "the delete never began"
        time.sleep(0.001)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)

    lines = [json.loads(line) for line in (root / "journal" / "journal.jsonl").read_text().splitlines()]
    if any("id" in line for line in lines):
        pytest.skip("the delete ended before the kill reached it (a slow runner): nothing killed to check")
    names = sorted(path.name for path in images.iterdir())
    records = [name for name in names if name.endswith(".taking")]
    taken = [name for name in names if not name.endswith(".taking")]
    left = sum(1 for path in (root / "out").rglob("*.txt"))
    assert len(records) == 1, names
    assert 0 < len(taken) <= files, "killed after the delete began"
    assert left + len(taken) == files, "every file is in the tree or in images/"
    noted = {image for line in (images / records[0]).read_text().splitlines() for _, image in json.loads(line)["files"]}
    assert set(taken) <= noted, "the record names every image the delete took"
    assert [(line["operation"], line["images"], "intent" in line) for line in lines] == [("remove", [], True)]
    (images / "1796417589431-000000ff.1.0").write_text("no line names it\n")

    def vfs(*arguments):
        return subprocess.run([str(BINARY), *arguments], cwd=root, capture_output=True, text=True, timeout=600)

    listed = vfs("journal", "list", "--journal", "journal")
    assert (listed.returncode, listed.stdout.split()[-4:]) == (0, ["/output/tree", "not", "undoable", "(incomplete)"])
    intent = lines[0]["intent"]
    dry = vfs("undo", "--journal", "journal", *launch[:2], "--change", intent, "--dry-run")
    would = f"would put back {intent} /output/tree: {len(taken)} files it took before vfs stopped during it\n"
    assert (dry.returncode, dry.stdout) == (0, would)
    # No change to undo: `--last` passes over it.
    last = vfs("undo", "--journal", "journal", *launch[:2], "--last", "1", "--dry-run")
    assert (last.returncode, last.stdout) == (0, "nothing to undo\n")
    assert len(list(images.iterdir())) == len(names) + 1, "a reader and a dry run remove nothing"

    restarted = start(root, *launch, warnings=True)
    initialize(restarted)
    assert sorted(path.name for path in images.iterdir()) == names, "the orphan goes, what the delete took stays"
    restarted.stdin.close()
    restarted.wait(timeout=10)
    warning = f"images/ keeps {len(names)} files of changes vfs stopped during"
    assert warning in restarted.stderr.read().decode()

    undone = vfs("undo", "--journal", "journal", *launch[:2], "--change", intent)
    restored = [line for line in undone.stdout.splitlines() if line.startswith("restored /output/tree/")]
    assert (undone.returncode, len(restored)) == (0, len(taken)), undone.stdout[-500:]
    assert sum(1 for path in (root / "out").rglob("*.txt")) == files
    assert (root / "out" / "tree" / "d0" / "f0.txt").read_text() == "0\n"
