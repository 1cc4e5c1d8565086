"""End-to-end tests of object-storage mounts (issue 6): the official Python MCP SDK drives the real
`vfs serve --mount s3://BUCKET/PREFIX:/data:rw` against moto's S3 server.

`scripts/test` (or `eval "$(scripts/s3-server)"`) starts moto on a free loopback port and exports
`AWS_*` and `VFS_TEST_S3_BUCKET`. Without them these tests are skipped, except under CI, where
they fail. The bucket name, the endpoint URL, the `s3://` URL and the key prefix are physical
spellings: every response is scanned for them (and for the temp dir, as in every test).
"""

import os
import pathlib
import re
import signal
import socket
import subprocess
import time
import urllib.request
import uuid

import anyio
import pytest
from conftest import BINARY, REPO, run_client

BUCKET = os.environ.get("VFS_TEST_S3_BUCKET", "")
ENDPOINT = os.environ.get("AWS_ENDPOINT_URL", "").rstrip("/")
AWS_VARS = ["AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ALLOW_HTTP"]
MOTO_SERVER = REPO / ".venv" / "bin" / "moto_server"


@pytest.fixture(autouse=True)
def s3_server():
    """The S3-compatible server of `scripts/s3-server`: skipped without it, except under CI."""
    if not BUCKET or not ENDPOINT:
        message = "VFS_TEST_S3_BUCKET/AWS_ENDPOINT_URL are not set: run `eval \"$(scripts/s3-server)\"` first"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(message + " (CI must run the object-storage tests)")
        pytest.skip(message)


