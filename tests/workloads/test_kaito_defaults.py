"""KAITO's controller defaults (kaito-project/kaito @056b8280) as the Workspace reader applies them.

pkg/model/interface.go L375-392: ``--gpu-memory-utilization=0.84``, 0.82 on "NVIDIA A10"; L414-415 with
pkg/workspace/inference/preset_inferences.go L581-590: ``--max-model-len=auto``; L525-555 and L686-698: a checkpoint
under half of one GPU runs ``--data-parallel-size=<node GPUs> --tensor-parallel-size=1``; the ConfigMap's vllm block
comes later on the command line and wins.
"""

from __future__ import annotations

from pathlib import Path

from fitgate.operator.decision.offline import check_files
from fitgate.workloads.crds import KAITO_PRESETS

WORKSPACE = """
apiVersion: kaito.sh/v1beta1
kind: Workspace
metadata: {{name: ws, namespace: default}}
resource:
  instanceType: {instance}
  labelSelector: {{matchLabels: {{apps: llama}}}}
inference:
  preset: {{name: {preset}}}
{config}"""

CONFIG = """  config: cfg
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: default}
data:
  inference_config.yaml: |
    vllm:
      gpu-memory-utilization: 0.7
      max-model-len: 2048
"""


def _check(tmp_path: Path, instance: str, preset: str = "llama-3.1-8b-instruct", config: str = "") -> str:
    f = tmp_path / "ws.yaml"
    f.write_text(WORKSPACE.format(instance=instance, preset=preset, config=config))
    results = [r for r in check_files([str(f)]) if r.kind == "Workspace"]
    assert len(results) == 1
    return f"{results[0].verdict}: {results[0].message}"


def test_kaito_fastcheck_llama_8b_on_one_a10_is_not_denied(tmp_path: Path) -> None:
    # test/e2e/preset_vllm_test.go L122-141: kept enabled, so it started. At the model's 131072 tokens one request
    # needs 16 GiB of KV and 0.82 x 22 GiB leaves ~1.6 GiB: only --max-model-len=auto lets vLLM start
    line = _check(tmp_path, "Standard_NV36ads_A10_v5")
    assert not line.startswith("DoesNotFit"), line
    assert "--gpu-memory-utilization=0.82" in line and "--max-model-len=auto" in line, line


def test_other_gpus_get_084_and_a_small_model_runs_data_parallel(tmp_path: Path) -> None:
    # Standard_NC96ads_A100_v4: 4 x A100 80GB; llama-3.1-8b's 14.96Gi (model_catalog.yaml) < half of 80 GB
    line = _check(tmp_path, "Standard_NC96ads_A100_v4")
    assert line.startswith("Fits"), line
    assert "--gpu-memory-utilization=0.84" in line, line
    assert "--data-parallel-size 4 --tensor-parallel-size 1" in line, line


def test_a_bigger_model_keeps_tensor_parallel_over_the_node(tmp_path: Path) -> None:
    # llama-3.3-70b's 131.42Gi is more than half of one 80 GB GPU: KAITO's second tier, TP = the node's 4 GPUs
    line = _check(tmp_path, "Standard_NC96ads_A100_v4", "llama-3.3-70b-instruct")
    assert "data-parallel" not in line and "KAITO runs --tensor-parallel-size 4" in line, line


def test_the_configmap_wins(tmp_path: Path) -> None:
    line = _check(tmp_path, "Standard_NV36ads_A10_v5", config=CONFIG)
    # the ConfigMap's 0.7 is sized, not KAITO's 0.82: 0.7 x 22.06 GiB = 15.44 GiB, less than 8B's 14.99 GiB of
    # bf16 weights plus its activation and CUDA graphs, a denial that holds at any length
    assert "(0.7 x 22.06 GiB)" in line, line
    assert "(0.82 x" not in line, line


def test_a_hub_id_as_preset_name_is_read(tmp_path: Path) -> None:
    # KAITO accepts any Hub repo id as a preset name (e42bb0418); a catalog model sizes offline
    assert "meta-llama/Llama-3.1-8B-Instruct" not in KAITO_PRESETS
    line = _check(tmp_path, "Standard_NV36ads_A10_v5", "meta-llama/Llama-3.1-8B-Instruct")
    assert "not a KAITO preset" not in line and not line.startswith("DoesNotFit"), line
