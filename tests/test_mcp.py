"""End-to-end tests: the official Python MCP SDK drives the real `vfs serve` over stdio."""

import base64
import os
import subprocess

import pytest
from conftest import BINARY, PNG, VALIDATED, run_client
from mcp import MCPError

ALL_TOOLS = [
    "list_mounts",
    "read_text_file",
    "read_multiple_files",
    "read_media_file",
    "write_file",
    "edit_file",
    "create_directory",
    "list_directory",
    "directory_tree",
    "search_files",
    "grep",
    "get_file_info",
    "move_file",
    "delete_file",
    "read_file",
    "list_directory_with_sizes",
    "list_allowed_directories",
]
WRITE_TOOLS = {"write_file", "edit_file", "create_directory", "move_file", "delete_file"}


def text(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def test_initialize_names_the_server_and_the_mounts(fixture):
    async def body(client, init):
        assert init.server_info.name == "vfs"
        assert init.capabilities.tools is not None
        assert "## Available File Mounts" in init.instructions
        assert "| /output | rw |" in init.instructions
        assert "llm-logs" not in init.instructions

    run_client(fixture, body)


def test_list_tools_has_every_tool_with_schemas_and_annotations(fixture):
    async def body(client, init):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert list(tools) == ALL_TOOLS
        read = tools["read_text_file"]
        assert set(read.input_schema["properties"]) == {"path", "head", "tail", "offset", "limit"}
        assert read.input_schema["required"] == ["path"]
        assert read.annotations.read_only_hint is True
        assert tools["delete_file"].annotations.destructive_hint is True
        assert tools["create_directory"].annotations.destructive_hint is False
        assert tools["create_directory"].annotations.idempotent_hint is True
        edit = tools["edit_file"].input_schema
        assert set(edit["properties"]) == {"path", "edits", "replaceAll", "dryRun", "expectedVersion"}
        assert set(tools["move_file"].input_schema["required"]) == {"source", "destination"}
        assert set(tools["grep"].input_schema["required"]) == {"pattern"}

    run_client(fixture, body)


def test_a_read_only_launch_lists_no_write_tools(fixture):
    async def body(client, init):
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == [name for name in ALL_TOOLS if name not in WRITE_TOOLS]
        with pytest.raises(MCPError):
            await client.call("write_file", {"path": "/src/x", "content": "x"})

    run_client(fixture, body, ["serve", "--mount", "data:/src:ro", "--llm-log", "logs"])


def test_every_tool_happy_path(fixture):
    async def body(client, init):
        result = await client.call("list_mounts")
        assert not result.is_error
        assert text(result) == "/output (rw)\n/src (ro)\n  /src/scratch (rw)\n"
        assert [mount["root"] for mount in result.structured_content["mounts"]] == ["/output", "/src"]

        result = await client.call("read_text_file", {"path": "/src/README.md", "head": 2})
        assert text(result).startswith("# Demo\nline two\n")
        assert result.structured_content["truncated"] is True

        result = await client.call("read_multiple_files", {"paths": ["/src/README.md", "/src/missing.txt"]})
        assert not result.is_error
        assert "# Demo" in text(result)
        assert "`/src/missing.txt` does not exist" in text(result)
        files = result.structured_content["files"]
        assert [entry["ok"] for entry in files] == [True, False]

        result = await client.call("read_media_file", {"path": "/src/image.png"})
        image = [block for block in result.content if block.type == "image"]
        assert image and image[0].mime_type == "image/png"
        assert base64.b64decode(image[0].data) == PNG

        # Any other file comes as an embedded resource named by its virtual path.
        (fixture.data / "doc one.pdf").write_bytes(b"%PDF-1.4\x00\x01")
        result = await client.call("read_media_file", {"path": "/src/doc one.pdf"})
        assert not result.is_error, text(result)
        embedded = [block.resource for block in result.content if block.type == "resource"]
        assert [(str(block.uri), block.mime_type) for block in embedded] == [
            ("vfs:/src/doc%20one.pdf", "application/pdf")
        ]
        assert base64.b64decode(embedded[0].blob) == b"%PDF-1.4\x00\x01"

        result = await client.call("write_file", {"path": "/output/notes/a.txt", "content": "hello world\n"})
        assert not result.is_error, text(result)
        version = result.structured_content["version"]
        assert (fixture.out / "notes" / "a.txt").read_text() == "hello world\n"

        result = await client.call(
            "edit_file",
            {
                "path": "/output/notes/a.txt",
                "edits": [{"oldText": "world", "newText": "there"}],
                "expectedVersion": version,
            },
        )
        assert not result.is_error, text(result)
        assert "-hello world" in result.structured_content["diff"]
        assert "/output/notes/a.txt" in result.structured_content["diff"]
        assert (fixture.out / "notes" / "a.txt").read_text() == "hello there\n"

        result = await client.call("create_directory", {"path": "/output/made/deeper"})
        assert not result.is_error, text(result)
        assert (fixture.out / "made" / "deeper").is_dir()

        result = await client.call("list_directory", {"path": "/src"})
        assert "[DIR] docs" in text(result)
        assert "[FILE] README.md" in text(result)

        result = await client.call("directory_tree", {"path": "/src", "maxDepth": 2})
        assert "guide.txt" in text(result)

        result = await client.call("search_files", {"path": "/src", "pattern": "*.txt"})
        assert "/src/docs/guide.txt" in text(result)

        result = await client.call("grep", {"pattern": "needle", "path": "/src"})
        assert "/src/docs/guide.txt" in text(result)
        assert result.structured_content["matches"] == 1

        result = await client.call("get_file_info", {"path": "/src/README.md"})
        assert result.structured_content["kind"] == "file"
        assert result.structured_content["rights"] == "ro"

        result = await client.call("move_file", {"source": "/output/notes/a.txt", "destination": "/output/b.txt"})
        assert not result.is_error, text(result)
        assert (fixture.out / "b.txt").exists() and not (fixture.out / "notes" / "a.txt").exists()

        result = await client.call("delete_file", {"path": "/output/b.txt"})
        assert not result.is_error, text(result)
        assert not (fixture.out / "b.txt").exists()

        result = await client.call("write_file", {"path": "/src/scratch/ok.txt", "content": "override grants write"})
        assert not result.is_error, text(result)

        # The reference server's names.
        result = await client.call("read_file", {"path": "/src/README.md"})
        assert text(result) == "# Demo\nline two\nline three\n"
        result = await client.call("list_allowed_directories")
        assert text(result) == "Allowed directories:\n/output\n/src\n"
        assert result.structured_content == {"directories": ["/output", "/src"]}
        result = await client.call("list_directory_with_sizes", {"path": "/src/docs", "sortBy": "size"})
        assert text(result) == "[FILE] guide.txt  24 B\nTotal: 1 file, 0 directories; 24 B in files\n"
        assert result.structured_content["entries"] == [{"name": "guide.txt", "kind": "file", "size": 24}]

    run_client(fixture, body)
    # Every tool's structured content was checked against its output schema.
    assert VALIDATED >= set(ALL_TOOLS), sorted(set(ALL_TOOLS) - VALIDATED)


def test_denials_are_tool_errors_with_virtual_paths_only(fixture):
    async def body(client, init):
        result = await client.call("write_file", {"path": "/src/new.txt", "content": "x"})
        assert result.is_error
        assert text(result).startswith("cannot write `/src/new.txt`: `/src` is mounted ro")

        result = await client.call("read_text_file", {"path": "/src/escape/passwd"})
        assert result.is_error
        assert "leads outside its mount" in text(result)

        result = await client.call("read_text_file", {"path": "/src/../../etc/passwd"})
        assert result.is_error
        assert text(result).startswith("no mount serves this path")

        result = await client.call("delete_file", {"path": "/src/README.md"})
        assert result.is_error
        assert (fixture.data / "README.md").exists()

        result = await client.call("read_text_file", {"path": "relative.txt"})
        assert result.is_error

        # Arguments that do not fit are a result the model reads (SEP-1303); an unknown tool
        # stays a protocol error.
        result = await client.call("read_text_file", {"path": 42})
        assert result.is_error
        assert text(result) == 'invalid arguments for `read_text_file`: `path` must be a string, not the number 42; write it like `"path": "…"`'
        result = await client.call("read_text_file", {"path": "/src/README.md", "head": 1.0, "color": "blue"})
        assert not result.is_error
        assert [block.text for block in result.content] == [
            "# Demo\n[more lines follow; read on with offset: 2]",
            "[ignored unknown argument `color`: `read_text_file` takes `head`, `limit`, `offset`, `path`, `tail`]",
        ]
        with pytest.raises(MCPError):
            await client.call("no_such_tool", {})
        # The server keeps serving after protocol errors.
        assert not (await client.call("list_mounts")).is_error

    run_client(fixture, body)


def test_the_internal_log_root_does_not_exist_for_the_agent(fixture):
    async def body(client, init):
        for tool in ["read_text_file", "list_directory", "get_file_info", "directory_tree"]:
            internal = await client.call(tool, {"path": "/llm-logs"})
            unknown = await client.call(tool, {"path": "/no-such-root"})
            assert internal.is_error and unknown.is_error
            assert internal.model_dump() == unknown.model_dump()
        internal = await client.call("write_file", {"path": "/llm-logs/x.jsonl", "content": "x"})
        unknown = await client.call("write_file", {"path": "/no-such-root/x.jsonl", "content": "x"})
        assert internal.model_dump() == unknown.model_dump()
        root = await client.call("list_directory", {"path": "/"})
        assert "llm-logs" not in text(root)
        assert "llm-logs" not in text(await client.call("list_mounts"))
        found = await client.call("search_files", {"path": "/", "pattern": "exchanges-*"})
        assert "exchanges-" not in text(found)

    run_client(fixture, body)
    assert [line["tool"] for line in fixture.log_lines()].count("write_file") == 2
    assert not (fixture.logs / "x.jsonl").exists()


def test_the_exchange_log_has_one_line_per_call(fixture):
    async def body(client, init):
        await client.call("list_mounts")
        await client.call("read_text_file", {"path": "/src/README.md"})
        await client.call("read_text_file", {"path": "/src/missing"})
        with pytest.raises(MCPError):
            await client.call("no_such_tool", {"x": 1})

    run_client(fixture, body)
    lines = fixture.log_lines()
    assert [line["tool"] for line in lines] == ["list_mounts", "read_text_file", "read_text_file", "no_such_tool"]
    for line in lines:
        assert line["time"].endswith("Z")
        assert isinstance(line["durationMs"], (int, float))
        assert ("result" in line) != ("error" in line)
    assert lines[1]["arguments"] == {"path": "/src/README.md"}
    assert lines[1]["result"]["isError"] is False
    assert lines[1]["result"]["text"].startswith("# Demo")
    assert lines[2]["result"]["isError"] is True
    assert lines[3]["error"]["code"] == -32602


def test_logging_set_level_is_accepted_and_declared(fixture):
    async def body(client, init):
        assert init.capabilities.logging is not None
        await client.session.set_logging_level("error")
        await client.session.set_logging_level("debug")
        assert not (await client.call("list_mounts")).is_error

    run_client(fixture, body)


def test_concurrent_calls_from_one_client(fixture):
    async def body(client, init):
        import anyio

        results = []

        async def one(index):
            results.append(await client.call("read_text_file", {"path": "/src/docs/guide.txt"}))

        async with anyio.create_task_group() as group:
            for index in range(20):
                group.start_soon(one, index)
        assert len(results) == 20
        assert all(text(result) == "alpha\nneedle here\nomega\n" for result in results)

    run_client(fixture, body)
    assert len(fixture.log_lines()) == 20


def test_a_log_directory_inside_the_workspace_stays_invisible(fixture):
    async def body(client, init):
        listing = text(await client.call("list_directory", {"path": "/workspace"}))
        assert "[DIR] data" in listing and "logs" not in listing
        read = await client.call("read_text_file", {"path": "/workspace/logs/anything.jsonl"})
        assert read.is_error
        assert text(read) == "`/workspace/logs/anything.jsonl` does not exist"
        missing = await client.call("read_text_file", {"path": "/workspace/gone/anything.jsonl"})
        assert text(missing) == "`/workspace/gone/anything.jsonl` does not exist"
        found = await client.call("search_files", {"path": "/workspace", "pattern": "exchanges-*"})
        assert "exchanges-" not in text(found)
        grep = await client.call("grep", {"pattern": "read_text_file", "path": "/workspace"})
        assert "exchanges-" not in text(grep)

    # The default workspace is read-only: the log directory inside it is a missing name.
    run_client(fixture, body, ["serve", "--llm-log", "logs"])
    assert len(fixture.log_lines()) == 5


def test_a_log_directory_inside_a_writable_workspace_is_refused(fixture):
    refused = subprocess.run(
        [str(BINARY), "serve", "--allow-write", "--llm-log", "logs"],
        cwd=fixture.root,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert refused.stdout == ""
    logs = os.path.realpath(fixture.root / "logs")
    assert refused.stderr == (
        f"error: the internal root `/llm-logs` (`{logs}`) lies inside `/workspace` at `/workspace/logs`, "
        "which is mounted rw; an agent could tell that something is there\n\n"
        "hint: put the internal directory outside the mount, or make that part read-only with a sub-path "
        "override (`;part:ro`)\n"
    )


def test_hidden_and_read_only_places_from_a_real_client(fixture):
    """Name rules and a mount string's own rules, as the official SDK sees them: hidden paths
    answer like missing ones and never show up in a listing, a tree or a grep; read-only places
    refuse changes; a move that would carry a protected file out of its place is refused."""
    secret = "SECRET-E2E-5d41"
    (fixture.out / ".env").write_text(f"TOKEN={secret}\n")
    (fixture.out / "secrets").mkdir()
    (fixture.out / "secrets" / "token.txt").write_text(secret)
    (fixture.out / "docs").mkdir()
    (fixture.out / "docs" / "guide.md").write_text("# guide\n")
    (fixture.out / "notes.txt").write_text("notes\n")

    async def body(client, init):
        assert (
            "Secrets (environment files, private keys, credentials, names the operator hides) are hidden"
            in init.instructions
        )
        listing = await client.call("list_directory", {"path": "/output"})
        assert text(listing) == "[DIR] docs\n[FILE] notes.txt\n"
        for spelled, canonical in [
            ("/output/.env", "/output/.env"),
            ("/output/secrets/token.txt", "/output/secrets/token.txt"),
            ("/output/./docs/../secrets/token.txt", "/output/secrets/token.txt"),
            ("/output/secrets", "/output/secrets"),
        ]:
            for tool in ["read_text_file", "get_file_info", "list_directory"]:
                result = await client.call(tool, {"path": spelled})
                assert result.is_error
                assert text(result) == f"`{canonical}` does not exist", (tool, spelled)
        tree = await client.call("directory_tree", {"path": "/output"})
        assert "secrets" not in text(tree) and ".env" not in text(tree)
        grep = await client.call("grep", {"pattern": secret, "path": "/output"})
        assert secret not in text(grep)
        result = await client.call("create_directory", {"path": "/output/secrets"})
        assert text(result) == "cannot create `/output/secrets`: names like this are hidden (names the operator hides)"
        result = await client.call("write_file", {"path": "/output/docs/new.md", "content": "x"})
        assert text(result) == (
            "cannot write `/output/docs/new.md`: `/output/docs/new.md` is read-only (paths the operator keeps read-only)"
        )
        result = await client.call("move_file", {"source": "/output/docs", "destination": "/output/manual"})
        assert text(result) == (
            "cannot move `/output/docs`: it holds paths the operator keeps read-only inside, which are read-only"
        )
        result = await client.call("write_file", {"path": "/output/docs/new.txt", "content": "x"})
        assert not result.is_error

    run_client(
        fixture,
        body,
        ["serve", "--mount", "data:/src:ro", "--mount", "out:/output:rw;secrets:hidden;docs/*.md:ro", "--llm-log", "logs"],
    )
    assert (fixture.out / "secrets" / "token.txt").read_text() == secret
    assert (fixture.out / "docs" / "guide.md").read_text() == "# guide\n"
