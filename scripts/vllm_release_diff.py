#!/usr/bin/env python3
"""Review a new vLLM release in minutes: the unified diff of the functions that decide memory.

Usage::

    scripts/vllm_release_diff.py 0.33.0 0.34.0                       # downloads both wheels (cached)
    scripts/vllm_release_diff.py 0.33.0 0.34.0 --old-dir /tmp/vllm/0.33.0 --new-dir /tmp/vllm/0.34.0
    scripts/vllm_release_diff.py 0.33.0 0.34.0 --summary              # only the table

A release is fetched with pip's ordinary client (``pip download --no-deps vllm==X``) into a cache
directory (``--cache``, default ``~/.cache/fitgate/vllm``) and its ``vllm/**/*.py`` unpacked there;
a directory already holding an unpacked ``vllm/`` package is reused. Each function in
:data:`TARGETS` is found by its qualified name with :mod:`ast` in any of its candidate files (vLLM
moves them: ``kv_cache_utils.py`` -> ``kv_cache_planning.py``, the V1 runner -> the V2 runner), and
the script prints a table (same / changed / added / removed, with file:line in each release) and
then the unified diff of every changed function. What fitgate did about each change is recorded in
docs/vllm-releases.md.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Where the memory-deciding functions live, by topic: (topic, candidate files, qualified names).
TARGETS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "worker memory",
        ("v1/worker/gpu_worker.py",),
        (
            "Worker.init_device",
            "Worker.determine_available_memory",
            "Worker.initialize_from_config",
            "Worker.compile_or_warm_up_model",
            "Worker._compile_or_warm_up_model",
        ),
    ),
    ("requested budget", ("v1/worker/utils.py",), ("request_memory",)),
    # before the split of vllm/utils (e.g. 0.10) these lived in utils/__init__.py
    ("profiling", ("utils/mem_utils.py", "utils/__init__.py"), ("memory_profiling", "MemorySnapshot.measure")),
    (
        "profile run and CUDA graphs",
        ("v1/worker/gpu/model_runner.py", "v1/worker/gpu_model_runner.py"),
        (
            "GPUModelRunner.profile_run",
            "GPUModelRunner.profile_cudagraph_memory",
            "GPUModelRunner.capture_model",
            "GPUModelRunner._dummy_sampler_run",
        ),
    ),
    (
        "CUDA-graph estimate",
        ("v1/worker/gpu/cudagraph_utils.py",),
        ("profile_cudagraph_memory", "_extrapolate_full_graph_memory"),
    ),
    (
        "extensible KV cache",
        ("v1/worker/extensible_kv_cache.py",),
        (
            "measure_kv_cache_bytes",
            "measure_kv_cache_blocks",
            "ExtensibleKVCache.blocks_within",
            "ExtensibleKVCache.committable_blocks",
            "ExtensibleKVCache.record_transient_peak",
            "KV_CACHE_MARGIN_FLOOR_BYTES",
            "KV_CACHE_MARGIN_FRACTION",
            "KV_CACHE_NON_TORCH_RESERVE_BYTES",
        ),
    ),
    (
        "KV cache config and grouping",
        ("v1/core/kv_cache_planning.py", "v1/core/kv_cache_utils.py"),
        (
            "get_kv_cache_groups",
            "get_num_blocks",
            "_get_kv_cache_bytes_per_block",
            "get_kv_cache_configs",
            "check_enough_kv_cache_memory",
            "_check_enough_kv_cache_memory",
            "get_max_concurrency_for_kv_cache_config",
            "get_kv_cache_capacity",
            "_report_kv_cache_config",
            "update_kv_cache_capacity",
            "unify_kv_cache_spec_page_size",
            "_get_kv_cache_groups_uniform_page_size",
            "_auto_fit_max_model_len",
            "shrink_kv_cache_configs",
            "finalize_extensible_kv_cache",
        ),
    ),
    (
        "default settings per platform",
        ("engine/arg_utils.py",),
        ("EngineArgs.get_batch_defaults", "EngineArgs._set_default_max_num_seqs_and_batched_tokens_args"),
    ),
    (
        "config defaults",
        ("config/vllm.py", "config/cache.py", "config/__init__.py", "config.py"),
        (
            "VllmConfig._set_cudagraph_sizes",
            "VllmConfig._resolve_extensible_kv_cache",
            "CacheConfig.resolved_gpu_memory_utilization",
            "CacheConfig.DEFAULT_GPU_MEMORY_UTILIZATION",
        ),
    ),
    (
        "max_model_len derivation",
        ("config/model.py", "transformers_utils/config.py", "config/__init__.py", "config.py"),
        ("_get_and_verify_max_len", "ModelConfig.get_and_verify_max_len"),
    ),
    (
        "environment defaults",
        ("envs.py",),
        (
            "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS",
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
            "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE",
            "VLLM_USE_V2_MODEL_RUNNER",
        ),
    ),
)

#: Bounds on what is read: a source file above this size is skipped (vLLM's largest is ~0.4 MB).
MAX_SOURCE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Found:
    """One definition in one release: where it is and its source text."""

    path: str
    first_line: int
    last_line: int
    text: str


def _walk(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) of every function, class attribute, module constant and env entry."""
    for node in tree.body:
        yield from _named(node, "")


