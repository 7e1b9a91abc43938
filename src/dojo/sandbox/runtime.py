"""The public sandbox API: ``AsyncSandbox`` (async first) and ``Sandbox`` (its sync wrapper).

    async with AsyncSandbox() as sandbox:
        result = await sandbox.run(Program(language="python", source="print(1)"))

Isolation levels: ``fast`` (default) runs on warm slot zygotes; ``strict`` starts fresh namespaces
and a fresh interpreter for every run. Both enforce the same limits and pass the same tests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import platform
import shutil
import site
import subprocess
import threading
from collections.abc import Coroutine, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Literal, TypeVar

from dojo.errors import InputError
from dojo.sandbox.backend import Isolation
from dojo.sandbox.builds import Build, BuildCache, build_key
from dojo.sandbox.cgroups import CgroupLayout, SlotCgroups, detect
from dojo.sandbox.compare import tokens_equal
from dojo.sandbox.environment import Environment, EnvironmentStore
from dojo.sandbox.errors import IsolationUnavailable, SandboxError
from dojo.sandbox.forker_build import forker_library
from dojo.sandbox.guest.preload import THREAD_POOL_VARIABLES
from dojo.sandbox.guest.wire import RunStep
from dojo.sandbox.languages import (
    EXPOSED_PREFIXES,
    SANDBOX_LOCALE,
    SANDBOX_PATH,
    TOOLCHAINS_MOUNT,
    Language,
    default_python,
    find_tool,
    get_language,
    needs_fresh_interpreter,
    provided_modules,
    python_prefix,
    resolve_toolchain,
    toolchains_dir,
)
from dojo.sandbox.limits import DEFAULT_COMPILE_LIMITS, DEFAULT_LIMITS, Limits
from dojo.sandbox.network import RESOLV_CONF, Endpoint, NetworkPolicy, NetworkRelay, hosts_file
from dojo.sandbox.network import resolve as resolve_network
from dojo.sandbox.packages import PROXY_ADDRESS, PROXY_HOST, PROXY_PORT, PackageProxy
from dojo.sandbox.packages import run_environment as packages_environment
from dojo.sandbox.pool import SlotPool, default_pool_size
from dojo.sandbox.program import Program, check_work_dir
from dojo.sandbox.result import ExecutionResult, result_from_wire
from dojo.sandbox.seccomp import ARCHITECTURES, filters_for_this_machine
from dojo.sandbox.session import Session
from dojo.sandbox.slot import NAMESPACE_FLAGS, ROOTLESS_FLAGS, SlotConfig
from dojo.sandbox.uncancellable import to_the_end
from dojo.sandbox.verdict import LimitKind, Verdict

Mode = Literal["root", "rootless"]
log = logging.getLogger(__name__)
T = TypeVar("T")
BUILD_ARCHIVE = ".dojo-build.tar"  # a build of several files travels as one tar (languages.py)
UNPACK = f"tar -xf {BUILD_ARCHIVE} && rm -f {BUILD_ARCHIVE}"
ENVIRONMENT_MOUNT = "/env"  # where a run sees its environment (read-only)
ENVIRONMENT_SITE = ENVIRONMENT_MOUNT + "/site-packages"
HOST_MARGIN_S = 10.0  # the host waits this much past the run's own wall limit before killing the slot


def preflight() -> Mode:
    """Check that this machine can isolate runs and say how: ``"root"`` or ``"rootless"``.

    Root builds namespaces, cgroups and one unprivileged uid per slot. Without root, dojo needs
    unprivileged user namespaces; it then maps the caller to root inside each slot and runs every
    program as an unmapped-from-the-host uid in a nested user namespace. Raises
    IsolationUnavailable saying what is missing.
    """
    if not os.path.exists("/proc/self/ns/pid"):
        raise IsolationUnavailable("dojo's sandbox needs Linux namespaces (this is not Linux, or /proc is missing)")
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    if not os.access(unshare, os.X_OK):
        raise IsolationUnavailable("the 'unshare' tool is missing; install it with: apt-get install util-linux")
    if os.geteuid() == 0:
        return "root"
    probe = subprocess.run(
        [unshare, *ROOTLESS_FLAGS, *NAMESPACE_FLAGS, "--", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:
        raise IsolationUnavailable(
            "dojo's sandbox needs root or unprivileged user namespaces, and this machine refused a user "
            f"namespace ({probe.stderr.strip() or 'exit ' + str(probe.returncode)}). Run as root, or allow "
            "them: sysctl -w kernel.unprivileged_userns_clone=1 (Debian/Ubuntu), sysctl -w "
            "user.max_user_namespaces=15000, and on Ubuntu 24.04+ sysctl -w "
            "kernel.apparmor_restrict_unprivileged_userns=0; in Docker, run with --security-opt seccomp=unconfined."
        )
    return "rootless"


def rootless_cgroups(layout: CgroupLayout) -> SlotCgroups | None:
    """Cgroups for a rootless pool, where a delegated (writable) hierarchy exists; else None."""
    if all(os.access(parent, os.W_OK) for parent in layout.parents.values()):
        return SlotCgroups(layout)
    log.warning(
        "rootless sandbox without a delegated cgroup: memory is limited by address space (RLIMIT_AS) and "
        "processes by RLIMIT_NPROC; for exact limits run as root or set DOJO_CGROUP_PARENT to a delegated group"
    )
    return None


class AsyncSandbox:
    """Runs programs in isolated slots. Start with ``async with`` or ``await start()``."""

    def __init__(
        self,
        *,
        pool_size: int | None = None,
        isolation: Isolation = "fast",
        limits: Limits = DEFAULT_LIMITS,
        compile_limits: Limits = DEFAULT_COMPILE_LIMITS,
        python: str | None = None,
        syscall_filter: bool = True,
        spare: bool = False,
        forker: bool = True,
        environments: EnvironmentStore | None = None,
        environment_pool_size: int | None = None,
        packages: PackageProxy | None = None,
    ) -> None:
        if isolation not in ("fast", "strict"):
            raise InputError(f"isolation must be 'fast' or 'strict', not {isolation!r}")
        if pool_size is not None and pool_size < 1:
            raise InputError(f"pool_size must be at least 1, got {pool_size}")
        self.isolation: Isolation = isolation
        self.limits = limits
        self.compile_limits = compile_limits
        self.python = python or default_python()
        # Off only to show what the filter stops (tests, docs/threat-model.md); never in production.
        self.syscall_filter = syscall_filter
        if syscall_filter and platform.machine() not in ARCHITECTURES:
            log.warning("no syscall table for %s: runs are not under dojo's seccomp filter", platform.machine())
        # spare=True: each slot forks its next run's process while idle, so a run does not wait for
        # the fork: lower latency at low load (pandas environment p50 -5%), but every page the zygote
        # then writes while handling the request is copied, not reused: -7% runs/s under load (print(1)
        # at c=8), hence off by default (docs/benchmarks.md).
        self.spare = spare
        # forker=True: each slot forks its runs through a C forker (dojo.sandbox.forker_build) where a C
        # compiler can build it: ~30% less CPU per short run than forking from the zygote. Off only to
        # compare (tests, bench/sandbox.py).
        self.forker = forker
        self.pool_size = pool_size or default_pool_size()
        if environment_pool_size is not None and environment_pool_size < 1:
            raise InputError(f"environment_pool_size must be at least 1, got {environment_pool_size}")
        # Each environment in use gets warm slots of its own (its zygotes preload its modules).
        self.environment_pool_size = environment_pool_size or self.pool_size
        self.environments = environments or EnvironmentStore(python=self.python)
        # What runs under the network policy "packages" reach (started on first use; a default
        # one proxies PyPI and the npm registry).
        self.packages = packages
        self._pool: SlotPool | None = None
        self._extra_pools: dict[tuple[tuple[str, tuple[str, ...], str] | None, str], SlotPool] = {}  # see _pool_for
        self.builds = BuildCache()  # compiled languages' artifacts, by their exact inputs
        self._build_locks: dict[str, asyncio.Lock] = {}
        self._slot_config: SlotConfig | None = None
        self._layout: CgroupLayout | None = None
        self.mode: Mode | None = None  # "root" or "rootless", known once started
        self._start_lock = asyncio.Lock()

    async def start(self) -> AsyncSandbox:
        async with self._start_lock:
            if self._pool is not None:
                return self
            mode = await asyncio.to_thread(preflight)
            layout = await asyncio.to_thread(detect)
            prefix = await asyncio.to_thread(python_prefix, self.python)
            extra = () if (prefix + "/").startswith(EXPOSED_PREFIXES) else (prefix,)
            toolchains = toolchains_dir()
            config = SlotConfig(
                python=self.python,
                extra_ro_paths=extra,
                masked=await asyncio.to_thread(masked_paths, self.python),
                mounts=((str(toolchains), TOOLCHAINS_MOUNT),) if toolchains.is_dir() else (),
                disk_bytes=self.limits.disk,
                cgroup_version=layout.version,
                rootless=mode == "rootless",
                syscall_filters=filters_for_this_machine(mode == "rootless") if self.syscall_filter else None,
                spare=self.spare,
                forker=await asyncio.to_thread(forker_library) if self.forker else None,
            )
            pool = SlotPool(self.pool_size, config, self._cgroups(mode, layout))
            await pool.start()
            self._pool = pool
            self.mode = mode
            self._slot_config, self._layout = config, layout
        return self

    @staticmethod
    def _cgroups(mode: Mode, layout: CgroupLayout) -> SlotCgroups | None:
        return SlotCgroups(layout) if mode == "root" else rootless_cgroups(layout)

    async def _pool_for(self, environment: str | None, network: NetworkPolicy) -> tuple[SlotPool, Environment | None]:
        """The warm slots a run needs: the sandbox's own, or (started on first use) those of an
        environment (its packages read-only at /env, its modules imported in every zygote; one pool for
        each files, preload and warm-up: names that share their files may start their slots differently)
        and/or of an ``allow`` network policy (its destinations relayed into each slot's namespace)."""
        if self._pool is None:
            await self.start()
        env = None
        if environment:
            env = self.environments.cached(environment) or await asyncio.to_thread(self.environments.get, environment)
        if env is None and network.mode != "allow":
            return self.pool, None
        started = (env.version, env.preload, env.warmup) if env else None
        key = (started, network.model_dump_json() if network.mode == "allow" else "")
        pool = self._extra_pools.get(key)
        if pool is not None:
            return pool, env
        async with self._start_lock:
            pool = self._extra_pools.get(key)
            if pool is None:
                pool = await self._start_extra_pool(env, network)
                self._extra_pools[key] = pool
        return pool, env

    async def _start_extra_pool(self, env: Environment | None, network: NetworkPolicy) -> SlotPool:
        assert self._slot_config is not None and self._layout is not None and self.mode is not None
        config = self._slot_config
        what = []
        if env is not None:
            what.append(f"environment {env.ref}")
            config = dataclasses.replace(
                config,
                mounts=(*config.mounts, (str(env.path), ENVIRONMENT_MOUNT)),
                python_paths=(ENVIRONMENT_SITE,),
                preload_modules=env.preload,
                warmup=env.warmup,
            )
        if network.mode == "allow":
            what.append(f"network allow {', '.join(network.allow)}")
            endpoints = await asyncio.to_thread(resolve_network, network)
            if network.packages:
                if self.packages is None:
                    self.packages = PackageProxy()
                proxy = await self.packages.start()
                endpoints.append(Endpoint(PROXY_ADDRESS, PROXY_PORT, (PROXY_HOST,), target=(proxy.host, proxy.port)))
            config = dataclasses.replace(
                config,
                etc_files=(("hosts", hosts_file(endpoints)), ("resolv.conf", RESOLV_CONF)),
                network_relay=NetworkRelay(endpoints),
            )
        size = self.environment_pool_size if env is not None else max(1, min(self.pool_size, 2))
        pool = SlotPool(size, config, self._cgroups(self.mode, self._layout))
        try:
            await pool.start()
        except BaseException as e:  # cancelled too: the relay's listeners are closed either way
            if config.network_relay is not None:
                config.network_relay.close()
            if isinstance(e, IsolationUnavailable):
                raise SandboxError(f"the slots of {' and '.join(what)} did not start: {e}") from e
            raise
        return pool

    async def close(self) -> None:
        """Stop every slot, relay and proxy this sandbox started. A cancelled or failing close still
        goes to the end (``to_the_end``), and each part is closed whatever the one before did."""
        pool, self._pool = self._pool, None
        extra, self._extra_pools = list(self._extra_pools.values()), {}
        await to_the_end(self._close(pool, extra, self.packages))

    @staticmethod
    async def _close(pool: SlotPool | None, extra: list[SlotPool], packages: PackageProxy | None) -> None:
        try:
            if packages is not None:
                await packages.close()
        finally:
            try:
                await asyncio.gather(*(p.close() for p in extra), return_exceptions=True)
            finally:
                for p in extra:
                    if p.config.network_relay is not None:
                        p.config.network_relay.close()
                if pool is not None:
                    await pool.close()

    async def __aenter__(self) -> AsyncSandbox:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def started(self) -> bool:
        return self._pool is not None

    async def open_session(
        self, language: str, limits: Limits | None = None, environment: str | None = None
    ) -> Session:
        """A stateful session on a slot of its own (see ``dojo.sandbox.session``), in an environment
        (``dojo env build``) when one is named."""
        lang = get_language(language)
        resolve_toolchain(lang, self.python)
        if self._pool is None:
            await self.start()
        limits = limits or self.limits
        pool, env = await self._pool_for(environment, limits.network)
        slot = await pool.start_fresh("session", limits.disk)  # (its files live as long as it does)

        def build(
            program: Program, lang: Language, lim: Limits, compile_only: bool = False
        ) -> tuple[dict[str, Any], list[bytes], float]:
            return build_request(
                program, lang, lim, self.compile_limits, self.python, strict=False, rootless=self.mode == "rootless",
                environment=env, compile_only=compile_only,
            )  # fmt: skip

        async def release(session: Session) -> None:
            await pool.stop_fresh(session.slot)

        return Session(slot, lang, limits, build, release)

    @property
    def pool(self) -> SlotPool:
        if self._pool is None:
            raise SandboxError("the sandbox is not started: use 'async with AsyncSandbox()' or await start()")
        return self._pool

    async def run(
        self,
        program: Program,
        limits: Limits | None = None,
        *,
        compile_limits: Limits | None = None,
        isolation: Isolation | None = None,
        cache_compiled: bool = False,
        harness: bool = False,
    ) -> ExecutionResult:
        """Run one program. User failures are verdicts; a sandbox failure is verdict SandboxError.

        ``cache_compiled``: the Python source is trusted and sent verbatim many times (a grading
        harness); each slot compiles it once and reuses the code object. Never set it for
        model-written source: its compilation would then happen outside the run's limits.

        ``harness``: the program is a trusted harness that forks processes for untrusted code
        (``dojo.rewards.harness``). Its stdin reaches it without ever entering the slot's zygote
        (the kernel moves it into a memfd that becomes fd 0), so no process forked from the zygote,
        now or later, holds it in memory; its main process starts non-dumpable (no process of its
        uid can read or write its memory or open its fds) with every blockable signal blocked; and
        (fast isolation) each slot runs the program's top level once and every run calls its
        ``main()``, so the program must only define at its top level (``if __name__ ==
        "__main__": main()``).

        Raises ``UnknownLanguage`` / ``LanguageUnavailable`` (a ``ValueError``) for a language that
        cannot run here: that is the caller's input, not a property of the program's code.
        """
        if self._pool is None:
            await self.start()
        lang = get_language(program.language)
        limits = limits or self.limits
        compile_limits = compile_limits or self.compile_limits
        fresh = lang.inline_python and needs_fresh_interpreter(program.env)  # (a PYTHON* variable or TZ)
        strict = (isolation or self.isolation) == "strict" or fresh
        require_root_for_network(limits, compile_limits, self.mode == "rootless")
        try:
            pool, env = await self._pool_for(program.environment, limits.network)
        except SandboxError as e:  # its slots did not start: the machine's fault, not the program's
            return ExecutionResult.from_sandbox_error(str(e), lang.name)
        rootless = self.mode == "rootless"
        build: Build | None = None
        if lang.compiled:
            outcome = await self._build(program, lang, compile_limits, strict, pool, env)
            if isinstance(outcome, ExecutionResult):  # the compile failed, or the sandbox did
                return outcome
            build = outcome
        header, blobs, timeout = build_request(
            program, lang, limits, compile_limits, self.python, strict, rootless=rootless, environment=env, build=build
        )
        if cache_compiled and lang.inline_python:
            header["steps"][-1]["cache_code"] = True
        if harness:
            header["stdin_private"] = True
            header["steps"][-1]["protect"] = True
            header["steps"][-1].pop("modules", None)  # (a trusted program forgets none of the slot's modules)
            if lang.inline_python:  # its top level only defines: the zygote runs it once per slot
                header["steps"][-1].update(cache_code=True, preload=True)
        try:
            if strict:
                resp, out = await pool.execute_fresh(header, blobs, timeout)
            else:
                resp, out = await pool.execute(header, blobs, timeout)
        except SandboxError as e:  # includes SlotDied
            return ExecutionResult.from_sandbox_error(str(e), lang.name)
        result = result_from_wire(resp, out, lang.name, compiled=False)
        if build is not None and result.verdict is not Verdict.SANDBOX_ERROR:
            result = result.model_copy(update={"compile": build.compile})
        if (
            program.expected_stdout is not None
            and result.verdict is Verdict.ACCEPTED
            and not tokens_equal(result.stdout, program.expected_stdout)
        ):
            result = result.model_copy(update={"verdict": Verdict.WRONG_ANSWER})
        return result

    async def _build(self, program: Program, lang: Language, compile_limits: Limits, strict: bool, pool: SlotPool,
                     env: Environment | None) -> Build | ExecutionResult:  # fmt: skip
        """The program's build: from the cache, or compiled now (once for concurrent identical
        programs) in a request of its own whose only output is the artifact."""
        header, blobs, timeout = build_request(
            program, lang, compile_limits, compile_limits, self.python, strict, rootless=self.mode == "rootless",
            environment=env, compile_only=True,
        )  # fmt: skip
        key = build_key(lang.name, resolve_toolchain(lang, self.python), header["steps"][0]["argv"],
                        [(f["path"], blobs[f["blob"]]) for f in header["files"]])  # fmt: skip
        build = self.builds.get(key)
        if build is None:
            lock = self._build_locks.setdefault(key, asyncio.Lock())
            async with lock:
                build = self.builds.get(key)
                if build is None:
                    self.builds.misses += 1
                    try:
                        if strict:
                            resp, out = await pool.execute_fresh(header, blobs, timeout)
                        else:
                            resp, out = await pool.execute(header, blobs, timeout)
                    except SandboxError as e:
                        return ExecutionResult.from_sandbox_error(str(e), lang.name)
                    result = result_from_wire(resp, out, lang.name, compiled=True)
                    if result.verdict is Verdict.SANDBOX_ERROR or result.compile is None:
                        return result
                    fetched = result.files.get(lang.artifacts[0])
                    succeeded = result.compile.exit_code == 0 and result.compile.limit is None
                    if succeeded and (fetched is None or fetched.content is None or fetched.truncated):
                        return result.model_copy(update={"verdict": Verdict.COMPILE_ERROR, "files": {}})
                    build = Build(result.compile, fetched.content if succeeded and fetched else None)
                    if build.ok or result.compile.limit is None:  # a limit's failure is not the source's
                        self.builds.put(key, build)
            self._build_locks.pop(key, None)
        if build.ok:
            return build
        failed = build.compile
        verdict = Verdict.TIME_LIMIT_EXCEEDED if failed.limit in (LimitKind.WALL_TIME, LimitKind.CPU_TIME) else (
            Verdict.COMPILE_ERROR)  # fmt: skip
        return ExecutionResult(verdict=verdict, **dict(failed), compile=failed, language=lang.name)

    async def run_many(self, programs: Iterable[Program], limits: Limits | None = None) -> list[ExecutionResult]:
        """Run programs concurrently (bounded by the pool); results in input order."""
        return list(await asyncio.gather(*(self.run(p, limits) for p in programs)))


def require_root_for_network(limits: Limits, compile_limits: Limits, rootless: bool) -> None:
    if rootless and (limits.network or compile_limits.network):
        raise InputError(
            "limits.network needs the sandbox to run as root: a rootless sandbox cannot reach into its slots' "
            "network namespaces. Run dojo as root, or leave network at 'none'."
        )


def build_request(
    program: Program,
    lang: Language,
    limits: Limits,
    compile_limits: Limits,
    python: str,
    strict: bool,
    rootless: bool = False,
    environment: Environment | None = None,
    build: Build | None = None,
    compile_only: bool = False,
) -> tuple[dict[str, Any], list[bytes], float]:
    """Turn a Program into a zygote request: files, steps with their limits, and a host timeout.

    A compiled language takes two requests: ``compile_only`` (the compile step, fetching its
    artifact), then the run with ``build`` (the artifact as an input file, no compile step).
    """
    require_root_for_network(limits, compile_limits, rootless)
    exe = resolve_toolchain(lang, python)
    source_name, source_text = lang.source_name(program.source)

    def expand(argv: tuple[str, ...]) -> list[str]:
        out = [a.replace("{exe}", exe).replace("{file}", source_name).replace("{toolchains}", TOOLCHAINS_MOUNT)
               for a in argv]  # fmt: skip
        if out and "/" not in out[0]:  # another tool of the language (java, mono, vvp): execve needs its path
            out[0] = find_tool(out[0], lang)
        return out

    blobs: list[bytes] = [source_text.encode()]
    files: list[dict[str, Any]] = [{"path": source_name, "blob": 0, "mode": 0o644}]
    names = {source_name}
    extra = [(name, text.encode(), False) for name, text in lang.support_files]
    extra += [(f.path, f.content, f.executable) for f in program.files]
    if build is not None and build.artifact is not None:
        extra.append((lang.artifacts[0], build.artifact, True))
    for path, content, executable in extra:
        if path in names:
            raise InputError(f"input file {path!r} appears twice (or clashes with the source file)")
        names.add(path)
        files.append({"path": path, "blob": len(blobs), "mode": 0o755 if executable else 0o644})
        blobs.append(content)
    check_work_dir(names, map(len, blobs), limits.disk)  # (main.py/x beside main.py; more than limits.disk)
    stdin, stdin_blob = program.stdin_bytes(), len(blobs)
    blobs.append(stdin)
    steps: list[RunStep] = []
    timeout = HOST_MARGIN_S
    fetch = list(program.fetch)
    if compile_only:
        assert lang.compile_argv is not None
        compile_wire = compile_limits.to_wire(lang.address_space_extra)
        steps.append({"role": "compile", "argv": expand(lang.compile_argv), "stdin": False, "limits": compile_wire})
        timeout += compile_limits.wall_time
        fetch = [lang.artifacts[0]]
    else:
        run_step: RunStep = {
            "role": "run",
            "stdin": True,
            "limits": limits.to_wire(lang.address_space_extra),
            "args": program.args,
        }
        if lang.inline_python and not strict:
            run_step["inline_python"] = source_name
            if modules := provided_modules(names - {source_name}, program.env.get("PYTHONPATH", "")):
                run_step["modules"] = modules
        else:
            run_argv = lang.run_argv
            if lang.artifacts and lang.artifacts[0] == BUILD_ARCHIVE:  # unpack the build first
                run_argv = ("/bin/bash", "-c", UNPACK + ' && exec "$@"', "run", *run_argv)
            run_step["argv"] = expand(run_argv) + list(program.args)
        steps.append(run_step)
        timeout += limits.wall_time
    env = {"PATH": SANDBOX_PATH, "HOME": "/box", "TMPDIR": "/tmp", "LANG": SANDBOX_LOCALE, "LC_ALL": SANDBOX_LOCALE}
    env.update({k: v.replace("{toolchains}", TOOLCHAINS_MOUNT) for k, v in lang.env})
    if limits.network.packages:  # pip and npm pointed at the package proxy
        env.update(packages_environment())
    if environment is not None:  # what any Python the run starts needs to find the environment
        env.update(dict.fromkeys(THREAD_POOL_VARIABLES, "1"))
    env.update(program.env)
    if environment is not None:  # the program's own PYTHONPATH first, then the environment's packages
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in (env.get("PYTHONPATH"), ENVIRONMENT_SITE) if p))
    inside_env = [p for p in program.hidden if not p.startswith("/")]
    if inside_env and environment is None:
        raise InputError("relative hidden paths are inside the run's environment: name one (Program.environment)")
    # (the zygote skips what its tree lacks, and links)
    hidden = _with_compiled_copies(Path("/"), [p for p in program.hidden if p.startswith("/")])
    if environment is not None:
        hidden += [f"{ENVIRONMENT_MOUNT}/{p}" for p in _with_compiled_copies(environment.path, inside_env)]
    header = {
        "files": files,
        "stdin_blob": stdin_blob,
        "steps": steps,
        "fetch": fetch,
        "fetch_max_bytes": max(limits.file_size, compile_limits.file_size) if compile_only else limits.file_size,
        "fetch_total_bytes": limits.fetched_bytes,
        "env": env,
        "network": limits.network.mode == "host",  # the zygote joins the host's namespace for this run
        "disk_bytes": limits.disk,
    }
    if hidden:
        header["hidden"] = hidden
    return header, blobs, timeout


