"""Named Python environments for runs: built on the host by pip, content-addressed by their lock,
mounted read-only into the slots that run them.

    store = EnvironmentStore()
    env = store.build("data", requirements=["pandas", "numpy"])     # dojo env build data -r req.txt
    await sandbox.run(Program(language="python", source=..., environment="data"))

Layout under the store's root (``$DOJO_HOME/environments``, default ``~/.cache/dojo/environments``):

- ``store/<version>/site-packages``: the installed packages; ``<version>`` is the first 16 hex
  digits of the SHA-256 of the lock (the Python ABI and every ``name==version`` line), so two names
  with the same lock share one copy and a lock always means the same files;
- ``store/<version>/environment.json``: the lock, the default modules to preload, when it was built;
- ``names/<name>.json``: the versions built under a name, newest last (``name`` means the newest,
  ``name@version`` one of them), and for each how its slots start (preload modules, warm-up code).

The packages are installed by pip for the sandbox's interpreter (``pip --python``), from the
configured index or a local wheelhouse; nothing of them runs on the host (pip installs wheels, and
builds sdists in its own isolated build). Warm slots of an environment import its preload modules
in their zygote (inside the sandbox), so every run forks with them already imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dojo.errors import InputError
from dojo.sandbox.home import dojo_home
from dojo.sandbox.languages import default_python

NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
VERSION = re.compile(r"^[0-9a-f]{16}$")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;#]+)$")
MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
PIP_TIMEOUT_S = 1800
REWRITE_TIMEOUT_S = 600  # writing pytest's rewritten test modules into an environment (swe:networkx: ~2 s)
# How ``adopt`` lays out an environment, part of its version: a change of layout (compiled files
# added, RECORD dropped: layout 2; pytest's rewritten tests added: layout 3) gives a new environment
# instead of reusing one made before it.
ADOPTED_LAYOUT = "layout:3"


class EnvironmentSpecError(InputError):
    """An environment that cannot be built or found; the message says how to fix it."""


class EnvironmentNotFound(EnvironmentSpecError):
    """No environment of that name (or version) has been built on this machine."""


@dataclass(frozen=True)
class Environment:
    """One built environment: a name, a version (its lock's hash) and what its slots preload."""

    name: str
    version: str
    path: Path
    lock: tuple[str, ...]
    preload: tuple[str, ...]
    python_tag: str
    created: float = 0.0
    requirements: tuple[str, ...] = field(default=())
    warmup: str = ""  # Python each zygote runs once after the imports, so lazy set-up happens there

    @property
    def site_packages(self) -> Path:
        return self.path / "site-packages"

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file() and not p.is_symlink())

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "path": str(self.path),
            "python": self.python_tag,
            "preload": list(self.preload),
            "warmup": self.warmup,
            "requirements": list(self.requirements),
            "lock": list(self.lock),
            "created": self.created,
        }


