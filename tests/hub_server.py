"""A loopback Hugging Face Hub: a real HTTP server on 127.0.0.1 for the real ``huggingface_hub`` client.

It serves the endpoints the client uses to size a checkpoint:

* ``GET /api/models/{repo}[/revision/{rev}]``: model info (commit sha, files and sizes);
* ``HEAD|GET /{repo}/resolve/{rev}/{file}``: files, with HTTP Range (206) and the Hub's headers
  (``X-Repo-Commit``, ``ETag``, ``X-Error-Code`` on errors).

Repos have branches/tags pointing at commits, optional access tokens (gated: 401 without a token,
403 with a wrong one) and files that are either real bytes or *faithful headers*: a real safetensors
header followed by virtual zero bytes up to the checkpoint's real size, so the client reads exactly
what it would read from the Hub without anyone storing weights. Faults (5xx, delays) can be injected
per path (``fail``, with an optional ``Retry-After``; ``slow``; ``trickle``: the answer's body one byte
at a time), and every byte sent is counted.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

DTYPE_SIZE = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I32": 4, "U8": 1, "I8": 1}


@dataclass(frozen=True)
class VirtualFile:
    """``prefix`` bytes followed by zeros up to ``size`` bytes."""

    prefix: bytes
    size: int

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``."""
        head = self.prefix[start:end]
        return head + b"\0" * max(0, (end - start) - len(head))


FileContent = bytes | VirtualFile


def safetensors_header(
    tensors: Mapping[str, tuple[str, Sequence[int]]], metadata: Mapping[str, str] | None = None
) -> tuple[bytes, int]:
    """A real safetensors header for ``{name: (dtype, shape)}``; returns (8-byte length + JSON, file size)."""
    entries: dict[str, Any] = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = DTYPE_SIZE[dtype]
        for dim in shape:
            n *= dim
        entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    body = json.dumps(entries, separators=(",", ":")).encode()
    body += b" " * (-len(body) % 8)
    return struct.pack("<Q", len(body)) + body, 8 + len(body) + offset


def faithful_safetensors(tensors: Mapping[str, tuple[str, Sequence[int]]]) -> VirtualFile:
    """A safetensors file with a real header and virtual (zero) tensor data."""
    header, size = safetensors_header(tensors)
    return VirtualFile(header, size)


@dataclass
class HubRepo:
    """One model repository: refs → commits → files."""

    repo_id: str
    commits: dict[str, dict[str, FileContent]]
    refs: dict[str, str]
    token: str | None = None
    gated: bool = False


@dataclass
class _Fault:
    pattern: str
    status: int = 0
    delay_s: float = 0.0
    times: int = 1
    retry_after: str | None = None
    trickle_s: float = 0.0  # seconds between body bytes
    location: str | None = None  # answer 302 to this URL (``{path}`` is replaced by the request's path)


