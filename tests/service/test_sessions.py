"""Sessions over HTTP: state persists between execs, files in and out, expiry, the cap."""

from __future__ import annotations

import threading
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


def test_a_fifo_at_a_put_path_is_a_400_and_the_session_goes_on(live: LiveServer, http: httpx.Client) -> None:
    """A FIFO the session's code made at a path: the PUT neither waits on it (the slot would stop
    answering and the session die as an infrastructure failure) nor writes through a symlink; it is
    refused at once, and the session, its files and its variables, goes on."""
    sid = http.post("/v1/sessions", json={"language": "python"}).json()["id"]
    try:
        assert http.put(f"/v1/sessions/{sid}/files/keep.txt", content=b"important work").status_code == 200
        code = "import os\nx = 41\nos.mkfifo('out.txt')\nos.symlink('keep.txt', 'link.txt')"
        assert http.post(f"/v1/sessions/{sid}/exec", json={"code": code}).json()["verdict"] == "Accepted"
        start = time.monotonic()
        fifo = http.put(f"/v1/sessions/{sid}/files/out.txt", content=b"x", timeout=20)
        assert fifo.status_code == 400 and time.monotonic() - start < 10
        assert "'out.txt' is a FIFO (named pipe), not a regular file" in fifo.json()["error"]
        link = http.put(f"/v1/sessions/{sid}/files/link.txt", content=b"x", timeout=20)
        assert link.status_code == 400 and "'link.txt' is a symlink" in link.json()["error"]
        assert http.get(f"/v1/sessions/{sid}/files/keep.txt").content == b"important work"
        after = http.post(f"/v1/sessions/{sid}/exec", json={"code": "print(x + 1)"}).json()
        assert after["stdout"] == "42\n" and not after["session_restarted"]
        assert http.put(f"/v1/sessions/{sid}/files/new.txt", content=b"ok").status_code == 200
    finally:
        http.delete(f"/v1/sessions/{sid}")


def test_a_call_on_a_busy_session_is_a_409(live: LiveServer, http: httpx.Client) -> None:
    """A session takes one request at a time: another call meanwhile is a 409 Conflict that says to
    retry once the first has ended (not a 400 blaming the call); after it, the session serves again."""
    sid = http.post("/v1/sessions", json={"language": "python"}).json()["id"]
    slow: dict[str, httpx.Response] = {}

    def sleep_in_session() -> None:
        with httpx.Client(base_url=live.url, timeout=60) as other:
            code = "import time\ntime.sleep(4)\nprint('slept')"
            for _ in range(200):  # (the test's own PUTs may hold the session as the exec arrives: a 409)
                slow["r"] = other.post(f"/v1/sessions/{sid}/exec", json={"code": code})
                if slow["r"].status_code != 409:
                    return
                time.sleep(0.01)

    thread = threading.Thread(target=sleep_in_session, daemon=True)
    thread.start()
    try:
        busy = None
        deadline = time.monotonic() + 20
        while busy is None and thread.is_alive() and time.monotonic() < deadline:
            r = http.put(f"/v1/sessions/{sid}/files/f.txt", content=b"x")
            if r.status_code == 409:
                busy = r
            else:
                time.sleep(0.05)
        assert busy is not None, "no call saw the session busy"
        assert "busy with another request" in busy.json()["error"] and "Retry-After" in busy.headers
        meanwhile = http.post(f"/v1/sessions/{sid}/exec", json={"code": "1"})
        if thread.is_alive():  # (the first exec may have ended on a slow machine)
            assert meanwhile.status_code == 409 and "retry once that one has ended" in meanwhile.json()["error"]
    finally:
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert slow["r"].status_code == 200 and slow["r"].json()["stdout"] == "slept\n"
    assert http.post(f"/v1/sessions/{sid}/exec", json={"code": "print('free')"}).json()["stdout"] == "free\n"
    assert http.delete(f"/v1/sessions/{sid}").status_code == 204


def test_a_session_exec_has_the_answer_bound_of_a_run(live: LiveServer, http: httpx.Client) -> None:
    # an exec printing 32 MiB of NUL on each stream was a 384 MiB answer, unbounded and uncounted
    big = {"output": 64 << 20}  # (each stream's 64 MiB of control bytes: 768 MiB of JSON, past the 512 allowed)
    r = http.post("/v1/sessions", json={"language": "python", "limits": big})
    assert r.status_code == 400 and "lower limits.output" in r.json()["error"], r.text
    sid = http.post("/v1/sessions", json={"language": "python"}).json()["id"]
    try:
        r = http.post(f"/v1/sessions/{sid}/exec", json={"code": "print(1)", "limits": big})
        assert r.status_code == 400 and "lower limits.output" in r.json()["error"], r.text
        assert http.post(f"/v1/sessions/{sid}/exec", json={"code": "print(2)"}).json()["stdout"] == "2\n"
    finally:
        http.delete(f"/v1/sessions/{sid}")


def test_a_session_has_the_disk_it_asked_for(live: LiveServer, http: httpx.Client) -> None:
    # its work dir was 64 MiB whatever limits.disk said; and a full one's PUT blamed a symlink
    sid = http.post("/v1/sessions", json={"language": "python", "limits": {"disk": 2 << 20}}).json()["id"]
    try:
        wrote = http.post(f"/v1/sessions/{sid}/exec", json={"code": "open('big', 'wb').write(b'x' * (3 << 20))"})
        assert wrote.json()["verdict"] == "RuntimeError" and "No space left" in wrote.json()["stderr"], wrote.text
        assert http.post(f"/v1/sessions/{sid}/exec", json={"code": "import os\nos.remove('big')"}).status_code == 200
        assert http.put(f"/v1/sessions/{sid}/files/keep.txt", content=b"abc").status_code == 200
        r = http.put(f"/v1/sessions/{sid}/files/keep.txt", content=b"y" * (3 << 20))
        assert r.status_code == 400 and "work dir is full" in r.json()["error"], r.text
        assert http.get(f"/v1/sessions/{sid}/files/keep.txt").content == b"abc"  # (truncated first, it was lost)
        assert http.post(f"/v1/sessions/{sid}/exec", json={"code": "print(3)"}).json()["stdout"] == "3\n"
    finally:
        http.delete(f"/v1/sessions/{sid}")