def _named(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        yield prefix + node.name, node
    elif isinstance(node, ast.ClassDef):
        for child in node.body:
            yield from _named(child, f"{prefix}{node.name}.")
    elif isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                yield prefix + target.id, node
        value = node.value
        if isinstance(value, ast.Dict):  # envs.py: environment_variables = {"VLLM_X": lambda: ...}
            for key, item in zip(value.keys, value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and item is not None:
                    yield prefix + key.value, _Span(key, item)


class _Span(ast.AST):
    """A dict entry: from its key to the end of its value."""

    def __init__(self, key: ast.AST, value: ast.AST) -> None:
        super().__init__()
        self.lineno = getattr(key, "lineno", 1)
        self.end_lineno = getattr(value, "end_lineno", self.lineno)


def find_definitions(root: Path, files: Sequence[str], names: Sequence[str]) -> dict[str, Found]:
    """The definitions of ``names`` in the first of ``files`` (relative to ``root``) that has each."""
    found: dict[str, Found] = {}
    for rel in files:
        path = root / rel
        if not path.is_file() or path.stat().st_size > MAX_SOURCE_BYTES:
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        lines = source.splitlines()
        for qualname, node in _walk(tree):
            if qualname in names and qualname not in found:
                first = getattr(node, "lineno", 1)
                for deco in getattr(node, "decorator_list", []):
                    first = min(first, deco.lineno)
                last = getattr(node, "end_lineno", None) or first
                found[qualname] = Found(rel, first, last, "\n".join(lines[first - 1 : last]) + "\n")
    return found


@dataclass(frozen=True)
class Change:
    """One target compared across the two releases."""

    topic: str
    name: str
    status: str  # same | changed | added | removed | absent
    old: Found | None
    new: Found | None

    def where(self) -> str:
        """``file Lx-y -> file Lx-y``."""

        def at(f: Found | None) -> str:
            return "-" if f is None else f"{f.path} L{f.first_line}-{f.last_line}"

        return f"{at(self.old)} -> {at(self.new)}"


def compare(old_root: Path, new_root: Path) -> list[Change]:
    """Every target of :data:`TARGETS` in both releases."""
    changes: list[Change] = []
    for topic, files, names in TARGETS:
        old = find_definitions(old_root, files, names)
        new = find_definitions(new_root, files, names)
        for name in names:
            a, b = old.get(name), new.get(name)
            if a is None and b is None:
                status = "absent"
            elif a is None:
                status = "added"
            elif b is None:
                status = "removed"
            else:
                status = "same" if a.text == b.text else "changed"
            changes.append(Change(topic, name, status, a, b))
    return changes


def unified(change: Change, old_label: str, new_label: str) -> str:
    """The unified diff of one target (whole body for added / removed)."""
    a = change.old.text.splitlines(keepends=True) if change.old else []
    b = change.new.text.splitlines(keepends=True) if change.new else []
    old_at = f"{old_label}/{change.old.path}:{change.old.first_line}" if change.old else f"{old_label}/(none)"
    new_at = f"{new_label}/{change.new.path}:{change.new.first_line}" if change.new else f"{new_label}/(none)"
    return "".join(difflib.unified_diff(a, b, f"{old_at} {change.name}", f"{new_at} {change.name}", n=3))


def report(changes: Sequence[Change], old_label: str, new_label: str, summary_only: bool = False) -> str:
    """The table, then the diffs of everything that is not the same."""
    out = [f"# vLLM {old_label} -> {new_label}: functions that decide memory\n"]
    width = max(len(c.name) for c in changes)
    for c in changes:
        out.append(f"{c.status:8} {c.name:{width}}  {c.where()}   [{c.topic}]\n")
    if not summary_only:
        for c in changes:
            if c.status in ("changed", "added", "removed"):
                out.append("\n" + unified(c, old_label, new_label))
    return "".join(out)


def unpacked(version: str, given: Path | None, cache: Path) -> Path:
    """The directory holding release ``version``'s ``vllm/`` package: ``given``, or download and unpack."""
    if given is not None:
        root = given / "vllm" if (given / "vllm").is_dir() else given
        if not (root / "__init__.py").is_file():
            raise SystemExit(f"--dir {given}: no unpacked vllm package there (expected vllm/__init__.py)")
        return root
    target = cache / version
    root = target / "vllm"
    if (root / "__init__.py").is_file():
        return root
    target.mkdir(parents=True, exist_ok=True)
    wheels = list(target.glob("vllm-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", f"vllm=={version}", "-d", str(target)]
        subprocess.run(cmd, check=True, timeout=1800)
        wheels = list(target.glob("vllm-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download vllm=={version}: no wheel in {target}")
    with zipfile.ZipFile(wheels[0]) as whl:
        for info in whl.infolist():
            if info.filename.startswith("vllm/") and info.filename.endswith(".py") and ".." not in info.filename:
                whl.extract(info, target)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("old", help="the release fitgate models, e.g. 0.33.0")
    ap.add_argument("new", help="the release to review, e.g. 0.34.0")
    ap.add_argument("--old-dir", type=Path, help="an unpacked wheel of OLD (directory holding vllm/)")
    ap.add_argument("--new-dir", type=Path, help="an unpacked wheel of NEW (directory holding vllm/)")
    default_cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fitgate" / "vllm"
    ap.add_argument("--cache", type=Path, default=default_cache, help=f"download cache (default {default_cache})")
    ap.add_argument("--summary", action="store_true", help="print only the table")
    args = ap.parse_args(argv)
    old = unpacked(args.old, args.old_dir, args.cache)
    new = unpacked(args.new, args.new_dir, args.cache)
    sys.stdout.write(report(compare(old, new), args.old, args.new, args.summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