@dataclass
class HubServer:
    """The server; use as a context manager (``with HubServer(repos) as hub: hub.url``)."""

    repos: list[HubRepo]
    bytes_sent: int = 0
    stopped: bool = False
    requests: list[str] = field(default_factory=list)
    authorized: list[str] = field(default_factory=list)  # paths of requests that carried a token
    _faults: list[_Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def fail(self, pattern: str, status: int, times: int = 1, retry_after: str | None = None) -> None:
        """Answer the next ``times`` requests whose path matches ``pattern`` with ``status`` (and ``Retry-After``)."""
        self._faults.append(_Fault(pattern, status=status, times=times, retry_after=retry_after))

    def redirect(self, pattern: str, location: str, times: int = 1_000_000) -> None:
        """Answer requests whose path matches ``pattern`` with a 302 to ``location`` (``{path}``: the request's)."""
        self._faults.append(_Fault(pattern, location=location, times=times))

    def trickle(self, pattern: str, bytes_per_s: float = 1.0, times: int = 1_000_000) -> None:
        """Send the bodies of requests whose path matches ``pattern`` one byte at a time (headers at once)."""
        self._faults.append(_Fault(pattern, trickle_s=1.0 / bytes_per_s, times=times))

    def slow(self, pattern: str, delay_s: float, times: int = 1_000_000) -> None:
        """Delay requests whose path matches ``pattern``."""
        self._faults.append(_Fault(pattern, delay_s=delay_s, times=times))

    def reset_counters(self) -> None:
        with self._lock:
            self.bytes_sent = 0
            self.requests.clear()
            self.authorized.clear()

    def __enter__(self) -> HubServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.stopped = False
        server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.stopped = True  # kept-alive connections are dropped at their next request
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- routing ----------------------------------------------------------------------------

    def _fault_for(self, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.times > 0 and re.search(fault.pattern, path):
                    fault.times -= 1
                    return fault
        return None

    def _repo(self, repo_id: str) -> HubRepo | None:
        return next((r for r in self.repos if r.repo_id == repo_id), None)


class _QuietServer(ThreadingHTTPServer):
    """Clients that time out and hang up (the slow-server tests) are expected, not errors."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _etag(content: FileContent) -> str:
    if isinstance(content, VirtualFile):
        return hashlib.sha256(content.prefix + str(content.size).encode()).hexdigest()
    return hashlib.sha256(content).hexdigest()


def _size(content: FileContent) -> int:
    return content.size if isinstance(content, VirtualFile) else len(content)


def _slice(content: FileContent, start: int, end: int) -> bytes:
    if isinstance(content, VirtualFile):
        return content.read(start, end)
    return content[start:end]


def _handler_for(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        _trickle_s = 0.0

        def log_message(self, *args: Any) -> None:
            return

        def do_HEAD(self) -> None:
            self._route(head=True)

        def do_GET(self) -> None:
            self._route(head=False)

        # -- helpers ------------------------------------------------------------------------

        def _send(
            self,
            status: int,
            body: bytes = b"",
            headers: Mapping[str, str] | None = None,
            head: bool = False,
            length: int | None = None,
        ) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            if not head and body and self._trickle_s:
                self.wfile.flush()
                for i in range(len(body)):
                    if hub.stopped:
                        return
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    with hub._lock:
                        hub.bytes_sent += 1
                    time.sleep(self._trickle_s)
            elif not head and body:
                self.wfile.write(body)
                with hub._lock:
                    hub.bytes_sent += len(body)

        def _error(self, status: int, code: str, message: str, head: bool, retry_after: str | None = None) -> None:
            body = json.dumps({"error": message}).encode()
            headers = {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
            if retry_after is not None:
                headers["Retry-After"] = retry_after
            self._send(status, body, headers, head)

        def _authorized(self, repo: HubRepo, head: bool) -> bool:
            if repo.token is None:
                return True
            auth = self.headers.get("Authorization", "")
            if not auth:
                if repo.gated:
                    self._error(401, "GatedRepo", "Access to this model is restricted", head)
                else:
                    self._error(401, "RepoNotFound", "Repository not found", head)
                return False
            if auth != f"Bearer {repo.token}":
                self._error(403, "GatedRepo", "Access to this model is restricted", head)
                return False
            return True

        def _route(self, head: bool) -> None:
            if hub.stopped:
                self.close_connection = True
                return
            path = unquote(urlparse(self.path).path)
            with hub._lock:
                hub.requests.append(f"{self.command} {path}")
                if self.headers.get("Authorization"):
                    hub.authorized.append(path)
            fault = hub._fault_for(path)
            self._trickle_s = 0.0
            if fault is not None:
                if fault.delay_s:
                    time.sleep(fault.delay_s)
                self._trickle_s = fault.trickle_s
                if fault.location is not None:
                    self._send(302, b"", {"Location": fault.location.replace("{path}", self.path)}, head)
                    return
                if fault.status:
                    self._error(fault.status, "ServerError", "injected failure", head, fault.retry_after)
                    return
            api = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/(.+))?", path)
            if api:
                self._model_info(api.group(1), api.group(2) or "main", head)
                return
            res = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
            if res:
                self._resolve(res.group(1), res.group(2), res.group(3), head)
                return
            self._error(404, "NotFound", "no such endpoint", head)

        def _open(self, repo_id: str, rev: str, head: bool) -> tuple[HubRepo, str] | None:
            """The repo and the commit ``rev`` names, or None after answering 404/401/403."""
            repo = hub._repo(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound", "Repository not found", head)
                return None
            if not self._authorized(repo, head):
                return None
            sha = repo.refs.get(rev) or (rev if rev in repo.commits else None)
            if sha is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
                return None
            return repo, sha

        def _model_info(self, repo_id: str, rev: str, head: bool) -> None:
            opened = self._open(repo_id, rev, head)
            if opened is None:
                return
            repo, sha = opened
            files = repo.commits[sha]
            info = {
                "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
                "id": repo_id,
                "modelId": repo_id,
                "sha": sha,
                "private": repo.token is not None and not repo.gated,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "tags": ["safetensors"] if any(f.endswith(".safetensors") for f in files) else [],
                "lastModified": "2026-01-01T00:00:00.000Z",
                "createdAt": "2025-01-01T00:00:00.000Z",
                "siblings": [{"rfilename": name, "size": _size(content)} for name, content in sorted(files.items())],
            }
            self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head)

        def _resolve(self, repo_id: str, rev: str, filename: str, head: bool) -> None:
            opened = self._open(repo_id, rev, head)
            if opened is None:
                return
            repo, sha = opened
            content = repo.commits[sha].get(filename)
            if content is None:
                self._error(404, "EntryNotFound", f"{filename} does not exist", head)
                return
            size = _size(content)
            headers = {
                "X-Repo-Commit": sha,
                "ETag": f'"{_etag(content)}"',
                "Accept-Ranges": "bytes",
                "Content-Type": "application/octet-stream",
            }
            ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            if ranged and not head:
                start = int(ranged.group(1))
                end = min(int(ranged.group(2)) + 1 if ranged.group(2) else size, size)
                if start >= size:
                    self._send(416, b"", {**headers, "Content-Range": f"bytes */{size}"}, head)
                    return
                body = _slice(content, start, end)
                self._send(206, body, {**headers, "Content-Range": f"bytes {start}-{end - 1}/{size}"}, head)
                return
            if head:
                self._send(200, b"", headers, head=True, length=size)
                return
            self._send(200, _slice(content, 0, size), headers)

    return Handler


@contextmanager
def serve(repos: list[HubRepo]) -> Iterator[HubServer]:
    """Run a :class:`HubServer` for the duration of a ``with`` block."""
    server = HubServer(repos)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------
# Faithful checkpoints from real configs


def llama_tensor_shapes(config: Mapping[str, Any]) -> dict[str, list[int]]:
    """Standard Transformers tensor names and shapes of a Llama/Mistral/Qwen2-style checkpoint."""
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    hd = config.get("head_dim") or h // heads
    v = config["vocab_size"]
    shapes: dict[str, list[int]] = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h]}
    if not config.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = [v, h]
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes |= {
            p + "self_attn.q_proj.weight": [heads * hd, h],
            p + "self_attn.k_proj.weight": [kv * hd, h],
            p + "self_attn.v_proj.weight": [kv * hd, h],
            p + "self_attn.o_proj.weight": [h, heads * hd],
            p + "mlp.gate_proj.weight": [inter, h],
            p + "mlp.up_proj.weight": [inter, h],
            p + "mlp.down_proj.weight": [h, inter],
            p + "input_layernorm.weight": [h],
            p + "post_attention_layernorm.weight": [h],
        }
        if config.get("model_type") in {"qwen2"}:
            shapes |= {
                p + "self_attn.q_proj.bias": [heads * hd],
                p + "self_attn.k_proj.bias": [kv * hd],
                p + "self_attn.v_proj.bias": [kv * hd],
            }
    return shapes


def sharded_checkpoint(
    config: Mapping[str, Any], weight_map: Mapping[str, str] | None = None, shards: int = 4, dtype: str = "BF16"
) -> dict[str, FileContent]:
    """config.json, model.safetensors.index.json and faithful shards for a Llama-style config.

    ``weight_map`` is the real tensor → shard assignment when known; otherwise tensors are split in
    order into ``shards`` files.
    """
    shapes = llama_tensor_shapes(config)
    names = list(shapes)
    if weight_map is None:
        per = -(-len(names) // shards)
        weight_map = {n: f"model-{i // per + 1:05d}-of-{shards:05d}.safetensors" for i, n in enumerate(names)}
    by_file: dict[str, dict[str, tuple[str, Sequence[int]]]] = {}
    for name in names:
        by_file.setdefault(weight_map[name], {})[name] = (dtype, shapes[name])
    files: dict[str, FileContent] = {"config.json": json.dumps(config, indent=2).encode()}
    total = 0
    for file, tensors in sorted(by_file.items()):
        vf = faithful_safetensors(tensors)
        files[file] = vf
        total += sum(DTYPE_SIZE[d] * _prod(s) for d, s in tensors.values())
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": total}, "weight_map": dict(weight_map)}, indent=2
    ).encode()
    return files


def _prod(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
