"""What `make toolchains` prepares beyond Debian's packages, in the toolchain directory that every
slot sees read-only at /opt/dojo (``dojo.sandbox.languages.toolchains_dir``):

- ``node/``: the npm packages TypeScript (tsx), Jest (with Babel) and SandboxFusion's Node.js
  programs use (lodash, seedrandom, ...), installed from the npm registry;
- ``go/cache``: a warm Go build cache holding testify and its dependencies compiled, which each
  ``go_test`` compile copies into its own scratch space (compiling them cold takes ~20 s of CPU).

Run once per machine, by an operator (it reaches the npm registry); nothing here runs model code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from dojo.errors import DojoError
from dojo.sandbox.languages import GO_ENV

NODE_PACKAGES = (
    "tsx@4", "typescript@5", "jest@29", "babel-jest@29", "@babel/core@7", "@babel/preset-env@7",
    "@babel/preset-typescript@7", "@jest/globals@29", "lodash@4", "js-md5@0.7", "seedrandom@3", "random-seed@0.3",
    "commander@12",
)  # fmt: skip
GO_WARM_TEST = """package main

import (
\t"testing"

\t"github.com/stretchr/testify/assert"
\t"github.com/stretchr/testify/require"
)

func TestWarm(t *testing.T) {
\tassert.Equal(t, 1, 1)
\trequire.True(t, true)
}
"""


class ToolchainError(DojoError):
    """A toolchain could not be prepared; the message says what failed."""


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 1800) -> None:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
        raise ToolchainError(f"{' '.join(argv[:3])} ... failed:\n{tail}")


def prepare_node(directory: Path) -> str:
    npm = shutil.which("npm")
    if npm is None:
        return "skipped node packages: npm is not installed (apt-get install npm)"
    node = directory / "node"
    node.mkdir(parents=True, exist_ok=True)
    if not (node / "package.json").exists():
        (node / "package.json").write_text('{"name": "dojo-toolchains", "private": true}\n')
    _run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *NODE_PACKAGES], node)
    return f"node packages: {len(NODE_PACKAGES)} in {node / 'node_modules'}"


def prepare_go_cache(directory: Path) -> str:
    go = shutil.which("go")
    if go is None or not Path("/usr/share/gocode/src/github.com/stretchr/testify").is_dir():
        return "skipped the Go build cache: needs golang-go and golang-github-stretchr-testify-dev"
    cache = directory / "go" / "cache"
    with tempfile.TemporaryDirectory(prefix="dojo-go-") as tmp:
        work = Path(tmp)
        (work / "main_test.go").write_text(GO_WARM_TEST)
        fresh = work / "cache"
        env = {**os.environ, **GO_ENV, "GOCACHE": str(fresh)}
        _run([go, "test", "-c", "-o", str(work / "test.bin"), "main_test.go"], work, env)
        if cache.exists():
            shutil.rmtree(cache)
        cache.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(fresh, cache)
    for path in [cache, *cache.rglob("*")]:  # readable by every slot's uid
        path.chmod(0o755 if path.is_dir() else 0o644)
    return f"Go build cache: {sum(p.stat().st_size for p in cache.rglob('*') if p.is_file()) >> 20} MiB in {cache}"


def prepare(directory: Path) -> list[str]:
    """Prepare everything this machine's tools allow; one line per part, saying what was done."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    return [prepare_node(directory), prepare_go_cache(directory)]
