#!/usr/bin/env bash
# `make test-cgroup2`: the sandbox's cgroup tests (memory, pids, kill, leftovers) as root on a real
# cgroup v2 kernel. Boots Debian's kernel in QEMU under software emulation (KVM aborts on these
# machines) with every cgroup v1 controller disabled and the host's root filesystem shared
# read-only (virtme-ng), then runs pytest inside. ~8 minutes on this kind of machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
KERNEL="$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)"
if [ -z "$KERNEL" ] || ! command -v qemu-system-x86_64 >/dev/null || [ ! -x .venv/bin/vng ]; then
  echo "needs a kernel in /boot, qemu-system-x86 and virtme-ng: run make test-cgroup2 (it installs them)" >&2
  exit 2
fi
TESTS="tests/sandbox/test_cgroups.py tests/sandbox/test_limits.py tests/sandbox/test_pool.py tests/sandbox/test_slot.py \
  tests/sandbox/test_forker.py"
# the forker is built here: the VM sees this file system read-only
.venv/bin/python -c 'from dojo.sandbox.forker_build import forker_library; assert forker_library(), "no forker"'
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
# Inside: prove the machine is cgroup v2 only, then run the tests; the exit status travels in the output.
INNER="cd $PWD && echo \"controllers: \$(cat /sys/fs/cgroup/cgroup.controllers)\" && \
  .venv/bin/python -c 'from dojo.sandbox.cgroups import detect; l = detect(); print(l.describe()); assert l.version == 2' && \
  PYTHONDONTWRITEBYTECODE=1 .venv/bin/python -m pytest -q -p no:cacheprovider $TESTS; echo \"dojo-vm-exit=\$?\""
PATH="$PWD/.venv/bin:$PATH" timeout 2400 .venv/bin/vng --disable-kvm --run "$KERNEL" --memory 2G --cpus 2 \
  --append "cgroup_no_v1=all" --exec "$INNER" 2>&1 | tee "$OUT"
grep -q "cgroup v2" "$OUT" && grep -q "dojo-vm-exit=0" "$OUT"
