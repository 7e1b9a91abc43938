"""Soak under faults: `dojo serve` for a long while at high concurrency, with a mixed load, while a
fault is injected every few seconds.

    .venv/bin/python bench/soak.py [--seconds 1800] [--concurrency 64] [--pool-size N]
                                   [--fault-every 4] [--tls-threads 4] [--json PATH]

The service runs in a process of its own (``bench/soak.py serve``: ``dojo.service.server.serve`` on
uvicorn's loop, uvloop when installed, with a package proxy whose upstream is a wheel index on
loopback, and ``--tls-threads`` threads doing TLS handshakes with a fresh SSL context each, so slots
restart while OpenSSL's locks are taken and freed). The load, one job at a time per worker:

- one-shot runs in every language the machine has of python, bash, c, cpp, javascript (``/v1/run``)
  and python through SandboxFusion's ``/run_code``: each computes ``n*n+1`` of a fresh ``n``, so a
  result that belongs to another request is seen;
- sessions (``/v1/sessions``): create, state carried between two execs, a file written and read
  back, delete;
- harness grading (``/v1/batch`` with ``call``/``expected_return``): a right and a wrong case;
- repo grading: a repo task's program (``dojo.rewards.repo.repo_program``: the tree, the edits,
  pytest and its JUnit report) with the fix or without it, the outcome read from the report;
- ``pip install`` of a wheel through the package proxy (root only: it needs a network namespace).

Faults, in turn: SIGKILL of a slot's zygote, SIGSTOP of a zygote's forker, a run that fills its
disk, a run that fills its process limit, a client that disconnects mid-request, a burst past
admission (``--queue`` is small), and, all along, the TLS threads.

Every answer is classed: ``ok`` (what the job expects), ``wrong`` (a verdict or output that is not
what the program computes: must be 0), ``sandbox_error`` (the SandboxError verdict or a 503: the
service said the infrastructure failed), ``refused`` (429), ``http_error`` (another explicit HTTP
error) or ``lost`` (no answer: a dropped connection, a read past --request-timeout, a body that is
not JSON; must be 0). Prints p50/p99 latency and the counts of each minute, and the service's RSS,
open fds and threads at the start and end (the median of the first ``--baseline`` seconds'
samples, a minute by default, is the baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import json
import os
import random
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.sandbox.wheelhouse import PackageIndex, make_wheel  # noqa: E402

from dojo.rewards.repo import REPORT, Edit, junit_outcomes, repo_program  # noqa: E402
from dojo.tasks.model import Task, TestCase, Workspace  # noqa: E402

PROGRAMS = {  # n on stdin -> n*n+1 on stdout
    "python": "import sys\nn = int(sys.stdin.read())\nprint(n * n + 1)\n",
    "bash": "read n\necho $((n * n + 1))\n",
    "c": '#include <stdio.h>\nint main(void) { long n; scanf("%ld", &n); printf("%ld\\n", n * n + 1); return 0; }\n',
    "cpp": "#include <iostream>\nint main() { long n; std::cin >> n; std::cout << n * n + 1 << std::endl; }\n",
    "javascript": "const n = parseInt(require('fs').readFileSync(0, 'utf8'));\nconsole.log(n * n + 1);\n",
}
FILL_DISK = """import errno, sys
written = 0
try:
    with open("/tmp/fill", "wb") as f:
        while True:
            f.write(b"x" * (1 << 20))
            f.flush()
            written += 1
except OSError as e:
    print("full", errno.errorcode.get(e.errno, e.errno))
"""
FILL_PROCESSES = """import os, time
made = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        made += 1
except OSError as e:
    print("limit", made > 0)
