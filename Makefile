# `make demo` trains PPO on CartPole over 8 seeds, exports the policy to ONNX and plays it in
# gymnasium; `make test` runs ruff and the whole test suite. Both create .venv on first use.
# The demo installs fxrl's core and its `demo` extra (gymnasium, ONNX, ONNX Runtime) only;
# the tests install the `dev` extra (every extra, the test-only references and tools).
VENV   := .venv
PY     := $(VENV)/bin/python
TORCH_STAMP := $(VENV)/.fxrl-torch
DEMO_STAMP  := $(VENV)/.fxrl-demo
STAMP  := $(VENV)/.fxrl-installed
PYTEST_ARGS ?=

.PHONY: demo test lint bench venv clean web-deps docs docs-serve

# tools/install.py installs with uv, given pip's configuration (indexes, wheel directory,
# constraints), and falls back to pip: the same versions, in a fraction of pip's time.
# FXRL_INSTALL_WITH=pip makes it use pip alone.
INSTALL := $(PY) tools/install.py -c constraints.txt

# torch from the local CPU build constraints.txt pins (any other request downloads GBs)
$(TORCH_STAMP): constraints.txt tools/install.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(INSTALL) torch==2.13.0
	touch $(TORCH_STAMP)

$(DEMO_STAMP): pyproject.toml $(TORCH_STAMP)
	$(INSTALL) -e ".[demo]"
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml $(TORCH_STAMP)
	$(INSTALL) -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(DEMO_STAMP)
	$(PY) -m fxrl.cli demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# npm packages of the web export (onnxruntime-web) and of its browser test (Chromium).
NPM_STAMP := node_modules/.fxrl-installed

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NPM_STAMP)

web-deps: $(NPM_STAMP)

# A fresh inductor cache per run: the suite sees what a new machine sees (a test that only
# passes on a warm cache fails here too); removed afterwards. Hypothesis's "ci" profile
# (derandomized, 30 examples a property; HYPOTHESIS_PROFILE=thorough for more). One
# inductor compile process per pytest worker: two workers already fill two cores, and each
# pool of compile workers (in every `fxrl` subprocess too) costs seconds to start.
test: lint web-deps
	start=$$(date +%s); cache=$$(mktemp -d) && TORCHINDUCTOR_CACHE_DIR=$$cache \
		HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} \
		TORCHINDUCTOR_COMPILE_THREADS=$${TORCHINDUCTOR_COMPILE_THREADS:-1} \
		$(PY) -m pytest -n 2 --dist loadfile --durations=30 \
		$(PYTEST_ARGS); rc=$$?; rm -rf $$cache; \
		echo "make test: pytest took $$(( $$(date +%s) - start )) s (exit status $$rc)"; exit $$rc

bench: $(STAMP)
	$(PY) bench/random_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis

# The documentation site (mkdocs-material + mkdocstrings): strict, so a broken link or an
# unreadable docstring fails; tests/test_docs_build.py runs the same build in CI. web-deps:
# the live CartPole page (docs/hooks/web_demo.py) copies onnxruntime-web from node_modules.
docs: $(STAMP) web-deps
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

docs-serve: $(STAMP) web-deps
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve
