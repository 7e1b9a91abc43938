"""The repo driver: the program of a ``repo`` task's run (``dojo.rewards.repo``, which checks the
edits' paths, builds its spec and reads pytest's report).

It runs before any of the candidate's code: it builds the tree, applies the edits, then execs pytest
on the tests (or bash on a command: an agent's shell). Argument 1: a JSON file with the packages,
files, edits, and the tests or the command.
"""

import json
import os
import sys
from typing import Any

ROOT = "/tmp/repo"


def opened_directories(spec: dict[str, Any]) -> set[str]:
    """The directories that hold a written file (the workspace's files, the edits' paths)."""
    opened: set[str] = set()
    for path in [*spec["files"], *(e["path"] for e in spec["edits"])]:
        parts = path.split("/")[:-1]
        opened.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return opened


def place(site: str, rel: str, opened: set[str]) -> None:
    """A directory that holds no written file is one link to the environment's (its compiled files
    included: imports read them instead of compiling the package again); one that does is made here,
    its entries linked one by one. The environment's copies of written files are hidden in this run."""
    src, dst = os.path.join(site, rel), os.path.join(ROOT, rel)
    if not os.path.lexists(src):
        return
    if rel in opened and os.path.isdir(src) and not os.path.islink(src):
        os.makedirs(dst, exist_ok=True)
        for name in os.listdir(src):
            place(site, rel + "/" + name, opened)
    else:
        os.symlink(src, dst)


def write(path: str, text: str) -> None:
    target = os.path.join(ROOT, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.lexists(target):
        os.unlink(target)
    with open(target, "w") as f:
        f.write(text)


def apply_edits(edits: list[dict[str, Any]]) -> list[str]:
    """Apply the edits in order; the problems of those that could not be applied."""
    problems = []
    for edit in edits:
        path, search, replace = edit["path"], edit["search"], edit["replace"]
        if search is None:
            write(path, replace)
            continue
        try:
            with open(os.path.join(ROOT, path)) as f:
                text = f.read()
        except OSError as e:
            problems.append(f"{path}: cannot edit: {e.strerror}")
            continue
        count = text.count(search) if search else 0
        if count != 1:
            problems.append(f"{path}: the SEARCH text occurs {count} times (it must occur exactly once)")
            continue
        write(path, text.replace(search, replace, 1))
    return problems


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    os.makedirs(ROOT, exist_ok=True)
    site_packages = spec["site"]
    opened = opened_directories(spec)
    for package in spec["packages"]:
        place(site_packages, package, opened)
    for path, text in spec["files"].items():
        write(path, text)
    problems = apply_edits(spec["edits"])
    print(json.dumps({"dojo_edits": len(spec["edits"]) - len(problems), "problems": problems}), flush=True)
    os.makedirs("/box/.dojo", exist_ok=True)
    os.chdir(ROOT)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "PYTHONPATH": "/box/.dojo:" + ROOT + ":" + site_packages,
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
        "DOJO_SCORED": json.dumps(spec.get("scored", [])),
    }
    if spec.get("command") is not None:
        os.execve("/bin/bash", ["bash", "-c", spec["command"]], env)
    args = [
        "-q",
        "-rN",
        "--tb=no",
        "-p",
        "no:cacheprovider",
        "-p",
        "dojo_scored",
        "-o",
        "addopts=",
        "-o",
        "junit_family=xunit1",
        "--rootdir",
        ROOT,
        "--junitxml",
        "/box/.dojo/report.xml",
        *spec["tests"],
    ]
    if "pytest" not in sys.modules:  # a fresh interpreter; a slot that preloads pytest runs it here
        os.execve(sys.executable, [sys.executable, "-B", "-m", "pytest", *args], env)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:0] = ["/box/.dojo", ROOT, site_packages]  # (first: no file of the tree can stand in for the plugin)
    sys.dont_write_bytecode = True
    import site  # the slot's interpreter starts without it: give the builtins it adds (copyright, exit, ...)

    site.setquit()
    site.setcopyright()
    site.sethelper()
    import pytest

    code = pytest.main(args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


if __name__ == "__main__":
    main()
