"""A batch is bounded: in its answer's size, in time, and by its client's presence; and a request
whose limits allow an answer past the service's bound is refused before it runs."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator

import httpx
import pytest

from dojo.service import ServiceSettings
from dojo.service.schemas import BatchResponse
from tests.service.conftest import LiveServer, running_server

NULS = "import sys\nsys.stdout.write('\\0' * 1_000_000)"  # 6 MB of JSON: each NUL is \u0000


@pytest.fixture(scope="module")
def bounded() -> Iterator[LiveServer]:
    settings = ServiceSettings(pool_size=2, queue=8, max_answer_bytes=16 << 20)
    with running_server(settings) as srv:
        yield srv


def test_a_batch_stops_at_the_answers_size_and_says_so(bounded: LiveServer) -> None:
    # 16 cases of 6 MB each had made a 96 MB answer (1,024 of them: ~6 GB, built whole in memory)
    body = {"program": {"language": "python", "source": NULS}, "cases": [{"stdin": ""}] * 16,
            "limits": {"output": 1 << 20}, "stop_on_first_failure": True}  # fmt: skip
    r = httpx.post(f"{bounded.url}/v1/batch", json=body, timeout=60)
    assert r.status_code == 200 and len(r.content) < 16 << 20, (r.status_code, len(r.content))
    answer = BatchResponse.model_validate_json(r.content)
    assert answer.stopped == "answer_size" and answer.total == 16
    ran = [item for item in answer.results if item.result is not None]
    assert len(ran) == 2 and all(item.result.stdout == "\0" * 1_000_000 for item in ran if item.result)
    assert [item.index for item in answer.results] == list(range(16))
    assert all(item.skipped for item in answer.results[2:]) and answer.accepted == 2


def test_limits_that_allow_a_bigger_answer_are_refused_before_the_run(bounded: LiveServer) -> None:
    body = {"program": {"language": "python", "source": NULS}, "limits": {"output": 2 << 20}}
    r = httpx.post(f"{bounded.url}/v1/run", json=body, timeout=60)
    assert r.status_code == 400 and "lower limits.output" in r.json()["error"], r.text
    body = {"program": {"language": "python", "source": "print(1)"}, "cases": [{"limits": {"output": 2 << 20}}]}
    assert httpx.post(f"{bounded.url}/v1/batch", json=body, timeout=60).status_code == 400
    many = {"program": {"language": "python", "source": "print(1)", "fetch": [f"f{i}" for i in range(8)]}}
    r = httpx.post(f"{bounded.url}/v1/run", json=many, timeout=60)  # 8 files of 16 MiB in base64
    assert r.status_code == 400 and "fetch fewer files" in r.json()["error"], r.text
    ok = httpx.post(f"{bounded.url}/v1/run", json={"program": {"language": "python", "source": "print(1)"}})
    assert ok.status_code == 200 and ok.json()["stdout"] == "1\n"


def test_a_batch_past_its_time_skips_the_cases_left() -> None:
    body = {"program": {"language": "python", "source": "import time\ntime.sleep(0.6)\nprint('done')"},
            "cases": [{"stdin": ""}] * 8}  # fmt: skip
    with running_server(ServiceSettings(pool_size=2, queue=8, max_batch_seconds=1.0)) as srv:
        answer = BatchResponse.model_validate_json(httpx.post(f"{srv.url}/v1/batch", json=body, timeout=60).content)
    ran = [item for item in answer.results if item.result is not None]
    assert answer.stopped == "deadline" and 2 <= len(ran) <= 6, answer.model_dump(exclude={"results"})
    assert all(item.result.stdout == "done\n" for item in ran if item.result) and answer.accepted == len(ran)


def test_an_abandoned_batch_starts_no_more_cases(bounded: LiveServer) -> None:
    # 12 cases of 0.9 s on 2 slots: ~5.4 s; its client gone after 0.5 s, it had held both slots to the end
    body = {"program": {"language": "python", "source": "import time\ntime.sleep(0.9)"}, "cases": [{"stdin": ""}] * 12}
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{bounded.url}/v1/batch", json=body, timeout=0.5)
    gone = time.monotonic()
    while httpx.get(f"{bounded.url}/healthz").json()["admitted"] > 0 and time.monotonic() - gone < 30:
        time.sleep(0.05)
    assert time.monotonic() - gone < 3.0  # the two cases under way end; no other starts


def test_a_case_that_raises_stops_the_batch_and_no_run_outlives_its_answer(bounded: LiveServer) -> None:
    # a case naming a missing environment was a 400 at once, while the batch's other worker went on
    # starting its cases, on slots admission no longer counted: a plain run then waited for them
    nap = {"language": "python", "source": "import time\ntime.sleep(1)"}
    body = {"programs": [nap, {"language": "python", "source": "", "environment": "no-such-env"}, *[nap] * 6]}
    r = httpx.post(f"{bounded.url}/v1/batch", json=body, timeout=60)
    assert r.status_code == 400 and "no-such-env" in r.json()["error"], r.text
    assert httpx.get(f"{bounded.url}/healthz").json()["admitted"] == 0
    start = time.monotonic()
    quick = httpx.post(f"{bounded.url}/v1/run", json={"program": {"language": "python", "source": "print(1)"}})
    assert quick.json()["stdout"] == "1\n" and time.monotonic() - start < 2.5  # (six orphans: ~6 s)


def test_answers_stay_counted_until_their_client_has_them() -> None:
    # two answers of ~12 MB that their clients do not read hold the 32 MiB for answers in the making:
    # a third request is refused until they are read (given back as the handler returned, 24 such
    # answers had sat in the server's buffers: 420 MB against a bound of 64)
    import json
    import socket

    request = {"program": {"language": "python", "source": "import sys\nsys.stdout.write('\\0' * 1_000_000)\n"
                           "sys.stderr.write('\\0' * 1_000_000)"}}  # fmt: skip
    payload = json.dumps(request).encode()
    settings = ServiceSettings(pool_size=2, queue=8, max_answer_bytes=16 << 20, max_pending_answer_bytes=32 << 20)
    with running_server(settings) as srv:
        host, port = srv.url.removeprefix("http://").split(":")
        readers = []
        for _ in range(2):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # (a client that reads nothing)
            sock.settimeout(30)
            sock.connect((host, int(port)))
            sock.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload))  # fmt: skip
            readers.append(sock)
        try:
            deadline = time.monotonic() + 30
            while httpx.get(f"{srv.url}/metrics").text.count('verdict="Accepted"') == 0:
                assert time.monotonic() < deadline, "the unread runs never ran"
                time.sleep(0.1)
            time.sleep(1.0)  # (their answers are being sent, into buffers nobody reads)
            refused = httpx.post(f"{srv.url}/v1/run", json=request, timeout=30)
            assert refused.status_code == 429 and "answers in the making" in refused.json()["error"], refused.text
        finally:
            for sock in readers:
                sock.close()
        deadline = time.monotonic() + 30
        while httpx.get(f"{srv.url}/healthz").json()["admitted"] > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        served = httpx.post(f"{srv.url}/v1/run", json=request, timeout=30)
        assert served.status_code == 200 and len(served.json()["stdout"]) == 1_000_000


def test_fetched_names_count_and_a_run_fetches_at_most_256_paths(bounded: LiveServer) -> None:
    many = {"program": {"language": "python", "source": "", "fetch": [f"f{i}" for i in range(257)]}}
    r = httpx.post(f"{bounded.url}/v1/run", json=many, timeout=60)
    assert r.status_code == 422 and "fetch" in r.json()["error"], r.text
    from dojo.sandbox import Limits
    from dojo.service.answers import answer_bytes

    named = answer_bytes(Limits(file_size=0, output=1), fetched=["\x01" * 255] * 256)
    assert named >= 256 * 2 * 6 * 255  # each name twice in the answer, each control byte six bytes


def test_many_fetched_files_fit_the_answer_bound_by_the_runs_disk(bounded: LiveServer) -> None:
    """The answer's bound counts the fetched files at most at what the run's scratch file systems
    hold (``Limits.fetched_bytes``), not each at its full ``file_size``: 40 files at 1 MiB each had
    counted 53 MiB against this server's 16 MiB and were refused; the files fit in 3 MiB."""
    source = "for i in range(40):\n    open(f'f{i}', 'w').write(str(i))"
    limits = {"output": 65536, "file_size": 1 << 20, "disk": 1 << 20}
    fetch = [f"f{i}" for i in range(40)]
    request = {"program": {"language": "python", "source": source, "fetch": fetch}, "limits": limits}
    r = httpx.post(f"{bounded.url}/v1/run", json=request, timeout=60)
    assert r.status_code == 200, r.text
    files = r.json()["files"]
    assert [base64.b64decode(files[p]["content"]) for p in fetch] == [str(i).encode() for i in range(40)]