def text(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def aws_env(endpoint: str | None = None) -> dict[str, str]:
    env = {name: os.environ[name] for name in AWS_VARS if name in os.environ}
    if endpoint is not None:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env


def store_spellings(bucket: str, endpoint: str, prefix: str = "") -> list[str]:
    """The physical spellings of an S3 mount: bucket, URL, endpoint (with and without scheme)."""
    host = endpoint.split("://", 1)[-1]
    spellings = [bucket, f"s3://{bucket}", "s3://", endpoint, host, host.split(":")[0]]
    if prefix:
        spellings += [prefix, f"s3://{bucket}/{prefix}"]
    return spellings


def s3_client(endpoint: str = ""):
    """A boto3 client of the test's S3 server (boto3 comes with moto, which scripts/s3-server
    installs; only these tests need it)."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint or ENDPOINT,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
    )


def get_object(key: str, endpoint: str = "", bucket: str = "") -> bytes | None:
    """The object's bytes, read straight from the store."""
    import botocore.exceptions

    client = s3_client(endpoint)
    try:
        return client.get_object(Bucket=bucket or BUCKET, Key=key)["Body"].read()
    except botocore.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in ("NoSuchKey", "404"):
            return None
        raise


def one_clean_line(result, *spellings: str) -> str:
    """A tool error as an agent sees it: isError, one line, no physical spelling."""
    assert result.is_error, text(result)
    message = text(result)
    assert message and "\n" not in message.rstrip("\n"), repr(message)
    for spelling in spellings:
        assert spelling not in message, (spelling, message)
    return message


def unique_prefix() -> str:
    return f"e2e-{uuid.uuid4().hex[:12]}"


def test_every_tool_on_an_s3_mount(fixture):
    prefix = unique_prefix()
    url = f"s3://{BUCKET}/{prefix}"
    fixture.extra_spellings += store_spellings(BUCKET, ENDPOINT, prefix)

    async def body(client, init):
        assert "| /data | rw |" in init.instructions

        result = await client.call("list_mounts")
        assert text(result) == "/data (rw)\n"

        result = await client.call("write_file", {"path": "/data/notes/a.txt", "content": "one\ntwo\nthree\n"})
        assert not result.is_error, text(result)
        version = result.structured_content["version"]
        assert version
        assert get_object(f"{prefix}/notes/a.txt") == b"one\ntwo\nthree\n"

        result = await client.call("write_file", {"path": "/data/notes/a.txt", "content": "x"})
        assert one_clean_line(result).startswith("`/data/notes/a.txt` already exists")

        result = await client.call("read_text_file", {"path": "/data/notes/a.txt"})
        assert not result.is_error, text(result)
        assert text(result) == "one\ntwo\nthree\n"
        assert result.structured_content["version"] == version

        result = await client.call("read_text_file", {"path": "/data/notes/a.txt", "offset": 2, "limit": 1})
        assert "content" not in result.structured_content, "the text is sent once"
        assert result.structured_content["startLine"] == 2
        assert result.structured_content["truncated"] is True
        assert text(result) == "two\n[more lines follow; read on with offset: 3]"

        result = await client.call("read_text_file", {"path": "/data/notes/a.txt", "tail": 1})
        assert text(result) == "three\n"

        for path, content in [("/data/notes/b.md", "hello needle\n"), ("/data/top.txt", "top\n")]:
            result = await client.call("write_file", {"path": path, "content": content})
            assert not result.is_error, text(result)
        result = await client.call("create_directory", {"path": "/data/empty"})
        assert not result.is_error, text(result)
        # An empty directory is its marker, as other tools write it: listed, and kept.
        assert get_object(f"{prefix}/empty/") == b""

        result = await client.call("list_directory", {"path": "/data"})
        assert text(result) == "[DIR] empty\n[DIR] notes\n[FILE] top.txt\n"
        result = await client.call("list_directory", {"path": "/data/notes"})
        assert text(result) == "[FILE] a.txt\n[FILE] b.md\n"

        result = await client.call("directory_tree", {"path": "/data"})
        assert not result.is_error, text(result)
        for name in ["notes", "a.txt", "b.md", "top.txt"]:
            assert name in text(result)

        result = await client.call("search_files", {"path": "/data", "pattern": "*.md"})
        assert text(result).strip() == "/data/notes/b.md"

        result = await client.call("grep", {"pattern": "needle", "path": "/data"})
        assert "/data/notes/b.md:1:hello needle" in text(result)
        assert result.structured_content["matches"] == 1

        result = await client.call("get_file_info", {"path": "/data/notes/a.txt"})
        info = result.structured_content
        assert (info["kind"], info["size"], info["rights"], info["version"]) == ("file", 14, "rw", version)
        result = await client.call("get_file_info", {"path": "/data/notes"})
        assert result.structured_content["kind"] == "directory"

        # A guarded write with a stale version: a clean error, and the object is untouched.
        stale = "0" * len(version)
        result = await client.call(
            "write_file", {"path": "/data/notes/a.txt", "content": "lost\n", "expectedVersion": stale}
        )
        message = one_clean_line(result)
        assert "/data/notes/a.txt" in message and "version" in message, message
        assert get_object(f"{prefix}/notes/a.txt") == b"one\ntwo\nthree\n"

        result = await client.call(
            "edit_file",
            {
                "path": "/data/notes/a.txt",
                "edits": [{"oldText": "two", "newText": "2"}],
                "expectedVersion": version,
            },
        )
        assert not result.is_error, text(result)
        assert "-two\n+2\n" in result.structured_content["diff"]
        assert get_object(f"{prefix}/notes/a.txt") == b"one\n2\nthree\n"

        # The old version is stale now, for edits too.
        result = await client.call(
            "edit_file",
            {"path": "/data/notes/a.txt", "edits": [{"oldText": "2", "newText": "two"}], "expectedVersion": version},
        )
        assert "version" in one_clean_line(result)

        result = await client.call("delete_file", {"path": "/data/top.txt"})
        assert not result.is_error, text(result)
        assert get_object(f"{prefix}/top.txt") is None
        result = await client.call("get_file_info", {"path": "/data/top.txt"})
        assert one_clean_line(result) == "`/data/top.txt` does not exist"

        result = await client.call("delete_file", {"path": "/data/notes"})
        assert one_clean_line(result)
        result = await client.call("delete_file", {"path": "/data/notes", "recursive": True})
        assert not result.is_error, text(result)
        assert get_object(f"{prefix}/notes/b.md") is None
        result = await client.call("read_text_file", {"path": "/data/notes/b.md"})
        assert one_clean_line(result) == "`/data/notes/b.md` does not exist"

    run_client(fixture, body, ["serve", "--mount", f"{url}:/data:rw"], env=aws_env())


def test_a_mixed_launch_moves_files_across_backends(fixture):
    prefix = unique_prefix()
    fixture.extra_spellings += store_spellings(BUCKET, ENDPOINT, prefix)

    async def body(client, init):
        result = await client.call("list_mounts")
        assert text(result) == "/output (rw)\n/src (rw)\n"

        # Local → object storage.
        result = await client.call("move_file", {"source": "/src/README.md", "destination": "/output/README.md"})
        assert not result.is_error, text(result)
        assert not (fixture.data / "README.md").exists()
        assert get_object(f"{prefix}/README.md") == b"# Demo\nline two\nline three\n"
        result = await client.call("read_text_file", {"path": "/output/README.md", "head": 1})
        assert text(result) == "# Demo\n[more lines follow; read on with offset: 2]"

        result = await client.call("write_file", {"path": "/output/report/summary.txt", "content": "done\n"})
        assert not result.is_error, text(result)

        # Object storage → local.
        result = await client.call(
            "move_file", {"source": "/output/report/summary.txt", "destination": "/src/docs/summary.txt"}
        )
        assert not result.is_error, text(result)
        assert (fixture.data / "docs" / "summary.txt").read_text() == "done\n"
        assert get_object(f"{prefix}/report/summary.txt") is None

        # An existing destination is refused both ways and nothing moves.
        result = await client.call("move_file", {"source": "/src/docs/guide.txt", "destination": "/output/README.md"})
        assert one_clean_line(result)
        assert (fixture.data / "docs" / "guide.txt").exists()
        result = await client.call("move_file", {"source": "/output/README.md", "destination": "/src/docs/guide.txt"})
        assert one_clean_line(result)
        assert get_object(f"{prefix}/README.md") is not None

        result = await client.call("move_file", {"source": "/output/README.md", "destination": "/src/README.md"})
        assert not result.is_error, text(result)
        assert (fixture.data / "README.md").read_text() == "# Demo\nline two\nline three\n"
        assert get_object(f"{prefix}/README.md") is None

        result = await client.call("grep", {"pattern": "done|needle", "path": "/"})
        assert "/src/docs/summary.txt:1:done" in text(result)
        assert "/src/docs/guide.txt:2:needle here" in text(result)

    run_client(
        fixture,
        body,
        ["serve", "--mount", "data:/src:rw", "--mount", f"s3://{BUCKET}/{prefix}:/output:rw"],
        env=aws_env(),
    )


def list_keys(prefix: str) -> list[str]:
    """The keys under `prefix` in the test bucket, straight from the store."""
    client = s3_client()
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/")
    return sorted(item["Key"] for item in listed.get("Contents", []))


def test_the_journal_keeps_an_objects_before_image_in_its_bucket_and_undo_puts_it_back(fixture):
    prefix = unique_prefix()
    fixture.extra_spellings += store_spellings(BUCKET, ENDPOINT, prefix)
    area = f"{prefix}/.vfs-tmp-journal/"

    async def body(client, init):
        steps = [
            ("write_file", {"path": "/data/a.txt", "content": "one\n"}),
            ("write_file", {"path": "/data/t/x.txt", "content": "x\n"}),
            ("write_file", {"path": "/data/a.txt", "content": "two\n", "overwrite": True}),
            ("delete_file", {"path": "/data/t", "recursive": True}),
        ]
        for tool, arguments in steps:
            result = await client.call(tool, arguments)
            assert not result.is_error, f"{tool}: {text(result)}"
        # The images of the overwrite and of the delete were copied by the store itself, into
        # the mount's own reserved area; nothing was copied to the journal's directory.
        images = [key for key in list_keys(prefix) if key.startswith(area)]
        assert len(images) == 2, list_keys(prefix)
        assert sorted(get_object(key) for key in images) == [b"one\n", b"x\n"]
        assert list((fixture.root / "journal" / "images").iterdir()) == []
        # No agent sees that area: not listed, not found by name (as a name that is not there).
        result = await client.call("list_directory", {"path": "/data"})
        assert text(result) == "[FILE] a.txt\n", text(result)
        hidden = await client.call("read_text_file", {"path": "/data/.vfs-tmp-journal"})
        assert one_clean_line(hidden) == "`/data/.vfs-tmp-journal` does not exist"
        result = await client.call("search_files", {"path": "/data", "pattern": "**"})
        assert ".vfs-tmp" not in text(result), text(result)

        undone = await client.call("undo_changes", {"count": 2})
        assert not undone.is_error, text(undone)
        assert undone.structured_content["lines"] == ["restored /data/t", "restored /data/a.txt"]
        assert get_object(f"{prefix}/a.txt") == b"one\n"
        assert get_object(f"{prefix}/t/x.txt") == b"x\n"

    run_client(
        fixture,
        body,
        ["serve", "--mount", f"s3://{BUCKET}/{prefix}:/data:rw", "--journal", "journal", "--no-read-before-edit"],
        env=aws_env(),
    )


def test_the_journals_bound_drops_an_objects_oldest_image_from_its_bucket(fixture):
    prefix = unique_prefix()
    fixture.extra_spellings += store_spellings(BUCKET, ENDPOINT, prefix)
    area = f"{prefix}/.vfs-tmp-journal/"

    async def body(client, init):
        for word in ["one\n", "two\n", "six\n"]:
            content = word * 37_500
            result = await client.call("write_file", {"path": "/data/a.txt", "content": content, "overwrite": True})
            assert not result.is_error, text(result)
        # Two images of 150,000 bytes each were kept; the bound (256 KiB, the least, for the
        # log and the images) dropped the older one.
        images = [key for key in list_keys(prefix) if key.startswith(area)]
        assert [get_object(key) for key in images] == [b"two\n" * 37_500], images
        changes = (await client.call("list_changes", {})).structured_content["changes"]
        assert [change["state"] for change in changes] == ["undoable", "dropped", "undoable"]

    run_client(
        fixture,
        body,
        [
            "serve",
            "--mount",
            f"s3://{BUCKET}/{prefix}:/data:rw",
            "--journal",
            "journal",
            "--journal-max-bytes",
            "256K",
            "--no-read-before-edit",
        ],
        env=aws_env(),
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_moto(port: int, log: pathlib.Path, bucket: str) -> subprocess.Popen:
    """A moto S3 server of this test's own on 127.0.0.1:port, with `bucket` created."""
    with open(log, "w") as output:
        server = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)], stdout=output, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 20
    while True:
        try:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/{bucket}", method="PUT")
            urllib.request.urlopen(request, timeout=1).close()
            return server
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise
            time.sleep(0.1)


