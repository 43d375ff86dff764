"""Speculative decoding: known answers for an MTP drafter, and --speculative-config on every surface.

vLLM 0.33.0's rules are cited in :mod:`fitgate.sizing.speculative`; the arithmetic is in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fitgate.checkpoints.facts import to_model_input
from fitgate.checkpoints.local import load_directory
from fitgate.cli import main
from fitgate.observe import parse_lines
from fitgate.observe.compare import serving_config
from fitgate.operator.schema.api import SpecError, parse_spec
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.cudagraphs import capture_sizes, graph_counts
from fitgate.sizing.engine_args import engine_args
from fitgate.sizing.errors import NotModelledError, SizingError, UnknownArchitectureError
from fitgate.sizing.speculative import Speculative, resolve
from fitgate.sizing.versions import accounting_for
from fitgate.workloads.flagvalues import config_file_flags
from fitgate.workloads.reader import read_workload

CORPUS = Path(__file__).parents[1] / "corpus"
MIMO = CORPUS / "XiaomiMiMo__MiMo-7B-Base"  # MiMoForCausalLM, num_nextn_predict_layers 1
DSV3 = CORPUS / "deepseek-ai__DeepSeek-V3"  # 61 MLA layers + 1 MTP layer
PUBLIC = Path(__file__).parents[2] / "benchmarks" / "calibration" / "public-2026.jsonl"
H100 = lookup_gpu("H100")


def _serving(**kw: Any) -> ServingConfig:
    return ServingConfig(vllm_version="0.33.0", max_model_len=8192, **kw)


def test_an_mtp_layer_is_the_last_decoder_layer_plus_eh_proj_on_the_last_stage() -> None:
    m = to_model_input(load_directory(MIMO))
    base = plan(m, H100, _serving())
    mtp = plan(m, H100, _serving(speculative_method="mtp"))
    # MiMo-7B layer 35: q 4096x4096 + k, v 2 x 4096x1024 + o 4096x4096 + biases 4096+1024+1024
    #   + MLP 3 x 4096x11008 + 2 norms x 4096 = 177,223,680 parameters x 2 B = 354,447,360 B
    # eh_proj 2 x 4096 x 4096 + enorm, hnorm, shared_head.norm 3 x 4096 = 33,566,720 x 2 B = 67,133,440 B
    assert mtp.ranks[-1].weights.total_bytes - base.ranks[-1].weights.total_bytes == 354_447_360 + 67_133_440
    # its attention layer shares the pool: 2 (K, V) x 8 KV heads x 128 x 2 B = 4,096 B more a token
    assert mtp.kv.bytes_per_token - base.kv.bytes_per_token == 4096
    assert mtp.kv.num_blocks < base.kv.num_blocks
    assert mtp.serving.speculative is not None and mtp.serving.speculative.num_tokens == 1  # n_predict
    assert any("1 MTP layer(s) are counted" in n for n in mtp.notes)


def test_with_pipeline_parallelism_the_drafter_loads_its_own_embedding_on_the_last_stage() -> None:
    m = to_model_input(load_directory(MIMO))
    base = plan(m, H100, _serving(pipeline_parallel_size=2))
    mtp = plan(m, H100, _serving(pipeline_parallel_size=2, speculative_method="deepseek_mtp"))
    assert mtp.ranks[0].weights.total_bytes == base.ranks[0].weights.total_bytes  # nothing on the first stage
    # + the embedding it cannot share: 151,680 x 4096 x 2 B = 1,242,562,560 B
    delta = mtp.ranks[1].weights.total_bytes - base.ranks[1].weights.total_bytes
    assert delta == 354_447_360 + 67_133_440 + 1_242_562_560


def test_deepseek_v3s_mtp_layer_adds_one_mla_latent_a_token() -> None:
    m = to_model_input(load_directory(DSV3))
    base = plan(m, lookup_gpu("H200"), ServingConfig(vllm_version="0.33.0", tensor_parallel_size=8))
    mtp = plan(
        m,
        lookup_gpu("H200"),
        ServingConfig(vllm_version="0.33.0", tensor_parallel_size=8, speculative_method="mtp", speculative_tokens=2),
    )
    # MLA latent, not sharded by TP: (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B = 1,152 B a layer;
    # 61 layers = 70,272 B, with the MTP layer 62 x 1,152 = 71,424 B
    assert (base.kv.bytes_per_token, mtp.kv.bytes_per_token) == (61 * 1152, 62 * 1152)
    assert mtp.per_gpu.weights_bytes > base.per_gpu.weights_bytes


def test_token_methods_add_no_memory_but_wider_graphs() -> None:
    m = to_model_input(load_directory(MIMO))
    base = plan(m, H100, _serving(max_num_seqs=64))
    ngram = plan(m, H100, _serving(max_num_seqs=64, speculative_method="ngram", speculative_tokens=3))
    assert ngram.per_gpu.weights_bytes == base.per_gpu.weights_bytes
    assert ngram.kv.bytes_per_token == base.kv.bytes_per_token
    assert ngram.per_gpu.cuda_graph_bytes > base.per_gpu.cuda_graph_bytes
    assert any("no drafter memory" in n for n in ngram.notes)


def test_capture_sizes_follow_the_decode_query_length() -> None:
    v033 = accounting_for("0.33.0")
    plain = capture_sizes(v033, max_num_seqs=64, max_num_batched_tokens=8192)
    spec = capture_sizes(v033, max_num_seqs=64, max_num_batched_tokens=8192, decode_query_len=4)
    # largest: min(2 x 64 x 1, 512) = 128 -> min(2 x 64 x 4, 512) = 512 tokens (config/vllm.py 0.33.0 L2466)
    assert (max(plain), max(spec)) == (128, 512)
    # FULL decode graphs: sizes from 4 up to 64 x 4 = 256 (1 and 2 are below one request's 4 tokens)
    counts = graph_counts(spec, 64, 4)
    assert counts.full == sum(1 for s in spec if 4 <= s <= 256) and counts.full < counts.piecewise


def test_a_drafter_from_another_checkpoint_is_named_not_counted() -> None:
    m = to_model_input(load_directory(MIMO))
    base = plan(m, H100, _serving())
    eagle = plan(m, H100, _serving(speculative_method="eagle3", speculative_tokens=3))
    assert eagle.per_gpu.weights_bytes == base.per_gpu.weights_bytes
    assert any("another checkpoint and is not counted" in n for n in eagle.notes)
    # the user's --speculative-config (its draft model) is theirs to keep: not rewritten in the args
    assert "--speculative-config" not in {a.name for a in engine_args(eagle, _serving())}
    mtp = plan(m, H100, _serving(speculative_method="mtp"))
    (arg,) = [a for a in engine_args(mtp, _serving()) if a.name == "--speculative-config"]
    assert json.loads(arg.value) == {"method": "mtp", "num_speculative_tokens": 1}


@pytest.mark.parametrize(
    ("method", "tokens", "field", "message"),
    [
        ("mtp", None, "speculative_config.method", "multi-token-prediction layers"),  # Llama has none
        ("lookahead", 2, "speculative_config.method", "a method of vLLM 0.33"),
        ("ngram", None, "speculative_config.num_speculative_tokens", "1 to 64"),
        ("ngram", 0, "speculative_config.num_speculative_tokens", "1 to 64"),
    ],
)
def test_bad_settings_name_the_field(method: str, tokens: int | None, field: str, message: str) -> None:
    llama = parse_config(json.loads((CORPUS / "meta-llama__Llama-3.1-8B-Instruct" / "config.json").read_text()))
    with pytest.raises(SizingError, match=message) as info:
        resolve(llama, method, tokens)
    assert str(info.value).startswith(field)


def test_a_plugin_method_is_unknown_from_0_34_and_refused_before() -> None:
    # hunt205 F3: 0.34 types the method SpeculativeMethod | str and takes a plugin's (config/speculative.py 0.34.0
    # L461, L1623-1634); 0.33 takes its own names only (L419)
    llama = parse_config(json.loads((CORPUS / "meta-llama__Llama-3.1-8B-Instruct" / "config.json").read_text()))
    with pytest.raises(NotModelledError, match="plugin"):
        resolve(llama, "my_plugin_method", 3, (0, 34, 0))
    with pytest.raises(SizingError, match=r"a method of vLLM 0\.33") as info:
        resolve(llama, "my_plugin_method", 3, (0, 33, 0))
    assert not isinstance(info.value, NotModelledError)


def test_more_draft_tokens_than_fitgate_sizes_is_not_modelled_not_invalid() -> None:
    # hunt144 F2: vLLM sets no upper bound on num_speculative_tokens (suffix decoding's forks run 128); past fitgate's
    # 64 the answer is Unknown (NotModelledError), not Invalid; 64 itself is sized
    llama = parse_config(json.loads((CORPUS / "meta-llama__Llama-3.1-8B-Instruct" / "config.json").read_text()))
    with pytest.raises(NotModelledError, match="at most 64 draft tokens"):
        resolve(llama, "suffix", 65)
    assert resolve(llama, "suffix", 64) == Speculative("suffix", 64)


def test_an_mtp_drafter_of_its_own_checkpoint_is_a_draft_model() -> None:
    """hunt117 F1: vLLM's "Gemma 4 Assistant Models" docs serve {"method": "mtp", "model":
    "google/gemma-4-31B-it-assistant"}: the MTP layers are the assistant checkpoint's, not the target's, so a target
    without num_nextn_predict_layers is not refused (it was, exit 2 / Invalid); without a model, mtp is the target's."""
    from fitgate.sizing.speculative import parse_config as parse_speculative  # noqa: PLC0415

    text = '{"method": "mtp", "model": "google/gemma-4-31B-it-assistant", "num_speculative_tokens": 4}'
    assert parse_speculative(text) == ("draft_model", 4)
    assert parse_speculative('{"method": "deepseek_mtp", "num_speculative_tokens": 1}') == ("deepseek_mtp", 1)
    llama = parse_config(json.loads((CORPUS / "meta-llama__Llama-3.1-8B-Instruct" / "config.json").read_text()))
    got = resolve(llama, *parse_speculative(text))
    assert got is not None and (got.method, got.num_tokens, got.counted) == ("draft_model", 4, False)
    with pytest.raises(SizingError, match="has none"):  # the target's own MTP layers, which Llama has not
        resolve(llama, *parse_speculative('{"method": "mtp", "num_speculative_tokens": 1}'))


