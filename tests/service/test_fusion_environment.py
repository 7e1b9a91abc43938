"""/run_code's Python environment (``dojo serve --fusion-environment``): SandboxFusion runs Python and
pytest in its image's packages; dojo runs them in a named environment, unless the request names
another. And a run's programs may serve and connect on the run's own loopback."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from dojo.cli import app as cli
from dojo.errors import InputError
from dojo.sandbox import AsyncSandbox
from dojo.sandbox.environment import EnvironmentNotFound, EnvironmentStore
from dojo.service import ServiceSettings, create_app
from dojo.service.fusion import FUSION_ENVIRONMENT, FUSION_LOCK, RunCodeRequest, build_command, to_program
from dojo.service.server import fusion_environment
from tests.sandbox.conftest import SKIP_REASON, requires_sandbox_pytest
from tests.service.conftest import LiveServer, free_port, running_server

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK_SERVER = (Path(__file__).parent / "programs" / "loopback_server.py").read_text()
WHICH = "import fusiondep\nprint(fusiondep.WHICH)\n"
WHICH_TEST = "import fusiondep\n\ndef test_which():\n    assert fusiondep.WHICH == 'default'\n"


PYTEST = ["pytest", "pluggy", "iniconfig", "packaging", "pygments"]  # pytest and what it imports, from this interpreter


def adopt(store: EnvironmentStore, name: str, which: str) -> None:
    store.adopt(name, PYTEST, preload=["fusiondep"], modules={"fusiondep": f"WHICH = {which!r}\n"})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> EnvironmentStore:
    """Two environments with pytest, and one module that says which environment it is."""
    store = EnvironmentStore(tmp_path_factory.mktemp("environments"))
    for which in ("default", "other"):
        adopt(store, f"fusion-{which}", which)
    return store


@pytest.fixture(scope="module")
def fusion_server(store: EnvironmentStore) -> Iterator[LiveServer]:
    settings = ServiceSettings(pool_size=2, fusion_environment="fusion-default")
    with running_server(settings, AsyncSandbox(pool_size=2, environments=store, environment_pool_size=1)) as srv:
        yield srv


def run_code(url: str, code: str, language: str = "python", **extra: object) -> dict:
    r = httpx.post(f"{url}/run_code", json={"code": code, "language": language, **extra}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_python_runs_in_the_fusion_environment_unless_the_request_names_another(fusion_server: LiveServer) -> None:
    default = run_code(fusion_server.url, WHICH)
    assert default["status"] == "Success" and default["run_result"]["stdout"] == "default\n", default
    named = run_code(fusion_server.url, WHICH, environment="fusion-other")
    assert named["run_result"]["stdout"] == "other\n", named
    # other languages run as before: no environment on their path
    shell = run_code(fusion_server.url, "python3 -c 'import fusiondep'", language="bash")
    assert shell["status"] == "Failed" and "No module named 'fusiondep'" in shell["run_result"]["stderr"], shell


@requires_sandbox_pytest  # (the pytest language runs Debian's python3-pytest: make toolchains)
def test_pytest_runs_in_the_fusion_environment(fusion_server: LiveServer) -> None:
    tested = run_code(fusion_server.url, WHICH_TEST, language="pytest")
    assert tested["status"] == "Success" and "1 passed" in tested["run_result"]["stdout"], tested


def test_without_a_fusion_environment_python_runs_on_the_bare_interpreter(live: LiveServer) -> None:
    bare = run_code(live.url, WHICH)
    assert bare["status"] == "Failed" and "No module named 'fusiondep'" in bare["run_result"]["stderr"], bare


def test_a_request_naming_a_missing_environment_is_a_400_that_says_how_to_build_it(fusion_server: LiveServer) -> None:
    r = httpx.post(f"{fusion_server.url}/run_code", json={"code": WHICH, "environment": "nosuch"}, timeout=60)
    assert r.status_code == 400 and "dojo env build nosuch" in r.json()["error"], r.text


def test_the_fusion_environment_applies_to_python_and_pytest_only() -> None:
    def environment(language: str, **extra: str) -> str | None:
        program, _, _ = to_program(RunCodeRequest(code="x", language=language, **extra), "fusion-default")
        return program.environment

    assert environment("python") == environment("python3") == environment("pytest") == "fusion-default"
    assert environment("python", environment="fusion-other") == "fusion-other"
    assert environment("bash") is None and environment("cpp") is None and environment("nodejs") is None


async def test_a_service_whose_fusion_environment_is_missing_does_not_start(store: EnvironmentStore) -> None:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    sandbox = AsyncSandbox(pool_size=1, environments=store)
    app = create_app(ServiceSettings(fusion_environment="nosuch"), sandbox, close_sandbox=True)
    with pytest.raises(EnvironmentNotFound, match="dojo env build nosuch"):
        async with app.router.lifespan_context(app):
            pass
    assert not sandbox.started  # closed on the way out: no slot left behind


def test_dojo_serve_chooses_the_fusion_environment(store: EnvironmentStore, tmp_path: Path) -> None:
    empty = EnvironmentStore(tmp_path)
    chosen, note = fusion_environment(None, empty)  # the default, not built here: the bare interpreter
    assert chosen is None and note is not None and "make fusion-env" in note and build_command() in note
    assert fusion_environment("none", store) == (None, None)
    assert fusion_environment("fusion-other", store) == ("fusion-other", None)
    with pytest.raises(InputError, match=re.escape(build_command("nosuch"))):
        fusion_environment("nosuch", store)
    adopt(store, FUSION_ENVIRONMENT, "default")
    try:
        assert fusion_environment(None, store) == (FUSION_ENVIRONMENT, None)  # the default, built
    finally:
        store.remove(FUSION_ENVIRONMENT)


def test_dojo_serve_refuses_a_fusion_environment_that_is_not_built() -> None:
    result = CliRunner().invoke(cli, ["serve", "--port", str(free_port()), "--fusion-environment", "no-such-env"])
    output = " ".join(result.output.split())
    assert result.exit_code != 0
    assert "--fusion-environment no-such-env" in output and "dojo env build no-such-env" in output, output


def test_make_fusion_env_builds_what_dojo_serve_says_to_build() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^fusion-env:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None
    command = shlex.split(recipe.group(1).replace("\\\n", " ").replace("$(BIN)/", ""))
    expected = shlex.split(build_command())
    assert command == [*expected[:5], str(FUSION_LOCK.relative_to(ROOT)), *expected[6:]]


def test_a_run_serves_and_connects_on_its_own_loopback(live: LiveServer) -> None:
    """SandboxFusion's isolation tests: a server on the run's loopback, asked by address and by
    name; two runs on one port at once each reach their own."""
    port = 45678  # any port: the run's loopback is its own

    def serve() -> dict:
        return run_code(live.url, LOOPBACK_SERVER, stdin=str(port), run_timeout=20)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: serve(), range(2)))
    for result in results:
        assert result["status"] == "Success", result
        assert result["run_result"]["stdout"] == f"127.0.0.1 200 served on {port}\nlocalhost 200 served on {port}\n"


def test_nothing_outside_the_run_is_reachable_from_its_loopback(live: LiveServer) -> None:
    """The host's own listener (this service) is not on the run's loopback."""
    port = int(live.url.rsplit(":", 1)[1])
    code = f"import socket\ns = socket.socket()\ns.settimeout(5)\nprint(s.connect_ex(('127.0.0.1', {port})))\n"
    result = run_code(live.url, code)
    assert result["status"] == "Success" and result["run_result"]["stdout"].strip() != "0", result
