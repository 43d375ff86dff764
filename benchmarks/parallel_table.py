"""The expert-parallelism table of docs/parallelism.md, printed from the sizing code (so it cannot drift).

Usage: python benchmarks/parallel_table.py [--gpu H200]

For each MoE model of tests/corpus (real config.json files, weights estimated from them, or the
catalog's exact safetensors metadata where it has the model), plan TP 8, DP 8 + EP on one node and
DP 16 + EP on two nodes of 8 (``-dpl 8``) and print per-GPU weights, KV pool and verdict, with the
public recipe or guide that ran each documented configuration. A documented configuration that
fitgate would deny is flagged ``DENIED`` (the tests require none).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fitgate.checkpoints import resolve, to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.sizing import ModelInput, ServingConfig, lookup_gpu, plan
from fitgate.sizing.units import GiB

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus"

RECIPES = "vllm-project/recipes@8959cf6"
DSV3_RECIPE = f"{RECIPES}:DeepSeek/DeepSeek-V3.md L35-76 (8xH200: TP8+EP, DP8+EP)"
LLMD_WIDE_EP = "llm-d/llm-d:guides/wide-ep-lws/README.md (DeepSeek-R1-0528, decode DP16 on 2x8 H200)"
KIMI_CARD = (
    "moonshotai/Kimi-K2-Instruct model card: smallest H200 unit is 16 GPUs, TP16 or DP16+EP "
    "(huggingface.co/moonshotai/Kimi-K2-Instruct#deployment)"
)
CODER_RECIPE = f"{RECIPES}:Qwen/Qwen3-Coder-480B-A35B.md L21-40 (8xH200 BF16: TP8+EP, --max-model-len 32000)"
QWEN35_RECIPE = f"{RECIPES}:Qwen/Qwen3.5.md L110-128 (Qwen3.5-397B-A17B-FP8 on 8xH200: -dp 8 -ep)"
GLM5_RECIPE = f"{RECIPES}:GLM/GLM5.md L46-60 (GLM-5.1-FP8 on 8xH200: TP8)"
GPT_OSS_RECIPE = f"{RECIPES}:OpenAI/GPT-OSS.md L42-47 (TP 1/2/4/8 on H100/H200)"
LLAMA4_POST = "blog.vllm.ai/2025/04/05/llama4.html (8xH200: Scout TP8 --max-model-len 3600000)"
GLM52_GUIDE = (
    "llm-d/llm-d:guides/wide-ep-lws/modelserver/gpu/vllm-glm-5.2 (H200: DEP8 one node, DEP16 two nodes; "
    "max-model-len caps at ~108K on DEP8; decode 131072, fp8 KV, MTP 3, deepep_low_latency)"
)
#: Settings a public run used besides the shape (``--max-model-len`` and the like).
GLM52_DEP8 = {"max_model_len": 108000, "speculative_method": "mtp", "speculative_tokens": 3}
GLM52_DEP16 = {
    "max_model_len": 131072,
    "kv_cache_dtype": "fp8",
    "gpu_memory_utilization": 0.80,  # multi-node: NVSHMEM_SYMMETRIC_SIZE=16G and gmu 0.80 (decode.yaml)
    "all2all_backend": "deepep_low_latency",
    "max_num_batched_tokens": 64,  # MAX_TOKENS_PER_NODE 32 x 2 nodes (decode.yaml)
    "max_num_seqs": 64,
    "speculative_method": "mtp",
    "speculative_tokens": 3,
}

SHAPES = {
    "TP8": {"tensor_parallel_size": 8},
    "TP8+EP": {"tensor_parallel_size": 8, "enable_expert_parallel": True},
    "DP8+EP": {"data_parallel_size": 8, "enable_expert_parallel": True},
    "DP16+EP (2 nodes)": {"data_parallel_size": 16, "data_parallel_size_local": 8, "enable_expert_parallel": True},
}


@dataclass(frozen=True)
class Row:
    """One model, the shapes it is planned with, and the public runs of some of them."""

    label: str
    source: str  # catalog repo id, or a tests/corpus directory
    documented: dict[str, str]  # shape -> where it was run
    max_model_len: int | None = None
    fp8_like: str | None = None  # another corpus config whose quantization_config this one is given
    settings: tuple[tuple[str, dict[str, object]], ...] = ()  # shape -> the public run's other settings


ROWS = (
    Row(
        "DeepSeek-V3 (fp8)",
        "deepseek-ai/DeepSeek-V3",
        {"TP8+EP": DSV3_RECIPE, "DP8+EP": DSV3_RECIPE, "DP16+EP (2 nodes)": LLMD_WIDE_EP},
    ),
    Row(
        "DeepSeek-R1 (fp8)",
        "deepseek-ai__DeepSeek-R1",
        {"TP8+EP": DSV3_RECIPE, "DP8+EP": DSV3_RECIPE, "DP16+EP (2 nodes)": LLMD_WIDE_EP},
    ),
    Row("Kimi K2 (fp8, 1T)", "moonshotai__Kimi-K2-Instruct", {"DP16+EP (2 nodes)": KIMI_CARD}),
    Row("Qwen3-235B-A22B-FP8", "Qwen__Qwen3-235B-A22B-FP8", {}),
    Row("Qwen3-Coder-480B-A35B (bf16)", "Qwen__Qwen3-Coder-480B-A35B-Instruct", {"TP8+EP": CODER_RECIPE}, 32000),
    Row(
        "Qwen3.5-397B-A17B-FP8*",
        "Qwen__Qwen3.5-397B-A17B",
        {"DP8+EP": QWEN35_RECIPE},
        fp8_like="Qwen__Qwen3-235B-A22B-FP8",
    ),
    Row("GLM-5-FP8", "zai-org__GLM-5-FP8", {"TP8": GLM5_RECIPE}),
    Row(
        "GLM-5.2-FP8 (guide's settings)",
        "zai-org__GLM-5.2-FP8",
        {"DP8+EP": GLM52_GUIDE, "DP16+EP (2 nodes)": GLM52_GUIDE},
        settings=(("DP8+EP", GLM52_DEP8), ("DP16+EP (2 nodes)", GLM52_DEP16)),
    ),
    Row("gpt-oss-120b (mxfp4)", "openai__gpt-oss-120b", {"TP8": GPT_OSS_RECIPE}),
    # vLLM's Llama 4 post runs Maverick *FP8* at TP 8 on 8xH200 with a 1M context; this is the BF16 config
    Row("Llama 4 Maverick (bf16, 1M)", "meta-llama__Llama-4-Maverick-17B-128E-Instruct", {}),
    # Scout: 8xH200 TP 8 at --max-model-len 3600000 (blog.vllm.ai/2025/04/05/llama4.html); its 10M-token
    # default context would not fit one request's KV
    Row("Llama 4 Scout (bf16, 3.6M)", "meta-llama/Llama-4-Scout-17B-16E-Instruct", {"TP8": LLAMA4_POST}, 3600000),
)


def load(row: Row) -> ModelInput:
    """The row's model: the catalog's exact entry, or a corpus config (optionally given an FP8 quantization_config)."""
    if "__" not in row.source:
        return to_model_input(resolve(row.source, source="catalog"))
    directory = CORPUS / row.source
    if row.fp8_like is None:
        return to_model_input(load_directory(directory))
    import tempfile  # noqa: PLC0415

    config = json.loads((directory / "config.json").read_text())
    like = json.loads((CORPUS / row.fp8_like / "config.json").read_text())
    target = config.get("text_config", config)
    target["quantization_config"] = like["quantization_config"]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        return to_model_input(load_directory(Path(tmp)))


def table(gpu_name: str = "H200") -> list[dict[str, object]]:
    """One entry per (model, shape): per-GPU weights and KV pool in GiB, the verdict, and the public run."""
    gpu = lookup_gpu(gpu_name, "--gpu")
    out: list[dict[str, object]] = []
    for row in ROWS:
        model = load(row)
        for shape, kw in SHAPES.items():
            if shape == "TP8+EP" and shape not in row.documented:
                continue
            extra = dict(row.settings).get(shape, {})
            if row.settings and shape not in row.documented:
                continue
            config = {"max_model_len": row.max_model_len, **kw, **extra}
            p = plan(model, gpu, ServingConfig(**config))  # type: ignore[arg-type]
            out.append(
                {
                    "model": row.label,
                    "shape": shape,
                    "weights_gib": round(p.per_gpu.weights_bytes / GiB, 1),
                    "kv_gib": round(p.per_gpu.kv_cache_bytes / GiB, 1),
                    "verdict": p.verdict.value,
                    "documented": row.documented.get(shape, ""),
                    "denied": bool(row.documented.get(shape)) and p.verdict.value == "DoesNotFit",
                }
            )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="H200")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = table(args.gpu)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("\n".join(markdown(rows, args.gpu)))
    return 1 if any(r["denied"] for r in rows) else 0


def markdown(rows: list[dict[str, Any]], gpu: str) -> list[str]:
    """The table as Markdown lines (docs/parallelism.md and the README quote rows of it; a test compares)."""
    out = [
        f"| model ({gpu}) | shape | weights / GPU | KV pool / GPU | verdict | run publicly |",
        "|---|---|---:|---:|---|---|",
    ]
    for r in rows:
        flag = " **DENIED**" if r["denied"] else ""
        out.append(
            f"| {r['model']} | {r['shape']} | {r['weights_gib']} GiB | {r['kv_gib']} GiB | {r['verdict']}{flag} "
            f"| {r['documented'] or '-'} |"
        )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
