"""``intercode:bash``: InterCode's bash tasks (``intercode:sql``: ``dojo.tasks.intercode_sql``), from
the data files of the ``intercode-bench`` wheel
(installed without its dependencies; nothing of it is imported or downloaded at run time).

InterCode runs each request in a Docker container whose file system ``setup_fs.sh`` builds under
``/testbed``, and rewards a command by its output and its changes to the file system, against a gold
command's. Here the same tree is a shell task's workspace (``testbed/`` in the work dir: the tasks'
``/testbed`` paths are rewritten to it), and the check is ``{"reference_state": true}``: the
candidate's script and the gold command run on fresh copies of the tree in the same grading, and
pass when both print the same lines and leave the same files (``dojo.rewards.shell.same_state``).
Gold commands whose output depends on the time they ran, or that need tools the sandbox does not
have, show up in ``dojo tasks audit`` as findings. Against InterCode's own reward (``BashEnv.get_reward``,
``tests/tasks/test_intercode_parity.py``) dojo's verdict differs only where InterCode cannot see a
difference (directories, mode bits but the owner's execute bit, a tracked file's contents, outputs
alike by TF-IDF) or by its stderr: docs/tasks/shell.md.
"""

from __future__ import annotations

import json
import random
import re
import shlex
from pathlib import Path

from dojo.sandbox import mask_modules
from dojo.tasks.intercode_sql import load_intercode_sql
from dojo.tasks.model import Task, TaskMetadata, TestCase, Workspace
from dojo.tasks.wheel_data import wheel_data

DISTRIBUTION = "intercode-bench"
VERSION = "0.1.22"
CATEGORIES = ("bash", "sql")
mask_modules("intercode")  # its data holds the gold commands and queries


def assets_dir() -> Path:
    return wheel_data(DISTRIBUTION, VERSION, "intercode/assets", "intercode")


def testbed(script: str) -> tuple[dict[str, str], list[str], list[str]]:
    """What ``setup_fs.sh`` makes (its ``mkdir -p``, ``echo [-e] TEXT > PATH`` and ``chmod +x``
    lines, the only kinds it has): files under ``testbed/``, the executable ones, the directories."""
    files: dict[str, str] = {}
    executable: list[str] = []
    directories: list[str] = []
    for raw in script.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "rm ")):
            continue
        words = shlex.split(line)
        if words[:2] == ["mkdir", "-p"]:
            directories += [_local(d) for d in words[2:]]
        elif words[0] == "echo" and ">" in words:
            at = words.index(">")
            escaped = words[1] == "-e"
            text = " ".join(words[2 if escaped else 1 : at])
            if escaped:
                text = text.encode().decode("unicode_escape")
            path = _local(words[at + 1])
            files[path] = text + "\n"
        elif words[:2] == ["chmod", "+x"]:
            executable += [_local(p) for p in words[2:]]
        else:
            raise ValueError(f"setup_fs.sh has a line this port does not know: {line!r}")
    return files, executable, directories


def _local(path: str) -> str:
    return path.removeprefix("/")


def relative(command: str) -> str:
    """A command's ``/testbed`` paths as the work dir's ``testbed``."""
    return re.sub(r"(?<![\w.])/testbed", "testbed", command)


def load_intercode(category: str, *, n: int | None = None, seed: int = 0) -> list[Task]:
    if category not in CATEGORIES:
        raise ValueError(f"intercode has no category {category!r} here; categories: {', '.join(CATEGORIES)}")
    if category == "sql":
        return load_intercode_sql(n=n, seed=seed)
    root = assets_dir()
    files, executable, directories = testbed((root / "docker" / "setup_fs.sh").read_text())
    rows = json.loads((root / "datasets" / "bash_queries.json").read_text())
    indexed = list(enumerate(rows))
    if n is not None:
        indexed = random.Random(seed).sample(indexed, min(n, len(indexed)))
    listing = "\n".join(f"  {p}" for p in sorted(files))
    tasks = []
    for i, row in indexed:
        query = relative(row["query"])
        prompt = (
            f"You are in a Linux shell in a directory holding `testbed/`:\n{listing}\n\n{query}\n\n"
            "Answer with a bash script in a ```bash block; it runs in that directory."
        )
        tasks.append(
            Task(
                id=f"intercode:bash/{i}",
                domain="terminal",
                form="shell",
                language="bash",
                prompt=prompt,
                tests=[TestCase(expected={"reference_state": True})],
                reference=f"```bash\n{relative(row['gold'])}\n```",
                workspace=Workspace(
                    files=files, executable=executable, directories=directories, editable=["*"], protected=[]
                ),
                metadata=TaskMetadata(source="intercode:bash", tags=["intercode"]),
            )
        )
    return tasks
