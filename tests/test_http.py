"""The server as a service, driven by the official Python SDK: over its streamable HTTP client
(`vfs serve --listen`) and, for pings, cancellation and progress, over stdio too.

Sessions, pings during a long call, cancellation, progress, tokens and origins, hosted crews
that cannot see each other, concurrent sessions, and SIGTERM in the middle of writes. Every
response is recorded and scanned for physical paths like the stdio tests' (conftest.py).
"""

import contextlib
import json
import os
import pathlib
import re
import signal
import subprocess
import threading
import time

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import BINARY, Client

TOKEN = "e2e-token-0123456789abcdef"
REVIEW = "review-token-0123456789abc"
BUILD = "build-token-0123456789abcd"


class Daemon:
    """A running `vfs serve --listen 127.0.0.1:0 ...`; its address comes from the start-up line."""

    def __init__(self, cwd: pathlib.Path, args: list[str], stderr: pathlib.Path, env: dict | None = None):
        assert BINARY.exists(), f"build the binary first: {BINARY}"
        self.stderr_path = stderr
        self.process = subprocess.Popen(
            [str(BINARY), "serve", "--listen", "127.0.0.1:0", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={"VFS_LOG": "warn", "PATH": os.environ.get("PATH", ""), **(env or {})},
        )
        self.status = self.process.stderr.readline().decode()
        match = re.search(r"at http://(\S+) ", self.status)
        assert match, f"no address in the start-up line: {self.status!r}"
        self.base = f"http://{match.group(1)}"
        # Keep reading stderr so that the daemon never blocks on it.
        self._rest: list[bytes] = []
        self._drain = threading.Thread(target=lambda: self._rest.append(self.process.stderr.read()), daemon=True)
        self._drain.start()

    def terminate(self, timeout: float = 30) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout)
        self._drain.join(timeout=10)
        self.stderr_path.write_text(self.status + b"".join(self._rest).decode(errors="replace"))
        return code

    def cpu_seconds(self) -> float:
        fields = pathlib.Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def daemon(fixture, *extra: str, env: dict | None = None):
    started = Daemon(fixture.root, [*fixture.launch()[1:], *extra], fixture.stderr, env={"VFS_TOKEN": TOKEN, **(env or {})})
    try:
        yield started
    finally:
        if started.process.poll() is None:
            started.terminate()


@contextlib.asynccontextmanager
async def session(fixture, url: str, token: str | None = TOKEN, headers: dict | None = None, statuses: list | None = None):
    """An initialized SDK session on `url` (`token` `None`: no `Authorization` header),
    recording every response for the leak scan (and each HTTP status in `statuses`)."""
    all_headers = {**({"Authorization": f"Bearer {token}"} if token is not None else {}), **(headers or {})}
    async with create_mcp_http_client(headers=all_headers) as http:
        if statuses is not None:

            async def seen(response):
                statuses.append(response.status_code)

            http.event_hooks = {"request": [], "response": [seen]}
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as raw:
                init = await raw.initialize()
                fixture.record(init)
                yield Client(raw, fixture)


