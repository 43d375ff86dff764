"""What a running vLLM server's ``/metrics`` says, and what a window of scrapes adds up to.

Pure: text in, typed values out (the operator fetches the text). The exposition is read with
``prometheus_client.parser`` (the reference parser of the text format), never with patterns of our own.

The families read are those vLLM's ``PrometheusStatLogger`` writes (vllm/v1/metrics/loggers.py of 0.33.0):
``vllm:cache_config_info`` (labels ``num_gpu_blocks``, ``block_size``, ``gpu_memory_utilization``,
``cache_dtype``, ... and ``engine``), ``vllm:kv_cache_usage_perc`` (1 = full), ``vllm:num_requests_running``
/ ``_waiting``, and the counters ``vllm:num_preemptions_total``, ``vllm:prefix_cache_queries_total`` /
``_hits_total`` (tokens), ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total`` and
``vllm:request_success_total`` (one series per ``finished_reason``). Series of several engines (data
parallel ranks) are summed, except ``num_gpu_blocks`` (the smallest engine's) and KV usage (the fullest).

A window of scrapes gives rates from counter deltas with Prometheus' ``increase()`` semantics: a
counter that goes down was reset (the pod restarted), and its new value counts as the increase.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from fitgate.sizing.errors import SizingError

#: KV usage at or above this share of the pool counts as at capacity (vLLM's own 1 = 100 %).
AT_CAPACITY_KV_USAGE = 0.95
#: Observed num_gpu_blocks within this share of the prediction verifies it.
VERIFIED_ERROR_RATIO = 0.02

_COUNTERS = {
    "vllm:num_preemptions_total": "preemptions",
    "vllm:prefix_cache_queries_total": "prefix_queries",
    "vllm:prefix_cache_hits_total": "prefix_hits",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:request_success_total": "requests",
}


_GAUGES = {"vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting"}


class MetricsError(SizingError):
    """The body is not a vLLM metrics exposition (garbage, not the text format, or no ``vllm:`` series)."""


@dataclass(frozen=True)
class Counters:
    """Cumulative counters of one scrape (None: the family was absent)."""

    preemptions: float | None = None
    prefix_queries: float | None = None
    prefix_hits: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    requests: float | None = None


@dataclass(frozen=True)
class Scrape:
    """One ``/metrics`` read of one pod, taken at ``at_s`` (seconds on any clock that only moves forward).

    Attributes:
        num_gpu_blocks: ``vllm:cache_config_info``'s ``num_gpu_blocks`` (the smallest over engines).
        block_size: Its ``block_size`` (tokens per block).
        cache_config: All labels of the first engine's ``vllm:cache_config_info``.
        kv_usage: ``vllm:kv_cache_usage_perc`` (0..1; the fullest engine).
        running, waiting: ``vllm:num_requests_running`` / ``_waiting`` summed over engines.
        model_name: The ``model_name`` label (the served model name).
        engines: Engines (data-parallel ranks) seen in ``cache_config_info``.
        skipped_lines: Lines of the families read that were not parsed: past :data:`MAX_LINE_CHARS` or
            :data:`MAX_LABELS`, or after :data:`MAX_KEPT_CHARS` (hunt83 F2).
    """

    at_s: float
    counters: Counters
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    cache_config: tuple[tuple[str, str], ...] = ()
    kv_usage: float | None = None
    running: float | None = None
    waiting: float | None = None
    model_name: str | None = None
    engines: int = 0
    skipped_lines: int = 0


#: The largest count read from a label or a sample (2^53: exact as a float; a pool of 9 P blocks is no pool).
MAX_COUNT = 1 << 53


def _int_label(labels: dict[str, str], name: str) -> int | None:
    """A whole-number label, None when absent or "None" (before the engine sized its cache).

    Raises:
        MetricsError: digits past :data:`MAX_COUNT` or below 1 (a 4,000-digit ``num_gpu_blocks`` failed
            the observe timer every minute, issue 22).
    """
    text = labels.get(name, "")
    if text in ("", "None"):
        return None
    if len(text) > 16 or not text.isdigit() or not 0 < int(text) <= MAX_COUNT:
        raise MetricsError(f"vllm:cache_config_info {name}", _shown(text), f"a whole number from 1 to {MAX_COUNT}")
    return int(text)


def _shown(text: str) -> str:
    """A value from the pod as shown in an error: 20 characters at most (bodies are never echoed)."""
    return text if len(text) <= 20 else f"{text[:12]}... ({len(text)} characters)"


def _checked(name: str, value: float, high: float) -> float:
    """A sample's value: finite, not negative, at most ``high`` (NaN stopped the observe timer, issue 22)."""
    if not math.isfinite(value) or not 0 <= value <= high:
        raise MetricsError(name, _shown(repr(value)), f"a finite number from 0 to {high:g}")
    return value


