"""Checkpoint facts from the Hugging Face Hub, with the ``huggingface_hub`` client.

Reads only what sizing needs: the repo's commit sha (``model_info``), ``config.json`` (refused over
1 MiB) and the safetensors headers (HTTP Range reads of each shard's header, never tensor data,
streamed into per-layer totals within :class:`~fitgate.checkpoints.safetensors.HeaderLimits`; the
shards are those of ``model.safetensors.index.json``'s ``weight_map``, itself streamed). Honours
``HF_ENDPOINT``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE``.

* Revisions: a branch or tag is pinned to its commit sha; facts are cached per sha (immutable) and
  the branch → sha mapping for ``ref_ttl_s``. When the Hub cannot be reached, a cached mapping is
  used even if it is stale (and the facts say so).
* Limits: every resolution has a wall-clock deadline (``FITGATE_HUB_DEADLINE``) that covers every
  read, not only the time between retries: a Hub that answers one byte a second is given up on when
  it passes (and ``auto`` falls back to the catalog). Each read has a timeout too; timeouts,
  connection errors, 429 and 5xx are retried with exponential backoff (or after ``Retry-After``)
  within the deadline; 404/401/403 are not retried.
* Safety: only the configured endpoint is contacted (a reference is a repo id, never a URL), and
  the token never appears in an error message. Redirects are followed only to the endpoint's own
  host and port or to the CDN hosts of ``FITGATE_HUB_CDN_HOSTS`` (the Hub's documented ones by
  default), never to a loopback, private or link-local address unless the endpoint is one, never from
  https to http, and the token is not sent to another host.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import quote

import httpx2
from huggingface_hub import HfApi, get_session, hf_hub_url, hf_raise_for_status, set_client_factory
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils._http import hf_request_event_hook
from huggingface_hub.utils.tqdm import disable_progress_bars

from fitgate.checkpoints.cache import FactsCache
from fitgate.checkpoints.facts import (
    MISTRAL_PARAMS,
    ST_CONFIG_FILES,
    CheckpointError,
    ModelFacts,
    TensorTotals,
    mistral_native,
    st_max_seq_length,
    st_pooling,
)
from fitgate.checkpoints.local import MAX_CONFIG_BYTES, MAX_INDEX_BYTES
from fitgate.checkpoints.safetensors import TotalsBuilder, index_shards, stream_object
from fitgate.settings import DEFAULT_CDN_HOSTS, HeaderLimits, HubSettings, load

__all__ = ["DEFAULT_CDN_HOSTS", "HubSettings", "HubSource"]

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
#: Bytes asked for in the first Range read of a shard (its header length and, mostly, all its header).
PREFETCH_BYTES = 100_000
#: Bytes of an error answer read for its message.
MAX_ERROR_BODY_BYTES = 64 << 10
#: Bytes of the model info answer (the file list of a repo).
MAX_INFO_BYTES = 16 << 20
MAX_REDIRECTS = 5
T = TypeVar("T")


_CLIENT_LOCK = threading.Lock()
_CLIENT_STATE: dict[str, float] = {}


def _install_client(timeout_s: float) -> None:
    """Give huggingface_hub's shared HTTP client a timeout (its default client has none)."""
    with _CLIENT_LOCK:
        if _CLIENT_STATE.get("timeout_s") == timeout_s:
            return
        # the default client's request hook (user agent, auth headers), plus our timeouts
        hooks: dict[str, list[Callable[..., Any]]] = {"request": [hf_request_event_hook]}

        def factory() -> httpx2.Client:
            return httpx2.Client(
                event_hooks=hooks,
                follow_redirects=False,  # HubSource follows them itself, to allowed hosts only
                timeout=httpx2.Timeout(timeout_s, connect=min(timeout_s, 3.0)),
            )

        set_client_factory(factory)
        disable_progress_bars()  # an operator's log is no place for tqdm
        _CLIENT_STATE["timeout_s"] = timeout_s


