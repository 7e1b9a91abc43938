"""Environments: built by pip from a real local wheelhouse, mounted read-only, preloaded in the zygote."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from pydantic import ValidationError
from typer.testing import CliRunner

from dojo.cli import app
from dojo.errors import InputError
from dojo.sandbox import AsyncSandbox, InputFile, Program, Verdict
from dojo.sandbox.environment import (
    EnvironmentNotFound,
    EnvironmentSpecError,
    EnvironmentStore,
    PipIndex,
    check_name,
    parse_lock,
    parse_requirements,
)
from tests.sandbox.conftest import SKIP_REASON, requires_isolation
from tests.sandbox.wheelhouse import make_wheel

# pip runs as `<this interpreter> -m pip`: the rootless suite (as nobody) may not be able to start
# an interpreter that lives under root's home directory (CI's pyenv).
pytestmark = pytest.mark.skipif(
    not os.access(os.path.realpath(sys.executable), os.X_OK),
    reason="this user cannot start the interpreter pip would run on (its path is not traversable)",
)

TOYAPP = """
import os
import toydep

LOADED_IN = os.getpid()


def answer():
    return toydep.VALUE + 1
"""


def publish(wheels: Path, dep_value: int, dep_version: str) -> None:
    make_wheel(wheels, "toydep", dep_version, {"toydep/__init__.py": f"VALUE = {dep_value}\n"})


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("wheels")
    make_wheel(directory, "toyapp", "1.0", {"toyapp/__init__.py": TOYAPP}, requires=("toydep>=1",))
    publish(directory, 41, "1.0")
    make_wheel(directory, "threaded", "1.0", {"threaded.py": "import threading, time\n"
               "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"})  # fmt: skip
    return directory


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, wheels: Path) -> EnvironmentStore:
    store = EnvironmentStore(tmp_path_factory.mktemp("environments"))
    store.build("toy", requirements=["toyapp"], index=PipIndex(find_links=(str(wheels),), no_index=True))
    return store


@pytest_asyncio.fixture(scope="module")
async def env_sandbox(store: EnvironmentStore) -> AsyncIterator[AsyncSandbox]:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    async with AsyncSandbox(pool_size=2, environments=store, environment_pool_size=2) as sb:
        yield sb


PRELOADED = """
import os, sys
was_loaded = "toyapp" in sys.modules
import toyapp
print(toyapp.answer(), was_loaded, toyapp.LOADED_IN != os.getpid())
"""


def test_build_resolves_dependencies_pins_them_and_preloads_the_packages_asked_for(store: EnvironmentStore) -> None:
    env = store.get("toy")
    assert env.lock == ("toyapp==1.0", "toydep==1.0")
    assert env.preload == ("toyapp",)
    assert (env.site_packages / "toydep" / "__init__.py").read_text() == "VALUE = 41\n"
    assert store.get(f"toy@{env.version}") == env


@requires_isolation
async def test_a_run_in_the_environment_forks_with_its_modules_already_imported(env_sandbox: AsyncSandbox) -> None:
    result = await env_sandbox.run(Program(language="python", source=PRELOADED, environment="toy"))
    assert result.verdict is Verdict.ACCEPTED, result.stderr or result.sandbox_error
    assert result.stdout.split() == ["42", "True", "True"]  # imported in the zygote, not in this run


@requires_isolation
async def test_strict_runs_and_processes_a_run_starts_find_the_environment(env_sandbox: AsyncSandbox) -> None:
    strict = await env_sandbox.run(Program(language="python", source=PRELOADED, environment="toy"), isolation="strict")
    assert strict.stdout.split()[0] == "42", strict.stderr
    inner = "import toyapp; print(toyapp.answer())"
    child = f"import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', {inner!r}], capture_output=True,"
    child += " text=True).stdout.strip())\n"
    result = await env_sandbox.run(Program(language="python", source=child, environment="toy"))
    assert result.stdout.strip() == "42", result.stderr
    # a run's program finds its own PYTHONPATH entries, where it writes too (/box/lib), as python3 does,
    # and the environment's packages still (a fast run had ignored PYTHONPATH: ModuleNotFoundError)
    mine = [InputFile(path="lib/mine.py", content=b"V = 7\n")]
    for path in ("/box/lib:/env/site-packages", "lib"):
        own = Program(language="python", source="import mine, toyapp, toydep\nprint(mine.V)\n", environment="toy",
                      files=mine, env={"PYTHONPATH": path})  # fmt: skip
        for isolation in ("strict", "fast", "fast", "fast"):  # (the same environment twice becomes the forker's)
            result = await env_sandbox.run(own, isolation=isolation)  # type: ignore[arg-type]
            assert result.stdout == "7\n", (path, isolation, result.stderr)
    again = await env_sandbox.run(Program(language="python", source="import mine", environment="toy", files=mine))
    assert "ModuleNotFoundError" in again.stderr  # (the entries of the runs before are not this one's)


@requires_isolation
async def test_the_environment_is_read_only_and_other_runs_do_not_see_it(env_sandbox: AsyncSandbox) -> None:
    source = (
        "import toydep\n"
        "try:\n    open(toydep.__file__, 'w').write('VALUE = 0')\nexcept OSError as e:\n    print(e.errno)\n"
    )
    result = await env_sandbox.run(Program(language="python", source=source, environment="toy"))
    assert result.stdout.strip() == "30", result.stderr  # EROFS
    plain = await env_sandbox.run(Program(language="python", source="import toyapp"))
    assert plain.verdict is Verdict.RUNTIME_ERROR and "ModuleNotFoundError" in plain.stderr


HIDDEN_PROBE = """
import ctypes, os
path = "/env/site-packages/toydep/__init__.py"
libc = ctypes.CDLL(None, use_errno=True)
for target in (path, "/env/site-packages/toydep"):  # a run cannot take a mask off
    if libc.umount2(target.encode(), 2) != 0:
        print("umount", ctypes.get_errno())
