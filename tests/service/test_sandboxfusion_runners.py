"""SandboxFusion's own runner tests (``../shared/peer/sandboxfusion``), for every language dojo
claims and can run here, against ``/run_code`` of a real server. ~3 minutes (a pytest process per
file, JVM and Scala compiles), so opt-in: ``make test-sandboxfusion`` (DOJO_SANDBOXFUSION=1).
Skipped where the peer suite is not beside the checkout."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from dojo.sandbox.errors import LanguageUnavailable
from dojo.sandbox.languages import LANGUAGES, resolve_toolchain
from dojo.service import ServiceSettings
from tests.service.conftest import running_server

PEER = Path(__file__).resolve().parents[3] / "shared" / "peer" / "sandboxfusion"
# SandboxFusion's test file -> the dojo language it exercises
FILES = {
    "bash": "bash", "cpp": "cpp", "csharp": "csharp", "d_ut": "d", "go": "go", "go_test": "go_test",
    "java": "java", "jest": "jest", "junit": "junit", "nodejs": "javascript", "perl": "perl", "php": "php",
    "pytest": "pytest", "python": "python", "r": "r", "racket": "racket", "ruby": "ruby", "rust": "rust",
    "scala": "scala", "typescript": "typescript", "verilog": "verilog", "lua": "lua",
}  # fmt: skip
# Tests that need what no registry this project may use ships: luaunit (LuaRocks only).
KNOWN_MISSING = {"lua": 2}
pytestmark = [
    pytest.mark.skipif(not (PEER / "run").exists(), reason=f"SandboxFusion's runner tests are not at {PEER}"),
    pytest.mark.skipif(os.environ.get("DOJO_SANDBOXFUSION") != "1", reason="opt-in: make test-sandboxfusion"),
]


def usable(language: str) -> bool:
    try:
        resolve_toolchain(LANGUAGES[language])
    except LanguageUnavailable:
        return False
    return True


def test_sandboxfusion_runner_tests_pass_for_every_claimed_language() -> None:
    files = [PEER / "tests" / "runners" / f"test_{name}.py" for name, lang in FILES.items() if usable(lang)]
    if not files:
        pytest.skip("no claimed language's toolchain is installed here")
    python = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python"
    with running_server(ServiceSettings(pool_size=4)) as server:
        proc = subprocess.run(
            ["bash", str(PEER / "run"), server.url, str(python), *map(str, files)],
            capture_output=True, text=True, timeout=1200, check=False,
        )  # fmt: skip
    failed = {}
    for line in proc.stdout.splitlines():
        match = re.match(r"test_(\w+)\.py\s+passed\s+(\d+)\s+failed\s+(\d+)", line)
        if match and int(match.group(3)) > KNOWN_MISSING.get(match.group(1), 0):
            failed[match.group(1)] = int(match.group(3))
        if match:
            assert int(match.group(2)) > 0, line  # a file whose tests did not run at all
    assert failed == {}, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "total:" in proc.stdout