def parse_scrape(text: str, at_s: float) -> Scrape:
    """Read one exposition text.

    Raises:
        MetricsError: the text does not parse, or holds no ``vllm:`` series at all.
    """
    counters: dict[str, float] = {}
    gauges: dict[str, list[float]] = {}
    blocks: list[int] = []
    block_size: int | None = None
    cache: tuple[tuple[str, str], ...] = ()
    model: str | None = None
    engines: set[str] = set()
    seen = 0
    relevant, skipped = _relevant(text)
    try:
        for family in text_string_to_metric_families(relevant):
            for sample in family.samples:
                if not sample.name.startswith("vllm:"):
                    continue
                seen += 1
                labels = dict(sample.labels)
                model = model or labels.get("model_name")
                if sample.name == "vllm:cache_config_info":
                    engines.add(labels.get("engine", ""))
                    n = _int_label(labels, "num_gpu_blocks")
                    if n is not None:
                        blocks.append(n)
                    block_size = block_size or _int_label(labels, "block_size")
                    cache = cache or tuple(sorted(labels.items()))
                elif sample.name in _COUNTERS:
                    key = _COUNTERS[sample.name]
                    value = _checked(sample.name, float(sample.value), MAX_COUNT)
                    counters[key] = counters.get(key, 0.0) + value
                elif sample.name in _GAUGES:
                    high = 1.0 if sample.name == "vllm:kv_cache_usage_perc" else MAX_COUNT
                    gauges.setdefault(sample.name, []).append(_checked(sample.name, float(sample.value), high))
    except MetricsError:
        raise
    except (ValueError, TypeError, IndexError, KeyError, OverflowError) as exc:
        # the parser's message quotes the line: only its kind is said (a body is never echoed into status)
        detail = f"{type(exc).__name__} from the reference parser"
        raise MetricsError("/metrics", _head(text), "the Prometheus text format", detail) from None
    if not seen:
        found = f"no vllm: series found; {skipped_message(skipped)}" if skipped else "no vllm: series found"
        raise MetricsError("/metrics", _head(text), f"vLLM's metrics ({found})")
    kv = gauges.get("vllm:kv_cache_usage_perc")
    running = gauges.get("vllm:num_requests_running")
    waiting = gauges.get("vllm:num_requests_waiting")
    return Scrape(
        at_s=at_s,
        counters=Counters(**counters),
        num_gpu_blocks=min(blocks) if blocks else None,
        block_size=block_size,
        cache_config=cache,
        kv_usage=max(kv) if kv else None,
        running=sum(running) if running is not None else None,
        waiting=sum(waiting) if waiting is not None else None,
        model_name=model,
        engines=len(engines),
        skipped_lines=skipped,
    )


#: The families read, by exact name (hunt88 F1: by prefix, ``vllm:num_requests_waiting_by_reason`` was kept too).
_WANTED = frozenset({"vllm:cache_config_info", *_GAUGES, *_COUNTERS})
_COMMENT = ("# HELP ", "# TYPE ")


#: The longest line of a family read that is parsed (vLLM's ``cache_config_info`` line, the longest, is under 1 KB).
#: The reference parser is quadratic in a line's escapes and labels (hunt83 F2: one 4 MiB line of ``\"`` took 72 s).
MAX_LINE_CHARS = 4096
#: Most labels (``=`` signs) of a line that is parsed (``cache_config_info`` has about 25).
MAX_LABELS = 64
#: Most characters of the families' lines parsed from one exposition: the parser costs ~0.1 us a character on these
#: lines. One API server lists every engine of a data-parallel deployment (vLLM 0.34 v1/engine/core_client.py
#: L770-777), ~3.5 KB of them an engine with a long model name, and ``cache_config_info`` comes last (loggers.py
#: L1114-1136): 256 KiB dropped it past ~72 engines (hunt88 F1); 1 MiB holds ~290, parsed in ~0.1 s.
MAX_KEPT_CHARS = 1024 * 1024


