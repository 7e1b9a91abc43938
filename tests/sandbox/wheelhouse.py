"""Real wheels and a real package index for the tests, made on the spot (nothing downloads).

``make_wheel`` writes a pure-Python wheel (PEP 427: the package's files, METADATA, WHEEL and a
RECORD with hashes); ``PackageIndex`` serves a directory of wheels as a PEP 503 simple index on
127.0.0.1, counting the requests it answers.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile
from pathlib import Path
from typing import Any


def make_wheel(directory: Path, name: str, version: str, files: dict[str, str], requires: tuple[str, ...] = ()) -> Path:
    """A wheel of ``name`` holding ``files`` (path inside the wheel -> text)."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    entries = {
        **files,
        f"{info}/METADATA": meta,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: dojo-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in entries.items():
            zf.writestr(path, text)
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def make_npm_package(directory: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """An npm tarball (``package/package.json`` and ``files``) as ``<name>-<version>.tgz``."""
    entries = {"package.json": json.dumps({"name": name, "version": version, "main": "index.js"}), **files}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{version}.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for member, text in entries.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{member}")
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return path


class PackageIndex:
    """A PEP 503 simple index of ``wheels`` on 127.0.0.1 (``url`` ends in ``/simple``), and an npm
    registry of the ``.tgz`` files beside them (``npm_url``)."""

    def __init__(self, wheels: Path) -> None:
        self.wheels = wheels
        self.requests: list[str] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.requests.append(self.path)
                parts = [p for p in self.path.split("?")[0].split("/") if p]
                body: bytes | None = None
                content_type = "text/html"
                if parts[:1] == ["simple"] and len(parts) == 2:
                    project = parts[1].lower().replace("_", "-")
                    links = [
                        f'<a href="/files/{w.name}">{w.name}</a>'
                        for w in sorted(index.wheels.glob("*.whl"))
                        if w.name.split("-")[0].lower().replace("_", "-") == project
                    ]
                    body = ("<html><body>" + "".join(links) + "</body></html>").encode() if links else None
                elif parts[:1] == ["files"] and len(parts) == 2 and (index.wheels / parts[1]).is_file():
                    body = (index.wheels / parts[1]).read_bytes()
                    content_type = "application/octet-stream"
                elif parts[:1] == ["npm"] and len(parts) == 2:
                    body = index.npm_document(parts[1])
                    content_type = "application/json"
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    @property
    def npm_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/npm"

    def npm_document(self, name: str) -> bytes | None:
        versions = {}
        for tgz in sorted(self.wheels.glob(f"{name}-*.tgz")):
            version = tgz.name[len(name) + 1 : -len(".tgz")]
            shasum = hashlib.sha1(tgz.read_bytes()).hexdigest()
            tarball = f"http://127.0.0.1:{self.server.server_address[1]}/files/{tgz.name}"
            versions[version] = {"name": name, "version": version, "dist": {"tarball": tarball, "shasum": shasum}}
        if not versions:
            return None
        latest = sorted(versions)[-1]
        return json.dumps({"name": name, "dist-tags": {"latest": latest}, "versions": versions}).encode()

    def __enter__(self) -> PackageIndex:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