FAULT_CALLS = [
    ("read_text_file", {"path": "/data/a.txt"}),
    ("read_text_file", {"path": "/data/a.txt", "offset": 2, "limit": 1}),
    ("get_file_info", {"path": "/data/a.txt"}),
    ("list_directory", {"path": "/data"}),
    ("directory_tree", {"path": "/data"}),
    ("search_files", {"path": "/data", "pattern": "*.txt"}),
    ("grep", {"pattern": "hello", "path": "/data"}),
    ("write_file", {"path": "/data/b.txt", "content": "b\n"}),
    ("edit_file", {"path": "/data/a.txt", "edits": [{"oldText": "hello", "newText": "bye"}]}),
    ("move_file", {"source": "/data/a.txt", "destination": "/data/c.txt"}),
    ("delete_file", {"path": "/data/a.txt"}),
]
FAULT_BOUND = 60.0


def store_down_session(fixture, tmp_path, calls, freeze: bool = False, messages: list | None = None) -> list[tuple[str, float, str]]:
    """Serves a bucket of a moto server of its own, makes one successful call, kills the server
    (or, with `freeze`, stops it with SIGSTOP so that it accepts connections and never answers),
    then makes `calls`: each must be a clean one-line tool error within FAULT_BOUND seconds, and
    the server must still answer afterwards. Returns (tool, seconds, message) per call."""
    if not MOTO_SERVER.exists():
        pytest.fail(f"moto is not installed in .venv: run scripts/s3-server once ({MOTO_SERVER})")
    port = free_port()
    bucket = f"vfs-fault-{uuid.uuid4().hex[:8]}"
    endpoint = f"http://127.0.0.1:{port}"
    prefix = f"fault-{uuid.uuid4().hex[:8]}"
    spellings = store_spellings(bucket, endpoint, prefix)
    fixture.extra_spellings += spellings
    server = start_moto(port, tmp_path / "moto.log", bucket)
    outcomes: list[tuple[str, float, str]] = []

    async def body(client, init):
        result = await client.call("write_file", {"path": "/data/a.txt", "content": "hello\nworld\n"})
        assert not result.is_error, text(result)
        if freeze:
            server.send_signal(signal.SIGSTOP)
        else:
            server.kill()
            server.wait(timeout=10)
        for tool, arguments in calls:
            started = time.monotonic()
            with anyio.fail_after(FAULT_BOUND + 30):
                result = await client.call(tool, arguments)
            elapsed = time.monotonic() - started
            outcomes.append((tool, elapsed, one_clean_line(result, *spellings)))
            assert elapsed < FAULT_BOUND, outcomes[-1]
        # The server still answers.
        result = await client.call("list_mounts")
        assert text(result) == "/data (rw)\n"
        result = await client.call("list_directory", {"path": "/"})
        assert not result.is_error, text(result)

    try:
        run_client(
            fixture, body, ["serve", "--mount", f"s3://{bucket}/{prefix}:/data:rw"], env=aws_env(endpoint), messages=messages
        )
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGCONT)
            server.kill()
            server.wait(timeout=10)
    print("\nstore-down calls:\n" + "\n".join(f"  {tool} {secs:.2f} s: {message}" for tool, secs, message in outcomes))
    return outcomes


