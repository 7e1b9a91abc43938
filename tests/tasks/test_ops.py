"""family:ops: configure a small service and start it; graded by its health endpoint (asked before
anything is killed) and its configuration as parsed; and the ways a script might fake a service."""

from __future__ import annotations

import json
import re

import pytest

from dojo.rewards import Grader
from dojo.rewards.outcome import Reward
from dojo.sandbox import AsyncSandbox
from dojo.tasks import generate_tasks
from dojo.tasks.model import Task


def ops(difficulty: float, i: int = 0) -> Task:
    return generate_tasks("ops", n=i + 1, seed=7, difficulty=difficulty)[i]


def script_of(task: Task) -> str:
    match = re.search(r"```bash\n(.*?)```", task.reference or "", re.DOTALL)
    assert match
    return match.group(1)


def health(task: Task) -> dict[str, object]:
    return next(t.expected for t in task.tests if "probe" in t.expected)


def fake_service(task: Task) -> tuple[str, str]:
    """A server of the script's own that answers /health exactly as the real service would, and the
    reference script's configuration part (everything before it starts the service)."""
    check = health(task)
    body = json.dumps(check["json"])
    port = check["probe"]["port"]  # type: ignore[index]
    fake_app = (
        "import http.server\nclass H(http.server.BaseHTTPRequestHandler):\n    def do_GET(self):\n"
        f"        b = {body!r}.encode()\n        self.send_response(200); self.end_headers(); self.wfile.write(b)\n"
        f"http.server.HTTPServer(('127.0.0.1', {port}), H).serve_forever()\n"
    )
    return fake_app, script_of(task).split("nohup")[0]


async def grade(sandbox: AsyncSandbox, task: Task, script: str) -> Reward:
    return await Grader(sandbox).grade(task, f"```bash\n{script}\n```")


@pytest.mark.parametrize("difficulty", [0.1, 0.5, 0.9])
async def test_the_reference_deploys_and_doing_nothing_fails(difficulty: float, fast_sandbox: AsyncSandbox) -> None:
    task = ops(difficulty)
    assert (await grade(fast_sandbox, task, script_of(task))).value == 1.0
    nothing = await grade(fast_sandbox, task, "true")
    assert nothing.value == 0.0 and "did not answer" in " ".join(c.detail for c in nothing.cases)


async def test_a_wrong_setting_or_a_service_not_left_running_fails(fast_sandbox: AsyncSandbox) -> None:
    task = ops(0.5)
    port = str(health(task)["probe"]["port"])  # type: ignore[index]
    right = script_of(task)
    wrong_port = right.replace(f"port = {port}", "port = 9999")
    r = await grade(fast_sandbox, task, wrong_port)
    assert r.verdict == "fail", r  # the file sets another port, and nothing answers on the asked one
    no_start = right.replace("nohup", "true nohup")
    r = await grade(fast_sandbox, task, no_start)
    assert r.verdict == "partial" and r.cases[1].detail.endswith(
        "did not answer (ConnectionRefusedError: [Errno 111] Connection refused)"
    )
    unknown = right.replace("[service]\n", "[service]\ncolour = blue\n")  # the service refuses to start
    r = await grade(fast_sandbox, task, unknown)
    assert r.verdict == "partial" and r.cases[0].passed and not r.cases[1].passed


async def test_a_fake_health_endpoint_is_not_the_service(fast_sandbox: AsyncSandbox) -> None:
    """A static server answering /health with the right JSON: the listening process is not the
    service's command; a service started with PYTHONPATH (to shadow its modules) is refused too."""
    task = ops(0.1)
    check = health(task)
    port = check["probe"]["port"]  # type: ignore[index]
    config = script_of(task).split("nohup")[0]
    fake = (
        f"{config}\nmkdir -p www && echo '{json.dumps(check['json'])}' > www/health\n"
        f"nohup python3 -m http.server {port} --bind 127.0.0.1 --directory www > /dev/null 2>&1 &"
    )
    r = await grade(fast_sandbox, task, fake)
    assert r.verdict == "partial" and "served by another program" in r.cases[1].detail
    shadowed = script_of(task).replace("nohup python3", "PYTHONPATH=/tmp nohup python3")
    r = await grade(fast_sandbox, task, shadowed)
    assert r.verdict == "partial" and "PYTHONPATH" in r.cases[1].detail


async def test_changing_the_service_and_changing_it_back_is_caught(fast_sandbox: AsyncSandbox) -> None:
    task = ops(0.1)
    fake_app, config = fake_service(task)
    swap = (
        f"{config}\ncp service/app.py /tmp/real.py\ncat > service/app.py <<'PY'\n{fake_app}PY\n"
        f"nohup python3 -I service/app.py --config service/config.json > /dev/null 2>&1 &\nsleep 1\n"
        "cat /tmp/real.py > service/app.py"
    )
    r = await grade(fast_sandbox, task, swap)
    assert r.value == 0.0 and "had to stay as they were changed" in r.cases[-1].detail, r


@pytest.mark.xfail(strict=True, reason="known gap (docs/threat-model.md): a script can run its own server "
                   "under the service's exact command line by swapping the directory around it")  # fmt: skip
async def test_a_service_started_from_a_swapped_directory_is_not_believed(fast_sandbox: AsyncSandbox) -> None:
    task = ops(0.1)
    fake_app, config = fake_service(task)
    swap = (
        f"{config}\nmv service real\nmkdir service\ncat > service/app.py <<'PY'\n{fake_app}PY\n"
        "nohup python3 -I service/app.py --config service/config.json > /dev/null 2>&1 &\nsleep 1\n"
        "rm -r service\nmv real service"
    )
    assert (await grade(fast_sandbox, task, swap)).value == 0.0


def test_ops_tasks_are_reproducible_and_levelled() -> None:
    a, b = ops(0.9), ops(0.9)
    assert a == b
    formats = {
        generate_tasks("ops", n=1, seed=s, difficulty=d)[0].metadata.tags[0] for s, d in [(1, 0.1), (1, 0.5), (1, 0.9)]
    }
    assert formats == {"config:json", "config:ini", "config:toml"}
