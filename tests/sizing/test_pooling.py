"""``--runner pooling``: embedding models profile their pooler, not the sampler, and load no lm_head."""

from __future__ import annotations

from pathlib import Path

import pytest

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.cli import main
from fitgate.sizing import ServingConfig, custom_gpu, lookup_gpu, plan
from fitgate.sizing.cudagraphs import FIRST_CAPTURE_BYTES, PER_GRAPH_LAYER_BYTES, pooling_graph_mode
from fitgate.sizing.engine_args import engine_args
from fitgate.sizing.errors import SizingError
from fitgate.sizing.units import GiB
from fitgate.sizing.versions import accounting_for
from tests.conftest import model

CORPUS = Path(__file__).parents[1] / "corpus"
RTX_5090 = custom_gpu(int(31.36 * GiB))  # the total vLLM printed in the calibration case


def test_pooling_profiles_the_forward_pass_only() -> None:
    # Qwen3-Embedding-0.6B (tests/corpus, real config) as served in the public 0.28 case: RTX 5090,
    # max_model_len 2048, default batch of a < 70 GiB card: 2048 tokens, 256 sequences.
    # Forward pass: 2048 tokens x 2 B x (7 x 1024 hidden + 3 x 3072 intermediate) = 67,108,864 B.
    # The generate runner adds the sampler warm-up over 256 rows x 151,669 logits instead: at 0.28 the dense model
    # runs on the V2 runner (config/vllm.py 0.28.0 L691-712), whose warm-up samples the bf16 logits without an fp32
    # copy (0.146 GiB + 2 B a logit = 0.218 GiB, larger than the forward pass, so it is the peak); the pooling
    # runner stays on V1 (``runner_type != "generate"``).
    m = to_model_input(load_directory(CORPUS / "Qwen__Qwen3-Embedding-0.6B"))
    serving = ServingConfig(max_model_len=2048, gpu_memory_utilization=0.3, vllm_version="0.28.0")
    pooled = plan(m, RTX_5090, ServingConfig(**{**serving.__dict__, "runner": "pooling"})).ranks[0].profile
    generated = plan(m, RTX_5090, serving).ranks[0].profile
    assert pooled.forward_bytes == generated.forward_bytes == 2048 * 2 * (7 * 1024 + 3 * 3072) == 67_108_864
    assert pooled.sampler_bytes == 0
    assert pooled.activation_bytes == 67_108_864
    assert generated.sampler_bytes == int(0.146 * GiB) + 2 * 256 * 151669
    assert generated.activation_bytes == generated.sampler_bytes


def test_pooling_loads_no_lm_head() -> None:
    # Llama-3.1-8B keeps an untied lm_head of 128,256 x 4096 bf16 = 1,050,673,152 B; the pooling
    # adapter builds the model without it. Qwen3-Embedding ties it to the embedding: nothing changes.
    llama = model("meta-llama/Llama-3.1-8B-Instruct")
    h100 = lookup_gpu("H100")

    def weights(m: object, runner: str) -> int:
        s = ServingConfig(max_model_len=2048, vllm_version="0.28.0", runner=runner)
        return plan(m, h100, s).ranks[0].weights.total_bytes  # type: ignore[arg-type]

    assert weights(llama, "generate") - weights(llama, "pooling") == 128256 * 4096 * 2 == 1_050_673_152
    tied = to_model_input(load_directory(CORPUS / "Qwen__Qwen3-Embedding-0.6B"))
    assert weights(tied, "generate") == weights(tied, "pooling")


