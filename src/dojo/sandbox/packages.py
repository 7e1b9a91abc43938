"""The package proxy: what ``pip install`` and ``npm install`` inside a run reach instead of the
open network.

    proxy = PackageProxy(pypi="https://pypi.org/simple", npm="https://registry.npmjs.org")
    async with AsyncSandbox(packages=proxy) as sandbox:
        await sandbox.run(Program(language="bash", source="pip install --target /box/lib requests"),
                          Limits(network="packages", wall_time=120))

It serves, on the host's loopback:

- ``/simple/<project>/``: the upstream index's page for the project (PEP 503), every file link
  rewritten to ``/files/<key>/<name>`` on the proxy;
- ``/files/<key>/<name>``: the file, fetched from upstream once and then served from the disk cache
  (``hits`` and ``misses`` count them);
- ``/npm/<package>``: the npm registry's document, every ``dist.tarball`` rewritten the same way.

A run with the network policy ``packages`` reaches only this proxy (through the policy's relay,
as ``packages.dojo``), with ``PIP_INDEX_URL`` / ``npm_config_registry`` pointing at it. The proxy
fetches only from its two configured upstreams and only URLs those upstreams listed: a run cannot
make it fetch anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from dojo.sandbox.home import dojo_home

log = logging.getLogger(__name__)

PROJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
NPM_NAME = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]{0,213}$")
KEY = re.compile(r"^[0-9a-f]{32}$")
FILE_NAME = re.compile(r"^[A-Za-z0-9._+-]{1,255}$")
PAGE_TTL_S = 300.0
PROXY_HOST = "packages.dojo"  # the proxy's name inside a run
PROXY_ADDRESS = "127.77.0.1"  # and its address there (the relay listens on it, port 80)
PROXY_PORT = 80


def default_cache() -> Path:
    return dojo_home() / "packages"


def run_environment() -> dict[str, str]:
    """What a run under the ``packages`` policy gets in its environment: pip and npm pointed at
    the proxy (plain HTTP on the slot's own loopback: nothing travels beyond the machine)."""
    base = f"http://{PROXY_HOST}"
    return {
        "PIP_INDEX_URL": f"{base}/simple/",
        "PIP_TRUSTED_HOST": PROXY_HOST,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "npm_config_registry": f"{base}/npm/",
        "npm_config_audit": "false",
        "npm_config_fund": "false",
        "npm_config_update_notifier": "false",
        "npm_config_cache": "/tmp/.npm",
    }


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str]] = []
        self._current: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._current = {k: v or "" for k, v in attrs}
            self._current["#text"] = ""

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self._current["#text"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._current is not None:
            self.links.append(self._current)
            self._current = None


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass
class PackageProxy:
    """A caching proxy of one Python package index and one npm registry (see the module's doc)."""

    pypi: str | None = "https://pypi.org/simple"
    npm: str | None = "https://registry.npmjs.org"
    cache: Path = field(default_factory=default_cache)
    host: str = "127.0.0.1"
    hits: int = 0
    misses: int = 0
    _urls: dict[str, str] = field(default_factory=dict)  # key -> upstream URL it stands for
    _pages: dict[str, tuple[float, bytes, str]] = field(default_factory=dict)
    _server: asyncio.Server | None = None
    _client: httpx.AsyncClient | None = None
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the package proxy is not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> PackageProxy:
        if self._server is None:
            (self.cache / "files").mkdir(parents=True, exist_ok=True)
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=10.0), follow_redirects=True)
            self._server = await asyncio.start_server(self._serve, self.host, 0)
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- HTTP ----------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readline()
                if not request:
                    return
                headers: dict[str, str] = {}
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                method, _, rest = request.decode("latin-1").partition(" ")
                path = rest.rsplit(" ", 1)[0].split("?", 1)[0]
                status, body, content_type = await self._answer(method, path)
                head = (
                    f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                    f"Connection: {'close' if headers.get('connection') == 'close' else 'keep-alive'}\r\n\r\n"
                )
                writer.write(head.encode() + (body if method != "HEAD" else b""))
                await writer.drain()
                if headers.get("connection") == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _answer(self, method: str, path: str) -> tuple[str, bytes, str]:
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", b"only GET\n", "text/plain"
        parts = [p for p in path.split("/") if p]
        try:
            if parts[:1] == ["simple"] and len(parts) == 2 and self.pypi and PROJECT.match(parts[1]):
                return await self._simple_page(parts[1])
            if parts[:1] == ["files"] and len(parts) == 3 and KEY.match(parts[1]) and FILE_NAME.match(parts[2]):
                return await self._file(parts[1], parts[2])
            if parts[:1] == ["npm"] and 2 <= len(parts) <= 3 and self.npm:
                name = "/".join(parts[1:]).replace("%2f", "/").replace("%2F", "/")
                if NPM_NAME.match(name):
                    return await self._npm_document(name)
        except httpx.HTTPError as e:
            log.warning("package proxy: upstream failed for %s: %s", path, e)
            return "502 Bad Gateway", f"upstream failed: {type(e).__name__}\n".encode(), "text/plain"
        return "404 Not Found", b"not found\n", "text/plain"

    def _key(self, url: str) -> str:
        key = hashlib.sha256(url.encode()).hexdigest()[:32]
        self._urls[key] = url
        return key

    async def _fetch(self, url: str, accept: str | None = None) -> httpx.Response:
        assert self._client is not None
        headers = {"Accept": accept} if accept else {}
        return await self._client.get(url, headers=headers)

    async def _simple_page(self, project: str) -> tuple[str, bytes, str]:
        normalized = re.sub(r"[-_.]+", "-", project).lower()
        cached = self._pages.get(f"pypi:{normalized}")
        loop = asyncio.get_running_loop()
        if cached and loop.time() - cached[0] < PAGE_TTL_S:
            return "200 OK", cached[1], cached[2]
        assert self.pypi is not None
        page_url = f"{self.pypi.rstrip('/')}/{normalized}/"
        response = await self._fetch(page_url, accept="text/html")
        if response.status_code == 404:
            return "404 Not Found", b"no such project\n", "text/plain"
        response.raise_for_status()
        parser = _Links()
        parser.feed(response.text)
        rows = []
        for link in parser.links:
            href = link.get("href", "")
            if not href:
                continue
            absolute = urljoin(str(response.url), href)
            target, _, fragment = absolute.partition("#")
            name = urlsplit(target).path.rsplit("/", 1)[-1]
            if not FILE_NAME.match(name):
                continue
            kept = {k: v for k, v in link.items() if k.startswith("data-") and k != "data-dist-info-metadata"}
            attrs = "".join(f' {k}="{_escape(v)}"' for k, v in kept.items())
            local = f"/files/{self._key(target)}/{name}" + (f"#{fragment}" if fragment else "")
            rows.append(f'<a href="{_escape(local)}"{attrs}>{_escape(name)}</a><br/>')
        body = ("<!DOCTYPE html><html><body>\n" + "\n".join(rows) + "\n</body></html>\n").encode()
        self._pages[f"pypi:{normalized}"] = (loop.time(), body, "text/html")
        return "200 OK", body, "text/html"

    async def _npm_document(self, name: str) -> tuple[str, bytes, str]:
        cached = self._pages.get(f"npm:{name}")
        loop = asyncio.get_running_loop()
        if cached and loop.time() - cached[0] < PAGE_TTL_S:
            return "200 OK", cached[1], cached[2]
        assert self.npm is not None
        response = await self._fetch(f"{self.npm.rstrip('/')}/{name.replace('/', '%2f')}", accept="application/json")
        if response.status_code == 404:
            return "404 Not Found", b'{"error": "not found"}', "application/json"
        response.raise_for_status()
        document: dict[str, Any] = response.json()
        for version in (document.get("versions") or {}).values():
            dist = version.get("dist") if isinstance(version, dict) else None
            if isinstance(dist, dict) and isinstance(dist.get("tarball"), str):
                tarball = urljoin(str(response.url), dist["tarball"])
                file_name = urlsplit(tarball).path.rsplit("/", 1)[-1]
                if FILE_NAME.match(file_name):
                    dist["tarball"] = f"http://{PROXY_HOST}/files/{self._key(tarball)}/{file_name}"
        body = json.dumps(document).encode()
        self._pages[f"npm:{name}"] = (loop.time(), body, "application/json")
        return "200 OK", body, "application/json"

    async def _file(self, key: str, name: str) -> tuple[str, bytes, str]:
        path = self.cache / "files" / key / name
        if path.is_file():
            self.hits += 1
            return "200 OK", await asyncio.to_thread(path.read_bytes), "application/octet-stream"
        url = self._urls.get(key)
        if url is None:  # only what an upstream page listed, in this proxy's life or a cached one
            return "404 Not Found", b"unknown file; fetch its index page first\n", "text/plain"
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if path.is_file():
                self.hits += 1
                return "200 OK", await asyncio.to_thread(path.read_bytes), "application/octet-stream"
            response = await self._fetch(url)
            response.raise_for_status()
            self.misses += 1
            data = response.content
            await asyncio.to_thread(_write_file, path, data)
        return "200 OK", data, "application/octet-stream"


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    tmp.write_bytes(data)
    tmp.replace(path)
