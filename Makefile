# fitgate: every target sets up what it needs (a virtualenv in .venv) on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MODEL  ?= meta-llama/Llama-3.1-8B-Instruct
GPU    ?= H100
ARGS   ?= --max-model-len 32768 --concurrency 16 --context-tokens 32000

.PHONY: setup plan test unit lint bench accuracy speed controlplane cluster-up cluster-down e2e clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

## The main job, offline on the built-in catalog: plan a model on a GPU (override MODEL, GPU, ARGS).
plan: $(STAMP)
	$(BIN)/fitgate plan --model $(MODEL) --gpu $(GPU) $(ARGS)

## The whole test suite: lint + types + import contracts + unit/integration tests.
test: $(STAMP)
	$(BIN)/python -m pytest tests

unit: test

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks e2e
	$(BIN)/ruff format --check src tests benchmarks e2e
	$(BIN)/mypy
	$(BIN)/lint-imports

## Accuracy against vLLM's startup logs (../shared/calibration) and plan speed.
bench: accuracy speed
accuracy: $(STAMP)
	$(BIN)/python benchmarks/accuracy.py
speed: $(STAMP)
	$(BIN)/python benchmarks/speed.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