class HubSource:
    """Resolve ``org/name[@revision]`` on one Hub endpoint."""

    def __init__(
        self, settings: HubSettings | None = None, cache: FactsCache | None = None, limits: HeaderLimits | None = None
    ) -> None:
        """``settings`` and ``limits`` default to :func:`fitgate.settings.load`'s, read now."""
        self.settings = settings or load().hub
        self.cache = cache or FactsCache()
        self.limits = limits
        self.api = HfApi(endpoint=self.settings.endpoint, token=self.settings.token or False)
        _install_client(self.settings.timeout_s)

    # -- public -----------------------------------------------------------------------------

    def resolve(self, repo_id: str, revision: str | None = None, ref: str | None = None) -> ModelFacts:
        """Facts of ``repo_id`` at ``revision`` (default ``main``), from the cache or the Hub.

        Raises:
            CheckpointError: not found, gated without access, malformed files (``transient=False``),
                or the Hub unreachable with nothing cached (``transient=True``).
        """
        revision = revision or "main"
        ref = ref or f"{repo_id}@{revision}"
        endpoint = self.settings.endpoint
        if SHA_RE.match(revision):
            cached = self.cache.get(endpoint, repo_id, revision)
            if cached is not None:
                return cached
        else:
            pinned = self.cache.get_ref(endpoint, repo_id, revision)
            if pinned is not None and pinned.age_s <= self.cache.ref_ttl_s:
                cached = self.cache.get(endpoint, repo_id, pinned.sha)
                if cached is not None:
                    return cached
        if self.settings.offline:
            return self._stale_or_raise(repo_id, revision, ref, "HF_HUB_OFFLINE is set")
        try:
            facts = self._fetch(repo_id, revision, ref)
        except CheckpointError as exc:
            if exc.transient:
                return self._stale_or_raise(repo_id, revision, ref, exc.problem)
            raise
        if not SHA_RE.match(revision) and facts.revision:
            self.cache.put_ref(endpoint, repo_id, revision, facts.revision)
        self.cache.put(endpoint, repo_id, facts)
        return facts

    # -- internals --------------------------------------------------------------------------

    def _stale_or_raise(self, repo_id: str, revision: str, ref: str, why: str) -> ModelFacts:
        endpoint = self.settings.endpoint
        sha = revision if SHA_RE.match(revision) else None
        if sha is None:
            pinned = self.cache.get_ref(endpoint, repo_id, revision)
            sha = pinned.sha if pinned else None
        cached = self.cache.get(endpoint, repo_id, sha) if sha else None
        if cached is not None:
            note = f"the Hub could not be reached ({self._scrub(why)}); using the cached facts of commit {sha}"
            return ModelFacts(**{**cached.__dict__, "notes": (*cached.notes, note)})
        raise CheckpointError(
            "model",
            ref,
            "",
            transient=True,
            problem=f"cannot reach {endpoint} and no cached facts ({self._scrub(why)})",
        )

    def _call(self, what: str, ref: str, fn: Callable[[], T], deadline: float) -> T:
        attempt = 0
        while True:
            try:
                return fn()
            except CheckpointError:
                raise
            except Exception as exc:
                error = self._translate(exc, what, ref)
                attempt += 1
                delay = max(0.5 * 2 ** (attempt - 1), _retry_after_s(exc))
                if not error.transient or attempt > self.settings.retries or time.monotonic() + delay > deadline:
                    raise error from None
                time.sleep(delay)

    def _past_deadline(self, what: str, ref: str) -> CheckpointError:
        return CheckpointError(
            "model",
            ref,
            "",
            transient=True,
            problem=f"no complete answer within {self.settings.deadline_s:g}s (FITGATE_HUB_DEADLINE) reading {what}",
        )

    def _translate(self, exc: Exception, what: str, ref: str) -> CheckpointError:
        text = self._scrub(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        if isinstance(exc, GatedRepoError):
            hint = (
                "the token was refused (request access on the model page)"
                if self.settings.token
                else ("set HF_TOKEN to a token with access")
            )
            return CheckpointError("model", ref, "", problem=f"gated repository: {hint}")
        if isinstance(exc, RevisionNotFoundError):
            return CheckpointError("model", ref, "", problem="revision not found on the Hub")
        if isinstance(exc, RepositoryNotFoundError):
            extra = "" if self.settings.token else " (for a private repo, set HF_TOKEN)"
            return CheckpointError("model", ref, "", problem=f"repository not found or not accessible{extra}")
        if isinstance(exc, EntryNotFoundError):
            return CheckpointError("model", ref, "", problem=f"{what} not found in the repository")
        if isinstance(exc, OfflineModeIsEnabled):
            return CheckpointError("model", ref, "", transient=True, problem="offline mode is enabled")
        if isinstance(exc, HfHubHTTPError):
            status = exc.response.status_code if exc.response is not None else 0
            transient = status >= 500 or status == 429
            return CheckpointError("model", ref, "", transient=transient, problem=f"Hub error {status} reading {what}")
        if isinstance(exc, httpx2.TimeoutException | TimeoutError):
            return CheckpointError(
                "model", ref, "", transient=True, problem=f"timed out after {self.settings.timeout_s:g}s reading {what}"
            )
        if isinstance(exc, httpx2.TransportError | ConnectionError | OSError):
            return CheckpointError("model", ref, "", transient=True, problem=f"cannot connect reading {what}: {text}")
        return CheckpointError(
            "model", ref, "", problem=f"unexpected error reading {what}: {type(exc).__name__}: {text}"
        )

    def _scrub(self, text: str) -> str:
        token = self.settings.token
        return text.replace(token, "***") if token else text

    def _fetch(self, repo_id: str, revision: str, ref: str) -> ModelFacts:
        deadline = time.monotonic() + self.settings.deadline_s
        sha, sizes, counts = self._call(
            "model info", ref, lambda: self._model_info(repo_id, revision, ref, deadline), deadline
        )
        if "config.json" in sizes and (sizes["config.json"] or 0) > MAX_CONFIG_BYTES:
            raise CheckpointError(
                "model",
                ref,
                "",
                problem=f"config.json is {sizes['config.json']} bytes, more than the {MAX_CONFIG_BYTES}-byte limit",
            )
        if sizes and "config.json" not in sizes and MISTRAL_PARAMS in sizes:
            raise mistral_native(ref)
        config = self._call(
            "config.json", ref, lambda: self._get_json(repo_id, "config.json", sha, ref, deadline), deadline
        )
        notes: list[str] = []
        pooling = False
        if "modules.json" in sizes and (sizes["modules.json"] or 0) <= MAX_CONFIG_BYTES:
            # a Sentence Transformers checkpoint: vLLM serves it as a pooling model (facts.st_pooling); a malformed
            # modules.json is vLLM's error to raise, not a reason to refuse the checkpoint here
            try:
                modules = self._call(
                    "modules.json",
                    ref,
                    lambda: self._get_json(repo_id, "modules.json", sha, ref, deadline, any_json=True),
                    deadline,
                )
                pooling = st_pooling(modules)
            except CheckpointError as exc:
                notes.append(f"modules.json not read ({exc.problem or exc}): sized with vLLM's generate runner")
        seq_length = None
        st_file = next((f for f in ST_CONFIG_FILES if f in sizes), None)  # vLLM's order (facts.st_max_seq_length)
        if st_file is not None and (sizes[st_file] or 0) <= MAX_CONFIG_BYTES:
            try:
                encoder = self._call(
                    st_file, ref, lambda: self._get_json(repo_id, st_file, sha, ref, deadline, any_json=True), deadline
                )
                seq_length = st_max_seq_length(encoder)
            except CheckpointError as exc:
                notes.append(f"{st_file} not read ({exc.problem or exc}): sized at the config's own length")
        headers = self._call(
            "safetensors headers", ref, lambda: self._safetensors(repo_id, sha, sizes, ref, deadline), deadline
        )
        tensors, total_size = headers if headers is not None else (None, None)
        if tensors:
            counts = None
        if not tensors and counts is None:
            notes.append("no safetensors weights in the repository: weights estimated from config.json")
        return ModelFacts(
            ref=ref,
            name=repo_id,
            config=config,
            tensors=tensors,
            total_size=total_size,
            dtype_counts=counts,
            source="hub",
            revision=sha,
            origin=f"{self.settings.endpoint}/{repo_id}@{sha}",
            notes=tuple(notes),
            pooling_config=pooling,
            st_max_seq_length=seq_length,
        )

    def _file_url(self, repo_id: str, filename: str, sha: str) -> str:
        return hf_hub_url(repo_id, filename, revision=sha, endpoint=self.settings.endpoint)

    @contextmanager
    def _open(
        self, url: str, what: str, ref: str, deadline: float, byte_range: str | None = None
    ) -> Iterator[Iterator[bytes]]:
        """A streamed GET whose chunks stop at the deadline; an error answer is raised as huggingface_hub's error.

        Each read waits at most the per-read timeout, and no longer than the deadline left.
        """
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._past_deadline(what, ref)
        timeout = min(self.settings.timeout_s, left)
        headers = self.api._build_hf_headers()  # the client's own auth and user-agent headers
        if byte_range:
            headers["Range"] = f"bytes={byte_range}"
        target = httpx2.URL(url)
        for _ in range(MAX_REDIRECTS + 1):
            with get_session().stream(
                "GET",
                target,
                headers=headers,
                timeout=httpx2.Timeout(timeout, connect=min(timeout, 3.0)),
                follow_redirects=False,
            ) as response:
                if response.has_redirect_location:
                    following = target.join(response.headers["Location"])
                    refusal = redirect_refusal(following, self.settings.endpoint, self.settings.cdn_hosts)
                    if refusal:
                        raise CheckpointError(
                            "model",
                            ref,
                            "",
                            problem=f"the Hub redirected {what} to {following.scheme}://{following.netloc.decode()}, "
                            f"which is {refusal}",
                        )
                    if (following.host, following.port) != (target.host, target.port):
                        headers.pop("authorization", None)  # the token goes to the Hub only
                        headers.pop("Authorization", None)
                    target = following
                    continue
                chunks = self._chunks(response, what, ref, deadline)
                if response.status_code >= 400:
                    body = b""
                    for chunk in chunks:
                        body += chunk
                        if len(body) > MAX_ERROR_BODY_BYTES:
                            break
                    hf_raise_for_status(
                        httpx2.Response(
                            response.status_code,
                            headers=response.headers,
                            content=body[:MAX_ERROR_BODY_BYTES],
                            request=response.request,
                        )
                    )
                yield chunks
                return
        raise CheckpointError("model", ref, "", problem=f"more than {MAX_REDIRECTS} redirects reading {what}")

    def _chunks(self, response: httpx2.Response, what: str, ref: str, deadline: float) -> Iterator[bytes]:
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                raise self._past_deadline(what, ref)
            yield chunk

    def _read(self, url: str, what: str, ref: str, deadline: float, limit: int) -> bytes:
        body = b""
        with self._open(url, what, ref, deadline) as chunks:
            for chunk in chunks:
                body += chunk
                if len(body) > limit:
                    raise CheckpointError("model", ref, "", problem=f"{what} is larger than {limit} bytes")
        return body

    def _model_info(
        self, repo_id: str, revision: str, ref: str, deadline: float
    ) -> tuple[str, dict[str, int | None], dict[str, int] | None]:
        """(commit sha, {file: size}, parameters per dtype) from ``/api/models/{repo}/revision/{rev}``."""
        url = f"{self.settings.endpoint}/api/models/{repo_id}/revision/{quote(revision, safe='')}?blobs=true"
        what = "model info"
        body = self._read(url, what, ref, deadline, MAX_INFO_BYTES)
        try:
            info = json.loads(body)
        except (ValueError, RecursionError):
            raise CheckpointError("model", ref, "", problem="the Hub's model info is not valid JSON") from None
        if not isinstance(info, dict) or not isinstance(info.get("siblings", []), list):
            raise CheckpointError("model", ref, "", problem="the Hub's model info is not an object with siblings")
        given = info.get("sha")
        sha = given if isinstance(given, str) and SHA_RE.match(given) else revision
        sizes: dict[str, int | None] = {}
        for sibling in info.get("siblings") or []:
            name = sibling.get("rfilename") if isinstance(sibling, dict) else None
            if isinstance(name, str):
                size = sibling.get("size")
                sizes[name] = size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None
        st = info.get("safetensors")
        params = st.get("parameters") if isinstance(st, dict) else None
        counts = None
        if isinstance(params, dict) and params:
            counts = {str(k): v for k, v in params.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
        return sha, sizes, counts or None

    def _safetensors(
        self, repo_id: str, sha: str, sizes: dict[str, int | None], ref: str, deadline: float
    ) -> tuple[TensorTotals | None, int | None] | None:
        """Tensor totals and index ``total_size`` from the shard headers; None for a repo without safetensors."""
        total = None
        if "model.safetensors" in sizes:
            shards = ["model.safetensors"]
        elif "model.safetensors.index.json" in sizes:
            index = "model.safetensors.index.json"
            if (sizes[index] or 0) > MAX_INDEX_BYTES:
                raise CheckpointError(f"{repo_id}/{index}", f"{sizes[index]} bytes", f"at most {MAX_INDEX_BYTES} bytes")
            where = f"{repo_id}/{index}"
            with self._open(self._file_url(repo_id, index, sha), index, ref, deadline) as chunks:
                shards, total = index_shards(where, stream_object(where, chunks, descend="weight_map"))
            missing = [s for s in shards if s not in sizes]
            if missing:
                raise CheckpointError(f"{where}:weight_map", missing[0], "a shard file of the repository")
        else:
            return None
        builder = TotalsBuilder(f"{repo_id}@{sha}", self.limits)
        for shard in shards:
            self._shard_header(repo_id, sha, shard, sizes.get(shard), builder, ref, deadline)
        return builder.totals(), total

    def _shard_header(
        self,
        repo_id: str,
        sha: str,
        shard: str,
        size: int | None,
        builder: TotalsBuilder,
        ref: str,
        deadline: float,
    ) -> None:
        """Range-read one shard's header into ``builder``: the first bytes, then the rest if it is longer."""
        url = self._file_url(repo_id, shard, sha)
        what = f"the header of {shard}"
        first = min(PREFETCH_BYTES, size) if size else PREFETCH_BYTES
        with self._open(url, what, ref, deadline, f"0-{first - 1}") as chunks:
            head = b""
            for chunk in chunks:
                head += chunk
                if len(head) >= 9:
                    break
            label = f"{repo_id}/{shard}"
            length = builder.header_length(label, head[:9], size)

            def header() -> Iterator[bytes]:
                got = len(head)
                yield head[8:]
                for chunk in chunks:
                    got += len(chunk)
                    yield chunk
                if got < 8 + length:
                    with self._open(url, what, ref, deadline, f"{got}-{8 + length - 1}") as rest:
                        yield from rest

            builder.read_header(label, header(), length)

    def _get_json(
        self, repo_id: str, filename: str, sha: str, ref: str, deadline: float, *, any_json: bool = False
    ) -> Any:
        body = self._read(self._file_url(repo_id, filename, sha), filename, ref, deadline, MAX_CONFIG_BYTES)
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 JSON, or nested too deeply"
            raise CheckpointError("model", ref, "", problem=f"{filename} is not valid JSON ({reason})") from None
        if not isinstance(data, dict) and not any_json:
            raise CheckpointError("model", ref, "", problem=f"{filename} is not a JSON object")
        return data


def _private(host: str) -> bool:
    """A loopback, private, link-local or otherwise non-public address (or ``localhost``)."""
    if host.lower().rstrip(".") == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return not address.is_global


def redirect_refusal(target: httpx2.URL, endpoint: str, cdn_hosts: tuple[str, ...]) -> str:
    """Why a redirect from the Hub ``endpoint`` to ``target`` is not followed ("" when it may be)."""
    origin = httpx2.URL(endpoint)
    if target.scheme not in ("http", "https") or (origin.scheme == "https" and target.scheme != "https"):
        return "not https like the Hub endpoint"
    default = {"http": 80, "https": 443}
    port = target.port or default[target.scheme]
    if (target.host, port) == (origin.host, origin.port or default[origin.scheme]):
        return ""
    host = target.host.lower()
    listed = any(
        entry in (host, f"{host}:{port}") or (entry.startswith(".") and host.endswith(entry)) for entry in cdn_hosts
    )
    if not listed:
        return "neither the Hub's host nor one of FITGATE_HUB_CDN_HOSTS"
    if _private(host) and not _private(origin.host):
        return "a loopback or private address while the Hub endpoint is not"
    return ""


def _retry_after_s(exc: Exception) -> float:
    """Seconds a 429/503 answer's ``Retry-After`` asks to wait: a number of seconds or an HTTP date (0 if absent)."""
    response = getattr(exc, "response", None)
    value = response.headers.get("Retry-After", "").strip() if isinstance(response, httpx2.Response) else ""
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError, IndexError):
            return 0.0
    return min(max(seconds, 0.0), 3600.0) if math.isfinite(seconds) else 0.0
