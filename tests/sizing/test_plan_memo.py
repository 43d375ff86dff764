"""The per-rank weights are computed once per model and settings (issue 23), with the same answer."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest

from fitgate.sizing import ServingConfig, SizingError, Verdict, Workload, lookup_gpu, plan
from fitgate.sizing.memo import IdentityMemo
from tests.conftest import model

plan_module = importlib.import_module("fitgate.sizing.plan")


def test_weights_are_computed_once_per_model_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    real = plan_module.weights_per_rank

    def counting(arch: Any, inventory: Any, **settings: Any) -> Any:
        calls.append(settings)
        return real(arch, inventory, **settings)

    monkeypatch.setattr(plan_module, "weights_per_rank", counting)
    monkeypatch.setattr(plan_module, "_WEIGHTS_MEMO", IdentityMemo())
    m, h100 = model("meta-llama/Llama-3.1-70B-Instruct"), lookup_gpu("H100")
    first = plan(m, h100, ServingConfig(tensor_parallel_size=4, max_model_len=8192))
    assert len(calls) == 1
    # another context length, another KV dtype: the same weights, not computed again
    again = plan(m, h100, ServingConfig(tensor_parallel_size=4, max_model_len=4096, kv_cache_dtype="fp8"))
    assert len(calls) == 1
    assert again.ranks[0].weights == first.ranks[0].weights
    # TP 8 is another split: computed, and half the per-GPU linear weights of TP 4 (plus the same rotary cache)
    eight = plan(m, h100, ServingConfig(tensor_parallel_size=8, max_model_len=8192))
    assert len(calls) == 2
    assert eight.ranks[0].weights.tensors_bytes < first.ranks[0].weights.tensors_bytes
    # the memo never changes an answer: the same plan without it
    monkeypatch.setattr(plan_module, "_WEIGHTS_MEMO", IdentityMemo())
    fresh = plan(m, h100, ServingConfig(tensor_parallel_size=4, max_model_len=8192))
    assert fresh.ranks[0].weights == first.ranks[0].weights and fresh.per_gpu == first.per_gpu


def test_kv_layouts_are_built_once_per_rank_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = plan_module.build_layout

    def counting(specs: Any, accounting: Any) -> Any:
        calls.append(len(specs))
        return real(specs, accounting)

    monkeypatch.setattr(plan_module, "build_layout", counting)
    monkeypatch.setattr(plan_module, "_LAYOUT_MEMO", IdentityMemo())
    m, h100 = model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu("H100")
    first = plan(m, h100, ServingConfig(max_model_len=8192))
    assert calls == [32]  # one rank, 32 attention layers
    # another context length and gmu: the same layers, dtype and block size -> the same layout, not rebuilt
    again = plan(m, h100, ServingConfig(max_model_len=4096, gpu_memory_utilization=0.8))
    assert calls == [32] and again.kv.bytes_per_token == first.kv.bytes_per_token
    # fp8 KV halves the bytes a token: rebuilt (32 x 2 x 8 x 128 x 1 B = 64 KiB)
    fp8 = plan(m, h100, ServingConfig(max_model_len=8192, kv_cache_dtype="fp8"))
    assert len(calls) == 2 and fp8.kv.bytes_per_token == 65536 == first.kv.bytes_per_token // 2


def test_ranks_are_planned_once_per_model_gpu_and_settings_whatever_the_workload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # issue 23: thousands of deployments share a model and settings and differ in workload; the ranks
    # (weights, activations, KV pool) do not depend on it, only the verdict and the workload's blocks do
    calls: list[int] = []
    real = plan_module._rank

    def counting(*args: Any) -> Any:
        calls.append(args[4])
        return real(*args)

    monkeypatch.setattr(plan_module, "_rank", counting)
    monkeypatch.setattr(plan_module, "_RANKS_MEMO", IdentityMemo())
    monkeypatch.setattr(plan_module, "_RANKS_BY_ID", IdentityMemo())
    m, h100 = model("meta-llama/Llama-3.1-8B-Instruct"), lookup_gpu("H100")
    serving = ServingConfig(max_model_len=32768)
    small = plan(m, h100, serving, Workload(2, 8000))
    big = plan(m, h100, serving, Workload(400, 32000))
    assert calls == [0]  # one rank, planned once for both workloads
    assert small.ranks is big.ranks and small.verdict is not big.verdict
    # the memo never changes an answer: the same plan for a copy of the model (another identity: a miss)
    twin = dataclasses.replace(m, arch=dataclasses.replace(m.arch))
    fresh = plan(twin, h100, serving, Workload(400, 32000))
    assert calls == [0, 0] and fresh == dataclasses.replace(big, model=fresh.model)
    # a bad workload is still refused on a hit, naming the field
    with pytest.raises(SizingError, match="concurrency"):
        plan(m, h100, serving, Workload(0, 8000))
    # a setting the model cannot take is refused every time (failures are not remembered)
    for _ in range(2):
        with pytest.raises(SizingError, match="tensor_parallel_size"):
            plan(m, h100, ServingConfig(tensor_parallel_size=3))


def test_suggestions_are_searched_once_per_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 23: a misfit evaluated again (a node joined elsewhere) re-planned a dozen candidates each time
    from fitgate.sizing import advice  # noqa: PLC0415 - the module whose memo is replaced

    monkeypatch.setattr(advice, "_SUGGESTIONS", IdentityMemo())
    searches: list[int] = []
    real = advice.search_suggestions

    def counting(*args: Any) -> Any:
        searches.append(1)
        return real(*args)

    monkeypatch.setattr(advice, "search_suggestions", counting)
    m, h100 = model("meta-llama/Llama-3.1-70B-Instruct"), lookup_gpu("H100")
    serving = ServingConfig(max_model_len=32768)
    current = plan(m, h100, serving)
    first = advice.suggest(m, h100, serving, None, current)
    assert first and len(searches) == 1
    assert advice.suggest(m, h100, serving, None, current) is first and len(searches) == 1  # answered once
    # another workload is another deployment: searched, and the answer is the search's
    busy = Workload(64, 32000)
    other = advice.suggest(m, h100, serving, busy, plan(m, h100, serving, busy))
    assert len(searches) == 2 and other == real(m, h100, serving, busy, plan(m, h100, serving, busy))
    # a different current plan for the same key (never from plan(), but the memo must not trust the key alone)
    tight = dataclasses.replace(current, verdict=Verdict.TIGHT)
    advice.suggest(m, h100, serving, None, tight)
    assert len(searches) == 3


def test_suggestion_candidates_are_interned_and_planned_by_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 23: each new workload of a misfit searches the same candidates on the same settings; interned per
    # (settings, change), they are the same objects each time and plan() finds their ranks by identity, without
    # hashing a ServingConfig (43 fields) once in the whole search
    from fitgate.sizing import advice  # noqa: PLC0415 - the module whose memo is replaced

    monkeypatch.setattr(advice, "_CANDIDATES", IdentityMemo())
    monkeypatch.setattr(plan_module, "_RANKS_BY_ID", IdentityMemo())
    m, h100 = model("meta-llama/Llama-3.1-70B-Instruct"), lookup_gpu("H100")
    serving = ServingConfig(max_model_len=32768)
    first_wl, second_wl = Workload(20, 8000), Workload(21, 8001)  # busy enough that the suggestions name the workload
    first = advice.search_suggestions(m, h100, serving, first_wl, plan(m, h100, serving, first_wl))
    assert first and len(advice._CANDIDATES) > 3
    moves = advice.moves_to_try(m, h100, serving, first_wl, plan(m, h100, serving, first_wl))
    tp = next(kind for kind in moves if kind and kind[0].changes[0][0] == "--tensor-parallel-size")[0]
    again = advice.candidate(serving, (tp,))
    assert again is advice.candidate(serving, (tp,)) and again == dataclasses.replace(serving, tensor_parallel_size=2)
    # equal settings in another object are another owner: their own candidates, equal in value
    twin = dataclasses.replace(serving)
    assert advice.candidate(twin, (tp,)) is not again and advice.candidate(twin, (tp,)) == again
    assert advice.candidate(serving, ()) is serving  # no change: the settings themselves

    hashes: list[int] = []
    real_hash = ServingConfig.__hash__

    def counting(self: ServingConfig) -> int:
        hashes.append(1)
        return real_hash(self)

    monkeypatch.setattr(ServingConfig, "__hash__", counting)
    current = plan(m, h100, serving, second_wl)
    second = advice.search_suggestions(m, h100, serving, second_wl, current)
    assert hashes == []  # every candidate (and the settings) found by identity
    monkeypatch.setattr(ServingConfig, "__hash__", real_hash)
    # the answers are those of a search with nothing interned or memoised by identity
    monkeypatch.setattr(advice, "_CANDIDATES", IdentityMemo())
    monkeypatch.setattr(plan_module, "_RANKS_BY_ID", IdentityMemo())
    monkeypatch.setattr(plan_module, "_RANKS_MEMO", IdentityMemo())
    assert second == advice.search_suggestions(m, h100, twin, second_wl, plan(m, h100, twin, second_wl))
    assert second != first  # another workload: other numbers in the summaries


def test_the_reasons_no_workload_changes_are_decided_once_per_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 23: a plan's reasons that its workload cannot change (weights over the budget, the memory outside it)
    # are worded once per settings (sizing.judge.prejudge) and shared by every workload's plan; what the workload
    # decides (beyond the KV pool, near it) is added per plan, in judge's order
    judge_module = importlib.import_module("fitgate.sizing.judge")
    calls: list[object] = []
    real = judge_module.prejudge
    monkeypatch.setattr(plan_module, "prejudge", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(plan_module, "_RANKS_MEMO", IdentityMemo())
    monkeypatch.setattr(plan_module, "_RANKS_BY_ID", IdentityMemo())
    m, h100 = model("meta-llama/Llama-3.1-70B-Instruct"), lookup_gpu("H100")
    serving = ServingConfig(max_model_len=8192)
    a, b = (plan(m, h100, serving, Workload(n, 4096)) for n in (1, 64))
    assert len(calls) == 1  # two workloads, one settings: decided once
    assert a.verdict is b.verdict is Verdict.DOES_NOT_FIT and a.reasons[0] is b.reasons[0]  # the same words
    tp4 = ServingConfig(max_model_len=8192, tensor_parallel_size=4)
    light, heavy = plan(m, h100, tp4, Workload(1, 4096)), plan(m, h100, tp4, Workload(4096, 8192))
    assert len(calls) == 2 and light.verdict is Verdict.FITS
    # 4,096 requests of 8,192 tokens need 4096 x 512 blocks of 16 tokens; the pool holds far fewer
    assert heavy.verdict is Verdict.DOES_NOT_FIT and heavy.reasons[-1].code.value == "WorkloadExceedsKVCache"
    assert "4096 concurrent requests x 8192 tokens" in heavy.reasons[-1].message
    # both steps at once give the plan's answer (a DoesNotFit's reasons do not read the memory outside the budget)
    again = judge_module.judge(heavy.serving, heavy.ranks[heavy.binding_rank], heavy.kv, heavy.per_gpu, heavy.workload)
    assert again == (heavy.verdict, heavy.reasons)
