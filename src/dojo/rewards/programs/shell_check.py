"""The shell check: the trusted process of a ``shell`` task's run (``dojo.rewards.shell``, which
builds its job and compares the state it reports with the task's checks).

It gets its job on a private stdin, runs the candidate's script as a child (in ``/box/work``, the
tree), waits for it (or its time), asks the probes, kills every process the script left, and only
then walks the tree and writes one report. Its top level only defines: the slot preloads it
(``AsyncSandbox.run(harness=True)``) and every run calls ``main()``. Shipped with
``dojo.sandbox.guest.trusted``: what it does first, before the script can reach it.
"""

# ruff: noqa: SIM105 (plain try/except: contextlib would be one more module in the sandbox)

import ctypes
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import tarfile
import time
import zipfile
from typing import Any

from dojo.sandbox.guest.trusted import make_undumpable, use_trusted_path

WORK = "/box/work"
TEXT_MAX = 1 << 16


def unblock() -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def describe(path: str, rel: str) -> dict[str, Any]:
    st = os.lstat(path)
    entry: dict[str, Any] = {"mode": stat.S_IMODE(st.st_mode), "size": st.st_size, "ctime": st.st_ctime}
    if stat.S_ISLNK(st.st_mode):
        entry.update(type="link", target=os.readlink(path))
        return entry
    if stat.S_ISDIR(st.st_mode):
        entry["type"] = "dir"
        return entry
    if not stat.S_ISREG(st.st_mode):
        entry["type"] = "other"
        return entry
    entry["type"] = "file"
    digest = hashlib.sha256()
    head = b""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            if len(head) < TEXT_MAX:
                head += chunk[: TEXT_MAX - len(head)]
            digest.update(chunk)
    entry["sha256"] = digest.hexdigest()
    if st.st_size <= TEXT_MAX:
        try:
            entry["text"] = head.decode()
        except UnicodeDecodeError:
            pass
    try:
        if rel.endswith((".tar", ".tar.gz", ".tgz")):
            with tarfile.open(path) as t:
                entry["members"] = sorted(m.name.lstrip("./") for m in t.getmembers() if m.isfile())
        elif rel.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                entry["members"] = sorted(n for n in z.namelist() if not n.endswith("/"))
    except Exception as e:
        entry["members_error"] = f"{type(e).__name__}: {e}"
    return entry


def listener(port: int) -> int | None:
    """The pid listening on the TCP port, found through /proc, or None."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return int(pid)
        except OSError:
            continue
    return None


def others_alive() -> bool:
    """Whether any process of this uid but this one is alive (not a zombie)."""
    me, uid = os.getpid(), os.getuid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if os.stat(f"/proc/{pid}").st_uid == uid and state != "Z":
                return True
        except (OSError, IndexError):
            continue
    return False


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    """GET 127.0.0.1:port/path once the port answers (up to ``wait`` seconds): the status, the body,
    and the command line and PYTHON* environment variables of the process listening."""
    import http.client

    deadline = time.monotonic() + float(spec.get("wait", 5))
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", int(spec["port"]), timeout=2)
            conn.request("GET", spec["path"])
            resp = conn.getresponse()
            body = resp.read(TEXT_MAX)
            out: dict[str, Any] = {"status": resp.status, "body": body.decode(errors="replace")}
            break
        except (OSError, http.client.HTTPException) as e:
            if time.monotonic() > deadline or not others_alive():  # nothing left that could start answering
                return {"error": f"{type(e).__name__}: {e}"}
            time.sleep(0.05)
    pid = listener(int(spec["port"]))
    if pid is not None:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out["cmdline"] = f.read().decode(errors="replace").split("\0")[:-1]
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().decode(errors="replace").split("\0")
            out["python_env"] = sorted(v.split("=", 1)[0] for v in environ if v.startswith("PYTHON"))
        except OSError as e:
            out["cmdline_error"] = e.strerror
    return out


def end_everything() -> None:
    """Kill everything the script left running (all of this uid but this process) and reap it."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break


def walk(root: str) -> dict[str, dict[str, Any]]:
    """Every entry under ``root`` by its relative path (``describe``), symbolic links not followed."""
    tree: dict[str, dict[str, Any]] = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            try:
                tree[rel] = describe(path, rel)
            except OSError as e:
                tree[rel] = {"type": "unreadable", "error": e.strerror}
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(base, d))]
    return tree


def main() -> None:
    started_at = time.time()  # the tree was written before this: a later ctime is the script's doing
    # Before the script runs: no import of this process's from where it writes (a script's
    # /box/gzip.py ran here when the walk opened a .tar.gz), and none of its /proc files open to the
    # script's processes (a fresh interpreter, strict isolation, is dumpable: a script wrote a report
    # of its own into this process's stdout, then killed it). Found 2026-12-06.
    use_trusted_path()
    if not make_undumpable(ctypes.pythonapi):
        os.write(2, b"dojo shell check: the check's process is dumpable\n")
        os._exit(70)
    job = json.loads(sys.stdin.buffer.read())
    for d in job.get("directories", []):
        path = os.path.normpath(os.path.join(WORK, d))
        if path.startswith(WORK + "/"):
            os.makedirs(path, exist_ok=True)
    os.makedirs("/tmp/.dojo", exist_ok=True)
    script = "/tmp/.dojo/script.sh"
    with open(script, "w") as f:
        f.write(job["script"])
    with open("/tmp/.dojo/out", "w+b") as out, open("/tmp/.dojo/err", "w+b") as err:
        start = time.monotonic()
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
        proc = subprocess.Popen(
            ["bash", script],
            cwd=WORK,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            preexec_fn=unblock,
            start_new_session=True,
        )
        code: int | None
        try:
            code = proc.wait(timeout=job["timeout"])
            ended = "exit"
        except subprocess.TimeoutExpired:
            code, ended = None, "timeout"
        probes = [probe(p) for p in job.get("probes", [])]  # what the script left running, asked before it is killed
        end_everything()
        tree = walk(WORK)
        streams = []
        for stream in (out, err):
            stream.seek(0)
            streams.append(stream.read(TEXT_MAX).decode(errors="replace"))
    report = {
        "dojo_shell": 1,
        "uid": os.getuid(),
        "ended": ended,
        "exit_code": code,
        "seconds": round(time.monotonic() - start, 3),
        "stdout": streams[0],
        "stderr": streams[1],
        "tree": tree,
        "probes": probes,
        "started_at": started_at,
    }
    sys.stdout.write(json.dumps(report))
    sys.stdout.flush()


if __name__ == "__main__":  # a preloaded check (the zygote's fast path) is called as main()
    main()