# Top-level modules whose installed files hold answers (HumanEval's solutions, InterCode's gold
# commands, the released code of a ``swe:`` package): a task source registers them (``mask_modules``).
MASKED_MODULES: set[str] = set()


def mask_modules(*names: str) -> None:
    """Keep these modules' installed files from every run of a sandbox started afterwards, should a
    path the sandbox binds hold them (a system-wide install under /usr)."""
    MASKED_MODULES.update(names)


@functools.cache
def site_dirs(python: str) -> tuple[str, ...]:
    """Where ``python`` (the sandbox's interpreter) and this one install packages."""
    code = "import site; print('\\n'.join([*site.getsitepackages(), site.getusersitepackages()]))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False).stdout
    return tuple(dict.fromkeys([*out.split(), *site.getsitepackages(), site.getusersitepackages()]))


def masked_paths(python: str) -> tuple[str, ...]:
    """What a run must not read even where a path the sandbox binds holds it (dojo, or a package of
    task data, installed under /usr or in the sandbox interpreter's own prefix): dojo's own package
    (its task data holds answers: the original lines of ``swe:`` bugs) and the registered
    ``MASKED_MODULES``. Slots mount an empty directory (or file) over each."""
    here = Path(__file__).parent.parent  # the dojo package
    paths = [str(here.absolute()), str(here.resolve())]
    for folder in site_dirs(python):
        for name in sorted(MASKED_MODULES):
            paths += [p for p in (f"{folder}/{name}", f"{folder}/{name}.py") if os.path.exists(p)]
    return tuple(dict.fromkeys(paths))


