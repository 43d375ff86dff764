"""How each vLLM release accounts memory: the differences that change the numbers.

Source: the official PyPI wheels of every release from 0.10.2 to 0.34.0 except 0.12.0 (``pip download
--no-deps vllm==X``, read not run; file:line below are of the wheel of the release named, as in
``docs/vllm-releases.md``), ``shared/reference/vllm-memory.md`` and the measured startup logs in
``shared/calibration``. Each switch sits at the first release whose source has the new behaviour.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from fitgate.sizing.errors import SizingError

T = TypeVar("T")

#: The newest release whose accounting fitgate models (read from its wheel): the default of ``plan``,
#: what ``latest`` / ``nightly`` image tags mean, and how a newer release is sized (with a note).
NEWEST_MODELLED = (0, 34, 0)
#: The release whose accounting ``plan`` uses when none is given: the newest modelled release.
DEFAULT_VLLM_VERSION = ".".join(map(str, NEWEST_MODELLED))
_OLDEST = (0, 5, 0)
#: Patch releases of the newest modelled minor share its accounting; anything above is "newer".
_NEWEST = (NEWEST_MODELLED[0], NEWEST_MODELLED[1], 99)
#: The extensible KV cache (sized after warm-up and CUDA-graph capture) is on by default from 0.34.0
#: on CUDA and ROCm (``VllmConfig._resolve_extensible_kv_cache``, config/vllm.py 0.34.0 L3180-3270).
EXTENSIBLE_KV_CACHE_SINCE = (0, 34, 0)
#: The release that gave chunked local attention its own KV spec, with the hybrid manager on (only in it, until
#: 0.14.0 turned it on again; see VllmAccounting.chunked_local_hybrid).
CHUNKED_LOCAL_SPEC_SINCE = (0, 10, 0)
#: Releases whose V1 sampler uses FlashInfer's top-k/top-p kernels by default when FlashInfer is importable (vLLM's
#: own image installs it: docker/Dockerfile's vllm-base stage, ``uv pip install ... ${FLASHINFER_WHEEL}`` on amd64).
#: ``TopKTopPSampler.__init__`` (v1/sample/ops/topk_topp_sampler.py) takes ``forward_cuda`` when
#: ``envs.VLLM_USE_FLASHINFER_SAMPLER is not False`` ("In V1, None means True"): 0.8.5 L50, 0.9.2 L40, 0.10.1.1 L41,
#: 0.10.2 L49, 0.11.0 L46. From 0.11.1 it is opt-in (``if envs.VLLM_USE_FLASHINFER_SAMPLER:``, "Users must opt in
#: explicitly": 0.11.1 L34-35, 0.11.2, 0.12.0, 0.13.0 L35, 0.15.1, 0.17.0 L39).
FLASHINFER_SAMPLER_DEFAULT = ((0, 8, 0), (0, 11, 1))
#: Bytes per (sequence x vocab) element of the profiling sampler pass on FlashInfer's path, from the source (0.10.2):
#: ``compute_logits`` returns logits in the model dtype (2 B, kept alive by ``_dummy_sampler_run``), the sampler
#: copies them to fp32 (4 B, v1/sample/sampler.py), ``_dummy_sampler_run`` sets both top_k and top_p
#: (gpu_model_runner.py 0.10.2 L2855-2861), so ``flashinfer_sample`` calls ``top_k_top_p_sampling_from_logits``
#: (topk_topp_sampler.py 0.10.2 L249-252), which masks the top-k logits (4 B) and takes their softmax (4 B) and then
#: samples by rejection, without PyTorch's sort (which ``sampler_bytes_per_logit``'s 37.8 B fits):
#: 2 + 4 + 4 + 4 = 14 B.
FLASHINFER_SAMPLER_BYTES_PER_LOGIT = 14.0

#: 0.26's list (config/vllm.py 0.26.0): 0.27 adds Kimi K3, 0.28 DeepSeek-V4 (0.27.0 / 0.27.1 L69-79, 0.28.0).
_V2_026 = frozenset(
    {
        "DeepseekV2ForCausalLM",
        "GraniteMoeForCausalLM",
        "InklingForCausalLM",
        "InklingForConditionalGeneration",
        "LongcatFlashNgramForCausalLM",
        "Qwen2MoeForCausalLM",
    }
)
_V2_027 = _V2_026 | {"KimiK3ForConditionalGeneration"}
#: The architectures each release lists for the V2 model runner (config/vllm.py
#: ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``: 0.22.0 L69, 0.23.0 L69-75, 0.24.0 L68-77, 0.25.0 L68-74,
#: 0.27.1 L69-99, 0.28.0); from 0.29.0 every model runs on V2 (0.29.0 L645-677, 0.33.0 L731-767); 0.34.0
#: removed the V1 GPU runner (v1/worker/gpu_model_runner.py and VLLM_USE_V2_MODEL_RUNNER are gone;
#: ``Worker._make_model_runner``, gpu_worker.py 0.34.0 L579-587, builds gpu/model_runner.py's GPUModelRunner).
#: Up to 0.28 V2's ``profile_cudagraph_memory()`` returns 0 (gpu/model_runner.py 0.21.0 L598-600,
#: 0.27.1 L749-751): those models get no CUDA-graph deduction even with the estimate on.
#: The list is not the whole rule: :meth:`VllmAccounting.uses_v2_runner`.
_V2_ARCHITECTURES: tuple[tuple[tuple[int, int, int], frozenset[str]], ...] = (
    ((0, 22, 0), frozenset({"Qwen3ForCausalLM"})),
    ((0, 23, 0), frozenset({"Qwen3ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM"})),
    (
        (0, 24, 0),
        frozenset(
            {
                "Qwen3ForCausalLM",
                "LlamaForCausalLM",
                "MistralForCausalLM",
                "DeepseekV2ForCausalLM",
                "Qwen2MoeForCausalLM",
                "GraniteMoeForCausalLM",
            }
        ),
    ),
    ((0, 25, 0), frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})),
    ((0, 26, 0), _V2_026),
    ((0, 27, 0), _V2_027),
    ((0, 28, 0), _V2_027 | {"DeepseekV4ForCausalLM"}),
)

#: Speculative methods the V2 runner runs (``_get_v2_model_runner_unsupported_features``, config/vllm.py): up to
#: 0.29 only these (0.22.0 L2000-2003, 0.24.0 L2029-2032, 0.25.0-0.28.0 L2072-2078 / L2400-2406, 0.29.0
#: L2564-2574); another method falls back to the V1 runner.
_V2_SPECULATIVE_ONLY: tuple[tuple[tuple[int, int, int], frozenset[str]], ...] = (
    ((0, 22, 0), frozenset({"eagle", "eagle3", "mtp"})),
    ((0, 24, 0), frozenset({"eagle", "eagle3", "mtp", "dflash"})),
    ((0, 25, 0), frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})),
    ((0, 29, 0), frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark", "extract_hidden_states"})),
)
#: From 0.30 the methods it does not run, V1's (0.30.0 L2839-2850, 0.31.0 L3075-3083, 0.32.0 L2928-2934, 0.33.0
#: L3066-3068); 0.34 has no V1 runner.
_V1_SPECULATIVE: tuple[tuple[tuple[int, int, int], frozenset[str]], ...] = (
    ((0, 30, 0), frozenset({"ngram", "ngram_gpu", "draft_model", "suffix", "medusa", "mlp_speculator"})),
    ((0, 31, 0), frozenset({"ngram", "ngram_gpu", "suffix", "medusa", "mlp_speculator"})),
    ((0, 32, 0), frozenset({"suffix", "medusa", "mlp_speculator"})),
    ((0, 33, 0), frozenset({"suffix"})),
)


def _by_release(
    table: tuple[tuple[tuple[int, int, int], frozenset[str]], ...], version: tuple[int, int, int]
) -> frozenset[str]:
    """The last entry of ``table`` at or before ``version`` (empty before the first)."""
    found = frozenset[str]()
    for since, names in table:
        if version >= since:
            found = names
    return found


@dataclass(frozen=True)
class RunnerTraits:
    """What vLLM 0.22-0.33 reads of a model to pick its GPU model runner (``VllmConfig.use_v2_model_runner``).

    Attributes:
        moe: ``model_config.is_moe``.
        hybrid: ``model_config.is_hybrid``: recurrent layers (Mamba, linear attention) beside attention.
        attention_free: Only recurrent layers (``is_attention_free``).
        quantized: The checkpoint has a ``quantization_config`` (``model_config.is_quantized``, 0.22-0.23).
        generate: ``runner_type == "generate"`` (a pooling runner stays on V1 up to 0.28).
        speculative: The speculative method (vLLM's name: every MTP spelling is ``mtp``), or None.
    """

    moe: bool = False
    hybrid: bool = False
    attention_free: bool = False
    quantized: bool = False
    generate: bool = True
    speculative: str | None = None


@dataclass(frozen=True)
class VllmAccounting:
    """The memory-accounting behaviour of one vLLM release.

    Attributes:
        version: (major, minor, patch).
        engine: ``V1`` (0.8+, default since 0.8) or ``V0``.
        hybrid_kv_manager: Sliding-window / chunked / Mamba layers get their own groups (0.10+);
            before, every attention layer is sized as full attention.
        chunked_local_hybrid: Chunked local attention (Llama 4) keeps its own group. 0.10.0 gave it its
            own spec with the hybrid manager on (v1/worker/gpu_model_runner.py 0.10.0 L2794-2813
            ``ChunkedLocalAttentionSpec``; config.py L4655-4676 turns the manager off only off-GPU, with
            KV transfer or events, or with EAGLE: vllm#19351; hunt182 F1). 0.10.1-0.13
            VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to "0" and the hybrid manager
            is disabled for it (chunked layers cost full-length KV; vllm#21761, envs.py 0.13.0 L1432-1433);
            from 0.14.0 the default is "1" (envs.py 0.14.0 L1469, 0.33.0 L1931-1932, 0.34.0 L2040-2042).
            Before 0.10.0 there is no such spec (full attention).
        requested_ceil: ``requested = ceil(total * gmu)`` (0.19+) instead of a float product.
        cudagraph_in_budget: The CUDA-graph estimate is subtracted from the KV budget: envs.py
            ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to "1" from 0.20.0 (envs.py 0.20.0
            L1725; opt-in "0" in 0.18.0 L1636 and 0.19.0 L1654; 0.34.0 L2355-2357); gpu_worker.py
            0.33.0 L720-757, 0.34.0 L742-780 (the estimate is 0 with the extensible KV cache,
            gpu/model_runner.py 0.34.0 L1121-1125).
        tokens_report: How ``GPU KV cache size: N tokens`` is computed: ``blocks`` (N = blocks x
            block size; V0 and 0.8), ``groups`` (blocks // groups x block size; 0.10-0.20.0,
            kv_cache_utils.py 0.20.0 L1694-1698) or ``derived`` (int(max concurrency x max_model_len); from 0.20.1,
            kv_cache_utils.py 0.20.1 L1699-1706, 0.21.0 L1686-1716, 0.34.0 L1141-1149; hunt84 F1).
        concurrency_sum_groups: ``Maximum concurrency`` divides by the sum over groups of each
            group's pages (kv_cache_utils.py 0.27.0 L951, 0.34.0 L1082-1114), not the group-size
            formula of 0.10-0.26.
        big_gpu_tier_bytes: Cards at least this large get the 16384-token batch in ``vllm serve``
            (160 GiB, arg_utils.py 0.28.0 L2582, 0.33.0 L2973, 0.34.0 L3010), else None.
        default_gpu_memory_utilization: 0.9 up to 0.19.1, 0.92 from 0.20.0 (config/cache.py 0.19.0
            L41, 0.20.0 L66, 0.33.0 L215; 0.34.0 ``DEFAULT_GPU_MEMORY_UTILIZATION`` L186 when the
            extensible KV cache is off, 1.0 when it is on: see ``extensible_kv_cache``).
        chunked_off_taken: V1 runs a generating model unchunked when ``--no-enable-chunked-prefill`` asks (0.11.1+:
            "if self.enable_chunked_prefill is None", arg_utils.py 0.11.1 L1955; before, its defaults set it True
            whatever was asked: 0.8.5 L1568-1569, 0.9.2 L1575-1579, 0.10.2 L1619-1623, 0.11.0 L1547-1548;
            hunt161 F1). The same release caps a default ``max_num_batched_tokens`` at ``max_num_seqs x
            max_model_len`` (0.11.1 L2023-2026, 0.34.0 L3255-3261; hunt161 F5).
        a100_small_tier: A100s get the small defaults even with 80 GB (``"a100" not in device_name``: 0.9.0+,
            engine/arg_utils.py 0.9.0 L1495, 0.9.2 L1629; 0.8.5 L1596 checks the memory alone; hunt161 F2).
        sampler_bytes_per_logit: Bytes of the profiling sampler pass per (sequence x vocab)
            element; larger before 0.17 (see activation.py).
        sampler_base_bytes: Fixed part of the sampler pass.
        mla_align_bytes: Per-token MLA cache entry alignment (V0 0.7.x: 256 bytes).
        extensible_kv_cache: 0.34+: the KV cache is reserved as address space, warm-up and CUDA-graph
            capture run, and its size is measured from the free memory left
            (``measure_kv_cache_blocks``, v1/worker/extensible_kv_cache.py 0.34.0 L621-716); on by
            default on CUDA and ROCm (config/vllm.py 0.34.0 L3180-3270) unless
            ``--kv-cache-memory-bytes`` or ``--no-enable-extensible-kv-cache`` is given. With it the
            default gpu_memory_utilization is 1.0 (``resolved_gpu_memory_utilization``,
            config/cache.py 0.34.0 L216, L495-501) and the free-memory start-up check is skipped
            (v1/worker/utils.py 0.34.0 L783-797).
        flashinfer_sampler_default: The V1 sampler uses FlashInfer's top-k/top-p kernels when FlashInfer is
            installed unless ``VLLM_USE_FLASHINFER_SAMPLER=0`` (0.8 to 0.11.0; see
            ``FLASHINFER_SAMPLER_DEFAULT``): its profiling pass is then far smaller than PyTorch's sort.
        free_memory_check: V1 refuses a start whose free memory is below ``total x gmu`` (0.9.1+, see
            ``FREE_MEMORY_CHECK_SINCE``; the extensible KV cache of 0.34 skips it).
    """

    version: tuple[int, int, int]
    engine: str
    hybrid_kv_manager: bool
    chunked_local_hybrid: bool
    requested_ceil: bool
    cudagraph_in_budget: bool
    tokens_report: str
    concurrency_sum_groups: bool
    big_gpu_tier_bytes: int | None
    default_gpu_memory_utilization: float
    a100_small_tier: bool
    chunked_off_taken: bool
    sampler_bytes_per_logit: float
    sampler_base_bytes: int
    mla_align_bytes: int
    extensible_kv_cache: bool = False
    flashinfer_sampler_default: bool = False
    free_memory_check: bool = False

    def uses_v2_runner(self, architecture: str, traits: RunnerTraits | None = None) -> bool:
        """Whether vLLM measures this model with its V2 model runner (``VllmConfig.use_v2_model_runner``).

        0.22-0.23: a listed architecture, dense and not quantized (config/vllm.py 0.22.0 L518-532, 0.23.0
        L544-558); 0.24: a listed one (L550-562); 0.25-0.26: any dense model, and the listed MoE ones, neither
        hybrid nor attention-free (0.25.0 L557-574, 0.26.0 L605-622); 0.27-0.28: a hybrid one only if listed
        (0.27.0 L637-658, 0.27.1 L637-658, 0.28.0 L691-712: hunt125 F2, Qwen3-32B's 0.27.1 log reads
        ``model_runner.py:329 Model loading took``, the V2 runner's line); from 0.29 every model (0.29.0
        L645-677); 0.34 has no V1 runner. Up to 0.33 a speculative method V2 does not run falls back to V1
        (:data:`_V2_SPECULATIVE_ONLY`, :data:`_V1_SPECULATIVE`).
        """
        t = traits or RunnerTraits()
        if self.engine != "V1" or self.version < (0, 22, 0):
            return False
        if self.version >= (0, 34, 0):
            return True
        if t.speculative is not None:
            if self.version < (0, 30, 0) and t.speculative not in _by_release(_V2_SPECULATIVE_ONLY, self.version):
                return False
            if t.speculative in _by_release(_V1_SPECULATIVE, self.version):
                return False
        if self.version >= (0, 29, 0):
            return True
        if not t.generate:
            return False
        listed = architecture in _by_release(_V2_ARCHITECTURES, self.version)
        if self.version < (0, 24, 0):
            return listed and not t.moe and not t.quantized
        if self.version < (0, 25, 0):
            return listed
        if t.attention_free or (t.hybrid and (self.version < (0, 27, 0) or not listed)):
            return False
        return listed or not t.moe

    def sampler_bytes_per_logit_for(self, v2_runner: bool, dtype_bytes: int) -> float:
        """Bytes per (sequence x vocab) element the profiling sampler pass takes.

        The V1 runner's figure is fitted (see ``sampler_bytes_per_logit``). The V2 runner's dummy
        sampler pass is derived from its source (docs/vllm-releases.md section 10): logits in the
        model dtype plus an fp32 copy in 0.22-0.25 and 0.27 (gpu/sample/sampler.py 0.24.0 L157), no
        copy in 0.26 and 0.28-0.32 (0.28.0 L192 returns early), and from 0.33 a second warm-up pass
        with the full fp32 top-k/top-p/logprobs pipeline (gpu/model_runner.py 0.33.0 L993-1019, 0.34.0
        L1038-1062),
        sized like the V1 runner's.
        """
        if not v2_runner or self.version >= (0, 33, 0):
            return self.sampler_bytes_per_logit
        if (0, 26, 0) <= self.version < (0, 27, 0) or self.version >= (0, 28, 0):
            return float(dtype_bytes)
        return float(dtype_bytes + 4)

    def v2_runner_without_cudagraph_estimate(self, v2_runner: bool) -> bool:
        """Whether nothing is deducted for CUDA graphs because the model runs on a stub V2 runner.

        The V2 model runner of 0.22-0.28 estimates no CUDA-graph memory (returns 0).
        """
        return self.version < (0, 29, 0) and v2_runner

    @property
    def label(self) -> str:
        """The version as ``0.19.0``."""
        return ".".join(str(p) for p in self.version)


_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+\-_a-zA-Z0-9]*)?$")


#: Image tags that name no release: ``vllm/vllm-openai:latest`` is the latest stable release and
#: ``nightly`` builds are main after it (docs/vllm-releases.md section 9); both are sized as the
#: newest release fitgate models.
_MOVING_TAGS = re.compile(r"^(latest|nightly)([-_.].*)?$")
#: A dated build of a moving tag (``nightly_main_20260211``, ROCm's vllm-dev): a past main, not the newest (hunt116)
_DATED = re.compile(r"(?<!\d)20\d{6}(?!\d)|(?<!\d)20\d\d-\d\d-\d\d(?!\d)")


@dataclass(frozen=True)
class Release:
    """A vLLM release as given, and the release whose accounting sizes it.

    Attributes:
        given: The release the text names (``latest`` / ``nightly``: the newest modelled).
        sized_as: The release whose accounting applies: ``given``, or the newest modelled release
            when ``given`` is newer than anything fitgate has read.
        note: Why ``sized_as`` differs from ``given`` (None when it does not).
        named: False for an image tag that names no release (``gptoss``): sized as the newest modelled.
    """

    given: tuple[int, int, int]
    sized_as: tuple[int, int, int]
    note: str | None = None
    named: bool = True


_MAX_VERSION_TEXT = 128
#: What a workload's spec says when its image's release is not known (``engine.version: unknown``).
UNKNOWN_RELEASE = "unknown"
#: One release of every V1-era minor, newest first: what an image of unknown release may run (hunt82 F2). Not the V0
#: releases before 0.8.0: they serve none of the large 2026 models whose misfits they would excuse (hunt86 F1: as 0.6 /
#: 0.7, DeepSeek-V4-Flash on 2 x H100 and Kimi-K2.5 on 8 x H100 were admitted; vLLM added them in 0.20 and 0.15), and
#: every vendor image mapped so far runs 0.8.4 or later (RHAIIS 3.0; NGC 25.10: 0.10.2; llm-d v0.2.0: 0.10.0).
MODELLED_MINORS = tuple(f"0.{minor}.0" for minor in range(NEWEST_MODELLED[1], 7, -1))
#: An image tag's grammar (the OCI distribution spec: ``[A-Za-z0-9_][A-Za-z0-9._-]{0,127}``).
_IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


def resolve_release(text: str, field: str = "vllm_version") -> Release:
    """The one decision on a release: known, newer than the table (sized as the newest, with a note), or nonsense.

    A gate must never deny for the release alone: a release newer than the newest fitgate models is
    sized with the newest modelled accounting and a note, never refused; one older than 0.5.0 with 0.5.0's and a
    note. An image tag that names no release (``vllm/vllm-openai:gptoss``, a custom build's tag) is sized as the
    newest modelled release with a note, as the operator sizes such an image (hunt78 O1: ``--vllm-version gptoss``
    exited 2). Text that is not even a tag is a one-line :class:`SizingError`.

    Raises:
        SizingError: ``text`` is not a vLLM release or image tag.
    """
    raw = str(text).strip()[: _MAX_VERSION_TEXT + 1]
    if len(raw) > _MAX_VERSION_TEXT:
        raise SizingError(field, raw[:32] + "...", f"a vLLM release of at most {_MAX_VERSION_TEXT} characters")
    return _resolve(raw, field)


@lru_cache(maxsize=512)  # bounded: a few hundred short texts (every plan of a search asks again)
def _resolve(raw: str, field: str) -> Release:  # a stripped text within the length limit
    if _MOVING_TAGS.match(raw.lower()) and not _DATED.search(raw):
        return Release(NEWEST_MODELLED, NEWEST_MODELLED)
    match = _VERSION_RE.match(raw)
    if not match and _IMAGE_TAG.match(raw):
        why = f"vLLM {raw!r} names no release fitgate knows (an image tag?); sized with {DEFAULT_VLLM_VERSION}'s"
        return Release(NEWEST_MODELLED, NEWEST_MODELLED, why + " accounting, the newest modelled", named=False)
    if not match:
        raise SizingError(field, raw, "a vLLM release such as 0.34.0 (or an image tag like v0.34.0)")
    version = (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    if version < _OLDEST:
        # hunt17 G1: 2024 tutorials pin 0.4.x; their V0 worker profiles and budgets memory as 0.5.0's does
        # (worker/worker.py determine_num_available_blocks, 0.4.3 L159-173: total x gmu - peak, as 0.5.0)
        label = ".".join(map(str, version))
        return Release(
            version,
            _OLDEST,
            f"vLLM {label} is older than the oldest release fitgate models (0.5.0); sized with 0.5.0's accounting",
        )
    if version > _NEWEST:
        label = ".".join(map(str, version))
        return Release(
            version,
            NEWEST_MODELLED,
            f"vLLM {label} is newer than the newest release fitgate models ({DEFAULT_VLLM_VERSION}); "
            f"sized with {DEFAULT_VLLM_VERSION}'s accounting (review its changes with scripts/vllm_release_diff.py)",
        )
    return Release(version, version)


def first_admitting(text: str | None, attempt: Callable[[str], T], admits: Callable[[T], bool]) -> tuple[str, T] | None:
    """The newest of :func:`other_releases` whose ``attempt`` ``admits``, and that attempt; None when none does.

    A :class:`SizingError` of an attempt (a setting that release does not take: a V0-only flag, a quantization it
    lacks) passes that release over. One rule for the operator's ReleaseUnknown and ``fitgate plan``'s (hunt82 F2).
    """
    for release in other_releases(text):
        try:
            result = attempt(release)
        except SizingError:
            continue
        if admits(result):
            return release, result
    return None


def other_releases(text: str | None) -> Iterator[str]:
    """What an image of unknown release may run instead (hunt82 F2).

    The releases of :data:`MODELLED_MINORS`, newest first, whose accounting is not the one ``text`` is sized with.
    """
    sized = resolve_release(text).sized_as if text else None
    for release in MODELLED_MINORS:
        if sized is None or resolve_release(release).sized_as != sized:
            yield release


def parse_version(text: str, field: str = "vllm_version") -> tuple[int, int, int]:
    """The release whose accounting sizes ``text`` (``0.19.0``, ``v0.19.1``, ``0.19``, ``v0.19.0-cu128``, ``latest``).

    A release newer than the newest modelled gives the newest modelled (see :func:`resolve_release`).
    """
    return resolve_release(text, field).sized_as


def release_modelled(text: str | None) -> bool:
    """Whether ``text`` names a release fitgate models (False: none, a newer one, or a tag naming none)."""
    if text is None:
        return False
    try:
        release = resolve_release(text)
    except SizingError:
        return False
    return release.named and release.given <= _NEWEST


def release_note(text: str | None) -> str | None:
    """The note a plan carries for ``text``: set when the release is newer or older than fitgate models."""
    if text is None:
        return None
    return resolve_release(text).note


#: V1 refuses to start when the free memory at its start snapshot is below ``total x gpu_memory_utilization``
#: ("Free memory on device ... is less than desired GPU memory utilization"): from 0.9.1 (v1/worker/gpu_worker.py
#: 0.9.1 L136-150); 0.8.5 (L195-213) and 0.9.0 size ``total x gmu - peak`` with no such check, nor does V0's worker.
FREE_MEMORY_CHECK_SINCE = (0, 9, 1)
#: The V1 engine's first release and the first without V0 (``VLLM_USE_V1`` is read from 0.8.0 to 0.10.x).
V1_SINCE = (0, 8, 0)
V0_REMOVED = (0, 11, 0)
#: Before 0.10.2, V1 refuses CUDA GPUs below compute capability 8.0 ("Need at least Ampere for now (FA support
#: required)"): unless ``VLLM_USE_V1`` is set, vLLM logs "Compute Capability < 8.0 is not supported by the V1
#: Engine. Falling back to V0" and runs V0; with ``VLLM_USE_V1=1`` it raises instead (engine/arg_utils.py
#: ``_is_v1_supported_oracle`` and ``_raise_or_fallback``: 0.8.0 L1475, 0.8.5 L1350-1356, 0.9.2 L1357-1363,
#: 0.10.0 L1343-1352, 0.10.1.1 L1403; no such check in 0.10.2 L1431-1560).
V1_AMPERE_ONLY_UNTIL = (0, 10, 2)
#: An fp8 KV cache (``--kv-cache-dtype fp8*``) on V1 before 0.11: none in 0.8.0-0.8.1 ("No Fp8 KV cache so far",
#: arg_utils.py 0.8.0 L1479-1483); from 0.8.2 where FlashAttention 3 reads it, Hopper only (``flash_attn_supports_fp8``:
#: FA3 and capability major 9, attention/utils/fa_utils.py 0.8.5 L51-54; arg_utils.py 0.8.2 L1560-1574, 0.9.2
#: L1365-1382); from 0.10.0 also capability 10.0 (platforms/cuda.py 0.10.0 L460-470 ``is_device_capability(100)``);
#: from 0.10.2 also MLA models, on FlashMLA / CUTLASS MLA by default (cuda.py 0.10.2 L522-561). Elsewhere vLLM falls
#: back to V0 the same way (0.10.2 L1465-1471). ROCm is not modelled (fitgate has no capability for it).
FP8_KV_ON_V1_SINCE = (0, 8, 2)
FP8_KV_ON_SM100_SINCE = (0, 10, 0)
FP8_KV_MLA_ON_V1_SINCE = (0, 10, 2)
#: A pooling model (embedding, classification, reward) on V1: not before 0.9.2 ("No Embedding Models so far":
#: ``model_config.task not in ["generate"]``, arg_utils.py 0.8.0 L1512-1516, 0.8.5 L1396-1400, 0.9.0 L1294-1298,
#: 0.9.1 L1347-1350; gone in 0.9.2).
POOLING_ON_V1_SINCE = (0, 9, 2)


#: The attention backends V1 runs (``VLLM_ATTENTION_BACKEND``), 0.8.0-0.10.x: any other one set makes vLLM fall back
#: to V0 unless ``VLLM_USE_V1`` is set (``_is_v1_supported_oracle``: 0.8.0 ``engine/arg_utils.py`` L1567-1575, 0.9.0
#: L1346-1362, 0.10.1.1 L1456-1477, 0.10.2 L1502-1526). The list grew by release; this is 0.10.2's, the union, so a
#: backend an older release did not list yet is sized as V1 (as before), never as a V0 the release did not run; with
#: ``CUTLASS_MLA_VLLM_V1``, 0.9.2's and 0.10.0's name (L1454) of what 0.10.1 calls ``CUTLASS_MLA`` (hunt164 F1).
V1_ATTENTION_BACKENDS = frozenset(
    {
        "FLASH_ATTN_VLLM_V1", "FLASH_ATTN", "PALLAS", "PALLAS_VLLM_V1", "TRITON_ATTN_VLLM_V1", "TRITON_MLA",
        "CUTLASS_MLA", "CUTLASS_MLA_VLLM_V1", "FLASHMLA", "FLASHMLA_VLLM_V1", "FLASH_ATTN_MLA", "FLASHINFER",
        "FLASHINFER_VLLM_V1", "FLASHINFER_MLA", "ROCM_AITER_MLA", "TORCH_SDPA_VLLM_V1", "FLEX_ATTENTION", "TREE_ATTN",
        "XFORMERS_VLLM_V1",
    }
)  # fmt: skip


def falls_back_to_v0(version_text: str | None, attention_backend: str) -> bool:
    """Whether ``VLLM_ATTENTION_BACKEND=attention_backend`` makes this release run V0 (``VLLM_USE_V1`` unset).

    hunt20 G1: Qwen's 1M-context models set ``DUAL_CHUNK_FLASH_ATTN``, a V0 backend (it also asserts V0, 0.9.0
    ``engine/arg_utils.py`` L1010-1019), so vLLM 0.9-0.10 serves them on V0.
    """
    try:
        version = parse_version(version_text or DEFAULT_VLLM_VERSION)
    except SizingError:
        return False
    return V1_SINCE <= version < V0_REMOVED and attention_backend.strip() not in V1_ATTENTION_BACKENDS


def _v1_refuses(
    version: tuple[int, int, int], capability: str | None, kv_cache_dtype: str | None, mla: bool, runner: str
) -> str | None:
    """Why V1 of ``version`` cannot run here with these settings (``_is_v1_supported_oracle``), or None."""
    if runner == "pooling" and version < POOLING_ON_V1_SINCE:
        return "for a pooling model (V1 runs generation only before 0.9.2)"
    if capability is None:  # not CUDA: ROCm's fallbacks are not modelled
        return None
    major, _, minor = capability.partition(".")
    cc = int(major) * 10 + int(minor or 0)
    if cc < 80 and version < V1_AMPERE_ONLY_UNTIL:
        return f"on a compute capability {capability} GPU (V1 needs 8.0 before 0.10.2)"
    if kv_cache_dtype is None or kv_cache_dtype == "auto":
        return None
    fp8 = kv_cache_dtype.startswith("fp8")
    readable = (
        version >= FP8_KV_ON_V1_SINCE
        and fp8
        and (
            cc // 10 == 9
            or (cc == 100 and version >= FP8_KV_ON_SM100_SINCE)
            or (mla and version >= FP8_KV_MLA_ON_V1_SINCE)
        )
    )
    if readable:
        return None
    return (
        f"for --kv-cache-dtype {kv_cache_dtype} on a compute capability {capability} GPU (V1 reads an fp8 KV cache "
        "with FlashAttention 3 on Hopper only before 0.11, also on 10.0 from 0.10.0 and for MLA models from 0.10.2)"
    )


def engine_for(
    version_text: str | None,
    use_v1: bool | None,
    compute_capability: str | None,
    kv_cache_dtype: str | None = None,
    mla: bool = False,
    runner: str = "generate",
) -> tuple[str | None, str | None]:
    """The engine vLLM runs (``V0``, ``V1``; None: the release's own) and the note a plan carries about it.

    ``use_v1`` is ``VLLM_USE_V1`` (None: unset); ``compute_capability`` the CUDA GPU's ("7.5"; None: not CUDA);
    ``kv_cache_dtype`` and ``mla`` (the model attends with MLA) decide whether V1 reads an fp8 KV cache there;
    ``runner`` is ``--runner`` (``pooling``: an embedding, classification or reward model).
    vLLM 0.8.0-0.10.x runs V1 unless ``VLLM_USE_V1=0`` or V1 cannot run there (engine/arg_utils.py
    ``create_engine_config``, 0.10.0 L1006-1013: ``try_v1 = envs.VLLM_USE_V1 or not envs.is_set("VLLM_USE_V1")``).
    """
    version = parse_version(version_text or DEFAULT_VLLM_VERSION)
    label = ".".join(map(str, version))
    if version < V1_SINCE:
        note = f"VLLM_USE_V1=1: V1 was experimental in vLLM {label}; sized as its V0 engine" if use_v1 else None
        return None, note
    if version >= V0_REMOVED:
        note = (
            f"VLLM_USE_V1=0: vLLM {label} has no V0 engine (removed in 0.11); sized as V1" if use_v1 is False else None
        )
        return None, note
    if use_v1 is False:
        return "V0", f"VLLM_USE_V1=0: vLLM {label} runs its V0 engine, sized as V0"
    why = _v1_refuses(version, compute_capability, kv_cache_dtype, mla, runner)
    if why is None:
        return None, None
    if use_v1:
        return "V1", (
            f"VLLM_USE_V1=1: vLLM {label} raises NotImplementedError {why}; unset VLLM_USE_V1 to fall back to V0; "
            "sized as V1"
        )
    return "V0", f"vLLM {label} falls back to its V0 engine {why}; sized as V0"


def accounting_for(version_text: str | None = None, engine: str | None = None) -> VllmAccounting:
    """The accounting of a vLLM release (``None``: :data:`DEFAULT_VLLM_VERSION`).

    ``engine="V0"`` selects the legacy engine on releases that still had it (up to 0.10).
    """
    version = parse_version(version_text or DEFAULT_VLLM_VERSION)
    if engine not in (None, "V0", "V1"):
        raise SizingError("engine", engine, "V0 or V1")
    return _accounting(version, engine == "V0")


@lru_cache(maxsize=256)  # bounded: one entry per release and engine (every plan of a search asks again)
def _accounting(version: tuple[int, int, int], v0_asked: bool) -> VllmAccounting:
    v0 = v0_asked or version < (0, 8, 0)
    if v0 and version >= (0, 11, 0):  # only where V0 was asked for
        raise SizingError("engine", "V0", "V1 (the V0 engine was removed in vLLM 0.11)")
    return VllmAccounting(
        version=version,
        engine="V0" if v0 else "V1",
        hybrid_kv_manager=not v0 and version >= (0, 10, 0),
        chunked_local_hybrid=not v0 and (version == CHUNKED_LOCAL_SPEC_SINCE or version >= (0, 14, 0)),
        requested_ceil=version >= (0, 19, 0),
        cudagraph_in_budget=not v0 and version >= (0, 20, 0),
        tokens_report="blocks" if v0 or version < (0, 10, 0) else ("groups" if version < (0, 20, 1) else "derived"),
        concurrency_sum_groups=not v0 and version >= (0, 27, 0),
        big_gpu_tier_bytes=160 * 1024**3 if version >= (0, 28, 0) else None,
        default_gpu_memory_utilization=0.92 if version >= (0, 20, 0) else 0.9,
        a100_small_tier=version >= (0, 9, 0),
        chunked_off_taken=version >= (0, 11, 1),
        # Fitted on the calibration logs: 14.35 B per logit on 0.19 (8 dense models); Qwen3-14B
        # profiled 5.64 GiB on 0.15/0.16 and 2.23 GiB on 0.17/0.18, and the undated V1 runs of one
        # benchmark imply the same 37.8 B per logit. V0 samples only the last token of each sequence.
        sampler_bytes_per_logit=24.0 if v0 else (14.35 if version >= (0, 17, 0) else 37.8),
        sampler_base_bytes=0 if v0 else int(0.146 * 1024**3),
        mla_align_bytes=256 if v0 and version >= (0, 7, 0) else 1,
        extensible_kv_cache=not v0 and version >= EXTENSIBLE_KV_CACHE_SINCE,
        flashinfer_sampler_default=not v0 and FLASHINFER_SAMPLER_DEFAULT[0] <= version < FLASHINFER_SAMPLER_DEFAULT[1],
        free_memory_check=not v0 and version >= FREE_MEMORY_CHECK_SINCE,
    )
