"""Both protocol generations, as the official Python SDK speaks them: `Client(url)` in its
default mode negotiates 2026-07-28 (no sessions; every request stands alone), and
`mode="legacy"` the initialize handshake. Over stdio and over HTTP, a read and an edit in
consecutive calls work, the exchange log holds one file per session or per token, progress
arrives while a long call runs, and a resumed stream starts after the last event it saw.
"""

import contextlib
import json
import time

import anyio
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import BINARY
from conftest import Client as Recorder
from test_http import TOKEN, daemon

MODES = pytest.mark.parametrize("mode", ["auto", "legacy"])
TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])
VERSIONS = {"auto": "2026-07-28", "legacy": "2025-11-25"}


@contextlib.asynccontextmanager
async def client(fixture, mode: str, url: str | None = None, token: str = TOKEN, **options):
    """The SDK's `Client` in `mode`, over HTTP at `url` (with `token`) or, without a URL, over
    stdio to a `vfs serve` of the fixture; every response recorded for the leak scan."""
    if url is not None:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode, **options) as connected:
                yield Recorder(connected, fixture)
        return
    params = StdioServerParameters(command=str(BINARY), args=fixture.launch(), cwd=str(fixture.root), env={"VFS_LOG": "warn"})
    async with Client(params, mode=mode, **options) as connected:
        yield Recorder(connected, fixture)


def text(result) -> str:
    return result.content[0].text


def log_tools(fixture) -> list[list[str]]:
    """The tools of each exchange-log file, file by file (sorted by their calls)."""
    logs = [path for path in fixture.logs.rglob("*.jsonl")]
    assert all(path.stat().st_size > 0 for path in logs), "an empty log file"
    return sorted([json.loads(line)["tool"] for line in path.read_text().splitlines()] for path in logs)


async def read_then_edit(connected) -> None:
    read = await connected.call("read_text_file", {"path": "/output/notes.txt"})
    assert text(read) == "one\n"
    edited = await connected.call("edit_file", {"path": "/output/notes.txt", "edits": [{"oldText": "one", "newText": "two"}]})
    assert not edited.is_error, text(edited)
    assert text(edited).startswith("edited `/output/notes.txt` (1 replacement)")


@MODES
@TRANSPORTS
def test_a_read_then_an_edit_work_in_consecutive_calls(fixture, mode, transport):
    (fixture.out / "notes.txt").write_text("one\n")

    async def main(url):
        async with client(fixture, mode, url) as connected:
            assert connected.session.protocol_version == VERSIONS[mode]
            await read_then_edit(connected)

    if transport == "http":
        with daemon(fixture) as server:
            anyio.run(main, f"{server.base}/mcp")
            assert server.terminate() == 0
    else:
        anyio.run(main, None)
    assert (fixture.out / "notes.txt").read_text() == "two\n"
    assert log_tools(fixture) == [["read_text_file", "edit_file"]]


def test_a_token_has_one_log_file_and_each_legacy_session_its_own(fixture):
    (fixture.out / "notes.txt").write_text("one\n")
    with daemon(fixture) as server:
        url = f"{server.base}/mcp"

        async def main():
            # Two clients of the 2026-07-28 protocol with one token are one principal: the
            # second may edit what the first read (ADR 0005), and they log into one file.
            async with client(fixture, "auto", url) as first:
                assert text(await first.call("read_text_file", {"path": "/output/notes.txt"})) == "one\n"
            async with client(fixture, "auto", url) as second:
                edited = await second.call(
                    "edit_file", {"path": "/output/notes.txt", "edits": [{"oldText": "one", "newText": "two"}]}
                )
                assert not edited.is_error, text(edited)
                await second.list_tools()
            # Legacy sessions keep their own memory, and their own file once they call a tool.
            async with client(fixture, "legacy", url) as third:
                refused = await third.call(
                    "edit_file", {"path": "/output/notes.txt", "edits": [{"oldText": "two", "newText": "three"}]}
                )
                assert refused.is_error
                assert text(refused).startswith("read `/output/notes.txt` first (you have not read it in this session)")
            async with client(fixture, "legacy", url) as idle:
                await idle.session.send_ping()

        anyio.run(main)
        assert server.terminate() == 0
    assert log_tools(fixture) == [["edit_file"], ["read_text_file", "edit_file"]]