cache = "/env/site-packages/toydep/__pycache__"
names = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
compiled = [open(os.path.join(cache, n), "rb").read() for n in names]
print(repr(open(path).read()), len(compiled), sum(map(len, compiled)))
"""


@requires_isolation
async def test_hidden_paths_read_as_empty_for_that_run_only(env_sandbox: AsyncSandbox) -> None:
    hidden = Program(language="python", source=HIDDEN_PROBE, environment="toy",
                     hidden=["site-packages/toydep/__init__.py", "site-packages/not/there.py"])  # fmt: skip
    result = await env_sandbox.run(hidden)
    assert result.verdict is Verdict.ACCEPTED, result.stderr or result.sandbox_error
    lines = result.stdout.split("\n")
    assert lines[:2] == ["umount 1", "umount 1"], result.stdout  # EPERM: the filter refuses it
    text, compiled, compiled_bytes = lines[2].split()
    assert (text, compiled_bytes) == ("''", "0") and int(compiled) >= 1, result.stdout  # the source, its .pyc: empty
    for isolation in ("strict", None):
        result = await env_sandbox.run(hidden, isolation=isolation)
        assert result.stdout.split("\n")[2].endswith(" 0"), (isolation, result.stdout)
    after = await env_sandbox.run(Program(language="python", source=HIDDEN_PROBE, environment="toy"))
    assert "'VALUE = 41\\n'" in after.stdout, after.stdout  # the next run sees the environment whole
    listing = "import os; print(os.listdir('/env/site-packages/toydep'))"
    whole = await env_sandbox.run(
        Program(language="python", environment="toy", hidden=["site-packages/toydep"], source=listing)
    )
    assert whole.stdout.strip() == "[]", whole.stdout + whole.stderr
    with pytest.raises(InputError, match="inside the run's environment"):
        await env_sandbox.run(Program(language="python", source="print(1)", hidden=["x.py"]))
    with pytest.raises(ValidationError, match="must stay inside the environment"):
        Program(language="python", source="print(1)", environment="toy", hidden=["../etc/passwd"])


@requires_isolation
async def test_a_session_in_the_environment(env_sandbox: AsyncSandbox) -> None:
    async with await env_sandbox.open_session("python", environment="toy") as session:
        first = await session.exec("import toyapp\nvalue = toyapp.answer()")
        assert first.verdict is Verdict.ACCEPTED, first.stderr
        assert (await session.exec("value * 2")).stdout.strip() == "84"


@requires_isolation
async def test_a_missing_environment_is_an_input_error_naming_the_build_command(env_sandbox: AsyncSandbox) -> None:
    with pytest.raises(EnvironmentNotFound, match=r"dojo env build nope -r requirements\.txt"):
        await env_sandbox.run(Program(language="python", source="print(1)", environment="nope"))
    with pytest.raises(EnvironmentNotFound, match="has no version"):
        await env_sandbox.run(Program(language="python", source="print(1)", environment="toy@0123456789abcdef"))


@requires_isolation
async def test_names_that_share_their_files_each_start_their_slots_their_own_way(
    env_sandbox: AsyncSandbox, store: EnvironmentStore
) -> None:
    toy = store.get("toy")
    bare = store.build("toy-bare", lock=list(toy.lock), preload=[], warmup="import toydep")
    assert bare.path == toy.path and bare.version == toy.version  # one copy of the files
    source = "import sys; print('toyapp' in sys.modules, 'toydep' in sys.modules)"
    seen = []
    for name in ("toy", "toy-bare", "toy"):  # each name's slots, whichever started first
        result = await env_sandbox.run(Program(language="python", source=source, environment=name))
        assert result.verdict is Verdict.ACCEPTED, result.stderr or result.sandbox_error
        seen.append(result.stdout.split())
    assert seen == [["True", "True"], ["False", "True"], ["True", "True"]]


@requires_isolation
async def test_a_temporary_directory_the_preload_made_is_not_removed_at_each_runs_exit(
    env_sandbox: AsyncSandbox, store: EnvironmentStore
) -> None:
    # what matplotlib does on import with no writable home: every run's stderr had a traceback of
    # the removal of a directory in the zygote's /tmp, which no run has
    made = "import atexit, shutil, tempfile\natexit.register(shutil.rmtree, tempfile.mkdtemp())\nimport toydep"
    store.build("toy-tmpdir", lock=list(store.get("toy").lock), preload=[], warmup=made)
    for source in ("print(1)", "import atexit, os, shutil\nos.mkdir('mine')\natexit.register(shutil.rmtree, 'mine')"):
        result = await env_sandbox.run(Program(language="python", source=source, environment="toy-tmpdir"))
        assert result.verdict is Verdict.ACCEPTED and result.stderr == "", result.stderr or result.sandbox_error
    removed = "import atexit, os, shutil\nos.mkdir('mine')\natexit.register(shutil.rmtree, 'mine')\nos.rmdir('mine')"
    result = await env_sandbox.run(Program(language="python", source=removed, environment="toy-tmpdir"))
    assert "FileNotFoundError" in result.stderr  # a run's own exit handlers still run


@requires_isolation
async def test_a_new_version_leaves_the_old_one_reachable(
    tmp_path: Path, wheels: Path, store: EnvironmentStore
) -> None:
    newer = tmp_path / "wheels"
    newer.mkdir()
    for wheel in wheels.glob("*.whl"):
        (newer / wheel.name).write_bytes(wheel.read_bytes())
    publish(newer, 99, "2.0")
    local = EnvironmentStore(tmp_path / "envs")
    old = local.build("toy", requirements=["toyapp"], index=PipIndex(find_links=(str(wheels),), no_index=True))
    new = local.build("toy", requirements=["toyapp"], index=PipIndex(find_links=(str(newer),), no_index=True))
    assert old.version != new.version and new.lock == ("toyapp==1.0", "toydep==2.0")
    same = local.build("alias", lock=list(old.lock), index=PipIndex(find_links=(str(wheels),), no_index=True))
    assert same.path == old.path  # content-addressed: one copy for one lock
    async with AsyncSandbox(pool_size=1, environments=local, environment_pool_size=1) as sb:
        source = "import toyapp; print(toyapp.answer())"
        assert (await sb.run(Program(language="python", source=source, environment="toy"))).stdout.strip() == "100"
        pinned = Program(language="python", source=source, environment=f"toy@{old.version}")
        assert (await sb.run(pinned)).stdout.strip() == "42"
    assert local.remove("toy") == [old.version, new.version]
    assert old.path.exists() and not new.path.exists()  # "alias" still uses the old files
    local.remove("alias")
    assert not old.path.exists() and local.all() == []


@requires_isolation
async def test_a_preload_module_that_starts_a_thread_is_refused_as_a_sandbox_error(
    tmp_path: Path, wheels: Path
) -> None:
    local = EnvironmentStore(tmp_path / "envs")
    local.build("threads", requirements=["threaded"], index=PipIndex(find_links=(str(wheels),), no_index=True))
    local.build("broken", requirements=["toyapp"], preload=["toyapp", "not_there"],
                index=PipIndex(find_links=(str(wheels),), no_index=True))  # fmt: skip
    async with AsyncSandbox(pool_size=1, environments=local, environment_pool_size=1) as sb:
        threads = await sb.run(Program(language="python", source="print(1)", environment="threads"))
        assert threads.verdict is Verdict.SANDBOX_ERROR and "started 1 thread" in str(threads.sandbox_error)
        broken = await sb.run(Program(language="python", source="print(1)", environment="broken"))
        assert broken.verdict is Verdict.SANDBOX_ERROR and "'not_there' failed to import" in str(broken.sandbox_error)


def test_bad_specifications_are_clear_errors(tmp_path: Path, wheels: Path) -> None:
    with pytest.raises(EnvironmentSpecError, match="not valid"):
        check_name("Data Science")
    with pytest.raises(EnvironmentSpecError, match="does not pin one version"):
        parse_lock(["numpy>=1"])
    with pytest.raises(EnvironmentSpecError, match="pins numpy twice"):
        parse_lock(["numpy==1.0", "NumPy==2.0"])
    assert parse_lock(["# a lock", "Foo_Bar==1.0 --hash=sha256:abc", "", "zed==2"]) == ("foo-bar==1.0", "zed==2")
    with pytest.raises(EnvironmentSpecError, match="options are not accepted"):
        parse_requirements(["-e ."])
    with pytest.raises(EnvironmentSpecError, match="no requirement"):
        parse_requirements(["# nothing"])
    local = EnvironmentStore(tmp_path / "envs")
    with pytest.raises(EnvironmentSpecError, match="pip could not resolve"):
        local.build("x", requirements=["no-such-package-anywhere"], index=PipIndex(find_links=(str(wheels),),
                                                                                   no_index=True))  # fmt: skip
    with pytest.raises(EnvironmentSpecError, match="either requirements"):
        local.build("x")
    assert local.all() == []  # nothing half-built is left under a name


def test_the_env_commands(tmp_path: Path, wheels: Path) -> None:
    runner = CliRunner()
    root = ["--root", str(tmp_path / "envs")]
    req = tmp_path / "requirements.txt"
    req.write_text("toyapp\n")
    built = runner.invoke(app, ["env", "build", "toy", "-r", str(req), "--find-links", str(wheels), "--no-index",
                                "--no-check", *root])  # fmt: skip
    assert built.exit_code == 0, built.output
    listed = runner.invoke(app, ["env", "list", *root])
    assert "toy" in listed.output and "toyapp" in listed.output
    lock, warmup = tmp_path / "lock.txt", tmp_path / "warmup.py"
    lock.write_text("toyapp==1.0\ntoydep==1.0\n")
    warmup.write_text("import toydep\nVALUE = toydep.VALUE\n")
    warm = runner.invoke(app, ["env", "build", "toy-warm", "--lock", str(lock), "--warmup", str(warmup), "--find-links",
                               str(wheels), "--no-index", "--no-check", *root])  # fmt: skip
    assert warm.exit_code == 0, warm.output
    assert "2 lines" in runner.invoke(app, ["env", "list", *root]).output  # the only way the two names differ
    assert "warm-up: 2 lines" in runner.invoke(app, ["env", "show", "toy-warm", *root]).output
    assert "warm-up" not in runner.invoke(app, ["env", "show", "toy", *root]).output
    shown = runner.invoke(app, ["env", "show", "toy", "--json", *root])
    assert json.loads(shown.output)["lock"] == ["toyapp==1.0", "toydep==1.0"]
    missing = runner.invoke(app, ["env", "show", "nope", *root])
    assert missing.exit_code == 2 and "dojo env build nope" in missing.output
    neither = runner.invoke(app, ["env", "build", "toy", *root])
    assert neither.exit_code == 2 and "either -r" in neither.output
    odd_index = runner.invoke(app, ["env", "build", "x", "-r", str(req), "--index-url", "not a url", *root])
    assert odd_index.exit_code == 2 and "give the index's URL" in odd_index.output  # (pip's traceback had shown)
    not_text = tmp_path / "latin.txt"
    not_text.write_bytes(b"caf\xe9\n")
    latin = runner.invoke(app, ["env", "build", "x", "-r", str(not_text), *root])
    assert latin.exit_code == 2 and "line 1: not UTF-8 text" in latin.output, latin.output
    assert runner.invoke(app, ["env", "rm", "toy-warm", *root]).exit_code == 0
    removed = runner.invoke(app, ["env", "rm", "toy", *root])
    assert removed.exit_code == 0 and runner.invoke(app, ["env", "list", *root]).output.count("toy") == 0