def _with_compiled_copies(root: Path, paths: list[str]) -> list[str]:
    """``paths`` and, for each Python source among them, its compiled copies in ``__pycache__``
    (the same code: hiding a module hides them too)."""
    out = []
    for path in paths:
        out.append(path)
        parent, _, name = path.rpartition("/")
        if name.endswith(".py"):
            cache = f"{parent}/__pycache__" if parent else "__pycache__"
            try:
                names = os.listdir(root / cache)
            except OSError:
                continue
            stem = name[:-3] + "."
            out += [f"{cache}/{n}" for n in sorted(names) if n.startswith(stem) and n.endswith(".pyc")]
    return out


class Sandbox:
    """Synchronous wrapper: an ``AsyncSandbox`` on a private event-loop thread.

    with Sandbox() as sandbox:
        print(sandbox.run(Program(language="python", source="print(1)")).stdout)
    """

    def __init__(self, **kwargs: Any) -> None:
        self._async = AsyncSandbox(**kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="dojo-sandbox", daemon=True)
        self._thread.start()
        self._closed = False

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise SandboxError("the sandbox is closed")
        fut: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return fut.result()

    def start(self) -> Sandbox:
        self._call(self._async.start())
        return self

    def run(self, program: Program, limits: Limits | None = None, **kwargs: Any) -> ExecutionResult:
        return self._call(self._async.run(program, limits, **kwargs))

    def run_many(self, programs: Iterable[Program], limits: Limits | None = None) -> list[ExecutionResult]:
        return self._call(self._async.run_many(list(programs), limits))

    def open_session(self, language: str, limits: Limits | None = None, environment: str | None = None) -> SyncSession:
        """A stateful session (see ``AsyncSandbox.open_session``), with blocking methods."""
        return SyncSession(self, self._call(self._async.open_session(language, limits, environment)))

    @property
    def pool(self) -> SlotPool:
        return self._async.pool

    def close(self) -> None:
        if self._closed:
            return
        try:
            self._call(self._async.close())
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncSession:
    """Blocking face of a ``Session``, for ``Sandbox`` users."""

    def __init__(self, sandbox: Sandbox, session: Session) -> None:
        self._sandbox = sandbox
        self.session = session

    def exec(self, code: str, stdin: str = "", limits: Limits | None = None) -> ExecutionResult:
        return self._sandbox._call(self.session.exec(code, stdin, limits))

    def write_file(self, path: str, content: bytes, executable: bool = False) -> None:
        self._sandbox._call(self.session.write_file(path, content, executable))

    def read_file(self, path: str, max_bytes: int = 16 << 20) -> bytes:
        return self._sandbox._call(self.session.read_file(path, max_bytes))

    def close(self) -> None:
        self._sandbox._call(self.session.close())

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