def leaves(error: BaseException):
    """The errors inside (nested) exception groups."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


def test_without_the_token_the_sdk_says_what_to_send(fixture):
    with daemon(fixture) as server:

        async def main(mode):
            with pytest.raises(BaseException) as caught:
                async with client(fixture, mode, f"{server.base}/mcp", token="not-the-token-0123456789"):
                    pass
            return caught.value

        for mode in ["auto", "legacy"]:
            errors = [error for error in leaves(anyio.run(main, mode)) if isinstance(error, MCPError)]
            assert [(error.code, error.message) for error in errors] == [
                (
                    -32001,
                    "unauthorized: this server takes static bearer tokens; send `Authorization: Bearer <token>` "
                    "with a token for this endpoint (ask the operator for one)",
                )
            ], mode
    assert not fixture.logs.exists() or list(fixture.logs.iterdir()) == []


def make_tree(root, files: int = 600, lines: int = 2500) -> None:
    """A tree a grep takes seconds over: `files` files of about 200 KB of words, and no line
    that the test's pattern matches but one in the last file."""
    words = ["alpha", "beta", "gamma", "delta", "épée", "naïve", "zeta", "theta"]
    root.mkdir(parents=True, exist_ok=True)
    line = " ".join(words[index % len(words)] for index in range(11)) + "\n"
    block = line * lines
    for index in range(files):
        extra = "zeta épée épée épée épée zeta needle abc1\n" if index == files - 1 else ""
        (root / f"f{index:04}.txt").write_text(block + extra)


# No literal for a search to jump to, and a Unicode word boundary over text with non-ASCII
# letters: the regex crate's fast engines give up on it, so the grep takes seconds on any
# machine (a literal-led pattern over repeated lines took 0.3 s on a quiet one, too short to
# see a second progress report).
PATTERN = r"(?i)\b\w{3}[0-9]"


@MODES
@TRANSPORTS
def test_progress_arrives_while_a_long_grep_runs_with_true_counts(fixture, mode, transport):
    make_tree(fixture.data / "big")

    async def main(url):
        reports: list[tuple[float, float, str]] = []
        started = time.monotonic()

        async def on_progress(progress, total, message):
            reports.append((time.monotonic() - started, progress, message))

        async with client(fixture, mode, url) as connected:
            started = time.monotonic()
            result = await connected.session.call_tool(
                "grep", {"pattern": PATTERN, "path": "/src/big"}, progress_callback=on_progress
            )
            answered = time.monotonic() - started
            fixture.record(result)
            assert not result.is_error, text(result)
            assert text(result) == "/src/big/f0599.txt:2501:zeta épée épée épée épée zeta needle abc1\n"
        assert reports, "no progress notification arrived"
        first_at, first_done, first_message = reports[0]
        assert first_message == "0 files searched, 0 matches", reports[0]
        # The first report comes at the start, not with the answer.
        assert first_at < answered / 2, (first_at, answered)
        dones = [done for _, done, _ in reports]
        assert dones == sorted(set(dones)), f"counts went back or repeated: {dones}"
        for _, done, message in reports:
            files, matches = message.removesuffix(" matches").split(" files searched, ")
            assert float(files) == done and 0 <= int(matches) <= 1 and done <= 600, message
        assert len(reports) >= 2, f"one report in {answered:.1f} s: {reports}"
        # At most four a second (and the one at the start).
        assert len(reports) <= 4 * answered + 2, (len(reports), answered)

    if transport == "http":
        with daemon(fixture) as server:
            anyio.run(main, f"{server.base}/mcp")
    else:
        anyio.run(main, None)


def sse_events(stream, enough) -> list[dict]:
    """The events of an SSE response with a message (`id`, `message`), read until `enough` of
    them says so or the stream ends."""
    events, current = [], {}
    for line in stream.iter_lines():
        if line.startswith("id:"):
            current["id"] = line[3:].strip()
        elif line.startswith("data:") and line[5:].strip():
            current["message"] = json.loads(line[5:])
        elif line == "" and "message" in current:
            events.append(current)
            current = {}
            if enough(events):
                break
    return events


