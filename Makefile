# conveyor: `make demo` and `make test` do all set-up on a fresh Debian machine with Python 3.11.
SHELL := /bin/bash
PY := $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CODE_DIRS := runtime actors simulation cli benchmarks
# Reinstall when the project file changes or a package gains or loses a module (editable strict mode links files).
$(STAMP): pyproject.toml $(shell find $(CODE_DIRS) -type d -not -name __pycache__ 2>/dev/null)
	@test -x $(BIN)/python || $(PY) -m venv $(VENV) || { \
		echo "python venv module missing; installing python3-venv"; \
		apt-get update -qq && apt-get install -y -qq python3-venv && $(PY) -m venv $(VENV); }
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[all,dev]' --config-settings editable_mode=strict
	@touch $@

.PHONY: java zookeeper install demo test test-slow test-light test-cluster crash-test mutants lint typecheck bench bench-storage rabbitmq clean
# PySpark (the sweep, trace analysis) needs a Java runtime: install one when none is on the PATH.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
java:
	@command -v java >/dev/null 2>&1 || { \
		echo "java missing (PySpark needs it); installing openjdk-17-jre-headless"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq openjdk-17-jre-headless; }

install: java $(STAMP)

# ZooKeeper 3.8 (Debian package `zookeeper`, not started as a service): the tests' fixtures start private servers
# on loopback (conveyor.actors.zookeeper.pytest_plugin). Quiet when it is already there.
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
zookeeper: java
	@test -f $(ZOOKEEPER_JAR) || { \
		echo "zookeeper missing; installing the Debian package"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		$(SUDO) apt-get install -y -qq --no-install-recommends zookeeper >/dev/null; }

# The actor demo on the three backends, then the main job: a default Spark sweep (summary table, report path).
demo: install
	$(BIN)/conveyor demo
	$(BIN)/conveyor sweep --seeds 12 --faults default,pause --out reports/demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check . || true

typecheck: install
	$(BIN)/mypy

test: install zookeeper lint typecheck
	$(BIN)/python -m pytest -m "not slow" -q --durations=15

test-slow: install zookeeper
	$(BIN)/python -m pytest -m slow -q

# The light install (`pip install conveyor`, no extras) in a fresh venv: its size, imports and commands (one slow test).
test-light: install
	$(BIN)/python -m pytest tests/test_packaging.py -m slow -q -s

# The sweep on a standalone Spark cluster started by the test (a master and two 1-core workers on loopback
# whose Python lacks conveyor): its rows equal local[2]'s. Part of test-slow; a few minutes on 2 cores.
test-cluster: install
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/simulation/sweep/test_cluster.py

# The kill -9 crash test by hand (tests/crash): CYCLES kills of a client life on one data directory, a drain,
# then Jepsen's total-queue checks. CRASH_TARGET: embedded (the broker on TrioSystem) or pubsub (conveyor serve).
# CRASH_MEMORY_TARGET=65536 (embedded only): the durable queue pages its bodies and its tail's entries under it.
CYCLES ?= 50
CRASH_TARGET ?= embedded
CRASH_SEED ?= 1
CRASH_MEMORY_TARGET ?=
crash-test: install
	$(BIN)/python -m tests.crash --target $(CRASH_TARGET) --cycles $(CYCLES) --seed $(CRASH_SEED) \
		$(if $(CRASH_MEMORY_TARGET),--memory-target $(CRASH_MEMORY_TARGET))

# Mutation testing (tools/mutants.py): a deterministic sample of one-point mutants of the cores and actors,
# each judged by the default `conveyor simulate all` and by its package's tests; table in reports/mutants.md.
# About 30 s a mutant on one core. TESTS: package (the package's tests), quick (the module's own test file), none.
MUTANTS ?= 120
SEED ?= 17
TESTS ?= package
mutants: install
	$(BIN)/python tools/mutants.py --count $(MUTANTS) --seed $(SEED) --tests $(TESTS) --out reports/mutants.md

bench: install
	$(BIN)/python benchmarks/runtime.py

# RabbitMQ 3.x and pika, the peer of `conveyor bench storage` (docs/storage.md, "Benchmark"): the Debian package
# (not started as a service: the benchmark starts and stops its own node on loopback) and the `bench` extra.
rabbitmq: install
	@test -x /usr/lib/rabbitmq/bin/rabbitmq-server || { \
		echo "rabbitmq-server missing; installing the Debian package"; \
		$(SUDO) apt-get update -qq && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive \
		$(SUDO) apt-get install -y -qq --no-install-recommends rabbitmq-server; }
	$(BIN)/python -m pip install -q -e '.[all,dev,bench]' --config-settings editable_mode=strict

# The full-size storage benchmark (minutes; not in CI): conveyor beside RabbitMQ, memory, recovery.
bench-storage: rabbitmq
	$(BIN)/conveyor bench storage

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
