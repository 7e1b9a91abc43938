"""``family:terminal``: procedural tasks in a shell over a seeded file tree, with exact checks.

Each task is one job on a generated tree (``Workspace.files``): delete files by pattern, rename by
extension, count matching lines, archive a directory, set permissions, sort and deduplicate, replace
a word across configuration files, report a size. The generator computes the final state itself, so
the checks (``dojo.rewards.shell``) are exact: the files that must change (scored), and every other
file, which must stay as it was (``"guard": true``: not scored, but breaking one scores 0). The
reference is a bash script that does the job. Difficulty (0..1) sets the tree's size and depth, the
decoys (names that almost match: ``notes.tmp.bak``, ``ERRORS`` in lower case, a ``.txt`` one level
down), and from 0.7 up, two jobs in one task.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dojo.tasks.families import difficulty_level, register_family
from dojo.tasks.model import Task, TaskMetadata, TestCase, Workspace

WORDS = ("alpha", "bravo", "delta", "gamma", "kilo", "lima", "oscar", "sierra", "tango", "zulu", "echo", "mike")
NAMES = ("ada", "alan", "barbara", "dennis", "edsger", "grace", "guido", "ken", "linus", "margaret", "niklaus")
# Where fillers and decoys go: no job's own directory (notes, docs, data, config, ...), so that one
# job never changes what another job, or a guard, looks at.
DIRS = ("src", "lib", "assets", "archive", "misc", "build")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Tree:
    """A file tree being generated: path -> text, path -> mode, and what each job expects."""

    files: dict[str, str] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    touched: set[str] = field(default_factory=set)  # paths a job changes (no guard for them)
    jobs: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)


def _line(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))


def _text(rng: random.Random, lines: int) -> str:
    return "".join(_line(rng) + "\n" for _ in range(lines))


def _scatter(
    tree: Tree, rng: random.Random, n: int, depth: int, exts: tuple[str, ...] = (".txt", ".log", ".md", ".dat")
) -> None:
    """``n`` filler files in directories up to ``depth`` deep."""
    for _ in range(n):
        parts = [rng.choice(DIRS) for _ in range(rng.randint(1, depth))]
        path = "/".join([*parts, f"{rng.choice(WORDS)}{rng.randint(1, 99)}{rng.choice(exts)}"])
        tree.files.setdefault(path, _text(rng, rng.randint(1, 5)))


# -- jobs: each adds its files, its checks and its part of the reference script ------------------


def job_cleanup(tree: Tree, rng: random.Random, level: int) -> None:
    targets = []
    for _ in range(2 + level * 2):
        d = "/".join(rng.choice(DIRS) for _ in range(rng.randint(1, 1 + level)))
        path = f"{d}/{rng.choice(WORDS)}{rng.randint(1, 999)}.tmp"
        tree.files[path] = _text(rng, 2)
        targets.append(path)
    if level >= 1:  # decoys: .tmp inside a name, or a directory that ends in .tmp
        tree.files[f"{rng.choice(DIRS)}/report.tmp.bak"] = _text(rng, 2)
        tree.files[f"{rng.choice(DIRS)}/tmpfile.txt"] = _text(rng, 1)
    tree.jobs.append("Delete every file whose name ends in `.tmp`, anywhere in the tree.")
    tree.scripts.append("find . -type f -name '*.tmp' -delete")
    for path in targets:
        tree.checks.append({"path": path, "exists": False})
        tree.touched.add(path)


def job_rename(tree: Tree, rng: random.Random, level: int) -> None:
    folder = rng.choice(("notes", "drafts", "journal"))
    names = rng.sample(WORDS, 2 + level)
    for name in names:
        path = f"{folder}/{name}.txt"
        tree.files[path] = _text(rng, 3)
        new = f"{folder}/{name}.md"
        tree.checks += [{"path": path, "exists": False}, {"path": new, "sha256": sha(tree.files[path])}]
        tree.touched |= {path, new}
    if level >= 1:  # a .txt one level down stays .txt
        tree.files[f"{folder}/old/{rng.choice(WORDS)}.txt"] = _text(rng, 2)
    tree.jobs.append(f"Rename every `.txt` file directly in `{folder}/` (not in its subdirectories) to `.md`, "
                     "keeping its contents.")  # fmt: skip
    tree.scripts.append(f'for f in {folder}/*.txt; do mv -- "$f" "${{f%.txt}}.md"; done')


def job_count(tree: Tree, rng: random.Random, level: int) -> None:
    lines = []
    for _ in range(10 + 15 * level):
        kind = rng.choice(("INFO", "INFO", "WARN", "ERROR", "DEBUG"))
        if level >= 1 and rng.random() < 0.15:
            kind = rng.choice(("error", "ERRORS", "NOERROR"))  # decoys: not the word ERROR alone
        lines.append(f"2026-01-{rng.randint(10, 28)} {kind} {_line(rng)}\n")
    tree.files["logs/app.log"] = "".join(lines)
    count = sum(line.split()[1] == "ERROR" for line in lines)
    tree.jobs.append("Count the lines of `logs/app.log` whose level (the second field) is exactly `ERROR`, and "
                     "write that number alone to `report.txt`.")  # fmt: skip
    tree.scripts.append("awk '$2 == \"ERROR\"' logs/app.log | wc -l > report.txt")
    tree.checks.append({"path": "report.txt", "text": f"{count}\n"})
    tree.touched.add("report.txt")


def job_archive(tree: Tree, rng: random.Random, level: int) -> None:
    members = []
    for _ in range(2 + level * 2):
        parts = ["docs", *(rng.choice(WORDS) for _ in range(rng.randint(0, level)))]
        path = "/".join([*parts, f"{rng.choice(WORDS)}{rng.randint(1, 99)}.md"])
        tree.files[path] = _text(rng, 2)
        members.append(path)
    tree.jobs.append("Create `backup.tar.gz`, a gzipped tar archive of the directory `docs/` "
                     "(its members' paths start with `docs/`).")  # fmt: skip
    tree.scripts.append("tar czf backup.tar.gz docs")
    tree.checks.append({"path": "backup.tar.gz", "members": sorted(set(members))})
    tree.touched.add("backup.tar.gz")


def job_permissions(tree: Tree, rng: random.Random, level: int) -> None:
    scripts = [f"scripts/{w}.sh" for w in rng.sample(WORDS, 2 + level)]
    for path in scripts:
        tree.files[path] = f"#!/bin/sh\necho {rng.choice(WORDS)}\n"
        tree.checks.append({"path": path, "mode": 0o755})
        tree.touched.add(path)
    tree.files["secrets/key.pem"] = f"-----BEGIN KEY-----\n{rng.getrandbits(128):032x}\n-----END KEY-----\n"
    tree.checks.append({"path": "secrets/key.pem", "mode": 0o600})
    tree.touched.add("secrets/key.pem")
    if level >= 1:
        tree.files["scripts/README.txt"] = "not a script\n"  # stays 644
        tree.checks.append({"path": "scripts/README.txt", "mode": 0o644, "guard": True})
    tree.jobs.append("Make every `.sh` file in `scripts/` executable with mode 755, and make `secrets/key.pem` "
                     "readable and writable by its owner only (mode 600).")  # fmt: skip
    tree.scripts.append("chmod 755 scripts/*.sh && chmod 600 secrets/key.pem")


def job_sort_unique(tree: Tree, rng: random.Random, level: int) -> None:
    names = [rng.choice(NAMES) for _ in range(8 + 10 * level)]
    tree.files["names.txt"] = "".join(f"{n}\n" for n in names)
    tree.jobs.append("Write the distinct lines of `names.txt`, sorted, one per line, to `sorted.txt`.")
    tree.scripts.append("LC_ALL=C sort -u names.txt > sorted.txt")
    tree.checks.append({"path": "sorted.txt", "text": "".join(f"{n}\n" for n in sorted(set(names)))})
    tree.touched.add("sorted.txt")


def job_replace(tree: Tree, rng: random.Random, level: int) -> None:
    paths = []
    for i in range(2 + level):
        sub = "/".join(rng.choice(("app", "db", "web")) for _ in range(rng.randint(0, level)))
        path = "/".join(p for p in ("config", sub, f"{rng.choice(WORDS)}{i}.cfg") if p)
        body = "".join(f"{k} = {rng.choice(('staging', 'staging', 'local'))}\n" for k in rng.sample(WORDS, 4))
        tree.files[path] = body + "env = staging\n"
        paths.append(path)
    if level >= 1:
        tree.files["config/notes.txt"] = "staging stays here\n"  # not a .cfg
    tree.jobs.append("In every `.cfg` file under `config/` (subdirectories too), replace each `staging` with "
                     "`production`.")  # fmt: skip
    tree.scripts.append("find config -type f -name '*.cfg' -exec sed -i 's/staging/production/g' {} +")
    for path in paths:
        tree.checks.append({"path": path, "sha256": sha(tree.files[path].replace("staging", "production"))})
        tree.touched.add(path)


def job_size(tree: Tree, rng: random.Random, level: int) -> None:
    total = 0
    for i in range(2 + level * 2):
        path = f"data/{'/'.join(rng.choice(WORDS) for _ in range(rng.randint(0, level)))}/part{i}.csv".replace(
            "//", "/"
        )
        text = "".join(f"{rng.randint(0, 999)},{rng.choice(WORDS)}\n" for _ in range(rng.randint(3, 30)))
        tree.files[path] = text
        total += len(text.encode())
    if level >= 1:
        tree.files["data/readme.txt"] = _text(rng, 3)  # not a .csv
    tree.jobs.append("Print the total size in bytes of all `.csv` files under `data/` (subdirectories too): "
                     "the number alone.")  # fmt: skip
    tree.scripts.append("find data -type f -name '*.csv' -printf '%s\\n' | awk '{s += $1} END {print s}'")
    tree.checks.append({"stdout": str(total)})


JOBS: dict[str, Callable[[Tree, random.Random, int], None]] = {
    "cleanup": job_cleanup, "rename": job_rename, "count": job_count, "archive": job_archive,
    "permissions": job_permissions, "sort_unique": job_sort_unique, "replace": job_replace, "size": job_size,
}  # fmt: skip


class TerminalFamily:
    """See the module doc. Two jobs at difficulty >= 0.7 (the size job, which prints, only alone)."""

    name = "terminal"

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        level = difficulty_level(difficulty, 3)
        tree = Tree()
        first = rng.choice(sorted(JOBS))
        kinds = [first]
        if difficulty >= 0.7 and first != "size":
            kinds.append(rng.choice(sorted(k for k in JOBS if k not in (first, "size"))))
        for kind in kinds:
            JOBS[kind](tree, rng, level)
        _scatter(tree, rng, 3 + 6 * level, 1 + level)
        for path, text in sorted(tree.files.items()):  # everything else stays as it was
            if path not in tree.touched:
                tree.checks.append({"path": path, "sha256": sha(text), "guard": True})
        listing = "\n".join(f"  {p}" for p in sorted(tree.files))
        jobs = "\n".join(f"{i + 1}. {j}" for i, j in enumerate(tree.jobs))
        prompt = (
            f"You are in a shell in a directory holding these files:\n{listing}\n\nDo this:\n{jobs}\n\n"
            "Leave every other file as it is. Answer with a bash script in a ```bash block; it runs in that "
            "directory."
        )
        scored = [c for c in tree.checks if not c.get("guard")]
        return Task(
            id="terminal",
            domain="terminal",
            form="shell",
            language="bash",
            prompt=prompt,
            tests=[TestCase(expected=c, visible=False) for c in tree.checks],
            reference="```bash\nset -e\n" + "\n".join(tree.scripts) + "\n```",
            workspace=Workspace(files=dict(sorted(tree.files.items())), editable=["*"], protected=[]),
            metadata=TaskMetadata(
                source="family:terminal", difficulty=round(difficulty, 3), tags=[*kinds, f"checks:{len(scored)}"]
            ),
        )


register_family(TerminalFamily())
