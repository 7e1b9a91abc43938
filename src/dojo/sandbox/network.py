"""What a run may reach on the network: ``none`` (the default: a private loopback only), ``allow``
(listed destinations only), or ``host`` (the host's whole network; operator-enabled).

    Limits(network={"mode": "allow", "allow": ["db.internal:5432", "10.0.0.0/30:80", "pypi.org"]})

``"packages"`` is ``allow`` with only the sandbox's package proxy (``dojo.sandbox.packages``):
``pip install`` and ``npm install`` work, nothing else is reachable.

``allow`` entries are ``HOST:PORT``, where HOST is a DNS name, an IPv4 address or a small CIDR
(at most 256 addresses), or a bare DNS name (ports 80 and 443). Names resolve on the host, once,
when the policy's slots start.

How ``allow`` is enforced (``NetworkRelay``): a run's network namespace still has nothing but its
loopback device. For each allowed address and port, the host opens a listening socket *inside*
the slot's namespace (a host thread enters it for that one ``socket()``/``bind()``), with the
address added to the slot's loopback, and relays each connection it accepts to that one
destination from the host's own namespace. The slot's ``/etc/hosts`` maps each allowed name to its
addresses and its ``/etc/resolv.conf`` names no server, so allowed names resolve, others fail at
once, a denied address has no route (refused at once, nothing leaves the machine), and a run
cannot choose where a relay connects: each listener knows only its own destination. TCP only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ipaddress
import logging
import os
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dojo.errors import InputError

log = logging.getLogger(__name__)

NetworkMode = Literal["none", "allow", "host"]
MAX_CIDR_ADDRESSES = 256
MAX_ENTRIES = 64
DEFAULT_PORTS = (80, 443)  # a bare name: HTTP and HTTPS
NAME = r"[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*"


@dataclass(frozen=True)
class Destination:
    """One parsed ``allow`` entry."""

    host: str  # a name, an IPv4 address, or a CIDR
    ports: tuple[int, ...]

    @property
    def is_name(self) -> bool:
        try:
            ipaddress.ip_network(self.host, strict=False)
        except ValueError:
            return True
        return False


def parse_entry(entry: str) -> Destination:
    """``HOST:PORT`` (a name, an IPv4 address or a CIDR) or a bare name; InputError otherwise."""
    import re

    text = entry.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = text, ""
    if port_text:
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise InputError(f"network allow entry {entry!r}: the port must be a number from 1 to 65535")
        ports: tuple[int, ...] = (int(port_text),)
    else:
        ports = DEFAULT_PORTS
    try:
        network = ipaddress.ip_network(host, strict=False)
    except ValueError:
        network = None
    if network is not None:
        if network.version != 4:
            raise InputError(f"network allow entry {entry!r}: only IPv4 destinations are supported")
        if network.num_addresses > MAX_CIDR_ADDRESSES:
            raise InputError(
                f"network allow entry {entry!r}: a CIDR may hold at most {MAX_CIDR_ADDRESSES} addresses "
                f"(this one has {network.num_addresses})"
            )
        if not port_text:
            raise InputError(f"network allow entry {entry!r}: an address or CIDR needs a port (ADDRESS:PORT)")
        return Destination(str(network) if network.num_addresses > 1 else str(network.network_address), ports)
    if not re.fullmatch(NAME, host) or len(host) > 253:
        raise InputError(
            f"network allow entry {entry!r} is not HOST:PORT, a CIDR:PORT or a DNS name (e.g. db.internal:5432)"
        )
    return Destination(host.lower(), ports)


class NetworkPolicy(BaseModel):
    """A run's network: ``none``, ``allow`` (``allow`` lists the destinations) or ``host``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: NetworkMode = Field("none", description="none: loopback only; allow: listed destinations; host: all.")
    allow: tuple[str, ...] = Field(
        default=(),
        max_length=MAX_ENTRIES,
        description="HOST:PORT, CIDR:PORT (<= 256 addresses) or a DNS name (ports 80, 443); mode allow only.",
    )
    packages: bool = Field(
        False, description="Mode allow: also reach the sandbox's package proxy (pip and npm point at it)."
    )

    @field_validator("allow")
    @classmethod
    def _entries(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for entry in v:
            parse_entry(entry)
        return tuple(dict.fromkeys(e.strip() for e in v))

    @model_validator(mode="after")
    def _mode_matches(self) -> NetworkPolicy:
        if self.mode == "allow" and not (self.allow or self.packages):
            raise InputError("network mode 'allow' needs at least one destination in 'allow' (or packages: true)")
        if self.mode != "allow" and (self.allow or self.packages):
            raise InputError(f"network mode {self.mode!r} takes no 'allow' list or packages (use mode 'allow')")
        return self

    @classmethod
    def coerce(cls, value: Any) -> Any:
        """Accept the older boolean (``True`` = host, ``False`` = none), a mode, ``"packages"`` (the
        package proxy only), or a list of entries."""
        if isinstance(value, bool):
            return {"mode": "host" if value else "none"}
        if value == "packages":
            return {"mode": "allow", "packages": True}
        if isinstance(value, str):
            return {"mode": value}
        if isinstance(value, list | tuple):
            return {"mode": "allow", "allow": tuple(value)}
        return value

    def destinations(self) -> list[Destination]:
        return [parse_entry(e) for e in self.allow]

    def __bool__(self) -> bool:  # a policy that reaches anything beyond the run's own loopback
        return self.mode != "none"


@dataclass(frozen=True)
class Endpoint:
    """An address and port a run may connect to, the names that resolve to the address, and where
    the host connects for it (the same address and port unless ``target`` says otherwise)."""

    address: str
    port: int
    names: tuple[str, ...] = ()
    target: tuple[str, int] | None = None


def resolve(policy: NetworkPolicy) -> list[Endpoint]:
    """Every (address, port) the policy allows, names resolved on the host (IPv4). InputError
    names an entry that does not resolve."""
    names: dict[str, set[str]] = {}
    pairs: set[tuple[str, int]] = set()
    for dest in policy.destinations():
        if dest.is_name:
            try:
                infos = socket.getaddrinfo(dest.host, None, socket.AF_INET, socket.SOCK_STREAM)
            except socket.gaierror as e:
                raise InputError(f"network allow entry {dest.host!r} does not resolve on this host: {e}") from e
            addresses = sorted({str(info[4][0]) for info in infos})
            for address in addresses:
                names.setdefault(address, set()).add(dest.host)
        else:
            addresses = [str(a) for a in ipaddress.ip_network(dest.host, strict=False)]
        pairs |= {(a, p) for a in addresses for p in dest.ports}
    return [Endpoint(a, p, tuple(sorted(names.get(a, ())))) for a, p in sorted(pairs)]


def hosts_file(endpoints: list[Endpoint]) -> str:
    """The slot's /etc/hosts: localhost, and each allowed name with its addresses."""
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback", "127.0.1.1 dojo"]
    seen: set[tuple[str, str]] = set()
    for endpoint in endpoints:
        for name in endpoint.names:
            if (endpoint.address, name) not in seen:
                seen.add((endpoint.address, name))
                lines.append(f"{endpoint.address} {name}")
    return "\n".join(lines) + "\n"


RESOLV_CONF = "# dojo: no name server; names resolve only through /etc/hosts\noptions attempts:1 timeout:1\n"

# -- the relay --------------------------------------------------------------------------------

CLONE_NEWNET = 0x40000000
RTM_NEWADDR = 20
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 1, 4, 0x200, 0x400
IFA_ADDRESS, IFA_LOCAL = 1, 2
NLMSG_ERROR = 2
LOOPBACK_INDEX = 1  # "lo" is always the first interface of a namespace
RT_SCOPE_HOST = 254


def add_loopback_address(address: str) -> None:
    """``ip addr add ADDRESS/32 dev lo`` in the calling thread's network namespace (netlink)."""
    packed = socket.inet_aton(address)
    attrs = b"".join(struct.pack("=HH", 8, kind) + packed for kind in (IFA_LOCAL, IFA_ADDRESS))
    body = struct.pack("=BBBBI", socket.AF_INET, 32, 0, RT_SCOPE_HOST, LOOPBACK_INDEX) + attrs
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    message = struct.pack("=IHHII", 16 + len(body), RTM_NEWADDR, flags, 1, 0) + body
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as nl:
        nl.bind((0, 0))
        nl.send(message)
        reply = nl.recv(65536)
    kind = struct.unpack_from("=H", reply, 4)[0]
    if kind == NLMSG_ERROR:
        error = -struct.unpack_from("=i", reply, 16)[0]
        if error and error != 17:  # EEXIST: already there
            raise OSError(error, f"adding {address} to the slot's loopback: {os.strerror(error)}")


def listen_in_namespace(pid: int, endpoints: list[Endpoint]) -> list[socket.socket]:
    """Listening sockets for ``endpoints`` inside the network namespace of process ``pid``. A
    thread of its own enters the namespace, so no other thread of this process changes network."""
    result: dict[str, Any] = {}
    libc = ctypes.CDLL(None, use_errno=True)

    def work() -> None:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        sockets: list[socket.socket] = []
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"entering the slot's network namespace: {os.strerror(err)}")
            try:
                for address in sorted({e.address for e in endpoints}):
                    if not address.startswith("127."):
                        add_loopback_address(address)
                for endpoint in endpoints:
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind((endpoint.address, endpoint.port))
                    sock.listen(128)
                    sock.setblocking(False)
                    sockets.append(sock)
            finally:
                if libc.setns(own, CLONE_NEWNET) != 0:  # pragma: no cover - the thread ends anyway
                    log.error("could not leave a slot's network namespace")
            result["sockets"] = sockets
        except BaseException as e:
            for sock in sockets:
                sock.close()
            result["error"] = e
        finally:
            os.close(own)
            os.close(target)

    thread = threading.Thread(target=work, name=f"dojo-netns-{pid}")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return list(result["sockets"])


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


