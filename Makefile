# thinwire — every workflow. `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

PYTHON ?= python3
PORT ?= 8000
VENV := .venv
BIN := $(VENV)/bin
STAMPS := .stamps
GENERATED := packages/client/src/generated

# Sources each build depends on, so a second run skips what is up to date.
sources = $(shell find $(1) -type f \( -name '*.ts' -o -name '*.tsx' -o -name '*.css' -o -name '*.html' \) -not -name '*.test.ts' -not -name '*.test.tsx' -not -path '*/node_modules/*' -not -path '*/dist/*')
CLIENT_SRC := $(call sources,packages/client/src) $(wildcard packages/client/*.json)
REACT_SRC := $(call sources,packages/react/src) $(wildcard packages/react/*.json)
WEB_SRC := $(call sources,web/src) web/index.html $(wildcard web/*.json web/*.ts)
NODE_MANIFESTS := package.json package-lock.json $(wildcard packages/*/package.json) web/package.json

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z][a-z0-9-]*:.*## ' $(MAKEFILE_LIST) | sed 's/\$$(PORT)/$(PORT)/' \
		| awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# --- installs -------------------------------------------------------------------------

$(STAMPS)/python: pyproject.toml requirements.lock
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c requirements.lock -e '.[dev,bench]'
	@mkdir -p $(STAMPS) && touch $@ $(STAMPS)/python-run

# What the demo needs and no more: thinwire, and the OpenAI SDK for `thinwire demo`'s
# model (used when $OPENAI_BASE_URL or $OPENAI_API_KEY is set). The tools of the line
# above come with the first `make test`; up to date when that one is.
$(STAMPS)/python-run: pyproject.toml requirements.lock
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c requirements.lock -e '.[openai]'
	@mkdir -p $(STAMPS) && touch $@

# A fresh venv resolves the newest releases pyproject.toml allows, then pins them all.
.PHONY: lock
lock: ## re-resolve the Python dependencies and rewrite requirements.lock
	rm -rf $(VENV).lock && $(PYTHON) -m venv $(VENV).lock
	$(VENV).lock/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,bench]'
	{ sed -n '1,2p' requirements.lock; $(VENV).lock/bin/python -m pip freeze --exclude-editable; } > requirements.lock.new
	mv requirements.lock.new requirements.lock && rm -rf $(VENV).lock

$(STAMPS)/node: $(NODE_MANIFESTS)
	npm ci --no-audit --no-fund --loglevel=error
	@mkdir -p $(STAMPS) && touch $@

.PHONY: install
install: $(STAMPS)/python $(STAMPS)/node ## install Python and npm dependencies (skipped when up to date)

# --- builds ---------------------------------------------------------------------------

$(STAMPS)/client: $(STAMPS)/node $(CLIENT_SRC)
	npm run build --workspace @thinwire/client
	@touch $@

$(STAMPS)/react: $(STAMPS)/client $(REACT_SRC)
	npm run build --workspace @thinwire/react
	@touch $@

$(STAMPS)/web: $(STAMPS)/react $(WEB_SRC)
	npm run build --workspace @thinwire/web-demo
	@touch $@

.PHONY: build
build: $(STAMPS)/web ## build the TypeScript packages and the demo page

# --- packages, as users get them -------------------------------------------------------

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
npm_version = $(shell sed -n 's/^  "version": "\(.*\)",/\1/p' packages/$(1)/package.json)
WHEEL := dist/thinwire-$(VERSION)-py3-none-any.whl
CLIENT_TGZ := dist/thinwire-client-$(call npm_version,client).tgz
REACT_TGZ := dist/thinwire-react-$(call npm_version,react).tgz
PY_SRC := $(shell find server/thinwire -type f \( -name '*.py' -o -name '*.js' -o -name py.typed \) -not -path '*/__pycache__/*')
EXAMPLES_SRC := $(shell find examples -type f -not -path '*/node_modules/*' -not -path '*/dist/*' -not -path '*/.thinwire/*' -not -path '*/__pycache__/*')

# The wheel ships the built demo page (hatch_build.py); pip builds it as it would for a user.
$(WHEEL): $(STAMPS)/python $(STAMPS)/web $(PY_SRC) pyproject.toml hatch_build.py README.md LICENSE
	@rm -f dist/thinwire-*.whl
	$(BIN)/python -m pip wheel . --no-deps --quiet --wheel-dir dist

$(CLIENT_TGZ): $(STAMPS)/client $(addprefix packages/client/,package.json README.md LICENSE)
	@mkdir -p dist && rm -f dist/thinwire-client-*.tgz
	npm pack --workspace @thinwire/client --pack-destination dist --silent >/dev/null

$(REACT_TGZ): $(STAMPS)/react $(addprefix packages/react/,package.json README.md LICENSE)
	@mkdir -p dist && rm -f dist/thinwire-react-*.tgz
	npm pack --workspace @thinwire/react --pack-destination dist --silent >/dev/null

