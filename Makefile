# Two commands set everything up on a fresh machine: `make run` and `make test`.
# torch goes in first so that the package's `torch>=` range is already met: on the project machines the CPU wheel
# torch==2.13.0 lies on local disk (/opt/wheels); a bare `pip install torch` would pull a multi-GB CUDA build.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_SPEC ?= $(shell ls /opt/wheels/torch-2.13.0* >/dev/null 2>&1 && echo "torch==2.13.0" || echo "torch>=2.3")
EXTRAS ?= dev,llm,eval,mujoco,distributed,sbx
STAMP := $(VENV)/.installed-$(shell echo "$(EXTRAS)" | tr ',' '-')

.PHONY: run test lint typecheck pytest docs install browser clean test-trl-matrix

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q "$(TORCH_SPEC)"
	$(PIP) install -q -e ".[$(EXTRAS)]"
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

# The TRL adapter's tests on the oldest and the newest TRL release of meta.rlvr.trl_limits.SUPPORTED_TRL, each in a
# venv of its own (.venv-trl-<release>); tests/rlvr/test_rlvr_trl_versions.py checks this list against the range.
# Not part of `make test` (two more venvs to build, then under a minute of tests each on 2 cores): `make test` runs
# the same tests on the TRL the llm extra resolves to and checks the version range itself.
TRL_MATRIX ?= 1.11.0 1.16.0
TRL_TESTS := tests/rlvr/test_rlvr_trl_versions.py tests/rlvr/test_rlvr_trl.py tests/rlvr/test_rlvr_trl_limits.py \
	tests/rlvr/test_rlvr_trl_vllm.py tests/rlvr/test_rlvr_trl_data_parallel.py tests/rlvr/test_rlvr_meta_trl.py \
	tests/rlvr/test_rlvr_example.py tests/rlvr/test_rlvr_trl_benchmark.py

# eval: the meta-policy test trains a controller, whose training report draws with matplotlib.
.venv-trl-%/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv .venv-trl-$*
	.venv-trl-$*/bin/python -m pip install -q "$(TORCH_SPEC)"
	.venv-trl-$*/bin/python -m pip install -q -e ".[dev,llm,eval]" "trl==$*"
	touch $@

test-trl-matrix: $(foreach v,$(TRL_MATRIX),.venv-trl-$(v)/.installed)
	@for v in $(TRL_MATRIX); do \
		echo "== TRL $$v: $$(.venv-trl-$$v/bin/python -c 'import importlib.metadata as m; print(", ".join(p + " " + m.version(p) for p in ("trl", "transformers", "torch")))')"; \
		env -u PYTHONPATH OMP_NUM_THREADS=1 .venv-trl-$$v/bin/python -m pytest -q -p no:cacheprovider $(TRL_TESTS) || exit 1; \
	done

clean:
	rm -rf $(VENV) .venv-trl-* .mypy_cache .ruff_cache .pytest_cache .browser-install.log build/site