def test_a_store_that_dies_mid_session_gives_clean_bounded_errors(fixture, tmp_path):
    outcomes = store_down_session(fixture, tmp_path, FAULT_CALLS)
    assert len(outcomes) == len(FAULT_CALLS)
    for tool, _, message in outcomes:
        # A dead store is never reported as a missing or existing file.
        assert "does not exist" not in message and "already exists" not in message, (tool, message)


def test_a_frozen_store_times_out_cleanly(fixture, tmp_path):
    # The request timeout (15 s) and the retry budget (20 s) bound the wait: about 30 s measured.
    outcomes = store_down_session(fixture, tmp_path, FAULT_CALLS[:1], freeze=True)
    assert len(outcomes) == 1


def test_a_dead_store_is_named_as_such_to_the_agent(fixture, tmp_path):
    messages: list = []
    outcomes = store_down_session(fixture, tmp_path, FAULT_CALLS[:1] + FAULT_CALLS[3:4] + FAULT_CALLS[7:8], messages=messages)
    for tool, _, message in outcomes:
        assert "the object store failed (after retries); try again later" in message, (tool, message)
    # The server's own warning reaches the client too (MCP logging): its message only, no
    # bucket, endpoint or path (the leak scan checks every message).
    assert messages, "no notifications/message arrived"
    assert {(message.level, message.logger, message.data) for message in messages} == {
        ("warning", "vfs", "object store request failed")
    }


