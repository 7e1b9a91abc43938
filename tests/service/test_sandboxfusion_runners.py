"""SandboxFusion's own runner tests (``../shared/peer/sandboxfusion``), for every language dojo
claims and can run here, against ``/run_code`` of a real server whose Python runs in SandboxFusion's
packages (``make fusion-env``). A few minutes (a pytest process per file, JVM, Scala and Kotlin
compiles), so opt-in: ``make test-sandboxfusion`` (DOJO_SANDBOXFUSION=1). Skipped where the peer
suite is not beside the checkout."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from dojo.sandbox.environment import EnvironmentNotFound, EnvironmentStore
from dojo.sandbox.errors import LanguageUnavailable
from dojo.sandbox.languages import LANGUAGES, resolve_toolchain
from dojo.service import ServiceSettings
from dojo.service.fusion import FUSION_ENVIRONMENT
from tests.service.conftest import running_server

PEER = Path(__file__).resolve().parents[3] / "shared" / "peer" / "sandboxfusion"
# SandboxFusion's test file -> the dojo language it exercises
FILES = {
    "bash": "bash", "cpp": "cpp", "csharp": "csharp", "d_ut": "d", "go": "go", "go_test": "go_test",
    "java": "java", "jest": "jest", "junit": "junit", "nodejs": "javascript", "perl": "perl", "php": "php",
    "pytest": "pytest", "python": "python", "r": "r", "racket": "racket", "ruby": "ruby", "rust": "rust",
    "scala": "scala", "typescript": "typescript", "verilog": "verilog", "lua": "lua",
    "kotlin_script": "kotlin_script", "isolation": "python",
}  # fmt: skip
# Tests of those files that cannot pass here (docs/languages.md lists them with the files not run).
CANNOT_PASS = {"isolation": 1}  # test_isolation_network_external_access: the open internet
# SandboxFusion's own pytest configuration (its pyproject.toml), which the peer suite does not carry:
# its async tests (two runs at once) run on asyncio.
SANDBOXFUSION_PYTEST = {"PYTEST_ADDOPTS": "-o asyncio_mode=auto"}
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
    try:
        EnvironmentStore().get(FUSION_ENVIRONMENT)
    except EnvironmentNotFound as e:
        pytest.fail(f"SandboxFusion's Python environment is not built: make fusion-env ({e})")
    files = [PEER / "tests" / "runners" / f"test_{name}.py" for name, lang in FILES.items() if usable(lang)]
    python = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python"
    with running_server(ServiceSettings(pool_size=4, fusion_environment=FUSION_ENVIRONMENT)) as server:
        proc = subprocess.run(
            ["bash", str(PEER / "run"), server.url, str(python), *map(str, files)],
            capture_output=True, text=True, timeout=1200, check=False, env={**os.environ, **SANDBOXFUSION_PYTEST},
        )  # fmt: skip
    counts = {
        m.group(1): (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"test_(\w+)\.py\s+passed\s+(\d+)\s+failed\s+(\d+)", proc.stdout)
    }
    assert set(counts) == {f.stem.removeprefix("test_") for f in files}, proc.stdout + proc.stderr[-2000:]
    failed = {name: f for name, (_, f) in counts.items() if f != CANNOT_PASS.get(name, 0)}
    not_run = [name for name, (p, _) in counts.items() if p == 0]  # a file whose tests did not run at all
    assert failed == {} and not_run == [], proc.stdout[-3000:] + proc.stderr[-2000:]