def cpu_of(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_child() -> int:
    """The pid of the `vfs` process this test process started (stdio)."""
    binary = os.path.realpath(BINARY)
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid() and os.path.realpath(entry / "exe") == binary:
                return int(entry.name)
        except OSError:
            continue
    raise AssertionError("the stdio server process was not found")


@contextlib.asynccontextmanager
async def connected(fixture, transport: str):
    """A session over `transport` (`stdio` or `http`), and a function giving the server's CPU
    seconds."""
    if transport == "http":
        with daemon(fixture) as server:
            async with session(fixture, f"{server.base}/mcp") as client:
                yield client, server.cpu_seconds
        return
    params = StdioServerParameters(command=str(BINARY), args=fixture.launch(), cwd=str(fixture.root), env={"VFS_LOG": "warn"})
    with open(fixture.stderr, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as raw:
                fixture.record(await raw.initialize())
                pid = server_child()
                yield Client(raw, fixture), lambda: cpu_of(pid)


def write_slow_file(path: pathlib.Path, gib: int = 2) -> None:
    """A sparse file of `gib` GiB: reading on from line 3 walks every byte, so the call runs for a
    while (0.5 s to 5 s for 2 GiB here, as the page cache has the holes or not)."""
    with open(path, "w") as file:
        file.write("first\n")
        file.truncate(gib * 1024 * 1024 * 1024)
    with open(path, "a") as file:
        file.write("\nlast\n")


def text(result) -> str:
    return result.content[0].text


def test_sessions_over_http_each_get_a_log_file_and_sigterm_ends_cleanly(fixture):
    with daemon(fixture) as server:
        assert server.status.endswith(
            " (MCP streamable HTTP); /mcp serves /output (rw), /src (ro); exchange log in logs, a file per session or token; stop with SIGTERM or Ctrl-C\n"
        ), server.status

        async def main():
            async with session(fixture, f"{server.base}/mcp") as client:
                assert text(await client.call("read_text_file", {"path": "/src/README.md"})) == "# Demo\nline two\nline three\n"
                wrote = await client.call("write_file", {"path": "/output/a.txt", "content": "one\n"})
                assert not wrote.is_error, wrote
                listing = await client.call("list_directory", {"path": "/"})
                assert text(listing) == "[DIR] output\n[DIR] src\n"
                hidden = await client.call("list_directory", {"path": "/llm-logs"})
                assert hidden.is_error
                assert text(hidden) == "no mount serves this path; available mounts: `/output` (rw), `/src` (ro)"
            async with session(fixture, f"{server.base}/mcp") as client:
                assert text(await client.call("read_text_file", {"path": "/output/a.txt"})) == "one\n"

        anyio.run(main)
        assert server.terminate() == 0
    assert (fixture.out / "a.txt").read_text() == "one\n"
    logs = sorted(fixture.logs.iterdir())
    assert len(logs) == 2, logs
    tools = [[json.loads(line)["tool"] for line in log.read_text().splitlines()] for log in logs]
    assert sorted(tools) == [["read_text_file"], ["read_text_file", "write_file", "list_directory", "list_directory"]]


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


@TRANSPORTS
def test_a_ping_is_answered_while_a_long_call_runs(fixture, transport):
    # 64 GiB, sparse: the read cannot end before the ping and the listing are answered, however fast
    # the machine (a 2 GiB read took 0.5 s to 5 s here); it is cancelled once they are.
    write_slow_file(fixture.data / "slow.txt", gib=64)

    async def main():
        order: list[str] = []
        async with connected(fixture, transport) as (client, _):

            async def long_call():
                await client.call("read_text_file", {"path": "/src/slow.txt", "offset": 3})
                order.append("long")

            async with anyio.create_task_group() as group:
                group.start_soon(long_call)
                await anyio.sleep(0.3)
                await client.session.send_ping()
                order.append("ping")
                listing = await client.call("list_directory", {"path": "/output"})
                assert not listing.is_error
                order.append("list")
                group.cancel_scope.cancel()
            # The session goes on after the cancelled read.
            assert text(await client.call("read_text_file", {"path": "/src/README.md"})).startswith("# Demo")
        assert order == ["ping", "list"]

    anyio.run(main)


@TRANSPORTS
def test_a_cancelled_call_stops_and_the_session_goes_on(fixture, transport):
    # 64 GiB, sparse: the read is cancelled after half a second, long before it could end, however
    # fast the machine (a 2 GiB read took 0.5 s to 5 s here).
    write_slow_file(fixture.data / "slow.txt", gib=64)

    async def main():
        async with connected(fixture, transport) as (client, cpu_seconds):
            with anyio.move_on_after(0.5) as scope:
                await client.call("read_text_file", {"path": "/src/slow.txt", "offset": 3})
            assert scope.cancelled_caught, "the long call finished before it could be cancelled"
            await client.session.send_ping()
            # The work stopped: the server's CPU is idle soon after.
            await anyio.sleep(0.5)
            before = cpu_seconds()
            await anyio.sleep(1.0)
            assert cpu_seconds() - before < 0.3, "the cancelled call is still running"
            assert text(await client.call("read_text_file", {"path": "/src/README.md"})).startswith("# Demo")

    anyio.run(main)


@TRANSPORTS
def test_a_long_call_reports_progress(fixture, transport):
    write_slow_file(fixture.data / "slow.txt")

    async def main():
        reports: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress, total, message):
            reports.append((progress, total, message))

        async with connected(fixture, transport) as (client, _):
            result = await client.session.call_tool(
                "read_multiple_files",
                {"paths": ["/src/README.md", "/src/slow.txt", "/src/docs/guide.txt"]},
                progress_callback=on_progress,
            )
            fixture.record(result)
            assert not result.is_error
        assert reports, "no progress notification arrived"
        for progress, total, message in reports:
            assert total == 3
            assert message == f"{progress:g} of 3 files read"

    anyio.run(main)


def refused_status(fixture, url: str, token: str | None, headers: dict | None = None) -> int:
    """The SDK cannot open a session: the HTTP status the daemon answered."""
    statuses: list[int] = []

    async def main():
        async with session(fixture, url, token=token, headers=headers, statuses=statuses):
            pass

    with pytest.raises(BaseException):
        anyio.run(main)
    assert len(statuses) == 1, statuses
    return statuses[0]


def test_a_wrong_token_gets_401_and_a_foreign_origin_403(fixture):
    with daemon(fixture) as server:
        url = f"{server.base}/mcp"
        assert refused_status(fixture, url, token="not-the-token-0123456789") == 401
        assert refused_status(fixture, url, token=None) == 401
        assert refused_status(fixture, url, token=TOKEN, headers={"Origin": "https://evil.example"}) == 403

        async def main():
            async with session(fixture, url, headers={"Origin": server.base}) as client:
                await client.session.send_ping()

        anyio.run(main)


def test_two_hosted_crews_cannot_see_each_other(fixture):
    (fixture.root / "crews" / "review").mkdir(parents=True)
    (fixture.root / "crews" / "review" / "crew.yaml").write_text("mounts: [/src]\n")
    (fixture.root / "crews" / "build").mkdir()
    (fixture.root / "crews" / "build" / "crew.yaml").write_text("name: builder\nmounts: [/output]\n")
    (fixture.root / "crews" / "build" / "plan.txt").write_text("the build plan\n")
    (fixture.root.parent / "tokens").write_text(f"review {REVIEW}\nbuilder {BUILD}\n")
    extra = ["--crew", "crews/review", "--crew", "crews/build", "--token-file", "../tokens"]
    with daemon(fixture, *extra, env={"VFS_TOKEN": ""}) as server:

        async def main():
            async with (
                session(fixture, f"{server.base}/mcp/review", token=REVIEW) as review,
                session(fixture, f"{server.base}/mcp/builder", token=BUILD) as builder,
            ):
                assert text(await review.call("list_directory", {"path": "/"})) == "[DIR] crew\n[DIR] src\n"
                assert text(await builder.call("list_directory", {"path": "/"})) == "[DIR] crew\n[DIR] output\n"
                assert text(await builder.call("read_text_file", {"path": "/crew/plan.txt"})) == "the build plan\n"
                missing = text(await review.call("read_text_file", {"path": "/nothing/plan.txt"}))
                for path in ["/crews-1/plan.txt", "/output/a.txt", "/crews/crew.yaml", "/llm-logs/x"]:
                    answer = await review.call("read_text_file", {"path": path})
                    assert answer.is_error and text(answer) == missing, path
                found = await review.call("search_files", {"path": "/", "pattern": "**/plan.txt"})
                assert "plan.txt" not in text(found)

        anyio.run(main)
        assert refused_status(fixture, f"{server.base}/mcp/builder", token=REVIEW) == 401
        assert refused_status(fixture, f"{server.base}/mcp", token=REVIEW) == 401
        assert server.terminate() == 0
    assert sorted(path.name for path in fixture.logs.iterdir()) == ["builder", "review"]
    assert len(list((fixture.logs / "review").iterdir())) == 1


def test_concurrent_sessions_each_work_and_log_apart(fixture):
    sessions = 8
    with daemon(fixture) as server:

        async def one(index: int):
            async with session(fixture, f"{server.base}/mcp") as client:
                wrote = await client.call("write_file", {"path": f"/output/s{index}.txt", "content": f"session {index}\n"})
                assert not wrote.is_error, wrote
                for _ in range(5):
                    assert text(await client.call("read_text_file", {"path": f"/output/s{index}.txt"})) == f"session {index}\n"

        async def main():
            async with anyio.create_task_group() as group:
                for index in range(sessions):
                    group.start_soon(one, index)

        anyio.run(main)
        assert server.terminate() == 0
    assert sorted(path.name for path in fixture.out.iterdir()) == sorted(f"s{index}.txt" for index in range(sessions))
    logs = sorted(fixture.logs.iterdir())
    assert len(logs) == sessions
    for log in logs:
        assert [json.loads(line)["tool"] for line in log.read_text().splitlines()] == ["write_file"] + ["read_text_file"] * 5


def body(file: int, version: int) -> str:
    # Distinct sizes and bodies, so a mix of two versions can never look whole.
    return f"file {file} version {version}\n" + chr(ord("a") + version % 26) * (4096 * (1 + version % 7))


def test_sigterm_during_writes_leaves_whole_files_and_whole_log_lines(fixture):
    files = 4
    written = {file: {body(file, 0)} for file in range(files)}
    for file in range(files):
        (fixture.out / f"f{file}.txt").write_text(body(file, 0))
    with daemon(fixture, "--grace", "5") as server:
        stop = threading.Event()

        landed = [0] * files

        failures: list[str] = []

        async def writer(file: int):
            version = 1
            try:
                async with session(fixture, f"{server.base}/mcp") as client:
                    # Read before overwrite: the session has seen the file, then its own writes.
                    await client.call("read_text_file", {"path": f"/output/f{file}.txt"})
                    while not stop.is_set():
                        content = body(file, version)
                        written[file].add(content)
                        result = await client.call(
                            "write_file", {"path": f"/output/f{file}.txt", "content": content, "overwrite": True}
                        )
                        assert not result.is_error, text(result)
                        landed[file] += 1
                        version += 1
            except BaseException as error:  # the daemon stopping ends the session: expected
                failures.append(repr(error))

        def run_writers():
            async def main():
                async with anyio.create_task_group() as group:
                    for file in range(files):
                        group.start_soon(writer, file)

            anyio.run(main)

        thread = threading.Thread(target=run_writers)
        thread.start()
        time.sleep(1.0)
        assert server.terminate(timeout=30) == 0
        stop.set()
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert all(count >= 2 for count in landed), f"too few writes landed to test anything: {landed} {failures}"
    for file in range(files):
        assert (fixture.out / f"f{file}.txt").read_text() in written[file], f"f{file}.txt holds a mix"
    assert sorted(path.name for path in fixture.out.iterdir()) == [f"f{file}.txt" for file in range(files)]
    logs = sorted(fixture.logs.iterdir())
    assert len(logs) == files
    for log in logs:
        content = log.read_text()
        assert content.endswith("\n"), f"{log.name} ends in a partial line"
        tools = [json.loads(line)["tool"] for line in content.splitlines()]
        assert tools[0] == "read_text_file" and set(tools[1:]) == {"write_file"}, tools


def test_a_flood_of_connections_without_a_token_keeps_no_token_holder_out(fixture):
    """A client opens connections without end from one address and sends nothing: at the
    connection cap each new one displaces a connection not kept, and before it displaced a
    token holder's fresh connection from another address (still sending its headers) as
    readily as its own: 60 of 60 requests were closed unanswered at a cap of 4 (red team of
    the twenty-fifth session). Now a flooding address displaces its own: every request of the
    token holder is answered while the flood runs, and the daemon serves after it."""
    import socket

    with daemon(fixture, "--max-connections", "8") as server:
        host, port = server.base.removeprefix("http://").rsplit(":", 1)
        stop = threading.Event()
        opened = [0]

        def flood():
            while not stop.is_set():
                with socket.socket() as held:
                    held.bind(("127.0.0.2", 0))
                    held.settimeout(0.5)
                    try:
                        held.connect((host, int(port)))
                        opened[0] += 1
                        while not stop.is_set() and held.recv(1) != b"":
                            pass
                    except OSError:
                        pass

        floods = [threading.Thread(target=flood, daemon=True) for _ in range(24)]
        for thread in floods:
            thread.start()
        try:
            time.sleep(0.5)
            answers = []
            for _ in range(30):
                request = (
                    f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                    "Content-Type: application/json\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx"
                )
                with socket.create_connection((host, int(port)), timeout=20) as client:
                    client.sendall(request.encode())
                    try:
                        answer = b""
                        while chunk := client.recv(65536):
                            answer += chunk
                    except ConnectionResetError:
                        answer = b"reset"
                answers.append(answer.split(b"\r\n", 1)[0])
            flooded = opened[0]
        finally:
            stop.set()
            for thread in floods:
                thread.join(timeout=5)
        assert answers == [b"HTTP/1.1 400 Bad Request"] * 30, answers
        assert flooded > 30, f"the flood opened only {flooded} connections"
        assert refused_status(fixture, f"{server.base}/mcp", token=None) == 401