@dataclass
class NetworkRelay:
    """The host side of an ``allow`` policy for one pool: per slot, the listeners in its network
    namespace and the tasks relaying their connections. ``connections`` counts accepted ones."""

    endpoints: list[Endpoint]
    connect_timeout: float = 10.0
    connections: int = 0
    _servers: dict[int, list[asyncio.Server]] = field(default_factory=dict)

    async def attach(self, pid: int) -> None:
        sockets = await asyncio.to_thread(listen_in_namespace, pid, self.endpoints)
        servers = []
        for sock, endpoint in zip(sockets, self.endpoints, strict=True):
            servers.append(await asyncio.start_server(self._handler(endpoint), sock=sock))
        self._servers[pid] = servers

    def detach(self, pid: int) -> None:
        for server in self._servers.pop(pid, []):
            server.close()

    def close(self) -> None:
        for pid in list(self._servers):
            self.detach(pid)

    def _handler(self, endpoint: Endpoint) -> Any:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                host, port = endpoint.target or (endpoint.address, endpoint.port)
                up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), self.connect_timeout)
            except (OSError, TimeoutError):
                writer.close()  # the run sees its connection closed: the destination did not answer
                return
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                for w in (writer, up_writer):
                    with contextlib.suppress(Exception):
                        w.close()

        return handle