def vfs_check(mount: str, endpoint: str | None = None) -> tuple[int, str, str, float]:
    env = {"PATH": os.environ.get("PATH", ""), **aws_env(endpoint)}
    started = time.monotonic()
    done = subprocess.run(
        [str(BINARY), "check", "--mount", mount], capture_output=True, text=True, env=env, timeout=120, cwd="/"
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def test_check_reports_a_missing_bucket_in_one_line():
    code, stdout, stderr, elapsed = vfs_check("s3://no-such-bucket:/data")
    assert code == 2, (stdout, stderr)
    lines = (stdout + stderr).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("cannot use `s3://no-such-bucket` for mount `/data`: the bucket does not exist"), lines
    assert elapsed < 30


def test_check_reports_an_unreachable_endpoint_in_one_line():
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code, stdout, stderr, elapsed = vfs_check(f"s3://{BUCKET}:/data", endpoint)
    assert code == 2, (stdout, stderr)
    lines = (stdout + stderr).splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(
        rf"cannot use `s3://{re.escape(BUCKET)}` for mount `/data`: the object store did not answer; "
        r"check AWS_ENDPOINT_URL, AWS_REGION and the network \(.+\)",
        lines[0],
    ), lines[0]
    assert elapsed < 30, elapsed


def put_raw(key: str, body: bytes = b"x\n") -> None:
    """Writes an object as another tool would, with any key the store takes."""
    s3_client().put_object(Bucket=BUCKET, Key=key, Body=body)


def test_a_key_no_path_can_spell_is_named_for_what_it_is(fixture):
    """Another tool wrote a key with an empty segment: the listings that meet it fail with a
    line that says so (not "the object store failed ... try again later"), without the key,
    and a mount whose first listing meets it is refused at the start in one line."""
    prefix = unique_prefix()
    fixture.extra_spellings += store_spellings(BUCKET, ENDPOINT, prefix)
    put_raw(f"{prefix}/ok.txt")
    put_raw(f"{prefix}/deep/x//y.txt")
    bad = (
        ": the object store holds a name here that no path can spell (an empty, `.` or `..` part, or a "
        "control character), which stops its listing; ask the operator to rename or remove it"
    )

    async def body(client, init):
        result = await client.call("read_text_file", {"path": "/data/ok.txt"})
        assert text(result) == "x\n", text(result)
        result = await client.call("directory_tree", {"path": "/data"})
        assert one_clean_line(result, "//", "y.txt") == "`/data`" + bad
        result = await client.call("list_directory", {"path": "/data/deep/x"})
        assert one_clean_line(result, "//", "y.txt") == "`/data/deep/x`" + bad

    run_client(fixture, body, ["serve", "--mount", f"s3://{BUCKET}/{prefix}:/data:rw"], env=aws_env())

    top = unique_prefix()
    put_raw(f"{top}//x")
    code, stdout, stderr, _ = vfs_check(f"s3://{BUCKET}/{top}:/data")
    assert code == 2, (stdout, stderr)
    lines = (stdout + stderr).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"cannot use `s3://{BUCKET}/{top}` for mount `/data`: it holds a key vfs cannot name, with an empty, "
        "`.` or `..` segment or a control character (Encountered object with invalid path: "
    ), lines[0]
    assert lines[0].endswith("; rename or remove that object"), lines[0]


