"""Sessions over HTTP: state persists between execs, files in and out, expiry, the cap."""

from __future__ import annotations

import time

import httpx

from dojo.client import SandboxClient, ServiceError
from dojo.service import ServiceSettings
from tests.service.conftest import LiveServer, running_server


def test_python_variables_persist(live: LiveServer) -> None:
    with SandboxClient(live.url) as client, client.open_session("python") as s:
        assert s.exec("import math\nx = 21").verdict == "Accepted"
        assert s.exec("print(x * 2)").stdout == "42\n"
        assert s.exec("math.sqrt(x * x)").stdout == "21.0\n"  # a last bare expression is echoed
        err = s.exec("undefined_name")
        assert err.verdict == "RuntimeError" and "NameError" in err.stderr
        assert s.exec("x").stdout == "21\n"  # an exception does not lose the state


def test_bash_cwd_and_files_persist(live: LiveServer) -> None:
    with SandboxClient(live.url) as client, client.open_session("bash") as s:
        s.exec("mkdir -p work/sub && cd work/sub && echo data > f.txt")
        r = s.exec("pwd; cat f.txt")
        assert r.stdout == "/box/work/sub\ndata\n"


def test_files_put_and_get(live: LiveServer, http: httpx.Client) -> None:
    sid = http.post("/v1/sessions", json={"language": "python"}).json()["id"]
    assert http.put(f"/v1/sessions/{sid}/files/dir/in.bin", content=b"\x00\x01binary").status_code == 200
    r = http.post(
        f"/v1/sessions/{sid}/exec",
        json={"code": "d = open('dir/in.bin','rb').read()\nopen('o.txt','w').write(str(len(d)))"},
    )
    assert r.json()["verdict"] == "Accepted"
    assert http.get(f"/v1/sessions/{sid}/files/o.txt").content == b"8"
    assert http.get(f"/v1/sessions/{sid}/files/missing").status_code == 404
    assert http.get(f"/v1/sessions/{sid}/files/../../etc/passwd").status_code in (400, 404, 422)
    assert http.delete(f"/v1/sessions/{sid}").status_code == 204
    assert http.post(f"/v1/sessions/{sid}/exec", json={"code": "1"}).status_code == 404


def test_sessions_expire_and_the_cap_answers_429() -> None:
    # a TTL well past the time the two sessions take to open on a loaded machine: the cap is checked
    # while both are live
    settings = ServiceSettings(pool_size=1, max_sessions=2, session_ttl=2.0)
    with running_server(settings) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        a = http.post("/v1/sessions", json={"language": "python"}).json()["id"]
        http.post("/v1/sessions", json={"language": "python"})
        full = http.post("/v1/sessions", json={"language": "python"})
        assert full.status_code == 429 and "Retry-After" in full.headers
        assert "maximum of 2 live sessions" in full.json()["error"]
        deadline = time.monotonic() + 10
        while http.get("/healthz").json()["live_sessions"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert http.get("/healthz").json()["live_sessions"] == 0
        assert http.post(f"/v1/sessions/{a}/exec", json={"code": "1"}).status_code == 404
        assert http.post("/v1/sessions", json={"language": "python"}).status_code == 201


def test_unknown_session_language_is_400(live: LiveServer) -> None:
    with SandboxClient(live.url) as client:
        try:
            client.open_session("cobol")
        except ServiceError as e:
            assert e.status_code == 400 and "unknown language" in e.message
        else:  # pragma: no cover
            raise AssertionError("expected a 400")
