"""The plan's JSON contract written once, below the CLI (fitgate.report), and ReasonCode end to end (issue 25)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from fitgate.checkpoints import resolve, to_model_input
from fitgate.cli import build_parser, main
from fitgate.cli.inputs import economics_of, origin_of
from fitgate.observe import parse_lines
from fitgate.observe.compare import TERMS, Comparison, compare_document, gpu_of, predicted_terms, serving_config
from fitgate.operator.decision.evaluate import evaluate
from fitgate.operator.decision.status import status_of
from fitgate.operator.gpus.inventory import parse_node
from fitgate.operator.schema.api import parse_spec
from fitgate.report import PlanReport, plan_document
from fitgate.sizing import (
    ReasonCode,
    ServingConfig,
    SizingError,
    Verdict,
    Workload,
    lookup_gpu,
    plan,
    recommend,
    suggest,
)

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm-logs" / "cases.jsonl"
CASES = {c["id"]: c for c in (json.loads(line) for line in LOGS.read_text().splitlines())}
LLAMA_LOG = "llmd-v0190-meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192"
#: metav1.Condition's reason pattern (k8s.io/apimachinery/pkg/apis/meta/v1/types.go, ``Condition.Reason``).
CONDITION_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
H100_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "h100-0", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
    "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"}},
}


def report_of(repo_id: str, gpu: str, serving: ServingConfig, workload: Workload | None = None) -> PlanReport:
    """What `fitgate plan` builds before printing: the typed report."""
    facts = resolve(repo_id, source="catalog")
    model = to_model_input(facts)
    g = lookup_gpu(gpu)
    result = plan(model, g, serving, workload)
    suggestions = suggest(model, g, serving, workload, result)
    _, args, chosen = recommend(model, g, serving, workload, result, suggestions)
    return PlanReport(origin_of(facts), result, suggestions, args, chosen)


# --- one serializer -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("repo_id", "gpu", "max_model_len"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "H100", 32768),  # Fits
        ("meta-llama/Llama-3.1-70B-Instruct", "H100", 32768),  # DoesNotFit: 70.6e9 params x 2 B > 80 GB
    ],
)
def test_fitgate_plan_prints_the_report_serializer_byte_for_byte(
    capsys: pytest.CaptureFixture[str], repo_id: str, gpu: str, max_model_len: int
) -> None:
    argv = ["plan", "--model", repo_id, "--source", "catalog", "--gpu", gpu, "--max-model-len", str(max_model_len)]
    main([*argv, "--output", "json"])
    out = capsys.readouterr().out
    report = report_of(repo_id, gpu, ServingConfig(max_model_len=max_model_len))
    # the estimates as `fitgate plan` makes them from its flags (list prices; none for a misfit)
    args = build_parser().parse_args(argv)
    perf, cost = economics_of(args, to_model_input(resolve(repo_id, source="catalog")), lookup_gpu(gpu), report.plan)
    report = replace(report, performance=perf, cost=cost)
    assert out == json.dumps(plan_document(report), indent=2) + "\n"


def test_compare_reads_the_typed_plan_and_agrees_with_the_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`predicted` is the report's document; every error is the typed figure against the log's, as printed."""
    case = CASES[LLAMA_LOG]
    path = tmp_path / "run.log"
    path.write_text("\n".join(case["raw_lines"]) + "\n")
    main(["compare", "--log", str(path), "--source", "catalog", "--output", "json"])
    printed = json.loads(capsys.readouterr().out)

    log = parse_lines(case["raw_lines"])
    gpu, gpu_notes = gpu_of(log, None)
    serving, notes = serving_config(log)
    facts = resolve(log.settings.model or "", source="catalog")
    model = to_model_input(facts)
    result = plan(model, gpu, serving)
    suggestions = suggest(model, gpu, serving, None, result)
    _, args, chosen = recommend(model, gpu, serving, None, result, suggestions)
    c = Comparison(
        log, str(path), PlanReport(origin_of(facts), result, suggestions, args, chosen), None, (*gpu_notes, *notes)
    )
    assert compare_document(c) == printed
    assert c.predicted is not None and printed["predicted"] == plan_document(c.predicted)

    # the typed terms are the document's figures: rank 0 of stage 0, and max concurrency rounded as printed
    rank0, kv = printed["predicted"]["ranks"][0], printed["predicted"]["kv_cache"]
    assert predicted_terms(result) == {
        "weights_bytes": rank0["weights_bytes"],
        "activation_bytes": rank0["activation_bytes"],
        "non_torch_bytes": rank0["non_torch_bytes"],
        "cuda_graph_bytes": rank0["cuda_graph_bytes"],
        "kv_available_bytes": rank0["available_kv_bytes"],
        "kv_tokens": kv["reported_tokens"],
        "num_gpu_blocks": kv["num_blocks"],
        "max_concurrency": kv["max_concurrency"],
    }
    checked = 0
    for term in TERMS:
        observed = printed["observed"][term.key]
        if observed:
            predicted = predicted_terms(result)[term.key]
            assert printed["errors"][term.key] == round(100 * (predicted - observed) / abs(observed), 2)
            checked += 1
    assert checked >= 5  # the log prints weights, activation, non-torch, KV memory, tokens, concurrency


