"""Hostile local checkpoints: bounded memory and tensor counts, only regular files, no escape, no echo."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from fitgate.checkpoints import CheckpointError, resolve, to_model_input
from fitgate.sizing import ServingConfig, lookup_gpu, plan
from fitgate.sizing.architecture import parse_config
from fitgate.sizing.weights import inventory_from_tensors
from tests.cli.test_cli import TINY, write_tiny_checkpoint


def write_header_file(path: Path, tensors: dict[str, tuple[str, list[int]]], pad_to: int = 0) -> None:
    """A safetensors file with a real header; the data is a sparse hole (never read)."""
    entries: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = {"F16": 2, "BF16": 2, "F32": 4}[dtype]
        for d in shape:
            n *= d
        entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    body = json.dumps(entries, separators=(",", ":")).encode()
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(body)) + body)
        fh.truncate(8 + len(body) + max(offset, pad_to))


def many_tensors(n: int, layers: int = 2) -> dict[str, tuple[str, list[int]]]:
    """``n`` small expert tensors spread over ``layers`` layers (a MoE with very many experts)."""
    return {f"model.layers.{i % layers}.mlp.experts.{i}.down_proj.weight": ("BF16", [4, 4]) for i in range(n)}


def plan_of(path: Path) -> object:
    return plan(to_model_input(resolve(str(path))), lookup_gpu("H100"), ServingConfig(max_model_len=2048)).per_gpu


def test_totals_give_the_same_plan_as_the_tensor_list(tmp_path: Path) -> None:
    stored = write_tiny_checkpoint(tmp_path / "m")
    # A layer beyond num_hidden_layers (an MTP layer) is stored but not loaded, as with a tensor list.
    write_header_file(
        tmp_path / "m" / "model-extra.safetensors", {"model.layers.2.mlp.up_proj.weight": ("F16", [8, 8])}
    )
    facts = resolve(str(tmp_path / "m"))
    assert facts.tensors is not None and facts.tensors.tensor_count == 22
    assert facts.tensors.stored_bytes == stored + 128
    listed = [("model.layers.2.mlp.up_proj.weight", "F16", (8, 8))]
    for shard in sorted((tmp_path / "m").glob("model-0000*.safetensors")):
        (length,) = struct.unpack("<Q", shard.read_bytes()[:8])
        header = json.loads(shard.read_bytes()[8 : 8 + length])
        listed += [(k, v["dtype"], tuple(v["shape"])) for k, v in header.items() if k != "__metadata__"]
    arch = parse_config(TINY)
    expected = inventory_from_tensors(listed, arch.num_layers)
    got = to_model_input(facts).inventory
    assert got.stored_bytes == expected.stored_bytes
    assert sorted(map(repr, got.entries)) == sorted(map(repr, expected.entries))


def test_headers_are_added_up_in_bounded_memory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    write_header_file(tmp_path / "model.safetensors", many_tensors(60_000))  # a 5.4 MB header
    tracemalloc.start()
    try:
        facts = resolve(str(tmp_path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"peak {peak >> 20} MiB while reading a 5 MB header"
    assert facts.tensors is not None and facts.tensors.tensor_count == 60_000
    assert len(facts.tensors.rows) <= 4  # two layers x (expert) x (linear or not): totals, not a list


def test_tensor_count_and_header_bytes_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    write_header_file(tmp_path / "model-1.safetensors", many_tensors(600))
    write_header_file(tmp_path / "model-2.safetensors", {"lm_head.weight": ("BF16", [1024, 256])})
    monkeypatch.setenv("FITGATE_MAX_TENSORS", "600")
    with pytest.raises(CheckpointError, match=r"more than 600 tensors.*at most 600 tensors per checkpoint"):
        resolve(str(tmp_path))
    monkeypatch.setenv("FITGATE_MAX_TENSORS", "601")
    assert resolve(str(tmp_path)).tensors is not None
    monkeypatch.setenv("FITGATE_MAX_HEADER_BYTES", "40000")  # model-1 alone is ~54 kB of header
    with pytest.raises(
        CheckpointError, match=r"at most 40000 header bytes per checkpoint \(FITGATE_MAX_HEADER_BYTES\)"
    ):
        resolve(str(tmp_path))


def test_a_fifo_in_place_of_a_shard_is_refused_not_waited_on(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    os.mkfifo(tmp_path / "model.safetensors")
    argv = [sys.executable, "-c", "import sys; from fitgate.cli import main; sys.exit(main(sys.argv[1:]))"]
    argv += ["plan", "--model", str(tmp_path), "--gpu", "H100"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("fitgate plan waited on a FIFO named model.safetensors")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "model.safetensors: 'not a regular file' is not valid; expected a regular file" in done.stderr


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: (d / "model.safetensors").mkdir(), "'a directory' is not valid; expected a regular file"),
        (lambda d: (d / "model.safetensors").symlink_to(d / "gone"), "expected a readable file (No such file"),
        (lambda d: (d / "model.safetensors").symlink_to(d / "model.safetensors"), "'a symbolic link loop'"),
        (lambda d: (d / "config.json").symlink_to(d / "config.json"), "config.json: 'a symbolic link loop'"),
    ],
)
def test_directories_and_broken_links_are_clean_errors(tmp_path: Path, make: object, message: str) -> None:
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(TINY))
    if "config.json" in message:
        (d / "config.json").unlink()
    make(d)  # type: ignore[operator]
    with pytest.raises(CheckpointError) as exc:
        resolve(str(d))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_links_out_of_the_model_directory_are_refused_and_never_echoed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(TINY))
    (d / "model.safetensors").symlink_to(secret)
    with pytest.raises(CheckpointError, match="a symbolic link out of the model directory") as exc:
        resolve(str(d))
    # Inside the directory, a file that is not safetensors is named as such; its bytes are not shown.
    (d / "model.safetensors").unlink()
    (d / "notes.txt").write_bytes(secret.read_bytes())
    (d / "model.safetensors").symlink_to("notes.txt")
    with pytest.raises(CheckpointError, match="not a safetensors file") as exc:
        resolve(str(d))
    leaked = struct.unpack("<Q", secret.read_bytes()[:8])[0]
    assert str(leaked) not in str(exc.value) and "root:x" not in str(exc.value)


def test_a_hugging_face_cache_snapshot_may_link_to_its_blobs(tmp_path: Path) -> None:
    repo = tmp_path / "models--acme--tiny"
    write_tiny_checkpoint(repo / "blobs-src")
    (repo / "blobs").mkdir()
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    for f in (repo / "blobs-src").iterdir():
        f.rename(repo / "blobs" / f.name)
        (snapshot / f.name).symlink_to(Path("../../blobs") / f.name)
    facts = resolve(str(snapshot))
    assert facts.tensors is not None and facts.tensors.tensor_count == 21


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"dtype": "BF16", "shape": [4, "4"]}, "expected a list of non-negative integers"),
        ({"dtype": "BF16", "shape": [True, 4]}, "expected a list of non-negative integers"),
        ({"dtype": "BF16", "shape": [1 << 40, 1 << 40]}, "expected at most 1125899906842624 elements"),
        ({"dtype": "Q9", "shape": [4]}, "model.safetensors:w.dtype"),
        ({"dtype": "BF16"}, "w.shape: 'None' is not valid"),
        ("x" * 5000, "expected a tensor entry with dtype and shape"),
    ],
)
def test_bad_entries_are_one_line_errors_naming_the_tensor(tmp_path: Path, entry: object, message: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    body = json.dumps({"w": entry}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(body)) + body)
    with pytest.raises(CheckpointError) as exc:
        resolve(str(tmp_path))
    assert message in str(exc.value) and len(str(exc.value)) < 400 and "\n" not in str(exc.value)


BIG = "9" * 5000  # past Python's int() limit of 4300 digits: json.loads raises ValueError, not JSONDecodeError


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        ("config.json", '{"hidden_size": ' + BIG + "}", "config.json: 'a number of more digits'"),
        ("config.json", '{"unused": ' + BIG + "}", "config.json: 'a number of more digits'"),
        ("hf_quant_config.json", '{"quantization": {"x": ' + BIG + "}}", "hf_quant_config.json: 'a number of"),
        ("model.safetensors", '{"w": {"dtype": "BF16", "shape": [' + BIG + "]}}", "model.safetensors:w: 'a number"),
        ("model.safetensors", '{"__metadata__": {"x": ' + BIG + "}}", "model.safetensors:__metadata__: 'a number"),
        ("model.safetensors.index.json", '{"metadata": {"total_size": ' + BIG + "}}", "index.json:metadata: 'a"),
    ],
)
def test_a_number_past_pythons_digit_limit_is_a_one_line_error(
    tmp_path: Path, file: str, text: str, message: str
) -> None:
    # hunt83 F4: each was "internal error: ValueError: Exceeds the limit (4300 digits) ..." (exit 70)
    write_tiny_checkpoint(tmp_path)
    body = text.encode()
    if file.startswith("model.safetensors"):  # the index is read only where no shard is
        for shard in tmp_path.glob("model-0000*"):
            shard.unlink()
    if file == "model.safetensors":
        body = struct.pack("<Q", len(body)) + body
    (tmp_path / file).write_bytes(body)
    with pytest.raises(CheckpointError) as exc:
        resolve(str(tmp_path))
    text = str(exc.value)
    assert message in text and "expected numbers of at most 4300 digits" in text, text
    assert len(text) < 400 and "\n" not in text and "set_int_max_str_digits" not in text