def skipped_message(n: int) -> str:
    """The one line that says how many of a scrape's lines were not parsed, and the limits."""
    return (
        f"{n} /metrics lines not read (longer than {MAX_LINE_CHARS} characters, more than {MAX_LABELS} labels, "
        f"or past {MAX_KEPT_CHARS} characters of vllm: lines)"
    )


def _relevant(text: str) -> tuple[str, int]:
    """Only the lines of the families read (and their HELP/TYPE lines), for the parser; and how many were skipped.

    vLLM's page is mostly histogram buckets fitgate does not read; parsing only these lines is ~10x
    faster. A line kept is parsed whole by the reference parser, so a broken one still fails. A line past
    :data:`MAX_LINE_CHARS` or :data:`MAX_LABELS`, and every line after :data:`MAX_KEPT_CHARS`, is skipped
    before the parser sees it (counted: :attr:`Scrape.skipped_lines`).
    """
    keep: list[str] = []
    kept = skipped = 0
    for line in text.splitlines():
        if (line[7:] if line.startswith(_COMMENT) else line).split("{", 1)[0].split(" ", 1)[0] not in _WANTED:
            continue
        if len(line) > MAX_LINE_CHARS or line.count("=") > MAX_LABELS or kept + len(line) > MAX_KEPT_CHARS:
            skipped += 1
            continue
        keep.append(line)
        kept += len(line) + 1
    return ("\n".join(keep) + "\n" if keep else ""), skipped


def _head(text: str) -> str:
    """The body as named in an error: its size, never its content (issue 22)."""
    return f"a body of {len(text)} characters"


def increase(values: Sequence[float | None]) -> float | None:
    """A counter's increase over successive reads (Prometheus ``increase()`` without extrapolation).

    A drop means the counter was reset (the server restarted): the value after the drop is all new.
    None when fewer than two reads carry the counter.
    """
    seen = [v for v in values if v is not None]
    if len(seen) < 2:
        return None
    total = 0.0
    for before, after in itertools.pairwise(seen):
        total += after - before if after >= before else after
    return total


@dataclass(frozen=True)
class PodWindow:
    """What one pod's scrapes over a window add up to (None: not enough scrapes or the family absent)."""

    window_s: float
    num_gpu_blocks: int | None
    block_size: int | None
    peak_kv_usage: float | None
    preemptions: float | None
    prefix_queries: float | None
    prefix_hits: float | None
    prompt_tokens: float | None
    generation_tokens: float | None
    requests: float | None
    running: float | None
    waiting: float | None


def pod_window(scrapes: Sequence[Scrape]) -> PodWindow:
    """Sum up one pod's scrapes, oldest first (at least one)."""
    if not scrapes:
        raise ValueError("pod_window needs at least one scrape")
    last = scrapes[-1]
    usage = [s.kv_usage for s in scrapes if s.kv_usage is not None]

    def inc(name: str) -> float | None:
        return increase([getattr(s.counters, name) for s in scrapes])

    return PodWindow(
        window_s=last.at_s - scrapes[0].at_s,
        num_gpu_blocks=last.num_gpu_blocks,
        block_size=last.block_size,
        peak_kv_usage=max(usage) if usage else None,
        preemptions=inc("preemptions"),
        prefix_queries=inc("prefix_queries"),
        prefix_hits=inc("prefix_hits"),
        prompt_tokens=inc("prompt_tokens"),
        generation_tokens=inc("generation_tokens"),
        requests=inc("requests"),
        running=last.running,
        waiting=last.waiting,
    )