"""
SLOW = "import time\ntime.sleep(3)\nprint('slept')\n"
REPO_SOURCE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
REPO_TESTS = (
    "from mypkg import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n"
)
LIMITS = {"wall_time": 30, "cpu_time": 10}
CLASSES = ("ok", "wrong", "sandbox_error", "refused", "http_error", "lost")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the service under test (its own process) -----------------------------------------------------


def tls_churn(stop: threading.Event, threads: int, workdir: Path) -> list[threading.Thread]:
    """A TLS server on loopback and ``threads`` clients, each handshaking in a loop with a fresh
    SSL context (created and freed each time: OpenSSL's locks are taken all the while)."""
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
    subprocess.run(
        [*openssl, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with contextlib.suppress(OSError, ssl.SSLError), conn:
                conn.settimeout(5)
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(16)
        listener.close()

    def client() -> None:
        while not stop.is_set():
            ctx = ssl.create_default_context(cafile=str(cert))
            with (
                contextlib.suppress(OSError, ssl.SSLError),
                socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
                ctx.wrap_socket(raw, server_hostname="localhost") as tls,
            ):
                tls.sendall(b"hi")
            del ctx

    made = [threading.Thread(target=serve, name="tls-server", daemon=True)]
    made += [threading.Thread(target=client, name=f"tls-client-{i}", daemon=True) for i in range(threads)]
    for t in made:
        t.start()
    return made


def serve_main(args: argparse.Namespace) -> None:
    from dojo.sandbox import AsyncSandbox
    from dojo.sandbox.packages import PackageProxy
    from dojo.service.app import ServiceSettings
    from dojo.service.server import serve

    stop = threading.Event()
    with tempfile.TemporaryDirectory(prefix="dojo-soak-") as tmp:
        if args.tls_threads:
            tls_churn(stop, args.tls_threads, Path(tmp))
        proxy = PackageProxy(pypi=args.index or None, npm=None, cache=Path(tmp) / "cache")
        sandbox = AsyncSandbox(pool_size=args.pool_size, packages=proxy)
        settings = ServiceSettings(pool_size=args.pool_size, queue=args.queue, max_sessions=args.max_sessions)
        try:
            serve("127.0.0.1", args.port, settings, sandbox)
        finally:
            stop.set()


# --- faults ---------------------------------------------------------------------------------------


def process_tree(root: int) -> dict[int, list[int]]:
    """parent pid -> child pids, for ``root`` and its descendants."""
    parents: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parents[int(fields[1])].append(int(entry))
    tree: dict[int, list[int]] = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        tree[pid] = parents.get(pid, [])
        stack.extend(tree[pid])
    return tree


def slot_processes(server: int) -> list[tuple[int, int | None]]:
    """(zygote, forker) of each slot: the server's ``unshare`` children start the zygote; its forker
    is the child that runs as the zygote's own user (a run, or a session's interpreter, runs as the
    slot's user; in rootless mode, where all are one user, the oldest child). None while there is none."""
    tree = process_tree(server)
    out = []
    for unshare in tree.get(server, []):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{unshare}/comm").read_text().strip() != "unshare":
                continue
        for zygote in tree.get(unshare, []):
            children = [(start_time(c), c) for c in tree.get(zygote, []) if uid_of(c) == uid_of(zygote)]
            out.append((zygote, min(children)[1] if children else None))
    return out


def uid_of(pid: int) -> int | None:
    with contextlib.suppress(OSError, StopIteration, ValueError):
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        return int(next(line for line in status if line.startswith("Uid:")).split()[1])
    return None


def start_time(pid: int) -> int:
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    return 1 << 62


def service_sample(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    values = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    tree_rss = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            tree_rss += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return {
        "rss_mib": int(values["VmRSS"].split()[0]) / 1024,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "threads": int(values["Threads"]),
        "tree_rss_mib": tree_rss / 2**20,
        "slots": len(slot_processes(pid)),
    }


# --- the load -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str
    cls: str
    latency: float
    detail: str = ""


@dataclass
class Tally:
    start: float
    outcomes: list[tuple[float, Outcome]] = field(default_factory=list)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    faults: Counter[str] = field(default_factory=Counter)
    fault_misses: Counter[str] = field(default_factory=Counter)

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append((time.monotonic() - self.start, outcome))
        if outcome.cls in ("wrong", "lost", "http_error") and len(self.examples[outcome.cls]) < 20:
            self.examples[outcome.cls].append(f"{outcome.kind}: {outcome.detail[:300]}")


class Wrong(Exception):
    """The service answered, with something other than what the job computes."""


def verdict_of(body: dict[str, Any]) -> str:
    return str(body.get("verdict"))


def describe(body: dict[str, Any]) -> str:
    """A run's answer in one line: verdict, the limit it hit, wall time, output."""
    return (
        f"{verdict_of(body)} limit={body.get('limit')} wall={body.get('wall_time')} "
        f"stdout={str(body.get('stdout'))[:100]!r} stderr={str(body.get('stderr'))[-200:]!r}"
    )


class Load:
    def __init__(self, client: httpx.AsyncClient, languages: list[str], pip: bool) -> None:
        self.client = client
        self.languages = languages
        self.with_pip = pip

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = await self.client.post(path, json=body)
        return self.checked(r)

    @staticmethod
    def checked(r: httpx.Response) -> dict[str, Any]:
        if r.status_code >= 300:
            raise HTTPStatus(r.status_code, r.text[:300])
        body = r.json()
        if isinstance(body, dict) and verdict_of(body) == "SandboxError":
            raise Infrastructure(str(body.get("sandbox_error") or body)[:300])
        return body if isinstance(body, dict) else {"value": body}

    async def run(self) -> None:
        language = random.choice(self.languages)
        n = random.randrange(1, 10**6)
        body = await self.post(
            "/v1/run",
            {"program": {"language": language, "source": PROGRAMS[language], "stdin": f"{n}\n"}, "limits": LIMITS},
        )
        if verdict_of(body) != "Accepted" or body.get("stdout") != f"{n * n + 1}\n":
            raise Wrong(f"{language} n={n}: {describe(body)}")

    async def run_code(self) -> None:
        n = random.randrange(1, 10**6)
        body = await self.post("/run_code", {"code": PROGRAMS["python"], "language": "python", "stdin": f"{n}\n"})
        if body.get("verdict") == "SandboxError" or body.get("status") == "SandboxError":
            raise Infrastructure(body.get("message", ""))
        run = body.get("run_result") or {}
        if body.get("status") != "Success" or run.get("stdout") != f"{n * n + 1}\n":
            raise Wrong(f"run_code n={n}: {body.get('status')} {run.get('stdout')!r}")

    async def session(self) -> None:
        r = await self.client.post("/v1/sessions", json={"language": "python", "limits": LIMITS})
        sid = self.checked(r)["id"]
        try:
            n = random.randrange(1, 10**6)
            self.exec_ok(await self.post(f"/v1/sessions/{sid}/exec", {"code": f"x = {n}\n"}), "")
            self.exec_ok(await self.post(f"/v1/sessions/{sid}/exec", {"code": "print(x * 2)\n"}), f"{2 * n}\n")
            data = f"token {n}\n".encode()
            self.checked(await self.client.put(f"/v1/sessions/{sid}/files/note.txt", content=data))
            r = await self.client.get(f"/v1/sessions/{sid}/files/note.txt")
            if r.status_code >= 300:
                raise HTTPStatus(r.status_code, r.text[:300])
            if r.content != data:
                raise Wrong(f"session file: {r.content[:80]!r} != {data!r}")
        finally:
            with contextlib.suppress(httpx.HTTPError):
                await self.client.delete(f"/v1/sessions/{sid}")

    @staticmethod
    def exec_ok(body: dict[str, Any], stdout: str) -> None:
        if verdict_of(body) != "Accepted" or body.get("stdout") != stdout:
            raise Wrong(f"session exec: {verdict_of(body)} {body.get('stdout')!r} != {stdout!r}")

    async def harness(self) -> None:
        k = random.randrange(1, 1000)
        source = f"def f(a, b):\n    return (a + b) * {k}\n"
        cases = [
            {"call": {"function": "f", "args": [2, 3]}, "expected_return": 5 * k},  # right
            {"call": {"function": "f", "args": [1, 1]}, "expected_return": 2 * k + 1},  # wrong on purpose
        ]
        body = await self.post("/v1/batch", {"program": {"language": "python", "source": source}, "cases": cases})
        for item in body["results"]:
            if (item.get("result") or {}).get("verdict") == "SandboxError":
                raise Infrastructure("a case's run")
        got = [(item["result"]["verdict"], item.get("return_value")) for item in body["results"]]
        if got != [("Accepted", 5 * k), ("WrongAnswer", 2 * k)]:
            raise Wrong(f"harness k={k}: {got}")

    async def repo(self) -> None:
        fixed = random.random() < 0.5
        task = Task(
            id="soak/repo",
            form="repo",
            prompt="fix add",
            tests=[
                TestCase(code="mypkg/tests/test_ops.py::test_add"),
                TestCase(code="mypkg/tests/test_ops.py::test_mul"),
            ],
            workspace=Workspace(
                files={
                    "mypkg/__init__.py": REPO_SOURCE,
                    "mypkg/tests/__init__.py": "",
                    "mypkg/tests/test_ops.py": REPO_TESTS,
                }
            ),
        )
        edits = [Edit(path="mypkg/__init__.py", search="return a - b", replace="return a + b")] if fixed else []
        program = repo_program(task, edits, [str(t.code) for t in task.tests])
        body = await self.post(
            "/v1/run", {"program": program.model_dump(mode="json"), "limits": {"wall_time": 60, "cpu_time": 30}}
        )
        report = (body.get("files") or {}).get(REPORT) or {}
        if report.get("content") is None:
            raise Wrong(f"repo: no report ({verdict_of(body)}): {body.get('stderr', '')[-300:]!r}")
        outcomes = junit_outcomes(base64.b64decode(report["content"]))
        got = {node: passed for node, (passed, _) in outcomes.items()}
        want = {"mypkg/tests/test_ops.py::test_add": fixed, "mypkg/tests/test_ops.py::test_mul": True}
        if got != want:
            raise Wrong(f"repo fixed={fixed}: {got}")

    async def pip(self) -> None:
        n = random.randrange(3)
        source = (
            f"python3 -m pip install --no-cache-dir --quiet --target /tmp/lib soakpkg{n}\n"
            f"PYTHONPATH=/tmp/lib python3 -c 'import soakpkg{n}; print(soakpkg{n}.VALUE)'\n"
        )
        limits = {"wall_time": 120, "cpu_time": 60, "memory": 1 << 30, "processes": 128, "network": "packages"}
        body = await self.post("/v1/run", {"program": {"language": "bash", "source": source}, "limits": limits})
        if verdict_of(body) != "Accepted" or body.get("stdout") != f"{1000 + n}\n":
            raise Wrong(f"pip {n}: {describe(body)}")

    def jobs(self) -> list[tuple[str, Callable[[], Awaitable[None]], float]]:
        jobs: list[tuple[str, Callable[[], Awaitable[None]], float]] = [
            ("run", self.run, 6),
            ("run_code", self.run_code, 2),
            ("session", self.session, 1.5),
            ("harness", self.harness, 2),
            ("repo", self.repo, 1),
        ]
        if self.with_pip:
            jobs.append(("pip", self.pip, 0.5))
        return jobs


class HTTPStatus(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}")
        self.status = status


class Infrastructure(Exception):
    """The service said: SandboxError (an infrastructure failure, never a verdict on the code)."""


async def timed(kind: str, job: Callable[[], Awaitable[None]], timeout: float) -> Outcome:
    t0 = time.perf_counter()
    cls, detail = "ok", ""
    try:
        await asyncio.wait_for(job(), timeout)
    except Wrong as e:
        cls, detail = "wrong", str(e)
    except Infrastructure as e:
        cls, detail = "sandbox_error", str(e)
    except HTTPStatus as e:
        cls = "refused" if e.status == 429 else "sandbox_error" if e.status == 503 else "http_error"
        detail = str(e)
    except (httpx.HTTPError, TimeoutError, ValueError, KeyError, TypeError) as e:
        cls, detail = "lost", f"{type(e).__name__}: {e}"
    return Outcome(kind, cls, time.perf_counter() - t0, detail)


# --- the run --------------------------------------------------------------------------------------


async def probe_languages(client: httpx.AsyncClient) -> list[str]:
    found = []
    for language, source in PROGRAMS.items():
        r = await client.post("/v1/run", json={"program": {"language": language, "source": source, "stdin": "3\n"}})
        if r.status_code == 200 and r.json().get("stdout") == "10\n":
            found.append(language)
    return found


async def inject_faults(
    args: argparse.Namespace, server: int, url: str, tally: Tally, deadline: float, rng: random.Random
) -> None:
    kinds = ["kill_zygote", "stop_forker", "fill_disk", "fill_processes", "disconnect", "burst"]
    i = 0
    started: list[asyncio.Future[None]] = []
    async with httpx.AsyncClient(base_url=url, timeout=args.request_timeout) as client:
        load = Load(client, ["python"], False)
        while time.monotonic() + args.fault_every < deadline:
            await asyncio.sleep(args.fault_every)
            kind = kinds[i % len(kinds)]
            i += 1
            tally.faults[kind] += 1
            if kind in ("kill_zygote", "stop_forker"):
                slots = slot_processes(server)
                chosen = [z if kind == "kill_zygote" else f for z, f in slots]
                targets = [t for t in chosen if t is not None]
                if not targets:
                    tally.fault_misses[kind] += 1
                    continue
                with contextlib.suppress(ProcessLookupError):
                    os.kill(rng.choice(targets), signal.SIGKILL if kind == "kill_zygote" else signal.SIGSTOP)
            elif kind == "fill_disk":
                started.append(
                    asyncio.ensure_future(fault_run(load, tally, kind, FILL_DISK, {"disk": 32 << 20}, "full "))
                )
            elif kind == "fill_processes":
                fill = fault_run(load, tally, kind, FILL_PROCESSES, {"processes": 16}, "limit True")
                started.append(asyncio.ensure_future(fill))
            elif kind == "disconnect":
                started.append(asyncio.ensure_future(disconnect(url, rng)))
            elif kind == "burst":
                started.append(asyncio.ensure_future(burst(url, args, tally, load)))
        await asyncio.gather(*started)  # each is bounded by --request-timeout


async def fault_run(load: Load, tally: Tally, kind: str, source: str, limits: dict[str, Any], stdout: str) -> None:
    """A run that fills a limit: it must end as a verdict (and report what it saw), never hang."""

    async def job() -> None:
        body = await load.post(
            "/v1/run", {"program": {"language": "python", "source": source}, "limits": {**LIMITS, **limits}}
        )
        if not str(body.get("stdout", "")).startswith(stdout):
            raise Wrong(f"{kind}: {describe(body)}")

    tally.add(await timed(kind, job, 120))


async def disconnect(url: str, rng: random.Random) -> None:
    """A client that goes away mid-request (its run still holds a slot when it does)."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        with contextlib.suppress(TimeoutError, httpx.HTTPError):
            body = {"program": {"language": "python", "source": SLOW}, "limits": LIMITS}
            await asyncio.wait_for(client.post("/v1/run", json=body), rng.uniform(0.05, 1.0))


async def burst(url: str, args: argparse.Namespace, tally: Tally, load: Load) -> None:
    """args.burst requests at once on new connections: past admission, each ends as a verdict or a 429."""
    async with httpx.AsyncClient(
        base_url=url, timeout=args.request_timeout, limits=httpx.Limits(max_connections=args.burst)
    ) as client:
        burst_load = Load(client, load.languages, False)
        outcomes = await asyncio.gather(
            *(timed("burst", burst_load.run, args.request_timeout) for _ in range(args.burst))
        )
    for outcome in outcomes:
        tally.add(outcome)


async def worker(load: Load, tally: Tally, deadline: float, timeout: float, rng: random.Random) -> None:
    jobs = load.jobs()
    weights = [w for _, _, w in jobs]
    while time.monotonic() < deadline:
        kind, job, _ = rng.choices(jobs, weights)[0]
        tally.add(await timed(kind, job, timeout))


async def sampler(server: int, samples: list[dict[str, float]], start: float, deadline: float) -> None:
    while True:
        with contextlib.suppress(OSError):
            samples.append({"t": round(time.monotonic() - start, 1), **service_sample(server)})
        if time.monotonic() >= deadline:
            return
        await asyncio.sleep(min(10.0, max(0.1, deadline - time.monotonic())))


def percentile(data: list[float], q: float) -> float:
    data = sorted(data)
    return data[min(len(data) - 1, int(q * len(data)))] if data else 0.0


def report(
    tally: Tally, samples: list[dict[str, float]], args: argparse.Namespace, meta: dict[str, Any]
) -> dict[str, Any]:
    minutes: dict[int, list[Outcome]] = defaultdict(list)
    for t, outcome in tally.outcomes:
        minutes[int(t // 60)].append(outcome)
    per_minute = []
    for m in sorted(minutes):
        served = [o.latency for o in minutes[m] if o.cls == "ok"]
        counts = Counter(o.cls for o in minutes[m])
        per_minute.append(
            {
                "minute": m + 1,
                "requests": len(minutes[m]),
                **{c: counts.get(c, 0) for c in CLASSES},
                "p50_s": round(percentile(served, 0.5), 3),
                "p99_s": round(percentile(served, 0.99), 3),
            }
        )
    totals = Counter(o.cls for _, o in tally.outcomes)
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    latency: dict[str, list[float]] = defaultdict(list)
    for _, o in tally.outcomes:
        by_kind[o.kind][o.cls] += 1
        if o.cls == "ok":
            latency[o.kind].append(o.latency)
    latency_by_kind = {
        k: {"p50_s": round(percentile(v, 0.5), 3), "p99_s": round(percentile(v, 0.99), 3)}
        for k, v in sorted(latency.items())
    }
    first = [s for s in samples if s["t"] <= args.baseline] or samples[:1]
    baseline = {k: statistics.median(s[k] for s in first) for k in ("rss_mib", "fds", "threads", "tree_rss_mib")}
    end = samples[-1] if samples else {}
    return {
        **meta,
        "seconds": args.seconds,
        "baseline_seconds": args.baseline,
        "concurrency": args.concurrency,
        "totals": {c: totals.get(c, 0) for c in CLASSES},
        "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
        "latency_by_kind": latency_by_kind,
        "faults": dict(tally.faults),
        "fault_misses": dict(tally.fault_misses),
        "per_minute": per_minute,
        "service_baseline": baseline,
        "service_end": end,
        "samples": samples,
        "examples": dict(tally.examples),
    }


def print_report(out: dict[str, Any]) -> None:
    t = out["totals"]
    print(f"\nsoak: {out['seconds']:.0f} s at concurrency {out['concurrency']}, pool {out['pool_size']}, "
          f"languages {', '.join(out['languages'])}, pip {'on' if out['pip'] else 'off (needs root)'}")  # fmt: skip
    print(f"faults injected: {out['faults']} (no target found: {out['fault_misses']})")
    print(f"requests: {sum(t.values())}  " + "  ".join(f"{c}={t[c]}" for c in CLASSES))
    print("by kind: " + "; ".join(f"{k} {dict(v)}" for k, v in out["by_kind"].items()))
    print("latency of ok answers, p50/p99 s: " + "; ".join(
        f"{k} {v['p50_s']:.3f}/{v['p99_s']:.3f}" for k, v in out["latency_by_kind"].items()))  # fmt: skip
    print(f"\n{'min':>4} {'requests':>8} {'ok':>6} {'wrong':>5} {'sbx_err':>7} {'429':>5} {'http':>4} {'lost':>4} "
          f"{'p50 s':>7} {'p99 s':>7}")  # fmt: skip
    for m in out["per_minute"]:
        counts = f"{m['ok']:>6} {m['wrong']:>5} {m['sandbox_error']:>7} {m['refused']:>5} {m['http_error']:>4}"
        counts += f" {m['lost']:>4}"
        print(f"{m['minute']:>4} {m['requests']:>8} {counts} {m['p50_s']:>7.3f} {m['p99_s']:>7.3f}")
    b, e = out["service_baseline"], out["service_end"]
    if e:
        print(f"\nservice (the first {out['baseline_seconds']:g} s' median -> end):")
        for k, unit in (("rss_mib", "MiB"), ("fds", ""), ("threads", ""), ("tree_rss_mib", "MiB")):
            ratio = e[k] / b[k] if b[k] else float("nan")
            print(f"  {k:<13} {b[k]:>8.1f} -> {e[k]:>8.1f} {unit:<4} ({ratio:.2f}x)")
    for cls, lines in out["examples"].items():
        print(f"\nexamples of {cls}:")
        for line in lines[:10]:
            print(f"  {line}")


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    pool_size = args.pool_size or max(2, 2 * (os.cpu_count() or 1))
    pip = os.geteuid() == 0 and not args.no_pip
    with tempfile.TemporaryDirectory(prefix="dojo-soak-index-") as tmp:
        for n in range(3):
            make_wheel(Path(tmp), f"soakpkg{n}", "1.0", {f"soakpkg{n}/__init__.py": f"VALUE = {1000 + n}\n"})
        with PackageIndex(Path(tmp)) as index:
            port = free_port()
            command = [sys.executable, str(Path(__file__).resolve()), "serve", "--port", str(port)]
            command += ["--pool-size", str(pool_size), "--queue", str(args.queue), "--index", index.url]
            command += ["--tls-threads", str(args.tls_threads), "--max-sessions", str(args.max_sessions)]
            log = open(args.log or os.devnull, "wb")  # noqa: SIM115
            proc = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
            url = f"http://127.0.0.1:{port}"
            try:
                return await drive(args, proc.pid, url, pool_size, pip)
            finally:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
                log.close()


async def drive(args: argparse.Namespace, server: int, url: str, pool_size: int, pip: bool) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=args.concurrency + 8, max_keepalive_connections=args.concurrency + 8)
    async with httpx.AsyncClient(base_url=url, timeout=args.request_timeout, limits=limits) as client:
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get("/healthz", timeout=2)).status_code == 200:
                    break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"the service did not answer on {url} within 60 s (see --log)")
        languages = await probe_languages(client)
        rng = random.Random(args.seed)
        start = time.monotonic()
        deadline = start + args.seconds
        tally = Tally(start)
        samples: list[dict[str, float]] = []
        load = Load(client, languages, pip)
        tasks = [
            asyncio.ensure_future(worker(load, tally, deadline, args.request_timeout, rng))
            for _ in range(args.concurrency)
        ]
        tasks.append(asyncio.ensure_future(inject_faults(args, server, url, tally, deadline, rng)))
        tasks.append(asyncio.ensure_future(sampler(server, samples, start, deadline)))
        await asyncio.gather(*tasks)
        await asyncio.sleep(5)  # the pool replaces the last killed slots
        samples.append({"t": round(time.monotonic() - start, 1), **service_sample(server)})
    meta = {"pool_size": pool_size, "languages": languages, "pip": pip, "date": datetime.date.today().isoformat()}
    return report(tally, samples, args, meta)


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        p = argparse.ArgumentParser(prog="soak.py serve")
        p.add_argument("serve")
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--pool-size", type=int, required=True)
        p.add_argument("--queue", type=int, default=32)
        p.add_argument("--max-sessions", type=int, default=64)
        p.add_argument("--index", default="")
        p.add_argument("--tls-threads", type=int, default=4)
        serve_main(p.parse_args())
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=1800.0, help="How long the load runs.")
    p.add_argument("--concurrency", type=int, default=64, help="Workers, each one job at a time.")
    p.add_argument("--pool-size", type=int, default=0, help="The service's warm slots (default: 2 per core).")
    p.add_argument("--queue", type=int, default=32, help="The service's admission queue (small: bursts meet 429).")
    p.add_argument("--max-sessions", type=int, default=64, help="The service's live sessions before 429.")
    p.add_argument("--fault-every", type=float, default=4.0, help="Seconds between faults.")
    p.add_argument("--baseline", type=float, default=60.0, help="Seconds whose samples' median is the baseline.")
    p.add_argument("--burst", type=int, default=150, help="Requests of an admission burst.")
    p.add_argument("--tls-threads", type=int, default=4, help="Threads doing TLS handshakes in the service.")
    p.add_argument("--request-timeout", type=float, default=180.0, help="A request unanswered this long is lost.")
    p.add_argument("--no-pip", action="store_true", help="Leave pip through the proxy out of the load.")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", default="", help="Write the service's log here.")
    p.add_argument("--json", default="", help="Write the full report (samples and examples too) here.")
    args = p.parse_args()
    if args.seconds <= 0 or args.concurrency < 1 or args.fault_every <= 0:
        p.error("--seconds, --concurrency and --fault-every must be positive")
    out = asyncio.run(soak(args))
    print_report(out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
