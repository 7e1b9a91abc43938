"""SandboxFusion compatibility: the real `sandbox-fusion` client and verl's request, unchanged."""

from __future__ import annotations

import base64
import json
import uuid

import httpx
from sandbox_fusion import RunCodeRequest, RunStatus, run_code

from tests.service.conftest import LiveServer


def test_sandbox_fusion_client_success(live: LiveServer) -> None:
    resp = run_code(RunCodeRequest(code="print(sum(range(10)))", language="python"), endpoint=live.url)
    assert resp.status == RunStatus.Success
    assert resp.run_result is not None and resp.run_result.stdout == "45\n"
    assert resp.run_result.return_code == 0
    # a program that ends with Python's exit() (site's, which the sandbox's python3 -S skips) succeeds
    ended = run_code(RunCodeRequest(code="print(1)\nexit(0)\nprint(2)", language="python"), endpoint=live.url)
    assert ended.status == RunStatus.Success and ended.run_result is not None, ended
    assert ended.run_result.stdout == "1\n" and ended.run_result.return_code == 0


def test_sandbox_fusion_client_compile_error_and_files(live: LiveServer) -> None:
    resp = run_code(RunCodeRequest(code="int main() { return nope; }", language="cpp"), endpoint=live.url)
    assert resp.status == RunStatus.Failed
    assert resp.compile_result is not None and resp.compile_result.return_code != 0
    assert "nope" in (resp.compile_result.stderr or "")
    resp = run_code(
        RunCodeRequest(
            code="print(open('a.txt').read().upper())\nopen('b.txt', 'w').write('out')",
            language="python",
            files={"a.txt": base64.b64encode(b"hello").decode()},
            fetch_files=["b.txt"],
        ),
        endpoint=live.url,
    )
    assert resp.status == RunStatus.Success and resp.run_result.stdout == "HELLO\n"
    assert base64.b64decode(resp.files["b.txt"]) == b"out"


def verl_call(url: str, code: str, stdin: str, language: str = "python", timeout: int = 5, **extra: object) -> dict:
    """The request verl's sandbox_fusion reward code sends (json string body, these fields)."""
    payload = json.dumps(
        {
            "compile_timeout": timeout,
            "run_timeout": timeout,
            "code": code,
            "stdin": stdin,
            "language": language,
            "files": {},
            "fetch_files": [],
            **extra,
        }
    )
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    r = httpx.post(f"{url}/run_code", headers=headers, content=payload, timeout=timeout * 2 + 10)
    r.raise_for_status()
    return r.json()


def test_verl_request_shapes(live: LiveServer) -> None:
    ok = verl_call(live.url, "print(int(input()) * 2)", "21")
    assert ok["status"] == "Success" and ok["run_result"]["status"] == "Finished"
    assert ok["run_result"]["stdout"].rstrip("\n") == "42"

    runtime = verl_call(live.url, "raise ValueError()", "")
    assert runtime["status"] == "Failed"
    assert runtime["run_result"]["status"] == "Finished" and runtime["run_result"]["return_code"] != 0

    timeout = verl_call(live.url, "while True: pass", "", timeout=1)
    assert timeout["status"] == "Failed" and timeout["run_result"]["status"] == "TimeLimitExceeded"

    compile_err = verl_call(live.url, "int main() { x }", "", language="cpp")
    assert compile_err["status"] == "Failed" and compile_err["compile_result"]["return_code"] != 0
    assert compile_err["run_result"] is None
    # a compile past its time limit: no run either (its result had been copied into a run_result)
    slow = {"compile_timeout": 0.001}
    fresh = f"int main() {{ return 0; }} // {uuid.uuid4()}"  # (never a cached build)
    compile_slow = verl_call(live.url, fresh, "", language="cpp", **slow)
    assert compile_slow["status"] == "Failed" and compile_slow["compile_result"]["status"] == "TimeLimitExceeded"
    assert compile_slow["run_result"] is None, compile_slow

    node = verl_call(live.url, "console.log(require('fs').readFileSync(0, 'utf8').trim())", "js", language="nodejs")
    assert node["run_result"]["stdout"] == "js\n"


def test_memory_limit_mb_is_honoured(live: LiveServer) -> None:
    hog = "b = bytearray(400 << 20)\nprint('allocated')"
    small = verl_call(live.url, hog, "", memory_limit_MB=64)
    assert small["status"] == "Failed" and small["verdict"] == "MemoryLimitExceeded"
    assert "allocated" not in (small["run_result"]["stdout"] or "")
    big = verl_call(live.url, hog, "", memory_limit_MB=1024)
    assert big["status"] == "Success" and big["run_result"]["stdout"] == "allocated\n"


def test_unsupported_language_is_a_clear_400(live: LiveServer) -> None:
    r = httpx.post(f"{live.url}/run_code", json={"code": "x", "language": "cobol"})
    assert r.status_code == 400 and "supported" in r.json()["error"]
