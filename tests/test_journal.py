"""The journal (`--journal`) from the official Python SDK, in both of its modes (`Client(url)`
negotiates 2026-07-28, `mode="legacy"` the handshake), over stdio and HTTP: every operation an
agent makes is listed by `list_changes` and undone by `undo_changes` exactly (a move across
mounts too), an undo of an undo redoes, a change made behind vfs's back is a conflict left as it
is, a 10,000-file recursive delete comes back whole, the operator's `vfs undo` works after a
restart, what a `run_command` command changed is the session's to list and undo, and the
journal's root is, to the agent, a root that does not exist. Every response
goes through the fixture's leak scan.
"""

import contextlib
import json
import shutil
import subprocess

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import BINARY
from conftest import Client as Recorder
from conftest import run_client
from test_http import TOKEN, daemon
from test_run import sandbox_or_skip

MODES = pytest.mark.parametrize("mode", ["auto", "legacy"])
TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])
# Read before edit is the tools' own rule (tests/test_mcp.py); here every change is the agent's
# to make at once.
JOURNAL = ("--journal", "journal", "--no-read-before-edit")


@contextlib.asynccontextmanager
async def client(fixture, mode: str, url: str | None, *extra: str):
    """The SDK's `Client` over HTTP at `url`, or over stdio to `vfs serve --journal journal`."""
    if url is not None:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as connected:
                yield Recorder(connected, fixture)
        return
    params = StdioServerParameters(
        command=str(BINARY), args=fixture.launch(*JOURNAL, *extra), cwd=str(fixture.root), env={"VFS_LOG": "warn"}
    )
    async with Client(params, mode=mode) as connected:
        yield Recorder(connected, fixture)


def served(fixture, transport, main, *extra: str):
    if transport == "http":
        with daemon(fixture, *JOURNAL, *extra) as server:
            anyio.run(main, f"{server.base}/mcp")
    else:
        anyio.run(main, None)


def text(result) -> str:
    return result.content[0].text


def tree(root) -> dict:
    """Every file (bytes) and directory (None) under `root`, by relative path."""
    return {
        str(path.relative_to(root)): (path.read_bytes() if path.is_file() else None) for path in sorted(root.rglob("*"))
    }


@MODES
@TRANSPORTS
def test_every_change_is_listed_and_undone_exactly_and_an_undo_of_an_undo_redoes(fixture, mode, transport):
    (fixture.out / "old.bin").write_bytes(bytes(range(256)))
    (fixture.data / "scratch" / "note.txt").write_text("a note\n")
    start_out, start_data = tree(fixture.out), tree(fixture.data)

    async def main(url):
        async with client(fixture, mode, url) as agent:
            names = [tool.name for tool in (await agent.list_tools()).tools]
            assert "list_changes" in names and "undo_changes" in names
            steps = [
                ("write_file", {"path": "/output/new/a.txt", "content": "made\n"}),
                ("write_file", {"path": "/output/old.bin", "content": "text now\n", "overwrite": True}),
                ("edit_file", {"path": "/output/new/a.txt", "edits": [{"oldText": "made", "newText": "edited"}]}),
                ("create_directory", {"path": "/output/empty"}),
                ("move_file", {"source": "/src/scratch/note.txt", "destination": "/output/note.txt"}),
                ("delete_file", {"path": "/output/old.bin"}),
            ]
            for tool, arguments in steps:
                result = await agent.call(tool, arguments)
                assert not result.is_error, f"{tool}: {text(result)}"
            listed = await agent.call("list_changes", {})
            changes = listed.structured_content["changes"]
            assert [(change["operation"], change["paths"], change["state"]) for change in changes] == [
                ("remove", ["/output/old.bin"], "undoable"),
                ("move", ["/src/scratch/note.txt", "/output/note.txt"], "undoable"),
                ("make_directory", ["/output/empty"], "undoable"),
                ("edit", ["/output/new/a.txt"], "undoable"),
                ("write", ["/output/old.bin"], "undoable"),
                ("write", ["/output/new/a.txt"], "undoable"),
            ]
            undone = await agent.call("undo_changes", {"count": 6})
            assert not undone.is_error, text(undone)
            assert undone.structured_content["lines"] == [
                "restored /output/old.bin",
                "restored /src/scratch/note.txt",
                "removed /output/empty",
                "restored /output/new/a.txt",
                "restored /output/old.bin",
                "removed /output/new/a.txt",
            ]
            assert (tree(fixture.out), tree(fixture.data)) == (start_out, start_data)
            after = (await agent.call("list_changes", {})).structured_content["changes"]
            # Each undo is an entry of its own, newest first, and what it undid is `undone`.
            assert [(change["operation"], change["state"]) for change in after] == [("undo", "undoable")] * 6 + [
                (change["operation"], "undone") for change in changes
            ]
            # Undoing the newest undo (that of the first change, the create, which removed the
            # file and the directory the create made) redoes the create, directory first.
            redone = await agent.call("undo_changes", {"changeId": after[0]["id"]})
            assert redone.structured_content["lines"] == ["restored /output/new", "restored /output/new/a.txt"]
            assert (fixture.out / "new" / "a.txt").read_text() == "made\n"

    served(fixture, transport, main)


