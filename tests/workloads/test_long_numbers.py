"""A number past Python's 4,300-digit ``int()`` limit in user text is a clear one-line error (hunt83 F3).

``json.loads`` and PyYAML's int constructor raise ``ValueError`` (not ``JSONDecodeError`` / ``YAMLError``) for such a
number; the readers on the webhook path caught only the parse errors, so the message was Python's advice
("use sys.set_int_max_str_digits()") from the catch-all, or an uncaught exception.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from fitgate.operator.decision.offline import check_files
from fitgate.sizing.cudagraphs import graph_flags
from fitgate.sizing.errors import SizingError
from fitgate.sizing.hf_config import parse_hf_overrides
from fitgate.sizing.speculative import parse_config
from fitgate.workloads.reader import read_workload
from tests.workloads.test_kaito_defaults import WORKSPACE

BIG = "9" * 5000  # past sys.get_int_max_str_digits() (4300)
MANIFESTS = Path(__file__).parents[1] / "fixtures" / "manifests"


def test_the_limit_is_what_python_refuses() -> None:
    assert sys.get_int_max_str_digits() < len(BIG)


def test_a_long_number_in_json_flags_is_a_flag_error_not_pythons_advice() -> None:
    with pytest.raises(SizingError, match="--speculative-config"):
        parse_config('{"method": "mtp", "num_speculative_tokens": ' + BIG + "}")
    assert parse_hf_overrides('{"max_position_embeddings": ' + BIG + "}") is None  # ignored, with a note
    read = graph_flags({"--compilation-config": '{"max_cudagraph_capture_size": ' + BIG + "}"})
    assert read.notes and "--compilation-config" in read.notes[0]


def test_a_long_number_in_serve_config_is_invalid_naming_the_field() -> None:
    ray = next(d for d in yaml.safe_load_all((MANIFESTS / "kuberay-ray-serve-llm.yaml").read_text()) if d)
    ray["spec"]["serveConfigV2"] = "applications:\n  - name: x\n    n: " + BIG + "\n"
    reading = read_workload(ray)
    assert reading is not None and reading.invalid == "spec.serveConfigV2: holds a number of more than 4300 digits"


def test_a_long_number_in_a_kaito_configmap_names_the_configmap(tmp_path: Path) -> None:
    config = (
        "  config: cfg\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: default}\n"
        f"data:\n  inference_config.yaml: |\n    vllm:\n      max-model-len: {BIG}\n"
    )
    f = tmp_path / "ws.yaml"
    f.write_text(WORKSPACE.format(instance="Standard_NC24ads_A100_v4", preset="llama-3.1-8b-instruct", config=config))
    (result,) = [r for r in check_files([str(f)]) if r.kind == "Workspace"]
    assert "ConfigMap cfg key inference_config.yaml: holds a number of more than 4300 digits" in result.message
    assert "set_int_max_str_digits" not in result.message