def test_a_resumed_stream_starts_after_the_last_event_it_saw(fixture):
    """Raw HTTP, as the TypeScript SDK resumes after a dropped stream: a long grep with a
    progress token, the stream dropped after two progress events, then a `GET` with
    `Last-Event-ID` of the second: the next event is the one after it."""
    make_tree(fixture.data / "big")
    with daemon(fixture) as server:
        url = f"{server.base}/mcp"
        headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        with httpx2.Client(headers=headers, timeout=30) as http:
            init = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
            session = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            http.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "grep", "arguments": {"pattern": PATTERN, "path": "/src/big"}, "_meta": {"progressToken": "p"}}}
            with http.stream("POST", url, headers=session, json=call) as stream:
                seen = sse_events(stream, lambda events: len(events) == 2)
            assert [event["message"]["method"] for event in seen] == ["notifications/progress"] * 2, seen
            last = seen[-1]["id"]
            index, request = last.split("/")
            with http.stream("GET", url, headers={**session, "Last-Event-ID": last}) as resumed:
                events = sse_events(resumed, lambda events: "result" in events[-1]["message"])
            assert events, "the resumed stream carried nothing"
            assert events[0]["id"] == f"{int(index) + 1}/{request}", (last, [event["id"] for event in events])
            assert all(event["id"] != last for event in events)
            assert events[-1]["message"]["id"] == 2 and "result" in events[-1]["message"], events[-1]


def test_a_resumed_session_stream_starts_after_the_last_event_it_saw(fixture):
    """The session's own `GET` stream, where the handshake protocol's warnings travel, opens
    with a priming event. A client that resumes from the priming event gets every event since;
    one that resumes from an event gets the events after it, never that one again. The warning
    here: the exchange log's directory was removed under the running daemon, so every call
    warns that it cannot create the log file."""
    import shutil

    def events_of(stream, count) -> list[dict]:
        """The first `count` events of an SSE response, each its `id` and its `message` (None
        for the priming event, whose data is empty)."""
        events, current = [], {}
        for line in stream.iter_lines():
            if line.startswith("id:"):
                current["id"] = line[3:].strip()
            elif line.startswith("data:"):
                current["message"] = json.loads(line[5:]) if line[5:].strip() else None
            elif line == "" and "id" in current:
                events.append(current)
                current = {}
                if len(events) == count:
                    break
        return events

    warning = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "warning", "logger": "vfs", "data": "cannot create the exchange log file"}}
    with daemon(fixture) as server:
        url = f"{server.base}/mcp"
        fixture.logs.mkdir(exist_ok=True)
        shutil.rmtree(fixture.logs)
        headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        with httpx2.Client(headers=headers, timeout=30) as http:
            init = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
            session = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            http.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            calls = iter(range(10, 100))

            def warn():
                call = {"jsonrpc": "2.0", "id": next(calls), "method": "tools/call", "params": {"name": "read_text_file", "arguments": {"path": "/src/README.md"}}}
                answer = http.post(url, headers=session, json=call)
                assert answer.status_code == 200 and "# Demo" in answer.text, answer.text

            # A fresh stream: the priming event alone, then the client goes.
            with http.stream("GET", url, headers=session) as opened:
                [priming] = events_of(opened, 1)
            assert priming["message"] is None, priming
            time.sleep(0.2)
            warn()
            warn()
            # Resumed from the priming event: both warnings sent meanwhile, each with an id of its own.
            with http.stream("GET", url, headers={**session, "Last-Event-ID": priming["id"]}) as resumed:
                missed = events_of(resumed, 2)
            assert [event["message"] for event in missed] == [warning, warning], missed
            ids = [priming["id"]] + [event["id"] for event in missed]
            assert len(set(ids)) == 3, ids
            time.sleep(0.2)
            warn()
            # Resumed from the last warning seen: the one after it, not that one again.
            with http.stream("GET", url, headers={**session, "Last-Event-ID": missed[-1]["id"]}) as resumed:
                [after] = events_of(resumed, 1)
            assert after["message"] == warning and after["id"] not in ids, (ids, after)
    fixture.logs.mkdir(exist_ok=True)