def test_the_token_counts_vllm_fills_in_and_its_older_methods_are_taken() -> None:
    llama = parse_config(json.loads((CORPUS / "meta-llama__Llama-3.1-8B-Instruct" / "config.json").read_text()))
    # hunt57 F1: vllm#35521 served {"method": "suffix"}: min(8, tree depth 24) (suffix/config.py 0.34.0 L24-31)
    assert resolve(llama, "suffix", None) == resolve(llama, "suffix", 8)
    # a drafter checkpoint's own n_predict (not read; its drafter is not counted): 1; vLLM's docs' MLP drafter
    # example gives no count. hunt57 F2: 0.30-0.32 list mlp_speculator and medusa (config/speculative.py L74-77)
    for method in ("eagle3", "draft_model", "mlp_speculator", "medusa"):
        got = resolve(llama, method, None)
        assert got is not None and (got.method, got.num_tokens, got.counted) == (method, 1, False)


def test_mimo_v2_flash_drafts_with_its_first_mtp_layer_whatever_the_config_says() -> None:
    # hunt57 F3: config/speculative.py 0.34.0 L929-945 sets n_predict = _MIMO_V2_FLASH_NUM_MTP_LAYERS (1)
    table = json.loads((Path(__file__).parents[2] / "src/fitgate/sizing/data/hf_defaults.json").read_text())
    defaults = table["model_types"]["mimo_v2_flash"]["defaults"]
    config = {
        **defaults,
        "model_type": "mimo_v2_flash",
        "architectures": ["MiMoV2FlashForCausalLM"],
        "hybrid_layer_pattern": [0] + [1] * 47,  # the 48 layers' attention kinds (families/mimo.py)
        "swa_num_attention_heads": 64,
        "swa_num_key_value_heads": 8,
        "swa_head_dim": 192,
        "swa_v_head_dim": 128,
        "sliding_window_size": 128,
        "moe_layer_freq": [0] + [1] * 47,
    }
    got = resolve(parse_config(config), "mtp", None)
    assert got is not None and (got.num_tokens, got.drafter_layers) == (1, 1)


