"""Network policies: none, allow (relayed destinations, names through the slot's /etc/hosts), host.

Every server here is one the test starts on the host's loopback (127.0.0.0/8); the one address
outside it (10.255.255.1) is only ever refused inside the run's namespace, where it has no route:
no packet leaves the machine.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from dojo.errors import InputError
from dojo.sandbox import AsyncSandbox, Limits, Program, Verdict
from dojo.sandbox import network as network_module
from dojo.sandbox.network import NetworkPolicy, parse_entry
from tests.sandbox.conftest import requires_isolation, root_only, rootless_only


class EchoServer:
    """A TCP server on a host loopback address: answers each line with 'pong <line>'."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((address, 0))
        self.sock.listen(16)
        self.address, self.port = address, self.sock.getsockname()[1]
        self.connections = 0
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                data = conn.recv(1024)
                conn.sendall(b"pong " + data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone would not)
        self.sock.close()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "the echo server's thread did not end"

    @property
    def entry(self) -> str:
        return f"{self.address}:{self.port}"


@pytest.fixture
def servers() -> Iterator[dict[str, EchoServer]]:
    made = {"allowed": EchoServer("127.0.0.2"), "denied": EchoServer("127.0.0.3"), "host": EchoServer("127.0.0.1")}
    yield made
    for server in made.values():
        server.close()


PROBE = """
import json, socket, sys
out = {}
for label, host, port in json.loads(sys.stdin.read()):
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(b"ping")
            out[label] = s.recv(100).decode()
    except socket.gaierror as e:
        out[label] = "no such name"
    except OSError as e:
        out[label] = type(e).__name__ + ":" + str(e.errno)
print(json.dumps(out))
"""


async def probe(sandbox: AsyncSandbox, limits: Limits, targets: list[tuple[str, str, int]]) -> dict[str, str]:
    result = await sandbox.run(Program(language="python", source=PROBE, stdin=json.dumps(targets)), limits)
    assert result.verdict is Verdict.ACCEPTED, result.stderr or result.sandbox_error
    return dict(json.loads(result.stdout))


def test_policies_parse_and_bad_ones_say_why() -> None:
    assert Limits().network.mode == "none"
    assert Limits(network=True).network.mode == "host" and Limits(network=False).network.mode == "none"
    policy = Limits(network=["db.internal:5432", "10.0.0.0/30:80", "PyPI.org"]).network
    assert policy.mode == "allow"
    assert [d.host for d in policy.destinations()] == ["db.internal", "10.0.0.0/30", "pypi.org"]
    assert parse_entry("pypi.org").ports == (80, 443)
    for bad, why in [
        ({"mode": "allow"}, "at least one destination"),
        ({"mode": "none", "allow": ["a:1"]}, "takes no 'allow' list"),
        (["10.0.0.0/16:80"], "at most 256"),
        (["10.0.0.1"], "needs a port"),
        (["db:99999"], "from 1 to 65535"),
        (["::1:80"], "only IPv4"),
        (["bad host!:80"], "is not HOST:PORT"),
        ({"mode": "everything"}, "mode"),
    ]:
        with pytest.raises((InputError, ValueError), match=why):
            Limits(network=bad)


@requires_isolation
@root_only
async def test_allow_reaches_listed_destinations_only(
    fast_sandbox: AsyncSandbox, servers: dict[str, EchoServer]
) -> None:
    allowed, denied, host = servers["allowed"], servers["denied"], servers["host"]
    limits = Limits(network=[allowed.entry])
    out = await probe(fast_sandbox, limits, [
        ("allowed", allowed.address, allowed.port),
        ("other port", allowed.address, denied.port),
        ("denied", denied.address, denied.port),
        ("host loopback", "127.0.0.1", host.port),
        ("outside", "10.255.255.1", 80),
    ])  # fmt: skip
    assert out["allowed"] == "pong ping"
    # refused at once, never a hanging connect (that would be "TimeoutError")
    assert out["other port"] == out["denied"] == out["host loopback"] == "ConnectionRefusedError:111"
    assert out["outside"] == "OSError:101"  # ENETUNREACH: no route, nothing sent
    assert allowed.connections == 1 and denied.connections == host.connections == 0
    # the same sandbox's runs without the policy still reach nothing
    plain = await probe(fast_sandbox, Limits(), [("allowed", allowed.address, allowed.port)])
    assert plain["allowed"] == "ConnectionRefusedError:111" and allowed.connections == 1


