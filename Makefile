# Two commands set everything up on a fresh machine: `make run` and `make test`.
# torch goes in first so that the package's `torch>=` range is already met: on the project machines the CPU wheel
# torch==2.13.0 lies on local disk (/opt/wheels); a bare `pip install torch` would pull a multi-GB CUDA build.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_SPEC ?= $(shell ls /opt/wheels/torch-2.13.0* >/dev/null 2>&1 && echo "torch==2.13.0" || echo "torch>=2.3")
EXTRAS ?= dev,llm,eval,mujoco,distributed
STAMP := $(VENV)/.installed-$(shell echo "$(EXTRAS)" | tr ',' '-')

.PHONY: run test lint typecheck pytest docs install browser clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# --no-compile: pip would byte-compile every file of every package (about a minute here); Python compiles the modules
# a command imports when it first imports them.
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q --no-compile "$(TORCH_SPEC)"
	$(PIP) install -q --no-compile -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

# The main job: the quick benchmark suite over every landed pillar.
run: $(STAMP)
	OMP_NUM_THREADS=1 $(VENV)/bin/rolloutlab bench

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy rolloutlab mbrl planning meta envs

pytest: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q

# Debian's Chromium + chromedriver for the Wordle page's browser test; never fails (the test skips saying why).
browser:
	bash scripts/install_browser.sh

# The documentation site (mkdocs + mkdocstrings); strict, so a broken link or an unresolvable API name fails.
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict -q -d build/site

test: browser lint typecheck docs pytest

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .browser-install.log build/site