def test_more_draft_tokens_than_mtp_layers_must_be_a_multiple() -> None:
    config = json.loads((MIMO / "config.json").read_text()) | {"num_nextn_predict_layers": 2}
    arch = parse_config(config)
    assert resolve(arch, "mtp", 4) is not None  # the 2 layers are reused twice
    with pytest.raises(SizingError, match="a multiple of the model's 2 MTP layers"):
        resolve(arch, "mtp", 3)


def test_cli_takes_the_json_and_refuses_bad_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", str(MIMO), "--gpu", "H100", "--max-model-len", "8192", "-o", "json"]
    assert main([*argv, "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}']) == 0
    out = json.loads(capsys.readouterr().out)
    assert any("MTP layer(s) are counted" in n for n in out["notes"])
    assert main([*argv, "--speculative-config", '{"method": "mtp"']) == 2
    assert "--speculative-config" in capsys.readouterr().err


def _deployment(args: list[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.33.0", "args": args, **(extra or {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ml"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def test_the_workload_reader_takes_the_flag_and_the_config_file() -> None:
    got = read_workload(_deployment(["deepseek-ai/DeepSeek-V3", "--speculative-config", '{"method": "deepseek_mtp"}']))
    assert got is not None and got.serving["speculativeConfig"] == {"method": "mtp"}
    eagle = '{"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "method": "eagle3", "num_speculative_tokens": 3}'
    got = read_workload(_deployment(["meta-llama/Llama-3.1-8B-Instruct", f"--speculative-config={eagle}"]))
    assert got is not None and got.serving["speculativeConfig"] == {"method": "eagle3", "numSpeculativeTokens": 3}
    assert any("another checkpoint, not counted" in n for n in got.notes)
    # a --config YAML file holds it as a mapping: vLLM passes it on as JSON (argparse_utils.py L664-668)
    flags = config_file_flags(yaml.safe_load("speculative-config:\n  method: ngram\n  num_speculative_tokens: 4\n"))
    assert json.loads(flags["--speculative-config"]) == {"method": "ngram", "num_speculative_tokens": 4}


def test_a_modeldeployment_carries_it_and_the_schema_refuses_unknown_methods() -> None:
    spec = {"model": {"name": "deepseek-ai/DeepSeek-V3"}, "serving": {"speculativeConfig": {"method": "mtp"}}}
    parsed = parse_spec(spec)
    assert parsed.serving.speculative_config is not None and parsed.serving.speculative_config.method == "mtp"
    spec["serving"] = {"speculativeConfig": {"method": "medusa", "numSpeculativeTokens": 2}}  # vLLM's (hunt78 F1)
    assert parse_spec(spec).serving.speculative_config is not None
    spec["serving"] = {"speculativeConfig": {"method": "lookahead", "numSpeculativeTokens": 2}}
    with pytest.raises(SpecError, match="speculativeConfig"):
        parse_spec(spec)


def _public(case_id: str) -> dict[str, Any]:
    for line in PUBLIC.read_text().splitlines():
        case: dict[str, Any] = json.loads(line)
        if case["id"] == case_id:
            return case
    raise AssertionError(case_id)


def test_a_real_log_gives_its_speculative_config_to_compare() -> None:
    # the engine's config line: speculative_config=SpeculativeConfig(method='mtp', ..., num_spec_tokens=2)
    log = parse_lines(_public("gh-file-56725819772-dsv4-flash-2xgb10-tp2-v0211dev")["raw_lines"])
    assert (log.settings.speculative_method, log.settings.speculative_tokens) == ("mtp", 2)
    serving, _ = serving_config(log)
    assert (serving.speculative_method, serving.speculative_tokens) == ("mtp", 2)
    # the non-default args dict: 'speculative_config': {'method': 'dflash', ..., 'num_speculative_tokens': 6}
    log = parse_lines(_public("gh-file-56878676544-qwen36-35b-prismaquant-dflash-v0220")["raw_lines"])
    assert (log.settings.speculative_method, log.settings.speculative_tokens) == ("dflash", 6)


def test_as_case_records_the_speculative_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(_public("gh-file-56725819772-dsv4-flash-2xgb10-tp2-v0211dev")["raw_lines"]) + "\n")
    assert main(["compare", "--log", str(log), "--as-case", "--gpu", "H100"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["speculative_method"], row["speculative_tokens"]) == ("mtp", 2)


def test_qwen3_next_without_a_layer_count_gets_its_classs_one_layer_and_no_default_tokens() -> None:
    # Qwen3NextMTP builds getattr(config, "num_nextn_predict_layers", 1) layers (qwen3_next_mtp.py L63); with
    # n_predict None vLLM has no default num_speculative_tokens (speculative.py L1601-1618)
    arch = parse_config(json.loads((CORPUS / "Qwen__Qwen3-Next-80B-A3B-Thinking" / "config.json").read_text()))
    assert arch.mtp_layers == 0
    spec = resolve(arch, "qwen3_next_mtp", 2)
    assert spec is not None and (spec.method, spec.num_tokens, spec.drafter_layers) == ("mtp", 2, 1)
    assert arch.layers[spec.template_layer].mixer is not None and spec.template_layer == arch.num_layers - 1
    with pytest.raises(SizingError, match="vLLM has no default"):
        resolve(arch, "mtp", None)


def test_gated_delta_net_conv_states_keep_the_draft_tokens() -> None:
    from fitgate.sizing.kv_layout import layer_specs  # noqa: PLC0415
    from fitgate.sizing.kv_specs import MambaSpec  # noqa: PLC0415

    arch = parse_config(json.loads((CORPUS / "Qwen__Qwen3-Next-80B-A3B-Thinking" / "config.json").read_text()))
    v033 = accounting_for("0.33.0")
    plain = [s for s in layer_specs(arch, [0], 4, 2, 2, 16, v033) if isinstance(s, MambaSpec)]
    spec = [s for s in layer_specs(arch, [0], 4, 2, 2, 16, v033, num_spec=3) if isinstance(s, MambaSpec)]
    # conv_dim = 2 x 16 key heads x 128 + 32 value heads x 128 = 8,192 -> 2,048 per GPU at TP 4; the conv
    # state keeps kernel - 1 + 3 columns (mamba_utils.py 0.33.0 L282-286): 3 x 2,048 x 2 B = 12,288 B more
    assert spec[0].state_bytes - plain[0].state_bytes == 3 * 2048 * 2


def test_a_method_fitgate_does_not_size_is_named_not_denied() -> None:
    # a method of a newer release: named, left out, never a denial
    config = '{"method": "lookahead_v9", "model": "acme.Proposer", "num_speculative_tokens": 2}'
    got = read_workload(_deployment(["meta-llama/Llama-3.1-8B-Instruct", "--speculative-config", config]))
    assert got is not None and got.invalid is None and "speculativeConfig" not in got.serving
    assert any("lookahead_v9: not sized by fitgate" in n for n in got.notes)
    # custom_class (a proposer class of the user's): carried like a drafter checkpoint, which is not counted
    config = '{"method": "custom_class", "model": "acme.Proposer", "num_speculative_tokens": 2}'
    got = read_workload(_deployment(["meta-llama/Llama-3.1-8B-Instruct", "--speculative-config", config]))
    assert got is not None and got.serving["speculativeConfig"] == {"method": "custom_class", "numSpeculativeTokens": 2}
    assert any("custom_class: the drafter is another checkpoint, not counted" in n for n in got.notes)
    bad = read_workload(_deployment(["meta-llama/Llama-3.1-8B-Instruct", "--speculative-config", "{method: mtp"]))
    assert bad is not None and bad.invalid is not None and "--speculative-config" in bad.invalid


def test_a_speculators_drafter_given_as_the_model_names_its_verifier() -> None:
    # hunt22 D1: `vllm serve RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3` serves the verifier the drafter's
    # speculators_config names, with the drafter (vllm/transformers_utils/config.py maybe_override_with_speculators);
    # fitgate said only that Eagle3Speculator "is not valid". The answer stays Unknown (an architecture fitgate does not
    # size), now saying what to plan instead.
    config = {
        "architectures": ["Eagle3Speculator"],
        "speculators_config": {"algorithm": "eagle3", "verifier": {"name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}},
    }
    with pytest.raises(UnknownArchitectureError, match=r"verifier 'meta-llama/Llama-3\.1-8B-Instruct'"):
        parse_config(config)


@pytest.mark.parametrize(("tokens", "count"), [('"4"', 4), ("4.0", 4), ('"4.0"', 4), ('" 4 "', 4), ("true", 1)])
def test_a_count_written_as_json_text_or_a_whole_float_is_read_as_vllms_pydantic_reads_it(
    tokens: str, count: int
) -> None:
    # hunt90 F1: num_speculative_tokens is an int field of a lax pydantic dataclass (config/speculative.py 0.34.0
    # L455): "4" and 4.0 are 4, true is 1 (hunt92 F3). KServe's LLMInferenceService keeps a speculator's config as
    # strings; it was Invalid.
    from fitgate.sizing.speculative import parse_config  # noqa: PLC0415

    assert parse_config(f'{{"method": "ngram", "num_speculative_tokens": {tokens}}}') == ("ngram", count)


@pytest.mark.parametrize("tokens", ['"x"', "4.5", "[4]", '"4.5"'])
def test_a_count_pydantic_refuses_stays_a_one_line_error(tokens: str) -> None:
    from fitgate.sizing.speculative import parse_config  # noqa: PLC0415

    with pytest.raises(SizingError, match="num_speculative_tokens"):
        parse_config(f'{{"method": "ngram", "num_speculative_tokens": {tokens}}}')


@pytest.mark.parametrize(
    ("version", "corpus", "implicit"),
    [
        ("0.8.5", DSV3, True),  # config.py 0.8.5 L2292-2300: deepseek_v3 only
        ("0.8.5", MIMO, False),
        ("0.10.1", MIMO, True),  # config/__init__.py 0.10.1 L2049-2060: + mimo
        ("0.10.2", DSV3, True),
        ("0.11.0", DSV3, False),  # config/speculative.py 0.11.0 L218-239: the method must be given
    ],
)
def test_a_method_less_config_makes_an_mtp_target_its_own_drafter_before_011(
    version: str, corpus: Path, implicit: bool
) -> None:
    """hunt127 F1: ``{"num_speculative_tokens": 1}`` alone ran DeepSeek-R1's MTP on 0.8.5; ``plan`` was exit 2."""
    arch = parse_config(json.loads((corpus / "config.json").read_text()))
    release = accounting_for(version).version
    if implicit:
        spec = resolve(arch, None, 1, release)
        assert spec is not None and (spec.method, spec.num_tokens, spec.drafter_layers) == ("mtp", 1, 1)
    else:  # vLLM: "num_speculative_tokens was provided but without speculative model"
        with pytest.raises(SizingError, match=r"speculative_config\.method"):
            resolve(arch, None, 1, release)


def test_the_workload_reader_takes_a_method_less_config_as_plan_does() -> None:
    """The workload path reads the same MTP drafter on a 0.8.5 image (it was dropped, so check and plan disagreed)."""
    args = ["deepseek-ai/DeepSeek-R1", "--speculative-config", '{"num_speculative_tokens": 1}']
    got = read_workload(_deployment(args, {"image": "vllm/vllm-openai:v0.8.5"}))
    assert got is not None and got.serving["speculativeConfig"] == {"method": "mtp", "numSpeculativeTokens": 1}
    got = read_workload(_deployment(args))  # 0.33: vLLM refuses it; the reader notes it and leaves it out
    assert got is not None and "speculativeConfig" not in got.serving
