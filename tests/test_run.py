"""`run_command` from the official Python SDK, in both of its modes (`Client(url)` negotiates
2026-07-28; `mode="legacy"` the handshake), over stdio and HTTP: one tree and one set of rules
for the shell and the file tools, cancellation and the time limit end every process, progress
counts the output, `git` works in a repository under a mount, the view's refusals reach the
exchange log in virtual terms, and the tool is listed only with `--allow-run`. Every response goes through the fixture's leak scan (no physical path, no host
home). Where the sandbox cannot run (no bwrap, no /dev/fuse, not root) each test says so and
is skipped, unless `VFS_REQUIRE_SANDBOX` is set, when it fails.
"""

import contextlib
import json
import os
import shutil
import subprocess
import time

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import BINARY
from conftest import Client as Recorder
from test_http import TOKEN, daemon

MODES = pytest.mark.parametrize("mode", ["auto", "legacy"])
TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


def sandbox_or_skip():
    possible = os.geteuid() == 0 and os.path.exists("/dev/fuse") and shutil.which("bwrap")
    if not possible:
        assert not os.environ.get("VFS_REQUIRE_SANDBOX"), "VFS_REQUIRE_SANDBOX is set, but the sandbox cannot run here"
        pytest.skip("the sandbox needs root, /dev/fuse and bwrap")


@contextlib.asynccontextmanager
async def client(fixture, mode: str, url: str | None, extra: tuple = (), **options):
    """The SDK's `Client` over HTTP at `url`, or over stdio to `vfs serve --allow-run` (and
    `extra` launch options)."""
    if url is not None:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode, **options) as connected:
                yield Recorder(connected, fixture)
        return
    params = StdioServerParameters(
        command=str(BINARY), args=fixture.launch("--allow-run", *extra), cwd=str(fixture.root), env={"VFS_LOG": "warn"}
    )
    async with Client(params, mode=mode, **options) as connected:
        yield Recorder(connected, fixture)


def served(fixture, transport, main, extra: tuple = ()):
    """Runs `main(url)` against a daemon (`http`) or a stdio server (`url` None), launched
    with `--allow-run` and `extra`."""
    if transport == "http":
        with daemon(fixture, "--allow-run", *extra) as server:
            anyio.run(main, f"{server.base}/mcp")
    else:
        anyio.run(main, None)


def text(result) -> str:
    return result.content[0].text


def processes_with(marker: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    line = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in line:
                found.append(line)
    return found


@MODES
@TRANSPORTS
def test_the_shell_and_the_tools_share_one_tree_and_one_set_of_rules(fixture, mode, transport):
    sandbox_or_skip()
    (fixture.data / ".env").write_text("SECRET=1\n")

    async def main(url):
        async with client(fixture, mode, url) as connected:
            tools = [tool.name for tool in (await connected.session.list_tools()).tools]
            assert "run_command" in tools
            ran = await connected.call(
                "run_command",
                {"command": "printf 'by shell\\n' > /output/shell.txt; cat /src/README.md | head -1; pwd"},
            )
            assert not ran.is_error, text(ran)
            assert text(ran) == "exit status 0\nstdout:\n# Demo\n/output\n\nstderr: (empty)"
            assert ran.structured_content == {
                "exitCode": 0,
                "timedOut": False,
                "stdout": "# Demo\n/output\n",
                "stderr": "",
                "stdoutTruncated": False,
                "stderrTruncated": False,
                "stdoutBytes": 15,
                "stderrBytes": 0,
                "durationMs": ran.structured_content["durationMs"],
            }
            assert text(await connected.call("read_text_file", {"path": "/output/shell.txt"})) == "by shell\n"
            written = await connected.call("write_file", {"path": "/output/tool.txt", "content": "by tool\n"})
            assert not written.is_error, text(written)
            refused = await connected.call(
                "run_command",
                {
                    "command": "cat /output/tool.txt; echo x > /src/README.md; cat /src/.env; test -e /llm-l""ogs || echo absent; "
                    "echo ok > /src/scratch/note.txt && cat /src/scratch/note.txt; mv /src/README.md /output/r.md",
                    "cwd": "/src",
                },
            )
            assert text(refused) == (
                "exit status 1\nstdout:\nby tool\nabsent\nok\n\nstderr:\n"
                "/bin/sh: 1: cannot create /src/README.md: Read-only file system\n"
                "cat: /src/.env: No such file or directory\n"
                # Across mounts `mv` copies, then cannot remove the read-only source.
                "mv: cannot remove '/src/README.md': Read-only file system\n"
            ), text(refused)
            # Nothing physical anywhere a program would look (the leak scan reads this too).
            looked = await connected.call("run_command", {"command": "cat /proc/self/mountinfo; df; env; ls -la / /home"})
            assert " /output " in text(looked) and " - fuse vfs " in text(looked), text(looked)

    served(fixture, transport, main)


@MODES
@TRANSPORTS
def test_appends_from_shells_at_once_all_land_and_the_tools_read_them(fixture, mode, transport):
    """Shells appending to one log at once each keep their line, and a tool's write beside
    the view is appended to, not overwritten with zeros (the view appended where the kernel
    reckoned the end, from a size it may have cached)."""
    sandbox_or_skip()

    async def main(url):
        async with client(fixture, mode, url) as connected:
            ran = await connected.call(
                "run_command",
                {
                    "command": "printf 'base\\n' > log.txt; "
                    "for i in 1 2 3 4 5 6; do echo \"line $i\" >> log.txt & done; wait; wc -l < log.txt"
                },
            )
            assert text(ran) == "exit status 0\nstdout:\n7\n\nstderr: (empty)", text(ran)
            log = text(await connected.call("read_text_file", {"path": "/output/log.txt"}))
            lines = log.splitlines()
            assert lines[0] == "base" and sorted(lines[1:]) == [f"line {i}" for i in range(1, 7)], log
            written = await connected.call(
                "write_file", {"path": "/output/log.txt", "content": "S\n", "overwrite": True}
            )
            assert not written.is_error, text(written)
            appended = await connected.call("run_command", {"command": "echo X >> log.txt"})
            assert not appended.is_error, text(appended)
            assert text(await connected.call("read_text_file", {"path": "/output/log.txt"})) == "S\nX\n"

    served(fixture, transport, main)


@MODES
@TRANSPORTS
def test_a_cancelled_or_timed_out_command_leaves_no_process(fixture, mode, transport):
    sandbox_or_skip()

    async def main(url):
        async with client(fixture, mode, url) as connected:
            with anyio.move_on_after(1.0) as scope:
                await connected.call("run_command", {"command": "setsid sleep 341 & sleep 342"})
            assert scope.cancelled_caught, "the command finished before it could be cancelled"
            deadline = time.monotonic() + 3
            while processes_with("sleep 34") and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            assert processes_with("sleep 341") == [] and processes_with("sleep 342") == []
            timed = await connected.call("run_command", {"command": "sleep 343 & echo started; sleep 344", "timeoutSeconds": 1})
            assert text(timed) == (
                "timed out after 1 s: every process of the command was killed (exit status 124)\n"
                "stdout:\nstarted\n\nstderr: (empty)"
            ), text(timed)
            assert timed.structured_content["timedOut"] is True
            assert processes_with("sleep 343") == [] and processes_with("sleep 344") == []
            again = await connected.call("run_command", {"command": "echo again"})
            assert text(again) == "exit status 0\nstdout:\nagain\n\nstderr: (empty)"

    served(fixture, transport, main)


@MODES
def test_progress_counts_the_lines_of_output(fixture, mode):
    sandbox_or_skip()

    async def main(url):
        reports = []

        async def on_progress(progress, total, message):
            reports.append((progress, message))

        async with client(fixture, mode, url) as connected:
            result = await connected.session.call_tool(
                "run_command", {"command": "for i in 1 2 3 4; do echo $i; sleep 0.4; done"}, progress_callback=on_progress
            )
            fixture.record(result)
            assert text(result) == "exit status 0\nstdout:\n1\n2\n3\n4\n\nstderr: (empty)"
        assert len(reports) >= 2, reports
        assert reports[0] == (1, "1 lines of output so far"), reports
        counts = [progress for progress, _ in reports]
        assert counts == sorted(counts) and counts[-1] <= 4, reports

    anyio.run(main, None)


@TRANSPORTS
def test_git_works_in_a_repository_under_a_mount(fixture, transport):
    sandbox_or_skip()
    git = shutil.which("git")
    if git is None:
        assert not os.environ.get("VFS_REQUIRE_SANDBOX"), "git is missing"
        pytest.skip("git is missing")
    repo = fixture.out / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("one\n")
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([git, "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run([git, "add", "a.txt"], cwd=repo, check=True)
    subprocess.run([git, *identity, "commit", "-q", "-m", "first"], cwd=repo, check=True)
    (repo / "a.txt").write_text("two\n")

    async def main(url):
        async with client(fixture, "auto", url) as connected:
            status = await connected.call("run_command", {"command": "git status --short; git log --format=%s", "cwd": "/output/repo"})
            assert text(status) == "exit status 0\nstdout:\n M a.txt\nfirst\n\nstderr: (empty)", text(status)

    served(fixture, transport, main)


def test_run_command_is_not_listed_without_allow_run(fixture):
    async def main():
        params = StdioServerParameters(command=str(BINARY), args=fixture.launch(), cwd=str(fixture.root), env={"VFS_LOG": "warn"})
        async with Client(params) as connected:
            tools = [tool.name for tool in (await connected.list_tools()).tools]
            assert "run_command" not in tools and "read_text_file" in tools

    anyio.run(main)


@TRANSPORTS
def test_the_views_refusals_reach_the_exchange_log_in_virtual_terms(fixture, transport):
    # A delete and a move the view refuses (under `rwnd`, which grants no delete) are each a
    # record of tool `fuse` in the exchange log, naming the operation and the virtual path, with
    # the reason the tools give; the call that ran the command is a record of its own. A write
    # to a `ro` mount never reaches the view (the sandbox binds it read-only: the kernel says
    # EROFS), so it leaves no record. No log file holds a physical path.
    sandbox_or_skip()
    keep = fixture.root / "keep"
    keep.mkdir()
    (keep / "kept.txt").write_text("kept\n")
    extra = ("--mount", "keep:/keep:rwnd")

    async def main(url):
        async with client(fixture, "auto", url, extra) as connected:
            ran = await connected.call(
                "run_command", {"command": "rm /keep/kept.txt; mv /keep/kept.txt /keep/moved.txt; echo x > /src/README.md"}
            )
            assert text(ran) == (
                "exit status 2\nstdout: (empty)\nstderr:\n"
                "rm: cannot remove '/keep/kept.txt': Permission denied\n"
                "mv: cannot move '/keep/kept.txt' to '/keep/moved.txt': Permission denied\n"
                "/bin/sh: 1: cannot create /src/README.md: Read-only file system\n"
            ), text(ran)

    served(fixture, transport, main, extra)
    assert (keep / "kept.txt").read_text() == "kept\n" and not (keep / "moved.txt").exists()
    records = []
    for log in sorted(fixture.logs.iterdir()):
        content = log.read_text()
        for spelling in fixture.physical_spellings():
            assert spelling not in content, (log.name, spelling)
        records += [json.loads(line) for line in content.splitlines()]
    refusals = [(record["arguments"], record["result"]) for record in records if record["tool"] == "fuse"]
    why = (
        "cannot delete `/keep/kept.txt`: `/keep` is mounted rwnd; "
        "mounts that grant delete: `/output` (rw), `/src/scratch` (rw)"
    )
    assert refusals == [
        ({"operation": "unlink", "path": "/keep/kept.txt"}, {"isError": True, "text": why, "errno": 13}),
        ({"operation": "rename", "path": "/keep/kept.txt"}, {"isError": True, "text": why, "errno": 13}),
    ], refusals
    [call] = [record for record in records if record["tool"] == "run_command"]
    assert call["result"]["exitCode"] == 2, call
    # Each refusal carries the id of the call whose command made it.
    assert [record["call"] for record in records if record["tool"] == "fuse"] == [call["call"]] * 2, records
