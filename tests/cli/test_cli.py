"""The fitgate CLI, as a user runs it: exit codes, the JSON contract, local checkpoints."""

from __future__ import annotations

import json
import shlex
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from fitgate.cli import main
from fitgate.cli.app import fold_dotted
from tests.conftest import TINY_LLAMA, catalog_config

TINY = {**TINY_LLAMA, "tie_word_embeddings": False}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run(capsys, "plan", *argv, "--output", "json")
    assert err == ""
    return code, json.loads(out)


def write_tiny_checkpoint(path: Path) -> int:
    """A real safetensors checkpoint of a 2-layer Llama (float16 arrays; header dtype F16)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(TINY))
    h, i, v, kv = 256, 512, 1024, 2 * 64
    tensors = {
        "model.embed_tokens.weight": np.zeros((v, h), np.float16),
        "lm_head.weight": np.zeros((v, h), np.float16),
        "model.norm.weight": np.zeros((h,), np.float16),
    }
    for n in range(2):
        p = f"model.layers.{n}."
        tensors |= {
            p + "self_attn.q_proj.weight": np.zeros((h, h), np.float16),
            p + "self_attn.k_proj.weight": np.zeros((kv, h), np.float16),
            p + "self_attn.v_proj.weight": np.zeros((kv, h), np.float16),
            p + "self_attn.o_proj.weight": np.zeros((h, h), np.float16),
            p + "mlp.gate_proj.weight": np.zeros((i, h), np.float16),
            p + "mlp.up_proj.weight": np.zeros((i, h), np.float16),
            p + "mlp.down_proj.weight": np.zeros((h, i), np.float16),
            p + "input_layernorm.weight": np.zeros((h,), np.float16),
            p + "post_attention_layernorm.weight": np.zeros((h,), np.float16),
        }
    save_file(dict(list(tensors.items())[:10]), str(path / "model-00001-of-00002.safetensors"))
    save_file(dict(list(tensors.items())[10:]), str(path / "model-00002-of-00002.safetensors"))
    return sum(t.nbytes for t in tensors.values())


def test_plan_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = plan_json(
        capsys,
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100",
        "--max-model-len",
        "8192",
        "--concurrency",
        "16",
        "--context-tokens",
        "8000",
        "--vllm-version",
        "0.33.0",  # the budget identity below is 0.33's; 0.34's pool is measured after warm-up (test_extensible.py)
    )
    assert code == 0 and doc["schema"] == "fitgate.io/plan/v1"
    assert doc["verdict"] in ("Fits", "Tight") and doc["reasons"]
    for key in (
        "capacity_bytes",
        "budget_bytes",
        "weights_bytes",
        "activation_bytes",
        "non_torch_bytes",
        "cuda_graph_bytes",
        "kv_cache_bytes",
        "headroom_bytes",
    ):
        assert isinstance(doc["per_gpu"][key], int)
    for key in ("bytes_per_token", "block_size", "num_blocks", "reported_tokens", "max_concurrency"):
        assert key in doc["kv_cache"]
    assert doc["max_model_len"] == 8192 and doc["max_model_len_that_fits"] >= 8192
    names = [a["name"] for a in doc["engine_args"]]
    assert {
        "--max-model-len",
        "--kv-cache-dtype",
        "--tensor-parallel-size",
        "--gpu-memory-utilization",
        "--max-num-seqs",
    } <= set(names)
    assert all(a["reason"] for a in doc["engine_args"])
    assert doc["vllm_args"][:2] == ["--max-model-len", "8192"]
    assert doc["workload"]["concurrency"] == 16 and doc["suggestions"] == []
    # the parts add up: budget = weights + activation + non-torch (+ CUDA graphs) + KV pool + the unused remainder
    g = doc["per_gpu"]
    graphs = g["cuda_graph_bytes"] if g["cuda_graphs_in_budget"] else 0  # vLLM >= 0.20 deducts its estimate
    rest = (
        g["budget_bytes"]
        - g["weights_bytes"]
        - g["activation_bytes"]
        - g["non_torch_bytes"]
        - graphs
        - g["kv_cache_bytes"]
    )
    assert 0 <= rest < doc["kv_cache"]["page_size_bytes"] * 32


def test_replicas_split_the_concurrency_and_a_suggestion_re_plans(capsys: pytest.CaptureFixture[str]) -> None:
    base = ("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4", "--max-model-len", "8192")
    code, doc = plan_json(capsys, *base, "--concurrency", "64", "--context-tokens", "8192")
    assert code == 1 and doc["workload"]["replicas"] == 1
    spread = [s for s in doc["suggestions"] if list(s["changes"]) == ["replicas"]] or [
        s for s in doc["suggestions"] if "replicas" in s["changes"]
    ]
    assert spread, doc["suggestions"]
    s = spread[0]
    flags = [x for k, v in s["changes"].items() for x in ("--" + k if k == "replicas" else k, v)]
    # the suggestion as flags re-plans to its verdict with every one of the 64 requests
    code, again = plan_json(capsys, *base, "--concurrency", "64", "--context-tokens", "8192", *flags)
    assert again["verdict"] == s["verdict"] and again["workload"]["replicas"] == s["replicas"] > 1
    assert again["workload"]["kv_blocks"] == -(-64 // s["replicas"]) * 512  # ceil(64 / n) requests of 512 blocks
    _, out, _ = run(capsys, "plan", *base, "--concurrency", "64", "--context-tokens", "8192")
    assert f"--replicas {s['replicas']}" in out and f"{s['replicas']} x {s['gpus']} GPU(s)" in out


def test_misfit_exits_1_with_suggestions(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = plan_json(
        capsys,
        "--model",
        "meta-llama/Llama-3.1-70B-Instruct",
        "--gpu",
        "NVIDIA-H100-80GB-HBM3",
        "--max-model-len",
        "32768",
    )
    assert code == 1 and doc["verdict"] == "DoesNotFit"
    assert doc["suggestions"] and doc["recommended_change"]
    assert all(s["verdict"] in ("Fits", "Tight") and s["gpus"] >= 1 for s in doc["suggestions"])
    _, out, _ = run(
        capsys, "plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--max-model-len", "32768"
    )
    assert "recommended vLLM args (with --tensor-parallel-size " in out and "{" not in out  # no dict reprs


def test_text_output_is_a_readable_breakdown(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu-memory", "81559MiB", "--max-model-len", "16384"
    )
    assert code == 0
    assert "verdict: Fits" in out and "KV cache" in out and "vllm serve Qwen/Qwen3-8B" in out and "█" in out


def test_a_gpu_memory_without_a_unit_says_it_is_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt79 F6: `--gpu-memory 16` read 16 bytes and said only "from 0.5 GiB to 16 TiB"
    code, _, err = run(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu-memory", "16")
    assert code == 2 and "a number without a unit is bytes: 16GiB?" in err


def test_local_safetensors_checkpoint_is_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stored = write_tiny_checkpoint(tmp_path / "tiny")
    code, doc = plan_json(capsys, "--model", str(tmp_path / "tiny"), "--gpu-memory", "8GiB")
    assert code == 0 and doc["model"]["weights_basis"] == "safetensors"
    # bf16 tensors as stored + rotary cache 2048 positions x 64 dims x 2 B
    assert doc["per_gpu"]["weights_bytes"] == stored + 2048 * 64 * 2
    assert doc["kv_cache"]["bytes_per_token"] == 2 * 2 * 2 * 64 * 2  # layers x K,V x kv heads x head dim x 2 B


def test_a_directory_model_is_served_by_its_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_tiny_checkpoint(tmp_path / "my models" / "tiny")  # a bare "tiny" would be looked up on the Hub
    code, doc = plan_json(capsys, "--model", str(tmp_path / "my models" / "tiny"), "--gpu-memory", "8GiB")
    assert code == 0
    assert doc["vllm_command"] == shlex.join(["vllm", "serve", str(tmp_path / "my models" / "tiny"), *doc["vllm_args"]])
    code, out, _ = run(capsys, "plan", "--model", str(tmp_path / "my models" / "tiny"), "--gpu-memory", "8GiB")
    assert f"  vllm serve '{tmp_path}/my models/tiny' --max-model-len 2048 " in out


def test_on_a_t4_the_command_has_dtype_half(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "T4", "--max-model-len", "4096")
    _, doc = plan_json(capsys, *argv)
    assert doc["serving"]["dtype"] == "float16" and " --dtype half" in doc["vllm_command"]
    code, _, err = run(capsys, "plan", *argv, "--dtype", "bfloat16")
    assert code == 2 and "dtype: 'bfloat16' is not valid" in err and "compute capability 7.5" in err


def test_a_pinned_revision_is_served(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--model", "Qwen/Qwen3-8B@main", "--source", "catalog", "--gpu", "H100")
    _, doc = plan_json(capsys, *argv)
    assert doc["vllm_command"].startswith("vllm serve Qwen/Qwen3-8B --revision main --max-model-len ")


def test_config_only_directory_is_estimated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(catalog_config("mistralai/Mistral-7B-Instruct-v0.3")))
    code, doc = plan_json(capsys, "--model", str(tmp_path), "--gpu", "L40S", "--max-model-len", "8192")
    assert code == 0 and doc["model"]["weights_basis"] == "estimated"
    assert any("estimated" in n for n in doc["notes"])


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (
            lambda d: (d / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hidden_'),
            "malformed JSON",
        ),
        (
            lambda d: (d / "config.json").write_text(json.dumps({**TINY, "hidden_size": -4})),
            "config.json:hidden_size: -4",
        ),
        (lambda d: (d / "config.json").write_text("x" * (9 << 20)), "at most 8388608 bytes"),
    ],
)
def test_bad_checkpoint_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: Any, message: str
) -> None:
    setup(tmp_path)
    code, out, err = run(capsys, "plan", "--model", str(tmp_path), "--gpu", "H100")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("fitgate: error: ") and message in err


def test_truncated_safetensors_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 5000) + b'{"a": {"dtype": "F16"')
    code, _, err = run(capsys, "plan", "--model", str(tmp_path), "--gpu", "H100")
    assert code == 2 and "model.safetensors" in err and "truncated" in err


def test_oversized_safetensors_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 10**12) + b"{}")
    code, _, err = run(capsys, "plan", "--model", str(tmp_path), "--gpu", "H100")
    assert code == 2 and "at most 100000000 bytes" in err


CONC_2 = ("--concurrency", "2", "--context-tokens")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpu", "H100"], "the following arguments are required: --model"),
        (
            ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-tp", "3"],
            "tensor_parallel_size: 3 is not valid",
        ),
        (["--model", "meta-llama/Llama-3.1-8B"], "--gpu is required: a GPU from `fitgate gpus`"),
        (["--model", "meta-llama/Llama-3.1-8B", "--gpu-memory", "lots"], "--gpu-memory: 'lots' is not valid"),
        (
            ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "1e5"],
            "'1e5' is not an integer",
        ),
        (
            ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--dtype", "fp4"],
            "dtype: 'fp4' is not valid",
        ),
        (
            ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpu-memory-utilization", "-1"],
            "gpu_memory_utilization: -1",
        ),
        (["--model", "nobody/nothing", "--gpu", "H100", "--source", "catalog"], "model: 'nobody/nothing' is not valid"),
        (["--model", "http://169.254.169.254/x", "--gpu", "H100"], "is not valid; expected a Hugging Face repo id"),
        (
            ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--context-tokens", "100"],
            "--concurrency is required: a number of concurrent requests",
        ),
        (  # the CRD's CEL rule: the API server refuses contextTokens > maxModelLen, so does plan
            ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "4096", *CONC_2, "8192"],
            "--context-tokens: 8192 is not valid; expected at most --max-model-len 4096",
        ),
        (
            ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--concurrency", "2", "--context-tokens", "200000"],
            "--context-tokens: 200000 is not valid; expected at most the model's 131072 tokens",
        ),
        (
            ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", *CONC_2, "100", "--replicas", "0"],
            "--replicas: 0 is not valid; expected between 1 and 10000",
        ),
    ],
)
def test_bad_flags_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    try:
        code: object = main(["plan", *argv])
    except SystemExit as exc:  # argparse's own errors exit through SystemExit
        code = exc.code
    _, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_catalog_and_gpus_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "list")
    assert code == 0 and "meta-llama/Llama-3.1-8B-Instruct" in out
    code, out, _ = run(capsys, "gpus", "--output", "json")
    assert code == 0 and any(g["name"] == "H100-SXM" for g in json.loads(out))


def manifest(tmp_path: Path, spec: dict[str, Any]) -> str:
    path = tmp_path / "md.yaml"
    doc = {"apiVersion": "fitgate.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "m"}, "spec": spec}
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (  # CEL rule of the CRD
            {"serving": {"maxModelLen": 4096}, "workload": {"concurrentRequests": 2, "contextTokens": 8192}},
            "spec.workload.contextTokens: workload.contextTokens cannot exceed serving.maxModelLen (got 8192 > ",
        ),
        (  # CEL rule of the CRD
            {"serving": {"tensorParallelSize": 16, "pipelineParallelSize": 8}},
            "spec.serving: tensorParallelSize x pipelineParallelSize must be at most 64 GPUs (got 16 x 8)",
        ),
        ({"serving": {"kvCacheDtype": "int4"}}, "spec.serving.kvCacheDtype"),  # schema enum
        ({"serving": {"tensorParallelSize": 3}}, "tensor_parallel_size: 3 is not valid"),  # the webhook's 400
    ],
)
def test_check_refuses_what_the_api_server_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict[str, Any], field: str
) -> None:
    spec = {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct"}, "placement": {"gpuProduct": "H100"}, **spec}
    code, out, _ = run(capsys, "check", manifest(tmp_path, spec))
    assert code == 2 and out.count("\n") == 1 and ": Invalid: " in out and field in out, out


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        ([], "(see fitgate --help)"),
        (["plan"], "(see fitgate plan --help)"),
        (["catalog", "add"], "(see fitgate catalog add --help)"),
    ],
)
def test_usage_errors_point_at_the_right_help(capsys: pytest.CaptureFixture[str], argv: list[str], hint: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and err.rstrip().endswith(hint), err


@pytest.mark.parametrize(
    ("extra", "flag", "limit"),
    [
        (["--cudagraph-capture-sizes", "0"], "--cudagraph-capture-sizes", "sizes from 1 to 16777216"),
        (["--max-cudagraph-capture-size", "99999999999"], "--max-cudagraph-capture-size", "from 1 to 16777216"),
        (["-cc", '{"cudagraph_mode": "BOGUS"}'], "--compilation-config cudagraph_mode", "one of FULL_AND_PIECEWISE"),
    ],
)
def test_cuda_graph_and_override_flags_name_the_flag_and_the_limit(
    capsys: pytest.CaptureFixture[str], extra: list[str], flag: str, limit: str
) -> None:
    code, _, err = run(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--source", "catalog", *extra)
    assert code == 2 and err.count("\n") == 1 and flag in err and limit in err, err


def test_dotted_json_flags_plan_as_vllm_reads_them(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt20 G2: the recipes' Qwen3-VL command passes `--limit-mm-per-prompt.video 0`; vLLM's FlexibleArgumentParser
    # folds it into the flag's JSON (utils/argparse_utils.py 0.34.0 L410-499), fitgate's plan refused it.
    assert fold_dotted(["plan", "--limit-mm-per-prompt.video", "0", "--limit-mm-per-prompt.image=2"]) == [
        "plan",
        "--limit-mm-per-prompt",
        '{"video": 0, "image": 2}',
    ]
    # over a whole JSON given for the same flag: vLLM appends the dotted keys' JSON after every word, and argparse
    # keeps the last value, so the whole one is replaced (hunt94 F6, vLLM 0.34's parser run on this argv); a short
    # head is its long flag (-cc.cudagraph_mode: hunt94 F3)
    folded = fold_dotted(["--limit-mm-per-prompt", '{"image": 4, "audio": 1}', "--limit-mm-per-prompt.image", "1"])
    assert json.loads(folded[-1]) == {"image": 1} and folded[-2] == "--limit-mm-per-prompt"
    assert fold_dotted(["-cc.cudagraph_mode=FULL_DECODE_ONLY"]) == [
        "--compilation-config",
        '{"cudagraph_mode": "FULL_DECODE_ONLY"}',
    ]
    assert fold_dotted(["--rope-theta", "-1.5"]) == ["--rope-theta", "-1.5"]  # a number, not a dotted flag
    base = ["plan", "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--gpu", "L4", "--max-model-len", "16384"]
    off = ["--limit-mm-per-prompt.image", "0", "--limit-mm-per-prompt.video", "0"]
    assert main([*base, *off, "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not any("encoder is profiled" in n for n in doc["notes"])
    # hunt61 F3: images off, videos on: vLLM profiles a video (encoder_budget.py 0.34.0 L140-186)
    assert main([*base, "--limit-mm-per-prompt.image", "0", "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any("encoder is profiled" in n for n in doc["notes"])


def test_prefix_caching_flags_are_taken_and_change_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt24 G7: `fitgate plan` refused --enable-prefix-caching, which recipes pass and `check` reads
    base = ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--max-model-len", "8192", "--output", "json"]
    outputs = []
    for extra in ([], ["--enable-prefix-caching"], ["--no-enable-prefix-caching"]):
        assert main([*base, *extra]) == 0
        outputs.append(json.loads(capsys.readouterr().out)["per_gpu"])
    assert outputs[0] == outputs[1] == outputs[2]


def test_what_fitgate_does_not_size_is_unknown_not_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # hunt26 F2: `plan` answered "error" and exit 2 (bad input) for a KV cache dtype vLLM 0.30+ takes, a load-time
    # method it does not size and an architecture it does not know, where `check` and the webhook answer Unknown.
    base = ("--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--max-model-len", "40960")  # bf16 KV does not fit it
    for extra in (("--kv-cache-dtype", "turboquant_k8v4"), ("--quantization", "lut_b_moe")):
        code, doc = plan_json(capsys, *base, *extra)
        assert (code, doc["verdict"], doc["reasons"][0]["code"]) == (0, "Unknown", "SettingsNotModelled"), doc
        assert extra[1] in doc["reasons"][0]["message"]
    for arch in ("Qwen4ExpForConditionalGeneration", "T5Model"):  # an architecture fitgate does not size
        config = {**catalog_config("Qwen/Qwen3-8B"), "architectures": [arch]}
        (tmp_path / "config.json").write_text(json.dumps(config))
        code, out, err = run(capsys, "plan", "--model", str(tmp_path), "--gpu", "H100")
        assert code == 0 and out.startswith("verdict: Unknown") and arch in out and err == "", (out, err)
    # bad input is still bad input
    code, out, err = run(capsys, "plan", *base, "--kv-cache-dtype", "fp9")
    assert code == 2 and "kv_cache_dtype" in err


def test_a_gguf_file_or_quantization_is_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # hunt28 F2: vLLM serves a .gguf file as --model and takes --quantization gguf; fitgate does not read a GGUF's
    # per-tensor types, so the answer is Unknown (exit 0), not "a directory with config.json" / "not valid" (exit 2)
    gguf = tmp_path / "Qwen3-8B-Q4_K_M.gguf"
    gguf.write_bytes(b"GGUF")
    # hunt190 F2: a Hub GGUF as `repo:QUANT` (vllm#29137 served unsloth/Qwen3-0.6B-GGUF:IQ1_S on 0.11.2) was
    # "not a Hugging Face repo id", exit 2; `check` already said Unknown
    hub_gguf = ("--model", "unsloth/Qwen3-0.6B-GGUF:IQ1_S", "--vllm-version", "0.12.0")
    for argv in (("--model", str(gguf)), ("--model", "Qwen/Qwen3-8B", "--quantization", "gguf"), hub_gguf):
        code, doc = plan_json(capsys, *argv, "--gpu", "L4")
        assert (code, doc["verdict"]) == (0, "Unknown"), doc


def test_a_pasted_vllm_command_plans_and_says_which_flags_it_did_not_read(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt28 F3: the recipes' Qwen3.6-27B command (--trust-remote-code --attention-backend flashinfer --async-scheduling
    # --enable-chunked-prefill --load-format fastsafetensors) was "unrecognized arguments", exit 2
    base = ("--model", "Qwen/Qwen3-8B", "--gpu", "RTX-5090", "--max-model-len", "8192")
    flags = ("--trust-remote-code", "--attention-backend", "flashinfer", "--async-scheduling", "--load-format=auto")
    code, doc = plan_json(capsys, *base, *flags)
    assert code == 0 and doc["verdict"] in ("Fits", "Tight")
    [n] = [n for n in doc["notes"] if n.startswith("not read")]
    assert "--attention-backend flashinfer" in n and "--load-format auto" in n
    # a typo and a flag vLLM does not have are errors; gguf weights are Unknown
    for bad in (("--max-model-length", "8192"), ("--no-such-vllm-flag",)):
        with pytest.raises(SystemExit) as exc:  # argparse's own errors exit through SystemExit
            main(["plan", *base, *bad])
        assert exc.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err, bad
    code, doc = plan_json(capsys, *base, "--load-format", "gguf")
    assert (code, doc["verdict"]) == (0, "Unknown")
    # hunt110 F1: vLLM-Omni's `--omni` (recipes' LTX-2.5-Diffusers, Qwen3-TTS) with its pipeline flags is Unknown
    code, doc = plan_json(capsys, *base, "--omni", "--model-class-name", "LTX2Pipeline")
    assert (code, doc["verdict"]) == (0, "Unknown") and "vLLM-Omni" in doc["reasons"][0]["message"]
    # hunt122: `--device cpu` (vLLM's CPU backend, the 0.6-0.9 docs) was sized on the GPU named: DoesNotFit, exit 1;
    # a backend other than the GPU is Unknown, `--device cuda` the plan itself
    for device in ("cpu", "neuron", "--device=tpu"):
        argv = (device,) if device.startswith("--") else ("--device", device)
        code, doc = plan_json(capsys, *base, *argv)
        assert (code, doc["verdict"]) == (0, "Unknown") and "device" in doc["reasons"][0]["message"], device
    code, doc = plan_json(capsys, *base, "--device", "cuda")
    assert code == 0 and doc["verdict"] in ("Fits", "Tight")


def test_a_length_only_the_newest_release_refuses_is_unknown_on_a_dated_nightly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # hunt116 F2: a dated nightly tag is a past main (not the newest, as `nightly` alone is): vLLM 0.33's YaRN rule
    # (vllm#56446) refusing 131072 over Qwen3-8B's 40960 positions is Unknown there, exit 0; named 0.34 it is exit 2
    yarn = '{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}'
    base = ("--model", "Qwen/Qwen3-8B", "--gpu", "MI300X", "--max-model-len", "131072", "--hf-overrides", yarn)
    code, out, _ = run(capsys, "plan", *base, "--vllm-version", "nightly_main_20260211")
    assert code == 0 and "verdict: Unknown (ReleaseUnknown)" in out and "vLLM 0.32.0 takes it" in out
    code, _, err = run(capsys, "plan", *base, "--vllm-version", "0.34.0")
    assert code == 2 and "max_model_len: 131072 is not valid" in err


def test_the_printed_command_keeps_the_config_overrides_the_plan_was_made_with(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # hunt145 F3: Qwen3-8B at 131072 with YaRN over its 40960 positions planned Fits, and the vllm serve line it printed
    # left out --hf-overrides, so vLLM would refuse that line's length; up to 0.6.3 (no --hf-overrides) the older
    # --rope-scaling is written instead
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    base = ["--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "131072"]
    code, doc = plan_json(
        capsys, *base, "--hf-overrides", json.dumps({"rope_scaling": yarn}), "--vllm-version", "0.12.0"
    )
    argv = shlex.split(doc["vllm_command"])
    assert code == 0 and json.loads(argv[argv.index("--hf-overrides") + 1]) == {"rope_scaling": yarn}
    code, doc = plan_json(capsys, *base, "--rope-scaling", json.dumps(yarn), "--vllm-version", "0.6.3")
    argv = shlex.split(doc["vllm_command"])
    assert code == 0 and json.loads(argv[argv.index("--rope-scaling") + 1]) == yarn and "--hf-overrides" not in argv
    code, doc = plan_json(capsys, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "8192")
    assert "--hf-overrides" not in doc["vllm_command"]  # none given, none written


def test_every_flag_plan_takes_is_one_check_knows() -> None:
    # one list of vLLM's flags: check must not call a flag plan takes "not a flag of any vLLM release" (hunt110 F2)
    from fitgate.cli.passthrough import IGNORED_LISTS, IGNORED_SWITCHES, IGNORED_VALUED  # noqa: PLC0415
    from fitgate.workloads.vllm_flags import unknown_flags  # noqa: PLC0415

    assert unknown_flags(IGNORED_SWITCHES | IGNORED_VALUED | IGNORED_LISTS) == []
    assert unknown_flags(["--kv-cache-spill-policy lru", "--max-model-len=8192"]) == ["--kv-cache-spill-policy"]


def test_a_flag_of_a_release_newer_than_fitgate_models_is_taken_and_never_denies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # hunt110 F2: `--vllm-version 0.36.0 --kv-cache-spill-policy lru` exited 2; the flag may be 0.36's own and change
    # memory, so it is taken and named, and a misfit with it (bf16 Qwen3-32B: 61.03 GiB on a 22.06 GiB L4) is Unknown
    base = ("--model", "Qwen/Qwen3-32B", "--gpu", "L4", "--max-model-len", "8192", "--vllm-version", "0.36.0")
    code, doc = plan_json(capsys, *base, "--kv-cache-spill-policy", "lru")
    assert (code, doc["verdict"]) == (0, "Unknown"), doc["reasons"]
    assert "--kv-cache-spill-policy may make it fit" in doc["reasons"][0]["message"]
    assert any("--kv-cache-spill-policy lru" in n and "taken but not modelled" in n for n in doc["notes"])
    code, doc = plan_json(capsys, *base)  # without it, every release's accounting denies it
    assert (code, doc["verdict"]) == (1, "DoesNotFit")


def test_every_flag_vllm_accepts_is_taken_and_named_not_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt40 F1 / hunt42 F1-F2: vLLM 0.34's own CI passes --worker-extension-cls, --disable-flashinfer-autotune,
    # --quantization-config.moe.activation; Modal and BentoVLLM write --no-enforce-eager, --no-use-tqdm-on-load; Vertex
    # --speculative-draft-tensor-parallel-size=8: each was "unrecognized arguments", exit 2. The flags vLLM accepts
    # come from its wheels' source (workloads/data/vllm_flags.json, scripts/gen_vllm_flags.py).
    base = ("--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "8192")
    flags = (
        "--worker-extension-cls", "my.Ext", "--disable-flashinfer-autotune", "--quantization-config.moe.activation",
        "silu", "--no-enforce-eager", "--no-use-tqdm-on-load", "--speculative-draft-tensor-parallel-size=8",
    )  # fmt: skip
    code, doc = plan_json(capsys, *base, *flags)
    assert code == 0 and doc["verdict"] in ("Fits", "Tight"), doc
    [n] = [n for n in doc["notes"] if "taken but not modelled" in n]
    for said in ("--worker-extension-cls my.Ext", "--no-enforce-eager", "--speculative-draft-tensor-parallel-size 8"):
        assert said in n, n
    # in a container's args a switch of vLLM's never takes the next word: the positional model after it is read
    from fitgate.workloads.argv import parse_engine_argv  # noqa: PLC0415

    cmd = parse_engine_argv("vllm serve", ["--disable-custom-all-reduce", "Qwen/Qwen3-8B", "--spec-method", "mtp"])
    assert cmd.model == "Qwen/Qwen3-8B" and json.loads(cmd.flags["--speculative-config"]) == {"method": "mtp"}
    # 0.34's split speculative flags are the speculative config (hunt40 F2: they were dropped): DeepSeek-V3's MTP
    # layer counted as with --speculative-config
    ds = ("--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "--max-model-len", "8192")
    _, split = plan_json(capsys, *ds, "--spec-method", "mtp", "--spec-tokens", "1")
    _, whole = plan_json(capsys, *ds, "-sc", '{"method": "mtp", "num_speculative_tokens": 1}')
    _, none = plan_json(capsys, *ds)
    assert split["per_gpu"]["weights_bytes"] == whole["per_gpu"]["weights_bytes"] > none["per_gpu"]["weights_bytes"]
    # --disable-X of an --enable-X switch is --no-enable-X: the chunked-prefill budget as with the long spelling
    v = ("--vllm-version", "0.24.0", "--max-model-len", "32768")
    _, off = plan_json(capsys, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", *v, "--disable-chunked-prefill")
    assert off["serving"]["max_num_batched_tokens"] == 32768


def test_0_34_inverse_switches_mori_and_dc_are_taken_not_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt70 F1-F3, each exit 2 before: 0.34 pairs every --disable-X switch with --enable-X (utils/argparse_utils.py
    # 0.34.0 L120-140 EnableDisableAction, registered for every BooleanOptionalAction at L179); "mori" is 0.34's name
    # of the MoRI all2all backend (config/parallel.py L45-60); -dc is 0.34's --diffusion-config, which argparse took
    # as an abbreviation of fitgate's -dcp.
    base = ("--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "8192")
    code, doc = plan_json(capsys, *base, "--enable-custom-all-reduce", "--enable-sliding-window", "-dc", "{}")
    assert code == 0 and doc["verdict"] == "Fits", doc
    [n] = [n for n in doc["notes"] if "taken but not modelled" in n]
    assert "--diffusion-config" in n
    moe = ("--model", "Qwen/Qwen3-30B-A3B", "--gpu", "MI300X", "-dp", "8", "--enable-expert-parallel")
    code, mori = plan_json(capsys, *moe, "--max-model-len", "32768", "--all2all-backend", "mori")
    _, old_name = plan_json(capsys, *moe, "--max-model-len", "32768", "--all2all-backend", "mori_high_throughput")
    assert code == 0 and mori["verdict"] == "Fits" and mori["per_gpu"] == old_name["per_gpu"]


def test_the_flag_list_generator_pairs_enable_and_disable_from_0_34() -> None:
    # scripts/gen_vllm_flags.py on a source shaped like engine/arg_utils.py: a bool field is a switch with its --no-
    # twin; from 0.34 (EnableDisableAction) --disable-X also takes --enable-X and back, for dataclass fields and for an
    # explicit BooleanOptionalAction alike (hunt70 F1); a valued flag stays valued.
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location(
        "gen_vllm_flags", Path(__file__).parents[2] / "scripts/gen_vllm_flags.py"
    )
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    source = (
        "import argparse\n"
        "class EngineArgs:\n    disable_custom_all_reduce: bool = False\n    enable_lora: bool = False\n"
        "    max_model_len: int | None = None\n"
        "p.add_argument('--disable-cascade-attn', action=argparse.BooleanOptionalAction)\n"
    )
    new, old = gen.flags_of(source, True), gen.flags_of(source, False)
    for flag in ("--enable-custom-all-reduce", "--disable-lora", "--enable-cascade-attn", "--no-disable-cascade-attn"):
        assert new[flag] is False, flag
    assert "--enable-custom-all-reduce" not in old and old["--no-disable-custom-all-reduce"] is False
    assert new["--max-model-len"] is True and old["--disable-cascade-attn"] is False


def test_recipe_flags_that_move_memory_are_read_or_named(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt31 F2/F4: --no-enable-chunked-prefill (the recipes' Qwen3-Next MTP command on 4 x H200), --task embed
    # (vllm#27479), --disable-hybrid-kv-cache-manager (recipes Kimi-K2.6 on B300) and --swap-space were exit 2
    base = ("--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "32768", "--vllm-version", "0.24.0")
    _, chunked = plan_json(capsys, *base)
    _, whole = plan_json(capsys, *base, "--no-enable-chunked-prefill")
    # vLLM makes the step budget max(max_model_len, 8192) = 32768 (engine/arg_utils.py 0.34.0 L3227-3236)
    assert (chunked["serving"]["max_num_batched_tokens"], whole["serving"]["max_num_batched_tokens"]) == (8192, 32768)
    assert whole["per_gpu"]["activation_bytes"] > chunked["per_gpu"]["activation_bytes"]
    _, given = plan_json(capsys, *base, "--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096")
    assert given["serving"]["max_num_batched_tokens"] == 4096  # an explicit budget is kept
    _, embed = plan_json(capsys, *base, "--task", "embed")
    assert embed["vllm_args"][-2:] == ["--runner", "pooling"]  # no lm_head: 151936 x 4096 x 2 bytes less
    assert chunked["per_gpu"]["weights_bytes"] - embed["per_gpu"]["weights_bytes"] == 151936 * 4096 * 2
    code, doc = plan_json(capsys, *base, "--disable-hybrid-kv-cache-manager", "--swap-space", "4")
    [n] = [n for n in doc["notes"] if "not modelled" in n]
    assert code == 0 and "--disable-hybrid-kv-cache-manager" in n and "--swap-space 4" in n


def test_vllms_underscore_spellings_and_old_boolean_values_plan(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt32 F1/F2: docs.vllm.ai's Kubernetes and LWS pages and five vLLM blog posts write --max_num_seqs,
    # --speculative_config.method; vLLM reads `_` as `-` up to the first `.` (utils/argparse_utils.py 0.34.0
    # L374-393). The 2024 AMD blog's 0.6 commands write --enable-chunked-prefill=False. All were exit 2.
    base = ("--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--vllm-version", "0.24.0")
    _, dashed = plan_json(capsys, *base, "--max-num-seqs", "64", "--gpu-memory-utilization", "0.8")
    code, under = plan_json(capsys, *base, "--max_num_seqs", "64", "--gpu_memory_utilization=0.8")
    assert code == 0 and under["serving"] == dashed["serving"]
    _, spec = plan_json(
        capsys, *base, "--speculative_config.method", "ngram", "--speculative_config.num_speculative_tokens", "3"
    )
    assert spec["serving"]["speculative_config"]["method"] == "ngram"
    _, old = plan_json(capsys, *base, "--enable-chunked-prefill=False", "--max-model-len", "32768")
    assert old["serving"]["max_num_batched_tokens"] == 32768
    code, doc = plan_json(capsys, *base, "--shutdown-timeout", "10", "--kv-cache-dtype-skip-layers", "0,1")
    assert code == 0 and any("--kv-cache-dtype-skip-layers 0,1" in n and "not modelled" in n for n in doc["notes"])


def test_model_cards_serving_flags_plan(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt35 F1/F2: NVIDIA's Nemotron commands (--reasoning-parser-plugin), Cosmos-Reason2 (--media-io-kwargs), the
    # gpt-oss recipe (--tool-server demo), two served names, and a Devstral card's --num-gpu-blocks-override were exit 2
    base = ("--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "8192")
    flags = (
        "--served-model-name", "a", "b", "--reasoning-parser-plugin", "p.py", "--tool-server", "demo",
        "--media-io-kwargs", '{"video": {"num_frames": 8}}', "--num-gpu-blocks-override", "512",
    )  # fmt: skip
    code, doc = plan_json(capsys, *base, *flags)
    assert code == 0 and doc["verdict"] in ("Fits", "Tight")
    [n] = [n for n in doc["notes"] if n.startswith("not read")]
    assert "--served-model-name a b" in n and "--num-gpu-blocks-override 512" in n.split("not modelled")[1]
    # vLLM's older --cuda-graph-sizes is --cudagraph-capture-sizes
    _, old = plan_json(capsys, *base, "--cuda-graph-sizes", "1", "2", "4")
    _, new = plan_json(capsys, *base, "--cudagraph-capture-sizes", "1", "2", "4")
    assert old["per_gpu"] == new["per_gpu"]


def test_vllm_0_6_commands_plan(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt36 F1-F3: 0.4-0.6 flags (--use-v2-block-manager: vllm#9990 started with it; --tokenizer-pool-size,
    # --max-context-len-to-capture), the two-word `--enable-chunked-prefill False` (vllm#7768) and a load-time method of
    # that era (deepspeedfp) were exit 2
    base = ("--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--vllm-version", "0.6.3", "--max-model-len", "16384")
    flags = ("--use-v2-block-manager", "--tokenizer-pool-size", "2", "--max-context-len-to-capture", "8192")
    code, doc = plan_json(capsys, *base, *flags, "--enable-chunked-prefill", "False")
    assert code == 0 and doc["verdict"] in ("Fits", "Tight")
    assert any("--use-v2-block-manager" in n and "--max-context-len-to-capture 8192" in n for n in doc["notes"])
    code, doc = plan_json(capsys, *base, "--quantization", "deepspeedfp")
    assert (code, doc["verdict"]) == (0, "Unknown")


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("nvidia-h100-80gb", "H100-SXM"),  # GKE / BentoCloud's accelerator label
        ("NVIDIA_TESLA_T4", "T4"),  # Vertex AI's accelerator_type
        ("H100:2", "H100-SXM"),  # SkyPilot's accelerators
        ("A100-80G", "A100-80GB"),  # Ray Serve LLM's accelerator_type
        ("p5.48xlarge", "H100-SXM"),  # an instance type
        ("g2-standard-12", "L4"),  # a GCE machine type
        # hunt43 F1: the names Chinese model makers' guides use, the memory size the catalog card's (within 10 %)
        ("H20 96GB", "H20"),
        ("H800-80GB", "H800"),
        ("RTX 4090 D", "RTX-4090"),  # the China-market 4090: the same 24 GB
    ],
)
def test_plan_reads_the_gpu_names_launchers_use(capsys: pytest.CaptureFixture[str], name: str, gpu: str) -> None:
    # hunt42 F3: the launchers' names for a GPU were exit 2 in plan, where check read the same names from node labels
    code, doc = plan_json(capsys, "--model", "Qwen/Qwen3-8B", "--gpu", name, "--max-model-len", "8192")
    assert code in (0, 1) and doc["gpu"]["name"] == gpu, doc["gpu"]  # a plan (Qwen3-8B does not fit a T4: exit 1)


@pytest.mark.parametrize("name", ["RTX 4090 48GB", "A800 96GB"])
def test_a_gpu_name_whose_memory_is_not_the_catalog_cards_is_not_taken_for_it(name: str) -> None:
    # a modded 48 GB 4090, or an A800 of a size the catalog does not hold (its 40 and 80 GB boards are), is not a
    # catalog card:
    # sizing it as that card would deny what the bigger board runs, or admit what the smaller one cannot
    from fitgate.sizing.instances import named_gpu  # noqa: PLC0415

    assert named_gpu(name) is None


def test_a_bare_a100_is_never_denied_what_the_80gb_card_runs(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt42 F4: Baseten's `accelerator: A100` Llama-3.1-70B at TP 4 and 50,000 tokens loads on the 80 GB card; a bare
    # A100 was read as the 40 GB one alone: DoesNotFit. At 0.34 (the V2 runner's smaller graphs, hunt184 F1) 50,000
    # tokens are Tight on the 40 GB card too; 60,000 are not: 17.6 GiB of weights per GPU leave too little KV on
    # 39.39 GiB for one 60,000-token request, 60,000 x 80 layers x 8 KV heads / 4 x 128 x 2 x 2 B = 4.58 GiB
    argv = ("--model", "meta-llama/Llama-3.1-70B-Instruct", "-tp", "4", "--max-model-len", "60000")
    code, doc = plan_json(capsys, *argv, "--gpu", "A100")
    assert code == 0 and doc["gpu"]["name"] == "A100-80GB" and doc["verdict"] != "DoesNotFit"
    assert any("names the A100-40GB and the A100-80GB" in n for n in doc["notes"])
    code, doc = plan_json(capsys, *argv, "--gpu", "A100-40GB")  # named exactly: the 40 GB card's answer
    assert code == 1 and doc["verdict"] == "DoesNotFit"
    code, doc = plan_json(capsys, "--model", "Qwen/Qwen3-8B", "--gpu", "A100", "--max-model-len", "8192")
    assert doc["gpu"]["name"] == "A100-40GB" and any("read as the A100-40GB" in n for n in doc["notes"])


def test_an_architecture_fitgate_does_not_size_is_unknown_and_named_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # hunt46 F2: a reranker / encoder vLLM serves (BAAI/bge-reranker-v2-m3 is XLMRobertaForSequenceClassification) was
    # "CheckpointInvalid ... is not valid": the checkpoint is valid, fitgate does not size its architecture
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["XLMRobertaForSequenceClassification"], "model_type": "xlm-roberta"})
    )
    code, doc = plan_json(capsys, "--model", str(tmp_path), "--gpu", "L4")
    assert code == 0 and doc["verdict"] == "Unknown"
    [reason] = doc["reasons"]
    assert reason["code"] == "ArchitectureNotSized" and "is an architecture fitgate does not size" in reason["message"]


def test_a_huge_gpu_name_is_a_one_line_error_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    # the launcher / cloud spellings are tried with patterns: a 20,000-dash name took 2 s before the length bound
    import time  # noqa: PLC0415

    started = time.monotonic()
    assert main(["plan", "--model", "Qwen/Qwen3-8B", "--gpu=" + "-" * 20000 + "x"]) == 0  # Unknown (hunt59 F2)
    assert time.monotonic() - started < 1.0
    out = capsys.readouterr().out
    assert out.count("\n") <= 4 and "verdict: Unknown" in out and len(out) < 1000  # the name cut to 128 characters


def test_a_gpu_outside_the_catalog_is_unknown_or_sized_by_its_memory(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt59 F2: `plan --gpu "NVIDIA GeForce RTX 4070"` (in the catalog now) was a usage error (exit 2); a GPU fitgate does not know is
    # Unknown (exit 0), and with --gpu-memory it is sized as a card of that memory under its own name
    assert main(["plan", "--model", "Qwen/Qwen3-0.6B", "--gpu", "NVIDIA GeForce RTX 3050"]) == 0
    out = capsys.readouterr().out
    assert "verdict: Unknown" in out and "is not a GPU of fitgate's catalog" in out and "--gpu-memory" in out
    argv = ["plan", "--model", "Qwen/Qwen3-0.6B", "--gpu", "NVIDIA GeForce RTX 3050", "--gpu-memory", "7.62GiB"]
    assert main([*argv, "--max-model-len", "8192"]) == 0
    out = capsys.readouterr().out
    assert "on 1 x NVIDIA GeForce RTX 3050 (7.62 GiB each)" in out and "verdict: Fits" in out


def test_a_bare_h20_is_never_denied_what_the_141gb_card_runs(capsys: pytest.CaptureFixture[str]) -> None:
    # vllm-project/recipes DeepSeek/DeepSeek-V3_2.md (269aa70) serves DeepSeek-V3.2 at its defaults (TP 8, 163,840
    # tokens) on "8xH20" and benchmarks it: 79.55 GiB of weights a GPU leave a 96 GB H20 (85.50 GiB budget at 0.9)
    # 5.9 GiB, short of one 163,840-token request's 11.95 GiB of KV, so the board was the 141 GB H20
    argv = ("--model", "deepseek-ai/DeepSeek-V3.2", "-tp", "8")
    code, doc = plan_json(capsys, *argv, "--gpu", "H20")
    assert code == 0 and doc["gpu"]["name"] == "H20-141GB" and doc["verdict"] != "DoesNotFit"
    [note] = [n for n in doc["notes"] if "names the H20 and the H20-141GB" in n]
    code, doc = plan_json(capsys, *argv, "--gpu", "NVIDIA-H20")  # the device plugin's label: the 96 GB card
    assert code == 1 and doc["verdict"] == "DoesNotFit"
    # hunt110 F3: the note told a user who passed --gpu H20 to pass --gpu H20; what it names now is the smaller card
    assert note.endswith("for the smaller card pass --gpu H20 --gpu-memory 95.00GiB")
    code, doc = plan_json(capsys, *argv, "--gpu", "H20", "--gpu-memory", "95.00GiB")
    assert code == 1 and doc["verdict"] == "DoesNotFit"


def test_check_reads_a_bare_gpu_name_as_plan_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `check --gpu A100` on a one-GPU Qwen2.5-32B (61.04 GiB of weights: over the 40 GB card's 35.45 GiB budget, within
    # the 80 GB card's 71.23 GiB) is the 80 GB card's Fits, with the note; named exactly, the 40 GB card denies
    manifest = tmp_path / "d.yaml"
    manifest.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec:\n  selector: {matchLabels: {a: a}}\n"
        "  template:\n    metadata: {labels: {a: a}}\n    spec:\n      containers:\n      - name: vllm\n"
        "        image: vllm/vllm-openai:v0.11.0\n"
        "        args: [--model, Qwen/Qwen2.5-32B-Instruct, --max-model-len, '8192']\n"
        "        resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    code, out, _ = run(capsys, "check", str(manifest), "--gpu", "A100")
    assert code == 0 and ": Fits:" in out and "A100-80GB" in out and "names the A100-40GB and the A100-80GB" in out
    code, out, _ = run(capsys, "check", str(manifest), "--gpu", "A100-40GB")
    assert code == 1 and ": DoesNotFit:" in out


def test_check_reads_a_bare_placement_gpu_as_both_cards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a ModelDeployment's placement.gpuProduct "H20" (no --gpu): either card's nodes serve it, as the operator's
    # inventory matches it (NAMESAKES); DeepSeek-V3.2 at its defaults fits only the 141 GB card (the test above)
    manifest = tmp_path / "md.yaml"
    manifest.write_text(
        "apiVersion: fitgate.io/v1alpha1\nkind: ModelDeployment\nmetadata: {name: ds}\nspec:\n"
        "  model: {name: deepseek-ai/DeepSeek-V3.2}\n  serving: {tensorParallelSize: 8}\n  placement: {gpuProduct: H20}\n"
    )
    code, out, _ = run(capsys, "check", str(manifest))
    assert code == 0 and ": Fits: H20-141GB:" in out
    # nvidia-smi (and GFD's product label) names both boards NVIDIA-H20 (hunt175 F2): the memory label decides
    manifest.write_text(manifest.read_text().replace("gpuProduct: H20", "gpuProduct: NVIDIA-H20"))
    code, out, _ = run(capsys, "check", str(manifest))
    assert code == 0 and ": Fits: H20-141GB:" in out
    memory = 'gpuProduct: NVIDIA-H20, nodeSelector: {"nvidia.com/gpu.memory": "97871"}'
    manifest.write_text(manifest.read_text().replace("gpuProduct: NVIDIA-H20", memory))
    code, out, _ = run(capsys, "check", str(manifest))
    assert code == 1 and ": DoesNotFit:" in out


@pytest.mark.parametrize(
    ("placement", "card"),
    [
        # hunt106 F1: the placement's node labels, read as a Deployment's nodeSelector is (cloudlabels)
        ('{nodeSelector: {"nvidia.com/gpu.product": "NVIDIA-L4"}}', "L4"),
        ('{nodeSelector: {"cloud.google.com/gke-accelerator": "nvidia-l4"}}', "L4"),
        ('{nodeSelector: {"node.kubernetes.io/instance-type": "g5.8xlarge"}}', "A10G"),
        ('{nodeSelector: {"node.kubernetes.io/instance-type": "Standard_NC24ads_A100_v4"}}', "A100-80GB"),
        # hunt106 F2: an instance type as gpuProduct names its GPU as --gpu does
        ("{gpuProduct: g5.8xlarge}", "A10G"),
        ("{gpuProduct: VM.GPU.A10.1}", "A10"),
    ],
)
def test_check_reads_a_model_deployments_gpu_from_its_placement_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], placement: str, card: str
) -> None:
    # Llama-3.1-8B (14.99 GiB of weights) at 8192 tokens fits each of these 22+ GiB cards; before, every one but the
    # product names was "Unknown: no GPU to check against" offline, though the operator reads the same labels
    manifest = tmp_path / "md.yaml"
    manifest.write_text(
        "apiVersion: fitgate.io/v1alpha1\nkind: ModelDeployment\nmetadata: {name: m}\nspec:\n"
        "  model: {name: meta-llama/Llama-3.1-8B-Instruct}\n  serving: {maxModelLen: 8192}\n"
        f"  placement: {placement}\n"
    )
    code, out, _ = run(capsys, "check", str(manifest))
    assert code == 0 and ": Fits:" in out and f"{card}:" in out.split("Fits:", 1)[1][:40], out


def test_a_checkpoint_the_hub_cannot_be_reached_for_is_unknown_not_bad_input(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # hunt105: plan said "error" and exit 2 (bad input) where check and the webhook answer Unknown; nothing about the
    # deployment is wrong, the Hub is out of reach (here HF_HUB_OFFLINE, set for every test). A model the catalog
    # lacks when the catalog is asked for is still bad input (test_bad_flags_are_one_line_exit_2).
    code = main(["plan", "--model", "nobody/nothing", "--gpu", "H100"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "") and out.startswith("verdict: Unknown (CheckpointUnavailable)")
    assert "model: 'nobody/nothing': cannot reach" in out and "could not read this checkpoint" in out
    code = main(["plan", "--model", "nobody/nothing", "--gpu", "H100", "--output", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["verdict"] == "Unknown" and doc["reasons"][0]["code"] == "CheckpointUnavailable"


def test_plan_reads_vllms_q_and_makes_a_misfit_with_prefetch_offload_unknown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # hunt107 F1: -q is vLLM's short --quantization (engine/arg_utils.py 0.34.0 L999); plan took it as a flag it does
    # not model and denied Llama-3.1-70B in bf16 (131.45 GiB on one H100). In fp8 (~67.7 GiB) it is within the card.
    base = ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--max-model-len", "8192"]
    code, doc = plan_json(capsys, *base, "-q", "fp8")
    assert code == 0 and doc["verdict"] in ("Fits", "Tight"), doc["reasons"]
    # F3: prefetch weight offload (config/offload.py 0.34.0 L54-60) is not modelled: the misfit without it is Unknown
    offload = ["--offload-group-size", "2", "--offload-num-in-group", "1", "--offload-backend", "prefetch"]
    code, doc = plan_json(capsys, *base, *offload)
    assert code == 0 and doc["verdict"] == "Unknown", doc["reasons"]
    assert doc["reasons"][0]["code"] == "SettingsNotModelled" and "may make it fit" in doc["reasons"][0]["message"]
    code, doc = plan_json(capsys, *base)
    assert code == 1 and doc["verdict"] == "DoesNotFit"
    # hunt127 F2: -pcp (vLLM's short --prefill-context-parallel-size) is taken without modelling and may make it fit
    for pcp in (["-pcp", "2"], ["--prefill-context-parallel-size=2"]):
        code, doc = plan_json(capsys, *base, *pcp)
        assert code == 0 and doc["verdict"] == "Unknown" and "may make it fit" in doc["reasons"][0]["message"], pcp


def test_plan_takes_eplb_at_one_gpu_when_prefill_context_parallelism_widens_the_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # session 30's note: vLLM's EPLB needs TP x PCP x DP > 1 (config/parallel.py 0.34.0 L609-621); fitgate checks
    # TP x DP > 1 and takes -pcp without modelling it, so `-pcp 2 -ep --enable-eplb` at TP 1 (a setting vLLM takes)
    # exited 2. Now Unknown, saying which flag widens the rule; -pcp 1 widens nothing and stays refused.
    base = ["--model", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-ep", "--enable-eplb"]
    for pcp in (["-pcp", "2"], ["--prefill-context-parallel-size=4"]):
        code, doc = plan_json(capsys, *base, *pcp)
        first = doc["reasons"][0]
        assert code == 0 and doc["verdict"] == "Unknown" and first["code"] == "SettingsNotModelled", pcp
        assert "enable_eplb" in first["message"] and "widens vLLM's rule" in first["message"], first
    code = main(["plan", *base, "-pcp", "1"])
    assert code == 2 and "TP x DP > 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags",
    [
        # hunt107 F4: vLLM writes out bare 80g / 1k / 2K in a config flag's JSON (engine/arg_utils.py 0.34.0 L300-318)
        ['--kv-transfer-config={"kv_connector":"OffloadingConnector","kv_role":"kv_both",'
         '"kv_connector_extra_config":{"cpu_bytes_to_use": 80g}}'],
        ['--compilation-config={"max_cudagraph_capture_size": 1k}'],
        # F5: None or '' is an optional flag unset (engine/arg_utils.py 0.34.0 L173-178), as Helm writes an empty value
        ["--quantization", "None"],
        ["--gpu-memory-utilization", "None"],
        ["--kv-cache-memory-bytes="],
        ["--kv-offloading-size", ""],
        ["--kv-transfer-config", "None"],
    ],
)  # fmt: skip
def test_plan_takes_the_values_vllm_takes(capsys: pytest.CaptureFixture[str], flags: list[str]) -> None:
    # each was exit 2 ("bad input") for a command vLLM 0.34 accepts; Qwen3-8B at 8192 on an H100 fits
    code, doc = plan_json(capsys, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "8192", *flags)
    assert code == 0 and doc["verdict"] == "Fits", doc.get("reasons")


def test_a_suffixed_number_too_long_to_expand_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    # review of hunt107 F4: 400 digits and a k overflowed int(float(...)) (OverflowError, "internal error", exit 70);
    # vLLM's suffixes are read on at most 18 digits, as flagvalues.human_int reads them, so the JSON is left as it is
    # and refused as not JSON, naming the flag
    config = '--compilation-config={"max_cudagraph_capture_size": ' + "9" * 400 + "k}"
    code, _, err = run(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", config)
    assert code == 2 and err.count("\n") == 1 and err.startswith("fitgate: error: --compilation-config:"), err


def test_plan_text_lists_a_switch_as_vllm_takes_it(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt147 S6: the recommended args list printed `--enforce-eager true`, a value vLLM's switch does not take
    # (the one-line `vllm serve` under it was right); both now write the switch alone
    code = main(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--enforce-eager", "--max-model-len", "8192"])
    out = capsys.readouterr().out
    listed = [line for line in out.splitlines() if line.lstrip().startswith("--enforce-eager")]
    assert code == 0 and len(listed) == 1 and listed[0].split("#")[0].split() == ["--enforce-eager"], listed
    assert "--enforce-eager true" not in out


def test_the_recommended_args_carry_every_flag_of_the_suggestion_they_follow(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # hunt170 F1: the printed args dropped the suggestion's --data-parallel-size / --enable-expert-parallel /
    # --max-num-seqs (advice.apply_suggestion mapped none of them), so Qwen3-30B-A3B-FP8 "with --data-parallel-size 4
    # --enable-expert-parallel" on L4s at 0.11 printed a TP 1 line of 29 GiB of weights on one 22 GiB card; the line
    # now re-plans to the suggestion's verdict. F6: a switch is written alone in the header and the suggestion lines.
    code, doc = plan_json(capsys, "--model", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "L4", "--vllm-version", "0.11.0")
    chosen = doc["recommended_change"]
    assert code == 1 and chosen is not None and "--data-parallel-size" in chosen, chosen
    argv = shlex.split(doc["vllm_command"])
    assert argv[argv.index("--data-parallel-size") + 1] == chosen["--data-parallel-size"]
    assert "--enable-expert-parallel" in argv
    replanned = argv[3:]  # vllm serve MODEL, then the args
    code, again = plan_json(
        capsys, "--model", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "L4", "--vllm-version", "0.11.0", *replanned
    )
    assert again["verdict"] in ("Fits", "Tight"), again["reasons"]
    code, out, _ = run(capsys, "plan", "--model", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "L4", "--vllm-version", "0.11.0")
    assert "--enable-expert-parallel true" not in out and "--enable-expert-parallel" in out


def test_fp8_kv_is_not_suggested_below_compute_capability_8(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt170 F2: on a V100 (7.0) vLLM has no fp8 KV path (0.24+ Triton attention "requires SM89+", 0.11's
    # FlexAttention raises for a quantized KV cache); `recommend`'s search already left it out, `plan` offered it
    base = ("--model", "meta-llama/Llama-3.1-8B-Instruct", "--dtype", "float16", "--vllm-version", "0.34.0")
    _, v100 = plan_json(capsys, *base, "--gpu", "V100-32GB")
    _, a100 = plan_json(
        capsys, *base, "--gpu", "A100-40GB", "--max-model-len", "131072", "--gpu-memory-utilization", "0.5"
    )
    assert not any("--kv-cache-dtype" in s["changes"] for s in v100["suggestions"]), v100["suggestions"]
    assert any(s["changes"].get("--kv-cache-dtype") == "fp8" for s in a100["suggestions"]), a100["suggestions"]


def test_expert_parallel_is_not_suggested_on_a_release_without_its_flags(capsys: pytest.CaptureFixture[str]) -> None:
    # hunt170 F4: --enable-expert-parallel is in vLLM from 0.8.0 (arg_utils.py L439; not 0.7.3), --data-parallel-size
    # from 0.8.5 (L535; not 0.8.0): at 0.6.4 they are "unrecognized arguments", no fix; Mixtral on one A100-40GB misfits
    base = ("--model", "mistralai/Mixtral-8x7B-Instruct-v0.1", "--gpu", "A100-40GB")

    def suggested(version: str) -> set[str]:
        _, doc = plan_json(capsys, *base, "--vllm-version", version)
        return {flag for s in doc["suggestions"] for flag in s["changes"]}

    assert not suggested("0.6.4") & {"--enable-expert-parallel", "--data-parallel-size"}
    assert {"--enable-expert-parallel", "--data-parallel-size"} <= suggested("0.34.0")
