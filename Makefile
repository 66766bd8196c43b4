# The few commands this project is run with. `make help` lists them.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Debian packages the tracker and its tests need: redis-server (embedded default and tests),
# libev-dev (bjoern builds against it), wrk (whole-server benchmarks), rsync and curl (the real
# warrior client uploads with them in the end-to-end tests), chromium (the leaderboard page's
# headless browser test), faketime (a node whose clock is off, in the clock-skew tests and faults),
# prometheus (its promtool checks the alert rules) and docker-compose (validates compose.yaml; no
# daemon needed).
APT_PACKAGES := redis-server libev-dev wrk rsync curl chromium chromium-driver faketime prometheus docker-compose
# What `make lint` needs, and no browser: lua-check (luacheck on the Redis scripts) and libev-dev
# (bjoern builds against it; the type checker reads the runtime packages' types).
LINT_APT_PACKAGES := lua-check libev-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ARGS ?=

.PHONY: help deps lint-deps venv build run docker lint format test test-fast bench bench-quick bench-offload chaos chaos-cluster fuzz vendor clean deploy-lint deploy-test

help:  ## List the commands.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# Install those of the Debian packages $(1) that are missing, without their recommends (those of
# docker-compose and prometheus are a Docker daemon and a node exporter).
apt_install = missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

deps:  ## Install the Debian packages that are missing.
	@$(call apt_install,$(APT_PACKAGES))

lint-deps:
	@$(call apt_install,$(LINT_APT_PACKAGES))

# The lint tools and the runtime packages, without the test tools or the Cython build.
$(VENV)/.lint-installed: requirements.txt requirements-lint.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -r requirements-lint.txt
	touch $@

$(VENV)/.installed: requirements.txt requirements-lint.txt requirements-dev.txt setup.py pyproject.toml $(wildcard src/tracker_core/compiled/*.pyx)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -r requirements-dev.txt
	$(PIP) install -q --no-build-isolation -e .
	touch $@

venv: deps $(VENV)/.installed  ## Create .venv with the pinned packages and the Cython build.

build: venv  ## Rebuild the Cython extensions in place.
	$(PIP) install -q --no-build-isolation -e .

run: venv  ## Start the tracker with a demo project on the embedded Redis (var/).
	$(VENV)/bin/tracker run --demo $(ARGS)

docker:  ## Build the image and start the demo in containers (needs Docker with Compose).
	docker compose up --build

lint: lint-deps $(VENV)/.lint-installed  ## Check the code: ruff (errors, bugbear, imports, format), mypy on src/, luacheck on the Lua.
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	luacheck --no-color -q src/tracker_core/lua

format: lint-deps $(VENV)/.lint-installed  ## Format the code and fix what ruff can fix safely.
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The second run puts the pure-Python twins in place of the compiled modules (classify, protocol,
# bloom) and runs the tests marked `twins`: the twins' own tests and those of the code that calls
# them (the files listed in tests/support/twins.py; tests/core/compiled/test_twins_suite.py checks every
# compiled module has some, and the run fails if a listed file no longer reaches its twin).
# Both runs deal whole files out to TEST_WORKERS processes (pytest-xdist), each with its own Redis:
# most tests wait on servers, Redis and browsers, so one process left a core idle. The files with
# slow tests go first (tests/conftest.py); TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -p no:benchmark
test: venv  ## Run the whole test suite (compiled), then the twins' tests on the pure-Python twins.
	$(PY) -m pytest $(PARALLEL) $(ARGS)
	TRACKER_PURE_PYTHON=1 $(PY) -m pytest $(PARALLEL) -m "twins and not slow" -q -p no:cacheprovider $(PURE_ARGS)

test-fast: venv  ## Run the suite without the slow end-to-end tests.
	$(PY) -m pytest -m "not slow" $(ARGS)

# The benchmarks are cases registered in benchmarks/harness (`make bench ARGS=--list` names them);
# each result file in benchmarks/results/ records its command, commit, machine, load and history.
bench: venv  ## Run every benchmark at full size (~45 min; not offload: make bench-offload); ARGS="--only cpu,bloom".
	PYTHONPATH=benchmarks $(PY) -m harness --skip offload $(ARGS)

bench-quick: venv  ## Run every benchmark small (a few minutes): does each still run? Figures not kept. CI runs it.
	PYTHONPATH=benchmarks $(PY) -m harness --quick $(ARGS)

# The fault suite (docs/faults.md): a seeded run on loopback, figures in benchmarks/results/.
CHAOS_ARGS ?=
chaos: venv  ## Kill workers, the server and Redis under load, stall and fill Redis; check every item (~6 min).
	PYTHONPATH=benchmarks $(PY) -m chaos $(CHAOS_ARGS)
	$(MAKE) fuzz

chaos-cluster: venv  ## The fault suite on a Redis Cluster (3 primaries + replicas), a 3-shard project, primaries killed (~3 min).
	PYTHONPATH=benchmarks $(PY) -m chaos --cluster --shards 3 --out benchmarks/results/chaos_cluster.json $(CHAOS_ARGS)

FUZZ_REQUESTS ?= 10000
fuzz: venv  ## Send FUZZ_REQUESTS generated requests (API, admin, raw HTTP): no 5xx, hang or change.
	FUZZ_REQUESTS=$(FUZZ_REQUESTS) $(PY) -m pytest tests/e2e/test_fuzz.py -q -p no:cacheprovider $(ARGS)

OFFLOAD_ITEMS ?= 35000000
bench-offload: venv  ## Load OFFLOAD_ITEMS items with offloading on and drain them (35M: ~45 min).
	PYTHONPATH=benchmarks $(PY) -m harness --only offload --set items=$(OFFLOAD_ITEMS) $(ARGS)

$(VENV)/.deploy-installed: requirements-deploy.txt $(VENV)/.installed
	$(PIP) install -q -r requirements-deploy.txt
	touch $@

deploy-lint: venv $(VENV)/.deploy-installed  ## Lint the Ansible playbooks (ansible/).
	cd ansible && ../$(VENV)/bin/ansible-lint

# Needs root (installs debootstrap, and haproxy for the HAProxy role tests): debootstraps Debian roots (base cached in /var/cache/tracker-deploy), provisions them
# with ansible/site.yml and drives them through HAProxy in network namespaces. Several minutes.
deploy-test: deploy-lint  ## Deploy with Ansible to throwaway Debian roots and work a project through it.
	@for p in debootstrap haproxy; do dpkg -s $$p >/dev/null 2>&1 || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$p; done
	$(SUDO) env TRACKER_DEPLOY_TEST=1 $(PY) -m pytest tests/deploy -m deploy -p no:cacheprovider $(ARGS)

# The leaderboard's front-end library, from its npm package, is shipped in the repository
# (src/tracker_api/static/, with its licence) so the page loads nothing from other hosts.
UPLOT_VERSION := 1.6.32
vendor:  ## Refresh the vendored front-end files from npm (needs npm; not part of the build).
	rm -rf build/vendor && mkdir -p build/vendor
	cd build/vendor && npm pack --silent uplot@$(UPLOT_VERSION) && tar xzf uplot-$(UPLOT_VERSION).tgz
	cp build/vendor/package/dist/uPlot.iife.min.js build/vendor/package/dist/uPlot.min.css src/tracker_api/static/
	cp build/vendor/package/LICENSE src/tracker_api/static/uPlot.LICENSE

clean:  ## Remove the virtualenv, build products and var/.
	rm -rf $(VENV) build src/*.egg-info src/tracker_core/compiled/*.c src/tracker_core/compiled/*.so var
