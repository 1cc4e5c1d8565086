"""Fixtures for the end-to-end tests: a fresh fixture tree per test, and an MCP client
(the official Python SDK) connected to the real `vfs serve` over stdio.

Every response the client receives is recorded, and after each test it is scanned for any
physical path of the fixture: the temp dir (as given and resolved), the test's working
directory and $HOME. A hit fails the test: no physical path may ever reach an agent.
"""

import base64
import json
import os
import pathlib
import subprocess
import sys

import anyio
import jsonschema
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

REPO = pathlib.Path(__file__).resolve().parent.parent
BINARY = pathlib.Path(os.environ.get("VFS_BINARY", REPO / "target" / "debug" / "vfs"))
LEAK_CHECKER = REPO / "target" / "debug" / "vfs-compliance"

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


class Fixture:
    """A fixture tree: /src (ro, with a rw override on `scratch`), /output (rw), a log dir."""

    def __init__(self, root: pathlib.Path, stderr: pathlib.Path):
        self.root = root
        self.stderr = stderr
        self.data = root / "data"
        self.out = root / "out"
        self.logs = root / "logs"
        (self.data / "docs").mkdir(parents=True)  # creates root too
        (self.data / "scratch").mkdir()
        self.out.mkdir()
        (self.data / "README.md").write_text("# Demo\nline two\nline three\n")
        (self.data / "docs" / "guide.txt").write_text("alpha\nneedle here\nomega\n")
        (self.data / "image.png").write_bytes(PNG)
        os.symlink("/etc", self.data / "escape")
        self.responses: list[str] = []
        # More physical spellings for the leak scan (a test serving other storage adds its own,
        # e.g. a bucket name and an endpoint URL).
        self.extra_spellings: list[str] = []

    def launch(self, *extra: str) -> list[str]:
        return [
            "serve",
            "--mount",
            "data:/src:ro;scratch:rw",
            "--mount",
            "out:/output:rw",
            "--llm-log",
            "logs",
            *extra,
        ]

    def physical_spellings(self) -> list[str]:
        spellings = {str(self.root.parent), os.path.realpath(self.root.parent), os.getcwd(), str(REPO)}
        home = os.environ.get("HOME")
        if home and home != "/":
            spellings.add(home)
        spellings.update(spelling for spelling in self.extra_spellings if spelling)
        return sorted(spellings, key=len, reverse=True)

    def record(self, value) -> None:
        if hasattr(value, "model_dump_json"):
            self.responses.append(value.model_dump_json())
        else:
            self.responses.append(json.dumps(value) if not isinstance(value, str) else value)

    def log_lines(self) -> list[dict]:
        files = sorted(self.logs.iterdir())
        assert len(files) == 1, files
        assert files[0].name.startswith("exchanges-") and files[0].name.endswith(".jsonl")
        text = files[0].read_text()
        assert text.endswith("\n"), "every record is a whole line"
        return [json.loads(line) for line in text.splitlines()]


# Every tool whose structured content a test validated against its output schema.
VALIDATED: set[str] = set()


class Client:
    """A thin recorder around ClientSession that also validates every successful result's
    structured content against the tool's `outputSchema` (JSON Schema 2020-12)."""

    def __init__(self, session: ClientSession, fixture: Fixture):
        self.session = session
        self.fixture = fixture
        self.output_schemas: dict[str, dict] | None = None

    async def call(self, name: str, arguments: dict | None = None):
        try:
            result = await self.session.call_tool(name, arguments or {})
        except MCPError as error:
            # Protocol errors reach the agent too: scan them like results.
            self.fixture.record(str(error))
            raise
        self.fixture.record(result)
        await self.validate(name, result)
        return result

    async def validate(self, name: str, result) -> None:
        if result.is_error:
            assert result.structured_content is None, f"{name}: an error with structured content"
            return
        if self.output_schemas is None:
            listed = await self.session.list_tools()
            self.output_schemas = {tool.name: tool.output_schema for tool in listed.tools}
        schema = self.output_schemas.get(name)
        assert schema is not None, f"{name} declares no outputSchema"
        assert result.structured_content is not None, f"{name} returned no structured content"
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.Draft202012Validator(schema).validate(result.structured_content)
        VALIDATED.add(name)

    async def list_tools(self):
        result = await self.session.list_tools()
        self.fixture.record(result)
        return result


@pytest.fixture
def fixture(tmp_path):
    # The server's stderr goes beside the served tree, not into it (the default launch serves
    # the fixture root as /workspace).
    made = Fixture(tmp_path / "root", tmp_path / "server-stderr.txt")
    yield made
    for response in made.responses:
        for spelling in made.physical_spellings():
            assert spelling not in response, f"a response names the physical path {spelling!r}: {response}"
    if made.responses:
        # The project's own leak checker too: every spelling of every mount's physical base
        # (as given, absolute, canonical), the working directory, $HOME and the internal root.
        made.logs.mkdir(exist_ok=True)
        checked = subprocess.run(
            [
                str(LEAK_CHECKER),
                "leaks",
                "--mount",
                "data:/src:ro",
                "--mount",
                "out:/output:rw",
                "--internal",
                "logs:/llm-logs:rw",
                "--spelling",
                str(made.root.parent),
            ],
            input="\n".join(made.responses),
            cwd=made.root,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert checked.returncode == 0, f"vfs-compliance leaks: {checked.stdout}{checked.stderr}"


def run_client(
    fixture: Fixture,
    body,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    messages: list | None = None,
):
    """Starts `vfs serve` in the fixture dir, initializes a session, and runs `body(client, init)`.

    `env` adds variables to the server's environment (which otherwise holds only the SDK's safe
    defaults and `VFS_LOG`). `messages` collects the server's `notifications/message` (each is
    scanned for physical paths like every response).
    """

    async def on_message(params):
        fixture.record(params)
        if messages is not None:
            messages.append(params)

    assert BINARY.exists(), f"build the binary first: {BINARY}"

    async def main():
        params = StdioServerParameters(
            command=str(BINARY),
            args=args or fixture.launch(),
            cwd=str(fixture.root),
            env={"VFS_LOG": "warn", **(env or {})},
        )
        with open(fixture.stderr, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, logging_callback=on_message) as session:
                    init = await session.initialize()
                    fixture.record(init)
                    await body(Client(session, fixture), init)

    anyio.run(main)
    sys.stderr.write(fixture.stderr.read_text())