@dataclass(frozen=True)
class Observation:
    """A deployment's pods over a window, against the prediction.

    Attributes:
        pods: Pods scraped successfully at least once in the window.
        observed_blocks: The smallest ``num_gpu_blocks`` of the pods (the one that fills first).
        predicted_blocks: fitgate's num_gpu_blocks (None: no plan).
        blocks_error_ratio: (observed - predicted) / predicted; negative: vLLM got fewer blocks than predicted.
        peak_kv_usage: Highest KV usage of any pod in the window (0..1).
        preemptions_per_minute: Preemptions of all pods per minute over the window.
        prefix_cache_hit_rate: Cached tokens / queried tokens over the window (None: no queries).
        tokens_per_second: Prompt + generation tokens per second, all pods.
        output_tokens_per_second: Generation tokens per second, all pods.
        requests_completed: ``request_success`` increase over the window, all pods.
        running_requests, waiting_requests: Latest, summed over pods.
        usd_per_request: The window's GPU cost / requests completed (idle GPU time counts), None without
            a price or a completed request.
        window_s: The window the rates are over (the longest pod's).
        block_size: Tokens per block of the pod with the fewest blocks.
    """

    pods: int
    observed_blocks: int | None
    predicted_blocks: int | None
    blocks_error_ratio: float | None
    peak_kv_usage: float | None
    preemptions_per_minute: float | None
    prefix_cache_hit_rate: float | None
    tokens_per_second: float | None
    output_tokens_per_second: float | None
    requests_completed: float | None
    running_requests: float | None
    waiting_requests: float | None
    usd_per_request: float | None
    window_s: float
    block_size: int | None = None

    @property
    def verified(self) -> bool | None:
        """Observed blocks within :data:`VERIFIED_ERROR_RATIO` of the prediction (None: cannot tell)."""
        if self.blocks_error_ratio is None:
            return None
        return abs(self.blocks_error_ratio) <= VERIFIED_ERROR_RATIO

    @property
    def at_capacity(self) -> bool | None:
        """Preemptions in the window, or KV usage at or above :data:`AT_CAPACITY_KV_USAGE` (None: no data)."""
        if self.preemptions_per_minute is None and self.peak_kv_usage is None:
            return None
        return bool((self.preemptions_per_minute or 0) > 0 or (self.peak_kv_usage or 0) >= AT_CAPACITY_KV_USAGE)


def _sum(values: Sequence[float | None]) -> float | None:
    seen = [v for v in values if v is not None]
    return sum(seen) if seen else None


def window_cost_usd(window_s: float, gpus: int, usd_per_gpu_hour: float) -> float:
    """GPU cost of a window: ``usd_per_gpu_hour x gpus x window_s / 3600`` (paid whether busy or idle).

    e.g. 2 GPUs at 2.5 USD for 600 s = 2.5 x 2 x 600 / 3600 = 0.8333 USD.
    """
    return usd_per_gpu_hour * gpus * window_s / 3600


def observe(
    pods: Sequence[PodWindow],
    predicted_blocks: int | None,
    *,
    gpus_per_pod: int = 1,
    usd_per_gpu_hour: float | None = None,
) -> Observation:
    """Combine the pods' windows and set them against the prediction.

    ``usd_per_request`` = sum over pods of (price x GPUs per pod x that pod's window / 3600) / requests
    completed in those windows: a pod that served nothing still costs its hours.
    """
    sized = sorted((p for p in pods if p.num_gpu_blocks is not None), key=lambda p: p.num_gpu_blocks or 0)
    observed = sized[0].num_gpu_blocks if sized else None
    error = None
    if observed is not None and predicted_blocks:
        error = (observed - predicted_blocks) / predicted_blocks
    usage = [p.peak_kv_usage for p in pods if p.peak_kv_usage is not None]
    timed = [p for p in pods if p.window_s > 0]
    window = max((p.window_s for p in pods), default=0.0)

    def rate(name: str, per_s: float = 1.0) -> float | None:
        total = 0.0
        seen = False
        for p in timed:
            value = getattr(p, name)
            if value is not None:
                total += value / p.window_s * per_s
                seen = True
        return total if seen else None

    queries = _sum([p.prefix_queries for p in timed])
    hits = _sum([p.prefix_hits for p in timed])
    prompt, generation = rate("prompt_tokens"), rate("generation_tokens")
    requests = _sum([p.requests for p in timed])
    per_request = None
    if usd_per_gpu_hour is not None and requests:
        cost = sum(window_cost_usd(p.window_s, gpus_per_pod, usd_per_gpu_hour) for p in timed)
        per_request = cost / requests
    return Observation(
        pods=len(pods),
        observed_blocks=observed,
        predicted_blocks=predicted_blocks,
        blocks_error_ratio=error,
        peak_kv_usage=max(usage) if usage else None,
        preemptions_per_minute=rate("preemptions", 60.0),
        prefix_cache_hit_rate=hits / queries if queries and hits is not None else None,
        tokens_per_second=None if prompt is None and generation is None else (prompt or 0.0) + (generation or 0.0),
        output_tokens_per_second=generation,
        requests_completed=requests,
        running_requests=_sum([p.running for p in pods]),
        waiting_requests=_sum([p.waiting for p in pods]),
        usd_per_request=per_request,
        window_s=window,
        block_size=sized[0].block_size if sized else None,
    )
