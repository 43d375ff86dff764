"""``source: path`` in the operator: only under FITGATE_MODEL_ROOTS, refused alike whatever lies outside."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fitgate.checkpoints import CheckpointError, resolve
from fitgate.operator.decision.store import FactsStore
from fitgate.operator.schema.api import ModelRef
from fitgate.operator.schema.config import OperatorConfig
from tests.cli.test_cli import write_tiny_checkpoint


@pytest.fixture
def roots(tmp_path: Path) -> tuple[str, ...]:
    write_tiny_checkpoint(tmp_path / "models" / "tiny")
    (tmp_path / "elsewhere").mkdir()
    write_tiny_checkpoint(tmp_path / "elsewhere" / "secret")
    return (str(tmp_path / "models"),)


def test_a_directory_under_a_root_resolves(roots: tuple[str, ...]) -> None:
    facts = resolve(f"{roots[0]}/tiny", source="path", roots=roots)
    assert facts.tensors is not None and facts.tensors.tensor_count == 21
    assert resolve(f"{roots[0]}/tiny", roots=roots).source == "local"  # auto: a path


@pytest.mark.parametrize(
    "name",
    ["/proc/self", "/etc", "/nonexistent/x", "{root}/../elsewhere/secret", "{root}/link-out", "relative/dir", "~"],
)
def test_paths_outside_the_roots_get_one_answer(roots: tuple[str, ...], name: str) -> None:
    root = roots[0]
    (Path(root) / "link-out").symlink_to(Path(root).parent / "elsewhere" / "secret")
    with pytest.raises(CheckpointError) as exc:
        resolve(name.format(root=root), source="path", roots=roots)
    assert f"a directory must be an absolute path under {root} (FITGATE_MODEL_ROOTS" in str(exc.value)
    assert "config.json" not in str(exc.value)  # nothing about what is (or is not) there


def test_no_roots_means_no_directories(roots: tuple[str, ...]) -> None:
    with pytest.raises(CheckpointError, match=r"no model roots are configured \(FITGATE_MODEL_ROOTS"):
        resolve(f"{roots[0]}/tiny", source="path", roots=())
    assert resolve(f"{roots[0]}/tiny", source="path").source == "local"  # the CLI: the user's own files


def test_the_operator_confines_paths_to_its_roots(roots: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FITGATE_MODEL_ROOTS", roots[0])
    assert OperatorConfig.from_env().model_roots == roots
    store = FactsStore()

    async def known(name: str, source: str) -> str | None:
        result = await store.get(ModelRef(name=name, source=source), 10.0)  # type: ignore[arg-type]
        assert result is not None
        return result.error

    assert asyncio.run(known(f"{roots[0]}/tiny", "path")) is None
    for name, source in (("/proc/self", "path"), ("/proc/self", "auto"), ("/etc", "path")):
        error = asyncio.run(known(name, source))
        assert error is not None and "FITGATE_MODEL_ROOTS" in error and "config.json" not in error, error


def test_roots_must_be_absolute(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FITGATE_MODEL_ROOTS", "models")
    with pytest.raises(ValueError, match="FITGATE_MODEL_ROOTS: 'models' is not valid; expected absolute"):
        OperatorConfig.from_env()