@MODES
def test_a_change_made_behind_vfs_is_a_conflict_and_the_journal_root_does_not_exist(fixture, mode):
    async def main(url):
        async with client(fixture, mode, url) as agent:
            assert not (await agent.call("write_file", {"path": "/output/a.txt", "content": "vfs\n"})).is_error
            (fixture.out / "a.txt").write_text("someone else\n")
            undone = await agent.call("undo_changes", {})
            # Not everything was undone: an error, its lines in the text.
            assert (undone.is_error, text(undone)) == (True, "conflict /output/a.txt: changed since (left as it is)\n")
            assert (fixture.out / "a.txt").read_text() == "someone else\n"
            # The journal's root answers as a root that does not exist.
            hidden = await agent.call("read_text_file", {"path": "/llm-journal/journal.jsonl"})
            missing = await agent.call("read_text_file", {"path": "/nowhere/journal.jsonl"})
            assert hidden.is_error and missing.is_error
            assert text(hidden) == text(missing).replace("/nowhere", "/llm-journal")
            roots = text(await agent.call("list_directory", {"path": "/"}))
            assert "llm-journal" not in roots

    served(fixture, "stdio", main)


def test_a_ten_thousand_file_delete_comes_back_whole_and_the_operator_undoes_after_a_restart(fixture):
    for index in range(10_000):
        directory = fixture.out / "tree" / f"d{index // 100}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"f{index}.txt").write_text(f"file {index}\n")
    start = tree(fixture.out)

    async def delete_and_undo(url):
        async with client(fixture, "auto", url) as agent:
            deleted = await agent.call("delete_file", {"path": "/output/tree", "recursive": True})
            assert not deleted.is_error, text(deleted)
            assert not (fixture.out / "tree").exists()
            undone = await agent.call("undo_changes", {})
            assert undone.structured_content["lines"] == ["restored /output/tree"]
        assert tree(fixture.out) == start
        # A change, then a new process: the operator's `vfs undo` puts it back.
        async with client(fixture, "auto", url) as agent:
            assert not (await agent.call("write_file", {"path": "/output/late.txt", "content": "late\n"})).is_error

    anyio.run(delete_and_undo, None)
    undo = subprocess.run(
        [str(BINARY), "undo", "--journal", "journal", "--mount", "data:/src:ro;scratch:rw", "--mount", "out:/output:rw", "--last", "1"],
        cwd=fixture.root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (undo.returncode, undo.stdout, undo.stderr) == (0, "removed /output/late.txt\n", "")
    assert tree(fixture.out) == start


@MODES
@TRANSPORTS
def test_what_a_command_changed_is_the_sessions_to_list_and_undo(fixture, mode, transport):
    sandbox_or_skip()
    (fixture.out / "kept.txt").write_text("before\n")

    async def main(url):
        async with client(fixture, mode, url, "--allow-run") as agent:
            ran = await agent.call("run_command", {"command": "echo after > /output/kept.txt; echo new > /output/made.txt"})
            assert text(ran).startswith("exit status 0\n"), text(ran)
            changes = (await agent.call("list_changes", {})).structured_content["changes"]
            # Each file the shell writes is made (or emptied) at its open, written at its close.
            assert [(change["operation"], change["paths"]) for change in changes] == [
                ("write", ["/output/made.txt"]),
                ("write", ["/output/made.txt"]),
                ("write", ["/output/kept.txt"]),
                ("write", ["/output/kept.txt"]),
            ]
            undone = await agent.call("undo_changes", {"count": 4})
            assert undone.structured_content["lines"] == [
                "restored /output/made.txt",
                "removed /output/made.txt",
                "restored /output/kept.txt",
                "restored /output/kept.txt",
            ]
            assert (fixture.out / "kept.txt").read_text() == "before\n"
            assert not (fixture.out / "made.txt").exists()

    served(fixture, transport, main, "--allow-run")


def test_what_vfs_run_changed_is_journaled_as_the_operators_under_its_call_and_undone(fixture):
    sandbox_or_skip()
    (fixture.out / "kept.txt").write_text("before\n")
    (fixture.root / "keep").mkdir()
    (fixture.root / "keep" / "k.txt").write_text("k\n")
    start = tree(fixture.out)
    mounts = ["--mount", "data:/src:ro;scratch:rw", "--mount", "out:/output:rw", "--mount", "keep:/keep:rwnd"]

    def vfs(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BINARY), *arguments], cwd=fixture.root, capture_output=True, text=True, timeout=60
        )

    ran = vfs(
        "run", *mounts, "--journal", "journal", "--llm-log", "logs", "--",
        "sh", "-c",
        "echo after > /output/kept.txt; echo new > /output/made.txt; rm /keep/k.txt 2>/dev/null; mkdir /output/d",
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
    listed = vfs("journal", "list", "--journal", "journal", "--json")
    assert listed.returncode == 0, listed.stderr
    entries = json.loads(listed.stdout)
    assert [(entry["operation"], entry["paths"], entry["session"], entry["state"]) for entry in entries] == [
        ("make_directory", ["/output/d"], "operator", "undoable"),
        ("write", ["/output/made.txt"], "operator", "undoable"),
        ("write", ["/output/made.txt"], "operator", "undoable"),
        ("write", ["/output/kept.txt"], "operator", "undoable"),
        ("write", ["/output/kept.txt"], "operator", "undoable"),
    ]
    # The command is one call: its exchange-log line carries the id its entries carry.
    logged = [json.loads(line) for path in (fixture.root / "logs").glob("*.jsonl") for line in path.read_text().splitlines()]
    commands = [line for line in logged if line.get("tool") == "vfs run"]
    assert len(commands) == 1, logged
    assert {entry["call"] for entry in entries} == {commands[0]["call"]}
    # The delete the view refused (`/keep` grants no delete) is logged under the same call.
    refused = [(line["call"], line["arguments"]) for line in logged if line.get("tool") == "fuse"]
    assert refused == [(commands[0]["call"], {"operation": "unlink", "path": "/keep/k.txt"})], logged
    assert (fixture.root / "keep" / "k.txt").read_text() == "k\n"
    undone = vfs("undo", "--journal", "journal", *mounts, "--call", commands[0]["call"])
    assert (undone.returncode, undone.stderr) == (0, "")
    assert undone.stdout.splitlines() == [
        "removed /output/d",
        "restored /output/made.txt",
        "removed /output/made.txt",
        "restored /output/kept.txt",
        "restored /output/kept.txt",
    ]
    assert tree(fixture.out) == start



@MODES
def test_two_sessions_share_a_journal_and_neither_sees_or_undoes_the_others(fixture, mode):
    """Two stdio servers on one project, each an SDK session, one journal: each lists and undoes
    its own changes only, the other's stay as they are; with a small bound, the oldest images
    are dropped and listed as such, the newest change still undone exactly."""
    (fixture.out / "theirs.txt").write_text("theirs\n")
    big = "x" * (100 * 1024)

    async def main():
        async with client(fixture, mode, None, "--journal-max-bytes", "256K") as mine:
            async with client(fixture, mode, None, "--journal-max-bytes", "256K") as theirs:
                arguments = {"path": "/output/theirs.txt", "content": "THEIRS\n", "overwrite": True}
                result = await theirs.call("write_file", arguments)
                assert not result.is_error, text(result)
                for round in range(4):
                    arguments = {"path": "/output/big.txt", "content": f"{round}{big}", "overwrite": True}
                    result = await mine.call("write_file", arguments)
                    assert not result.is_error, text(result)
                changes = (await mine.call("list_changes", {})).structured_content["changes"]
                assert [(change["paths"], change["state"]) for change in changes] == [
                    (["/output/big.txt"], "undoable"),
                    (["/output/big.txt"], "undoable"),
                    (["/output/big.txt"], "dropped"),
                    (["/output/big.txt"], "undoable"),
                ]
                undone = await mine.call("undo_changes", {})
                assert undone.structured_content["lines"] == ["restored /output/big.txt"]
                assert (fixture.out / "big.txt").read_text() == f"2{big}"
                everything = await mine.call("undo_changes", {"count": 10})
                assert (fixture.out / "theirs.txt").read_text() == "THEIRS\n", text(everything)
                # Theirs alone, and the journal's oldest: the shared bound dropped its image
                # first (the bound is the journal's, not a session's).
                their_changes = (await theirs.call("list_changes", {})).structured_content["changes"]
                assert [(change["paths"], change["state"]) for change in their_changes] == [
                    (["/output/theirs.txt"], "dropped")
                ]

    anyio.run(main)


def test_a_journal_that_cannot_be_written_refuses_the_change_in_one_fixed_sentence(fixture):
    """A change whose image cannot be kept (the journal's `images/` made a file behind its
    back) is not made: the agent hears one fixed sentence, not the journal's error, which named
    the journal's `images/` and its files (red team of the twenty-sixth session). Until the
    twenty-eighth, the change was made without its image, and what it replaced was lost."""
    messages = []

    async def body(client, init):
        first = await client.call("write_file", {"path": "/output/a.txt", "content": "one\n"})
        assert not first.is_error, text(first)
        images = fixture.root / "journal" / "images"
        shutil.rmtree(images)
        images.write_text("not a directory\n")
        second = await client.call("write_file", {"path": "/output/a.txt", "content": "two\n", "overwrite": True})
        assert second.is_error
        assert text(second) == (
            "`/output/a.txt` was not changed: vfs could not record the change in its journal (where every change "
            "is kept so that it can be undone); tell the operator, whose log says why"
        )
        await anyio.sleep(0.2)

    run_client(fixture, body, fixture.launch(*JOURNAL), messages=messages)
    assert (fixture.root / "out" / "a.txt").read_text() == "one\n"
    assert [(message.level, message.data) for message in messages] == [
        ("warning", "a change was refused: its record could not be kept")
    ]