def test_a_file_that_is_also_a_prefix_is_judged_and_kept_by_a_recursive_delete(fixture):
    """Another tool made `y/fp` both a file and a prefix (`y/fp/child`), beside directory
    markers (`y/`, `y/e/`). A recursive delete of `/data/y` judges `fp` as any file (read it
    first), keeps its image and deletes it; the markers go with the directory, and undo brings
    the files back (red team of the twenty-fifth session: the file was taken for a marker and
    deleted unread, with no image)."""
    prefix = unique_prefix()
    fixture.extra_spellings += store_spellings(BUCKET, ENDPOINT, prefix)
    put_raw(f"{prefix}/y/", b"")
    put_raw(f"{prefix}/y/e/", b"")
    put_raw(f"{prefix}/y/fp", b"never read\n")
    put_raw(f"{prefix}/y/fp/child", b"child\n")
    before = list_keys(prefix)

    async def body(client, init):
        result = await client.call("directory_tree", {"path": "/data/y"})
        assert text(result) == "/data/y/\n  e/\n  fp\n  fp/\n    child\n", text(result)
        result = await client.call("list_directory", {"path": "/data/y"})
        assert text(result) == "[DIR] e\n[DIR] fp\n[FILE] fp\n", text(result)
        result = await client.call("read_text_file", {"path": "/data/y/fp/child"})
        assert text(result) == "child\n", text(result)
        refused = await client.call("delete_file", {"path": "/data/y", "recursive": True})
        assert one_clean_line(refused) == (
            "cannot delete `/data/y`: it holds `/data/y/fp`, which you have not read in this session; a delete "
            "removes only files this session has seen at their current version, so read it whole first, or "
            "delete it by itself with the `expectedVersion` that `get_file_info` reports"
        )
        assert list_keys(prefix) == before
        result = await client.call("read_text_file", {"path": "/data/y/fp"})
        assert text(result) == "never read\n", text(result)
        deleted = await client.call("delete_file", {"path": "/data/y", "recursive": True})
        assert not deleted.is_error, text(deleted)
        assert [key for key in list_keys(prefix) if "/.vfs-tmp-" not in key] == []
        undone = await client.call("undo_changes", {"count": 1})
        # Undo brings back what a disk can hold (vfs never makes a name a file and a
        # directory): the file `fp`, not the file below it, and says so.
        assert undone.is_error
        assert text(undone) == (
            "failed /data/y/fp: `/data/y/fp` is not a directory\n"
            "failed /data/y/fp/child: `/data/y/fp/child` is not a directory\n"
            "restored /data/y\n"
        ), text(undone)
        assert get_object(f"{prefix}/y/fp") == b"never read\n"
        assert get_object(f"{prefix}/y/fp/child") is None

    run_client(
        fixture,
        body,
        ["serve", "--mount", f"s3://{BUCKET}/{prefix}:/data:rw", "--journal", "journal"],
        env=aws_env(),
    )