def test_pooling_captures_piecewise_graphs_only() -> None:
    # hunt146 F1: vLLM lowers a pooling model's CUDA-graph mode to PIECEWISE ("Pooling models do not support full
    # cudagraphs", config/vllm.py 0.11.1 L484-490, 0.34.0 L1863-1873), so from 0.20, where the estimate comes out of
    # the budget, only the piecewise graphs count. Qwen3-Embedding-0.6B (28 layers) at 0.25 on the RTX 5090, 256
    # sequences and 2048 tokens: 51 capture sizes, 35 of them decode sizes (test_cudagraph_settings.py).
    # generate: 100 MiB + (50 + 34) x 220 KiB x 28; pooling: 100 MiB + 50 x 220 KiB x 28.
    m = to_model_input(load_directory(CORPUS / "Qwen__Qwen3-Embedding-0.6B"))
    serving = {"max_model_len": 2048, "gpu_memory_utilization": 0.3, "vllm_version": "0.25.0"}
    pooled = plan(m, RTX_5090, ServingConfig(**serving, runner="pooling"))
    generated = plan(m, RTX_5090, ServingConfig(**serving, runner="generate"))
    assert generated.ranks[0].profile.cuda_graph_bytes == FIRST_CAPTURE_BYTES + 84 * PER_GRAPH_LAYER_BYTES * 28
    assert pooled.ranks[0].profile.cuda_graph_bytes == FIRST_CAPTURE_BYTES + 50 * PER_GRAPH_LAYER_BYTES * 28
    # 0.11.0 lowered only its default mode; from 0.11.1 any mode with full graphs; NONE and generate stay as given
    cases = [
        (None, "pooling", "0.11.0", "PIECEWISE"),
        ("FULL", "pooling", "0.11.0", "FULL"),
        ("FULL", "pooling", "0.11.1", "PIECEWISE"),
        ("FULL_DECODE_ONLY", "pooling", "0.34.0", "PIECEWISE"),
        ("NONE", "pooling", "0.34.0", "NONE"),
        (None, "generate", "0.34.0", "FULL_AND_PIECEWISE"),
        (None, "pooling", "0.10.2", "FULL_AND_PIECEWISE"),
    ]
    for given, runner, release, want in cases:
        mode = given or "FULL_AND_PIECEWISE"
        assert pooling_graph_mode(mode, given, runner, accounting_for(release)) == want, (given, runner, release)


def test_an_unknown_runner_names_the_field() -> None:
    with pytest.raises(SizingError, match=r"runner: 'draft' is not valid; expected auto, generate or pooling"):
        plan(model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu("H100"), ServingConfig(runner="draft"))


def test_the_command_keeps_the_runner() -> None:
    m = to_model_input(load_directory(CORPUS / "Qwen__Qwen3-Embedding-0.6B"))
    pooling = ServingConfig(max_model_len=2048, runner="pooling")
    args = {a.name: a.value for a in engine_args(plan(m, RTX_5090, pooling), pooling)}
    assert args["--runner"] == "pooling"
    assert "--runner" not in {a.name for a in engine_args(plan(m, RTX_5090, ServingConfig()), ServingConfig())}


@pytest.mark.parametrize(
    ("version", "flag"),
    [("0.34.0", ("--runner", "pooling")), ("0.10.1", ("--runner", "pooling")), ("0.10.0", ("--task", "embed")),
     ("0.6.6", ("--task", "embed")), ("0.6.4", ("--task", "embedding")), ("0.6.3", None)],
)  # fmt: skip
def test_the_command_asks_for_pooling_the_way_the_release_takes_it(version: str, flag: tuple[str, str] | None) -> None:
    # hunt124 F1: `--runner` first came in 0.10.1 (engine/arg_utils.py 0.10.1 L473); 0.10.0 and older exit on it
    # ("unrecognized arguments"). Before, --task: `embedding` in 0.6.4 (config.py TaskOption L42), `embed` from
    # 0.6.6 (L55); 0.6.3 has neither and picks the runner from the architecture.
    m = to_model_input(load_directory(CORPUS / "Qwen__Qwen3-Embedding-0.6B"))
    pooling = ServingConfig(max_model_len=2048, runner="pooling", vllm_version=version)
    got = [(a.name, a.value) for a in engine_args(plan(m, RTX_5090, pooling), pooling)]
    asked = [arg for arg in got if arg[0] in ("--runner", "--task")]
    assert asked == ([flag] if flag else [])


def test_plan_flag(capsys: pytest.CaptureFixture[str]) -> None:
    directory = str(CORPUS / "Qwen__Qwen3-Embedding-0.6B")
    argv = ["plan", "--model", directory, "--gpu-memory", "31.36GiB", "--max-model-len", "2048", "--runner"]
    assert main([*argv, "pooling"]) == 0
    out, _ = capsys.readouterr()
    assert "--runner pooling" in out
    try:
        code: object = main([*argv, "draft"])
    except SystemExit as exc:  # argparse's choices
        code = exc.code
    _, err = capsys.readouterr()
    assert code == 2 and "--runner" in err and "Traceback" not in err