# --- ReasonCode end to end -------------------------------------------------------------------------------------------


def test_every_reason_code_is_a_kubernetes_condition_reason_and_its_own_string_in_json() -> None:
    for code in ReasonCode:
        assert CONDITION_REASON.match(code.value), code
        assert json.dumps({"code": code}) == json.dumps({"code": code.value})
        assert f"{code}" == str(code) == code.value


def test_every_code_the_plan_emits_is_a_member_and_the_json_prints_its_value() -> None:
    emitted: set[ReasonCode] = set()
    for repo_id in ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-30B-A3B"):
        for gpu in ("H100", "L4"):
            for mml in (2048, 32768):
                for gmu in (0.5, 0.9, 0.99):
                    for workload in (None, Workload(64, mml)):
                        try:
                            report = report_of(
                                repo_id, gpu, ServingConfig(max_model_len=mml, gpu_memory_utilization=gmu), workload
                            )
                        except SizingError:
                            continue
                        codes = [r.code for r in report.plan.reasons]
                        assert all(type(c) is ReasonCode for c in codes), codes
                        doc = plan_document(report)
                        assert [r["code"] for r in doc["reasons"]] == [c.value for c in codes]
                        assert all(type(r["code"]) is str for r in doc["reasons"])  # plain strings in the JSON
                        emitted |= set(codes)
    # DoesNotFit, Tight and Fits codes all seen (70B on one L4; 64 x 32768 tokens on H100; 8B at 2048 on H100)
    assert {ReasonCode.WEIGHTS_EXCEED_BUDGET, ReasonCode.FITS} <= emitted and len(emitted) >= 5, emitted


@pytest.mark.parametrize(
    ("repo_id", "verdict", "reason"),
    [
        # 8B: 16 GB of bf16 weights on an 80 GB card, one 32768-token request's KV well inside the pool
        ("meta-llama/Llama-3.1-8B-Instruct", Verdict.FITS, "Fits"),
        # 70B: 70.6e9 params x 2 B = 141 GB of weights on one 80 GB card
        ("meta-llama/Llama-3.1-70B-Instruct", Verdict.DOES_NOT_FIT, "WeightsExceedBudget"),
    ],
)
def test_status_reasons_are_members_and_the_strings_they_always_were(
    repo_id: str, verdict: Verdict, reason: str
) -> None:
    spec = parse_spec({"model": {"name": repo_id, "source": "catalog"}, "serving": {"maxModelLen": 32768}})
    facts = resolve(repo_id, source="catalog")
    ev = evaluate(spec, to_model_input(facts), parse_node(H100_NODE), facts=facts)
    assert type(ev.reason) is ReasonCode and ev.verdict is verdict
    status = status_of(ev, 1, None)
    assert status["reason"] == reason and type(status["reason"]) is str
    conditions = {c["type"]: c["reason"] for c in status["conditions"]}
    assert conditions == {"Ready": "Evaluated", "Fits": reason}
    assert all(type(r) is str and r in {c.value for c in ReasonCode} for r in conditions.values())
    assert [p["reason"] for p in status["pools"]] == [reason]