@MODES
def test_one_sessions_long_greps_do_not_hold_another_sessions_reads(fixture, mode):
    """Class 3 of the third hardening round: eight long greps from one session (the pool's
    size on two cores) held every other session's one-line read for seconds. Long calls have
    a lane and a share of their own now: the other client's reads all finish while the greps
    still run."""
    make_tree(fixture.data / "big", files=150)
    (fixture.out / "line.txt").write_text("one line\n")
    with daemon(fixture) as server:
        url = f"{server.base}/mcp"

        latencies: list[float] = []

        async def main():
            finished: list[str] = []
            async with client(fixture, "legacy", url) as greedy, client(fixture, mode, url) as other:
                # The first call of a client lists the tools (for the output schemas): not timed.
                assert text(await other.call("read_text_file", {"path": "/output/line.txt"})) == "one line\n"

                async def grep():
                    result = await greedy.call("grep", {"pattern": PATTERN, "path": "/src/big"})
                    assert not result.is_error, text(result)
                    finished.append("grep")

                async def reads():
                    await anyio.sleep(0.3)
                    for _ in range(20):
                        started = time.monotonic()
                        assert text(await other.call("read_text_file", {"path": "/output/line.txt"})) == "one line\n"
                        latencies.append(time.monotonic() - started)
                    finished.append("reads")

                started = time.monotonic()
                async with anyio.create_task_group() as group:
                    for _ in range(8):
                        group.start_soon(grep)
                    group.start_soon(reads)
                greps = time.monotonic() - started
            assert finished.count("grep") == 8 and "reads" in finished[:-1], finished
            # No read waited for a grep: the slowest took far less than a grep does (without
            # the lanes, a read waited until one of the eight greps ended: a third or more of
            # their time). A ratio of the same run, not a figure of this machine's speed.
            assert max(latencies) < greps / 8, (max(latencies), greps)

        anyio.run(main)


@MODES
@TRANSPORTS
def test_a_cancelled_call_stops_in_both_protocols(fixture, mode, transport):
    """Under 2026-07-28 a client cancels by closing the call's response stream (over HTTP) or
    with `notifications/cancelled` (over stdio); either way the work stops and the client goes
    on."""
    from test_http import cpu_of, server_child, write_slow_file

    # 64 GiB, sparse: cancelled after half a second, long before it could end (test_http.py).
    write_slow_file(fixture.data / "slow.txt", gib=64)

    async def main(url, cpu_seconds):
        async with client(fixture, mode, url) as connected:
            cpu = cpu_seconds or (lambda: cpu_of(server_child()))
            with anyio.move_on_after(0.5) as scope:
                await connected.call("read_text_file", {"path": "/src/slow.txt", "offset": 3})
            assert scope.cancelled_caught, "the long call finished before it could be cancelled"
            await anyio.sleep(0.5)
            before = cpu()
            await anyio.sleep(1.0)
            assert cpu() - before < 0.3, "the cancelled call is still running"
            assert text(await connected.call("read_text_file", {"path": "/src/README.md"})).startswith("# Demo")

    if transport == "http":
        with daemon(fixture) as server:
            anyio.run(main, f"{server.base}/mcp", server.cpu_seconds)
    else:
        anyio.run(main, None, None)


def test_log_messages_go_only_to_requests_that_ask_for_them(fixture):
    """Under 2026-07-28 a request names the least level it wants in `_meta`; one that names
    none gets no `notifications/message`. (The handshake protocol keeps `logging/setLevel`,
    warnings by default.) The server's warning here: the exchange log's directory was removed
    under the running daemon, so the log file cannot be created."""
    import shutil

    with daemon(fixture) as server:
        url = f"{server.base}/mcp"
        fixture.logs.mkdir(exist_ok=True)
        shutil.rmtree(fixture.logs)

        async def main(mode, level):
            messages = []

            async def on_message(params):
                fixture.record(params)
                messages.append((params.level, params.logger, params.data))

            options = {"logging_callback": on_message}
            if level is not None:
                options["log_level"] = level
            async with client(fixture, mode, url, **options) as connected:
                result = await connected.call("read_text_file", {"path": "/src/README.md"})
                assert text(result).startswith("# Demo")
                await anyio.sleep(0.2)
            return messages

        warning = ("warning", "vfs", "cannot create the exchange log file")
        assert anyio.run(main, "auto", None) == []
        assert anyio.run(main, "auto", "warning") == [warning]
        assert anyio.run(main, "auto", "error") == []
        assert anyio.run(main, "legacy", None) == [warning]
    fixture.logs.mkdir(exist_ok=True)