@requires_isolation
@root_only
async def test_allowed_names_resolve_in_the_run_and_no_other_does(
    fast_sandbox: AsyncSandbox, servers: dict[str, EchoServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names resolve on the host (here: a resolver that knows 'service.test'), and the run sees
    only them, through its slot's /etc/hosts."""
    allowed = servers["allowed"]
    real = socket.getaddrinfo

    def host_resolver(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "service.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (allowed.address, 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(network_module.socket, "getaddrinfo", host_resolver)
    limits = Limits(network=[f"service.test:{allowed.port}"])
    out = await probe(fast_sandbox, limits, [
        ("by name", "service.test", allowed.port), ("unknown name", "denied.test", 80), ("real name", "pypi.org", 443),
    ])  # fmt: skip
    assert out == {"by name": "pong ping", "unknown name": "no such name", "real name": "no such name"}
    with pytest.raises(InputError, match="does not resolve"):
        await fast_sandbox.run(Program(language="python", source="1"), Limits(network=["no-such-name.invalid:80"]))


HOSTILE = """
import ctypes, json, socket, sys
port = int(sys.argv[1])
out = {}
s = socket.socket()
try:
    s.bind(("127.0.0.2", port))  # take the relay's place
    out["bind"] = "bound"
except OSError as e:
    out["bind"] = e.errno
libc = ctypes.CDLL(None, use_errno=True)
out["hosts"] = open("/etc/hosts").read().count("\\n")
try:
    open("/etc/hosts", "a").write("127.0.0.3 service.test\\n")
except OSError as e:
    out["write hosts"] = e.errno
print(json.dumps(out))
"""


@requires_isolation
@root_only
async def test_a_run_cannot_take_over_or_rewrite_what_the_policy_set_up(
    fast_sandbox: AsyncSandbox, servers: dict[str, EchoServer]
) -> None:
    allowed = servers["allowed"]
    program = Program(language="python", source=HOSTILE, args=[str(allowed.port)])
    result = await fast_sandbox.run(program, Limits(network=[allowed.entry]))
    out = json.loads(result.stdout)
    assert out["bind"] == 98  # EADDRINUSE: the relay holds it
    assert out["write hosts"] == 30  # EROFS


@requires_isolation
@root_only
async def test_host_mode_still_opens_the_host_network(
    fast_sandbox: AsyncSandbox, servers: dict[str, EchoServer]
) -> None:
    host = servers["host"]
    out = await probe(fast_sandbox, Limits(network="host"), [("host loopback", "127.0.0.1", host.port)])
    assert out["host loopback"] == "pong ping"


@requires_isolation
@root_only
async def test_a_session_under_an_allow_policy(fast_sandbox: AsyncSandbox, servers: dict[str, EchoServer]) -> None:
    allowed = servers["allowed"]
    async with await fast_sandbox.open_session("python", Limits(network=[allowed.entry])) as session:
        code = f"import socket\ns = socket.create_connection(({allowed.address!r}, {allowed.port}), timeout=5)\n"
        code += "s.sendall(b'hi'); print(s.recv(10).decode())"
        result = await session.exec(code)
        assert result.stdout.strip() == "pong hi", result.stderr


@requires_isolation
@rootless_only
async def test_rootless_refuses_network_policies_clearly(fast_sandbox: AsyncSandbox) -> None:
    with pytest.raises(InputError, match="needs the sandbox to run as root"):
        await fast_sandbox.run(Program(language="python", source="1"), Limits(network=["127.0.0.2:80"]))


def test_policy_is_hashable_and_compact() -> None:
    policy = NetworkPolicy(mode="allow", allow=("a.test:1", "a.test:1"))
    assert policy.allow == ("a.test:1",) and bool(policy) and not bool(NetworkPolicy())
