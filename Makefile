# fitgate: every target sets up what it needs (a virtualenv in .venv) on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MODEL  ?= meta-llama/Llama-3.1-8B-Instruct
GPU    ?= H100
ARGS   ?= --max-model-len 32768 --concurrency 16 --context-tokens 32000

.PHONY: constraints setup plan test unit lint docs bench accuracy speed hub-bench fuzz controlplane tools cluster-up cluster-down e2e clean

# constraints.txt pins every package the tests ran with (regenerate with `make constraints`), so a fresh
# machine installs the same versions CI saw.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

constraints: $(STAMP)
	$(BIN)/pip freeze --exclude-editable | grep -v '^-e' > constraints.txt

setup: $(STAMP)

## The main job, offline on the built-in catalog: plan a model on a GPU (override MODEL, GPU, ARGS).
## A DoesNotFit verdict (exit 1) is a result, not a failure of the job; bad input (exit 2) fails.
plan: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/fitgate plan --model $(MODEL) --gpu $(GPU) $(ARGS); rc=$$?; [ $$rc -le 1 ]

## The whole test suite: lint + types + import contracts + unit/integration tests + e2e on a real
## kube-apiserver (built from Go modules on first use, then cached in .cache/kube/bin).
test: $(STAMP)
	$(BIN)/python -m pytest tests e2e

unit: $(STAMP)
	$(BIN)/python -m pytest tests

e2e: $(STAMP)
	$(BIN)/python -m pytest e2e

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks e2e scripts
	$(BIN)/ruff format --check src tests benchmarks e2e scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

## The documentation site (mkdocs.yml): regenerate the reference pages and example outputs, then build it.
docs: $(STAMP)
	$(BIN)/python scripts/gen_docs.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir .cache/site

## Accuracy against vLLM's startup logs (../shared/calibration) and plan speed.
bench: accuracy speed hub-bench
accuracy: $(STAMP)
	$(BIN)/python benchmarks/accuracy.py
speed: $(STAMP)
	$(BIN)/python benchmarks/speed.py
hub-bench: $(STAMP)
	$(BIN)/python benchmarks/hub.py
## Fuzz the input boundaries (safetensors, index files, AdmissionReview bodies) with 10,000 cases.
fuzz: $(STAMP)
	$(BIN)/python benchmarks/fuzz.py

## The e2e control plane: build kube-apiserver + etcd, install kubectl + helm, start/stop it.
controlplane:
	bash e2e/controlplane/build.sh
tools: $(STAMP)
	$(BIN)/python -m e2e.tools
cluster-up: $(STAMP) tools
	$(BIN)/python -m e2e.cluster up
cluster-down: $(STAMP)
	$(BIN)/python -m e2e.cluster down

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
