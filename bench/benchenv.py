"""The benchmarks' virtual environment: bench/.cache/venv, or the one `VFS_BENCH_VENV` names
(scripts/test passes the test suite's .venv, which has the same `mcp` pin), with `mcp` pinned
as in tests/requirements.txt and psutil. `bootstrap(script)` creates or refreshes it, then runs
`script` again inside it."""

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VENV = Path(os.environ.get("VFS_BENCH_VENV") or BENCH / ".cache" / "venv")
PSUTIL_VERSION = "7.2.2"


def requirements() -> list[str]:
    pin = next(
        (line.strip() for line in (ROOT / "tests" / "requirements.txt").read_text().splitlines() if line.startswith("mcp==")),
        None,
    )
    if pin is None:
        raise SystemExit("tests/requirements.txt has no `mcp==` pin")
    return [pin, f"psutil=={PSUTIL_VERSION}"]


def bootstrap(script: str) -> None:
    """Returns at once inside the environment; elsewhere makes it and re-executes `script`."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    wanted = requirements()
    python = VENV / "bin" / "python"
    stamp = VENV / ".bench-requirements"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if not stamp.exists() or stamp.read_text().split() != wanted:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *wanted], check=True)
        stamp.write_text("\n".join(wanted) + "\n")
    os.execv(str(python), [str(python), str(Path(script).resolve()), *sys.argv[1:]])