.PHONY: dist
dist: $(WHEEL) $(CLIENT_TGZ) $(REACT_TGZ) ## build the wheel and the npm tarballs into dist/

# --- run ------------------------------------------------------------------------------

.PHONY: run
run: $(STAMPS)/python-run $(STAMPS)/web ## install, build and serve the demo at http://127.0.0.1:$(PORT)
	$(BIN)/thinwire demo --port $(PORT)

# --- schema ---------------------------------------------------------------------------

.PHONY: schema
schema: $(STAMPS)/python ## regenerate the JSON Schema and TypeScript wire types
	cd server && ../$(BIN)/python -m codegen ../$(GENERATED)

.PHONY: check-schema
check-schema: $(STAMPS)/python ## fail when the generated wire types drift from the pydantic models
	cd server && ../$(BIN)/python -m codegen ../$(GENERATED) --check

# --- checks ---------------------------------------------------------------------------

.PHONY: lint
lint: $(STAMPS)/python $(STAMPS)/react ## ruff, mypy --strict and tsc --noEmit (the demo page reads the built packages)
	$(BIN)/ruff check server e2e examples
	$(BIN)/ruff format --check server e2e examples
	$(BIN)/mypy
	$(BIN)/mypy examples/vite-app/agents.py examples/fastapi-mount/main.py
	$(BIN)/mypy examples/ai-sdk-usechat/agents.py  # another agents.py: a run of its own
	npm run typecheck

.PHONY: test-py
test-py: $(STAMPS)/python ## Python server tests (starts its own redis-server)
	THINWIRE_REDIS_SERVER="$$(server/tests/find-redis-server)" $(BIN)/pytest

.PHONY: test-ts
test-ts: $(STAMPS)/client ## TypeScript client and hook tests (vitest)
	npm test

.PHONY: e2e
e2e: $(STAMPS)/python $(STAMPS)/web ## Playwright end-to-end tests in Chromium
	THINWIRE_CHROMIUM="$$(e2e/find-chromium)" \
	THINWIRE_REDIS_SERVER="$$(server/tests/find-redis-server)" $(BIN)/pytest e2e --ignore=e2e/examples

# The users' path: the wheel and the tarballs installed outside the checkout (a venv and
# copies of examples/ under $TMPDIR, kept while their inputs' hashes hold), the examples
# built and driven in Chromium, the docs' TypeScript compiled. Skipped when nothing changed.
$(STAMPS)/examples: $(STAMPS)/python $(WHEEL) $(CLIENT_TGZ) $(REACT_TGZ) $(EXAMPLES_SRC) \
		$(wildcard e2e/examples/*.py) e2e/conftest.py README.md $(wildcard docs/*.md)
	$(BIN)/python e2e/examples/userland.py
	THINWIRE_CHROMIUM="$$(e2e/find-chromium)" $(BIN)/pytest e2e/examples
	@touch $@

.PHONY: test-examples
test-examples: $(STAMPS)/examples ## examples/ and the docs' TypeScript, from the wheel and npm tarballs as users install them

.PHONY: test
test: ## install what is missing, then run every check and suite
	$(MAKE) lint
	$(MAKE) check-schema
	$(MAKE) test-py
	$(MAKE) test-ts
	$(MAKE) e2e
	$(MAKE) test-examples

# --- benchmarks -----------------------------------------------------------------------

# The bench's Node pieces (the AI SDK server, esbuild) install apart from the workspaces.
$(STAMPS)/bench-node: packages/bench/package.json packages/bench/package-lock.json
	npm ci --prefix packages/bench --no-audit --no-fund --loglevel=error
	@mkdir -p $(STAMPS) && touch $@

.PHONY: bench
bench: $(STAMPS)/python $(STAMPS)/react $(STAMPS)/bench-node ## thinwire side by side with bare, sse-starlette and the AI SDK (QUICK=1: short run)
	THINWIRE_CHROMIUM="$${THINWIRE_CHROMIUM:-$$(e2e/find-chromium || true)}" \
		$(BIN)/python -m bench $(if $(QUICK),--quick) $(BENCH_ARGS)

# --- fault drills ---------------------------------------------------------------------

.PHONY: chaos
chaos: $(STAMPS)/python ## fault drills: SIGKILL, SIGTERM, full disk, Redis and replica loss, floods (QUICK=1: short run)
	cd server && THINWIRE_REDIS_SERVER="$$(tests/find-redis-server)" \
		../$(BIN)/python -m chaos $(if $(QUICK),--quick) $(CHAOS_ARGS)

.PHONY: clean
clean: ## remove builds and their stamps (keeps installs and theirs)
	rm -rf $(addprefix $(STAMPS)/,client react web examples) packages/*/dist web/dist dist

.PHONY: distclean
distclean: clean ## also remove installed dependencies
	[ ! -x $(BIN)/python ] || $(BIN)/python e2e/examples/userland.py --remove
	rm -rf $(STAMPS) $(VENV) node_modules packages/*/node_modules web/node_modules e2e/*-js/node_modules