def default_root() -> Path:
    return dojo_home() / "environments"


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise EnvironmentSpecError(
            f"environment name {name!r} is not valid: use 1-64 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def parse_lock(lines: list[str]) -> tuple[str, ...]:
    """A lock's pins, normalised (``name==version``, names lowercase with '-'), sorted; every line
    must pin one exact version (comments, blank lines and pip's ``--hash`` options are dropped)."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        line = re.sub(r"\s+--hash[= ]\S+", "", line).rstrip("\\").strip()
        if not line:
            continue
        match = PIN.match(line)
        if match is None:
            raise EnvironmentSpecError(
                f"lock line {number} ({raw.strip()!r}) does not pin one version: a lock has one 'name==version' "
                "per line (give loose requirements with -r instead)"
            )
        name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
        if name in pins and pins[name] != match.group(3):
            raise EnvironmentSpecError(f"lock pins {name} twice, to {pins[name]} and {match.group(3)}")
        pins[name] = match.group(3)
    if not pins:
        raise EnvironmentSpecError("the lock pins no package")
    return tuple(f"{n}=={v}" for n, v in sorted(pins.items()))


def parse_requirements(lines: list[str]) -> tuple[str, ...]:
    """Requirement lines as pip reads them, without comments and blanks. Options that point pip
    somewhere else (``-r``, ``-e``, ``--index-url`` ...) are refused: the index is the store's."""
    out = []
    for number, raw in enumerate(lines, 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            raise EnvironmentSpecError(
                f"requirements line {number} ({line!r}): options are not accepted in a requirements list; "
                "give the index with --index-url or --find-links"
            )
        out.append(line)
    if not out:
        raise EnvironmentSpecError("no requirement given: list at least one package (-r requirements.txt)")
    return tuple(out)


def lock_version(lock: tuple[str, ...], python_tag: str) -> str:
    text = "\n".join((f"# {python_tag}", *lock)) + "\n"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def python_tag(python: str) -> str:
    """The interpreter's implementation and version (``cp311``): an environment serves one."""
    out = subprocess.run(
        [python, "-S", "-E", "-s", "-c", "import sys; print(sys.implementation.cache_tag)"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return out.stdout.strip().replace("cpython-", "cp")


@dataclass
class PipIndex:
    """Where pip finds packages: an index URL, local wheelhouses, or pip's own configuration."""

    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    no_index: bool = False

    def args(self) -> list[str]:
        args = ["--index-url", self.index_url] if self.index_url else []
        for link in self.find_links:
            args += ["--find-links", link]
        if self.no_index:
            args.append("--no-index")
        return args


def run_pip(args: list[str], python: str, what: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-12:])
        raise EnvironmentSpecError(f"pip could not {what}:\n{tail}")
    return proc


def resolve(requirements: tuple[str, ...], python: str, index: PipIndex) -> tuple[str, ...]:
    """Pin every package the requirements need (pip's resolver, nothing installed)."""
    with tempfile.TemporaryDirectory(prefix="dojo-env-") as tmp:
        report = Path(tmp) / "report.json"
        req = Path(tmp) / "requirements.txt"
        req.write_text("\n".join(requirements) + "\n")
        run_pip(
            ["install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), "-r", str(req),
             *index.args()],
            python, "resolve the requirements",
        )  # fmt: skip
        items = json.loads(report.read_text()).get("install", [])
    return parse_lock([f"{i['metadata']['name']}=={i['metadata']['version']}" for i in items])


def top_level_modules(site: Path, distributions: list[str]) -> tuple[str, ...]:
    """The importable top-level names of some installed distributions (``scikit-learn`` ->
    ``sklearn``), read from their metadata in ``site``."""
    wanted = {re.sub(r"[-_.]+", "-", d).lower() for d in distributions}
    found: list[str] = []
    for info in sorted(site.glob("*.dist-info")):
        meta = (info / "METADATA").read_text(errors="replace") if (info / "METADATA").exists() else ""
        name = next((ln.split(":", 1)[1].strip() for ln in meta.splitlines() if ln.startswith("Name:")), "")
        if re.sub(r"[-_.]+", "-", name).lower() not in wanted:
            continue
        names: list[str] = []
        if (info / "top_level.txt").exists():
            names = [n.strip() for n in (info / "top_level.txt").read_text().split() if n.strip()]
        elif (info / "RECORD").exists():
            for row in (info / "RECORD").read_text().splitlines():
                first = row.split(",", 1)[0].split("/", 1)
                if len(first) == 2 and first[1] == "__init__.py":
                    names.append(first[0])
                elif len(first) == 1 and first[0].endswith(".py"):
                    names.append(first[0][:-3])
        found += [n for n in names if MODULE.match(n) and not n.startswith("_") and n not in found]
    return tuple(found)


class EnvironmentStore:
    """Build, find, list and remove environments on this machine."""

    def __init__(self, root: Path | str | None = None, python: str | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.python = python or default_python()
        # ref -> (its names file's mtime and size, what it meant)
        self._found: dict[str, tuple[tuple[int, int], Environment]] = {}

    # -- finding -------------------------------------------------------------------------------

    def _names_file(self, name: str) -> Path:
        return self.root / "names" / f"{check_name(name)}.json"

    def _versions(self, name: str) -> list[str]:
        path = self._names_file(name)
        if not path.exists():
            return []
        return list(json.loads(path.read_text()).get("versions", []))

    def _load(self, name: str, version: str) -> Environment:
        path = self.root / "store" / version
        meta = json.loads((path / "environment.json").read_text())
        settings = self._record(name).get("settings", {}).get(version, {})
        return Environment(
            name=name,
            version=version,
            path=path,
            lock=tuple(meta["lock"]),
            preload=tuple(settings.get("preload", meta.get("preload", ()))),
            python_tag=meta["python"],
            created=float(meta.get("created", 0.0)),
            requirements=tuple(meta.get("requirements", ())),
            warmup=str(settings.get("warmup", "")),
        )

    def cached(self, ref: str) -> Environment | None:
        """What ``get(ref)`` last answered, while the name's file is unchanged (one ``stat``: a run's
        hot path asks this before reading any file); None otherwise."""
        found = self._found.get(ref)
        if found is None:
            return None
        return found[1] if self._stamp(ref.partition("@")[0]) == found[0] else None

    def _stamp(self, name: str) -> tuple[int, int]:
        try:
            st = self._names_file(name).stat()
        except OSError:
            return (0, -1)
        return (st.st_mtime_ns, st.st_size)

    def get(self, ref: str) -> Environment:
        """``name`` (its newest version) or ``name@version``; EnvironmentNotFound says how to build it."""
        name, _, version = ref.partition("@")
        stamp = self._stamp(name)
        versions = self._versions(name)
        if not versions:
            raise EnvironmentNotFound(
                f"no environment named {name!r} on this machine (store {self.root}); build it with: "
                f"dojo env build {name} -r requirements.txt"
            )
        if version and version not in versions:
            raise EnvironmentNotFound(
                f"environment {name!r} has no version {version!r}; it has {', '.join(versions)} (dojo env show {name})"
            )
        chosen = version or versions[-1]
        if not (self.root / "store" / chosen / "environment.json").exists():
            raise EnvironmentNotFound(
                f"environment {name}@{chosen} is listed but its files are gone; rebuild it with: "
                f"dojo env build {name} -r requirements.txt"
            )
        environment = self._load(name, chosen)
        self._found[ref] = (stamp, environment)
        return environment

    def all(self) -> list[Environment]:
        names_dir = self.root / "names"
        if not names_dir.is_dir():
            return []
        out = []
        for path in sorted(names_dir.glob("*.json")):
            try:
                out.append(self.get(path.stem))
            except EnvironmentNotFound:
                continue
        return out

    def versions(self, name: str) -> list[Environment]:
        return [self._load(name, v) for v in self._versions(name) if (self.root / "store" / v).is_dir()]

    # -- building ------------------------------------------------------------------------------

    def build(
        self,
        name: str,
        *,
        requirements: list[str] | None = None,
        lock: list[str] | None = None,
        preload: list[str] | None = None,
        index: PipIndex | None = None,
        warmup: str | None = None,
    ) -> Environment:
        """Resolve (or take the lock), install into the content-addressed store unless that lock is
        already there, and point ``name`` at it. Preload defaults to the top-level modules of the
        packages asked for. ``warmup``: Python source each of the environment's zygotes runs once
        after importing them (exercise the libraries, so that what they set up lazily on first use
        is done there, once, instead of in every run)."""
        check_name(name)
        if (requirements is None) == (lock is None):
            raise EnvironmentSpecError("give either requirements (-r requirements.txt) or a lock (--lock lock.txt)")
        index = index or PipIndex()
        for module in preload or ():
            if not MODULE.match(module):
                raise EnvironmentSpecError(f"preload {module!r} is not a module name (e.g. numpy or scipy.stats)")
        if warmup is not None:
            try:
                compile(warmup, "<warmup>", "exec")
            except SyntaxError as e:
                raise EnvironmentSpecError(f"the warm-up code does not compile: {e}") from e
        tag = python_tag(self.python)
        if lock is not None:
            pins = parse_lock(lock)
            asked = tuple(p.split("==")[0] for p in pins)
        else:
            asked = parse_requirements(requirements or [])
            pins = resolve(asked, self.python, index)
        version = lock_version(pins, tag)
        target = self.root / "store" / version
        if not (target / "environment.json").exists():
            self._install(target, pins, asked, preload, tag, index)
        # How the name's slots start (preload, warm-up) belongs to the name: names sharing the files
        # may start their slots differently.
        settings: dict[str, Any] = {"warmup": warmup or ""}
        if preload is not None:
            settings["preload"] = list(preload)
        self._add_version(name, version, settings)
        return self.get(f"{name}@{version}")

    def adopt(
        self,
        name: str,
        distributions: list[str],
        *,
        preload: list[str] | None = None,
        modules: dict[str, str] | None = None,
        warmup: str = "",
    ) -> Environment:
        """An environment made of pure-Python distributions that the host's interpreter has installed
        (their files copied as their RECORD lists them), with no index and no network: for task sets
        whose data is a package's own source and tests (``swe:``). The lock is the installed
        versions, so the same versions always give the same environment. ``preload`` defaults to
        none: a task that edits the package must import its own copy. ``modules``: top-level
        modules (name -> source) written beside the distributions (an adapter a task set needs);
        their hashes are part of the lock. A distribution with compiled code is adopted only when
        this interpreter and the sandbox's are the same version (``cp311``: the same ABI).
        ``warmup``: as for ``build`` (it may also import modules after setting what they read first)."""
        import importlib.metadata as metadata
        import sys

        check_name(name)
        dists = []
        for wanted in distributions:
            try:
                dist = metadata.distribution(wanted)
            except metadata.PackageNotFoundError:
                raise EnvironmentSpecError(
                    f"{wanted!r} is not installed here, so it cannot be adopted into {name!r}; install it "
                    f"(pip install {wanted}) or build the environment from an index (dojo env build)"
                ) from None
            dists.append(dist)
        tag = python_tag(self.python)
        host = sys.implementation.cache_tag.replace("cpython-", "cp")
        for dist in dists:
            if "Root-Is-Purelib: true" not in (dist.read_text("WHEEL") or "") and host != tag:
                raise EnvironmentSpecError(
                    f"{dist.metadata['Name']!r} has compiled code for {host}, but the sandbox runs {tag}; "
                    f"build {name!r} with pip (dojo env build)"
                )
        for module in modules or {}:
            if not module.isidentifier():
                raise EnvironmentSpecError(f"module name {module!r} is not a Python identifier")
        extra = [f"module:{m}={hashlib.sha256(src.encode()).hexdigest()[:16]}" for m, src in (modules or {}).items()]
        pins = tuple(sorted([*(f"{d.metadata['Name']}=={d.version}" for d in dists), *extra]))
        version = lock_version((*pins, ADOPTED_LAYOUT), tag)
        target = self.root / "store" / version
        if not (target / "environment.json").exists():
            (self.root / "store").mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=self.root / "store"))
            try:
                site = staging / "site-packages"
                site.mkdir()  # (an environment of modules alone adopts no distribution)
                for dist in dists:
                    for file in dist.files or ():
                        rel = Path(str(file))
                        if rel.is_absolute() or ".." in rel.parts or rel.suffix == ".pyc" or "__pycache__" in rel.parts:
                            continue
                        if rel.name == "RECORD" and rel.parent.name.endswith(".dist-info"):
                            continue  # its hashes of the originals would let a run test a guess at a hidden file
                        src = Path(str(dist.locate_file(file)))
                        if src.is_file():
                            (site / rel).parent.mkdir(parents=True, exist_ok=True)
                            shutil.copyfile(src, site / rel)
                for module, source in (modules or {}).items():
                    (site / f"{module}.py").write_text(source)
                # compiled by the sandbox's interpreter, so a run imports instead of compiling (a file
                # that does not compile, such as a test's sample of bad syntax, is left as it is)
                subprocess.run([self.python, "-m", "compileall", "-q", "-q", "-j", "0", str(site)], check=False,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
                self._cache_rewritten_tests(site)
                meta = {"lock": list(pins), "python": tag, "preload": list(preload or ()),
                        "requirements": list(distributions), "created": time.time(), "adopted": True}  # fmt: skip
                _write_atomic(staging / "environment.json", meta)
                self._publish(staging, target)
            finally:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)
        self._add_version(name, version, {"warmup": warmup, "preload": list(preload or ())})
        return self.get(f"{name}@{version}")

    def _cache_rewritten_tests(self, site: Path) -> None:
        """Put pytest's rewritten code of the test modules under ``site`` beside them, made by the
        sandbox's interpreter and the environment's own pytest (``dojo.sandbox.rewritten_tests``:
        runs skip rewriting them). Not having them costs time, never a result: a failure is ignored."""
        script = Path(__file__).with_name("rewritten_tests.py")
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run([self.python, "-I", "-S", str(script), str(site)], check=False, timeout=REWRITE_TIMEOUT_S,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    @staticmethod
    def _publish(staging: Path, target: Path) -> None:
        """Make a staged environment readable by every slot's uid (writable by none) and move it
        to its place; a build of the same lock that finished first has the same files."""
        for path in [staging, *staging.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "environment.json").exists():
                raise

    def _install(
        self, target: Path, pins: tuple[str, ...], asked: tuple[str, ...], preload: list[str] | None, tag: str,
        index: PipIndex,
    ) -> None:  # fmt: skip
        (self.root / "store").mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=self.root / "store"))
        try:
            lock_file = staging / "lock.txt"
            lock_file.write_text("\n".join(pins) + "\n")
            run_pip(
                ["install", "--no-deps", "--quiet", "--no-warn-script-location", "--target",
                 str(staging / "site-packages"), "-r", str(lock_file), *index.args()],
                self.python, "install the environment's packages",
            )  # fmt: skip
            site = staging / "site-packages"
            self._cache_rewritten_tests(site)
            if preload is None:
                names = [re.split(r"[\s\[<>=!~;]", a, maxsplit=1)[0] for a in asked]
                preload = list(top_level_modules(site, names))
            meta = {"lock": list(pins), "python": tag, "preload": list(preload), "requirements": list(asked),
                    "created": time.time()}  # fmt: skip
            _write_atomic(staging / "environment.json", meta)
            self._publish(staging, target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    def _record(self, name: str) -> dict[str, Any]:
        path = self._names_file(name)
        return json.loads(path.read_text()) if path.exists() else {"name": name, "versions": [], "settings": {}}

    def _add_version(self, name: str, version: str, settings: dict[str, Any]) -> None:
        record = self._record(name)
        if record["versions"][-1:] == [version] and record.get("settings", {}).get(version) == settings:
            return  # already the name's newest, as asked: the file (and what runs cached of it) stays
        record["versions"] = [v for v in record["versions"] if v != version] + [version]
        record.setdefault("settings", {})[version] = settings
        path = self._names_file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, record)

    # -- removing ------------------------------------------------------------------------------

    def remove(self, ref: str) -> list[str]:
        """Remove a name (every version) or one ``name@version``; delete the files no name still
        uses. Returns the versions removed from the name."""
        name, _, version = ref.partition("@")
        versions = self._versions(name)
        if not versions or (version and version not in versions):
            raise EnvironmentNotFound(f"no environment {ref!r} to remove (dojo env list shows what there is)")
        gone = [version] if version else versions
        record = self._record(name)
        record["versions"] = [v for v in versions if v not in gone]
        record["settings"] = {v: c for v, c in record.get("settings", {}).items() if v in record["versions"]}
        if record["versions"]:
            _write_atomic(self._names_file(name), record)
        else:
            self._names_file(name).unlink()
        in_use = {v for n in (self.root / "names").glob("*.json") for v in json.loads(n.read_text())["versions"]}
        for v in gone:
            if v not in in_use:
                shutil.rmtree(self.root / "store" / v, ignore_errors=True)
        return gone


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.chmod(tmp, 0o644)
    tmp.replace(path)
