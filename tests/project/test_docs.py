"""The documentation: the site builds with ``mkdocs build --strict``, generated pages are fresh, every
example output is what the code prints now, every page is in the nav, and the README stays a map."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _gen_docs()


def _nav_pages(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _nav_pages(value)]
    return []


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """A broken link, a page missing from the nav or a nav entry without a page fails the build."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "crd" / "index.html").exists()


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = set(_nav_pages(config["nav"]))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert nav == pages


@pytest.mark.parametrize("page", ["crd.md", "helm-values.md", "contributing.md"])
def test_generated_pages_are_fresh(page: str) -> None:
    """docs/reference/*.md from src/fitgate/operator/schema/api.py and the chart's schema; docs/contributing.md."""
    pages = {p.name: (p, text) for p, text in GEN.generated_pages().items()}
    path, text = pages[page]
    assert path.read_text() == text, "stale: run python scripts/gen_docs.py"


def test_the_crd_page_names_every_spec_field() -> None:
    from fitgate.operator.schema.api import ModelDeploymentSpec  # noqa: PLC0415

    text = (DOCS / "reference" / "crd.md").read_text()
    for name, field in ModelDeploymentSpec.model_fields.items():
        assert f"`spec.{field.alias or name}`" in text


def test_every_example_output_is_what_the_code_prints() -> None:
    examples = [(p, c, s) for p in GEN.example_pages() for c, s in GEN.examples_in(p.read_text())]
    assert len(examples) >= 6  # README, index, cli, compare, capacity, operator
    problems = GEN.stale_examples()
    assert problems == [], "\n".join(problems) + "\n(run python scripts/gen_docs.py)"


@pytest.mark.parametrize(
    ("shown", "output", "ok"),
    [
        ("a\nb", "a\nb", True),
        ("a\n...\nc", "a\nb\nc", True),
        ("...\nb\n...", "a\nb\nc", True),
        ("a\nc", "a\nb\nc", False),  # a line left out without '...'
        ("a\nb", "a\nb\nc", False),  # the output goes on
        ("a\nx", "a\nb", False),
    ],
)
def test_shown_lines_are_compared_in_order(shown: str, output: str, ok: bool) -> None:
    assert (GEN.shown_lines_match(shown, output) is None) is ok


def test_the_readme_is_a_map() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).exists(), link
    for needed in ("make plan", "make test", "helm install", "<!-- recipe: try-without-gpus -->", "CONTRIBUTING.md"):
        assert needed in text