def test_undo_of_a_tree_delete_writes_markers_only_for_its_empty_directories(fixture):
    """A tree another tool wrote without directory markers, one empty directory (its marker)
    among its directories: deleted whole and undone, the bucket holds exactly the keys it held
    (red team of the thirty-fourth session: undo wrote a marker for every directory it made,
    2,631 objects came back as 2,662, and each directory then outlived its last file)."""
    prefix = unique_prefix()
    fixture.extra_spellings += store_spellings(BUCKET, ENDPOINT, prefix)
    for key, body in [
        ("t/a.txt", b"a\n"),
        ("t/sub/b.txt", b"b\n"),
        ("t/sub2/deeper/c.txt", b"c\n"),
        ("t/empty/", b""),
    ]:
        put_raw(f"{prefix}/{key}", body)
    before = list_keys(prefix)

    async def body(client, init):
        deleted = await client.call("delete_file", {"path": "/data/t", "recursive": True})
        assert not deleted.is_error, text(deleted)
        assert [key for key in list_keys(prefix) if "/.vfs-tmp-" not in key] == []
        undone = await client.call("undo_changes", {"count": 1})
        assert text(undone) == "restored /data/t\n", text(undone)
        assert [key for key in list_keys(prefix) if "/.vfs-tmp-" not in key] == before
        # So a directory goes with its last file, as it did before the delete.
        for path in ["/data/t/sub/b.txt", "/data/t/sub2/deeper/c.txt"]:
            result = await client.call("delete_file", {"path": path})
            assert not result.is_error, text(result)
        result = await client.call("list_directory", {"path": "/data/t"})
        assert text(result) == "[FILE] a.txt\n[DIR] empty\n", text(result)

    run_client(
        fixture,
        body,
        ["serve", "--mount", f"s3://{BUCKET}/{prefix}:/data:rw", "--journal", "journal", "--no-read-before-edit"],
        env=aws_env(),
    )


def test_undo_brings_back_an_empty_directory_as_its_marker(fixture):
    """An empty directory on S3 is its marker: deleted, and brought back by undo as one (red
    team of the twenty-fifth session: undo said "restored" and wrote nothing)."""
    prefix = unique_prefix()
    fixture.extra_spellings += store_spellings(BUCKET, ENDPOINT, prefix)
    put_raw(f"{prefix}/theirs/", b"")

    async def body(client, init):
        for tool, arguments in [
            ("create_directory", {"path": "/data/mine"}),
            ("delete_file", {"path": "/data/mine"}),
            ("delete_file", {"path": "/data/theirs"}),
        ]:
            result = await client.call(tool, arguments)
            assert not result.is_error, f"{tool}: {text(result)}"
        assert [key for key in list_keys(prefix) if "/.vfs-tmp-" not in key] == []
        undone = await client.call("undo_changes", {"count": 2})
        assert text(undone) == "restored /data/theirs\nrestored /data/mine\n", text(undone)
        assert get_object(f"{prefix}/theirs/") == b""
        assert get_object(f"{prefix}/mine/") == b""
        result = await client.call("list_directory", {"path": "/data"})
        assert text(result) == "[DIR] mine\n[DIR] theirs\n", text(result)

    run_client(
        fixture,
        body,
        ["serve", "--mount", f"s3://{BUCKET}/{prefix}:/data:rw", "--journal", "journal"],
        env=aws_env(),
    )
