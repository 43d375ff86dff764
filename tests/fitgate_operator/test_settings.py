"""One settings module: every FITGATE_*/HF_* variable is read by fitgate.settings only, documented, and checked."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from fitgate.checkpoints import CheckpointError, resolve
from fitgate.settings import (
    BUDGET_VARIABLES,
    VARIABLES,
    HeaderLimits,
    HubSettings,
    OperatorConfig,
    Settings,
    SettingsError,
    load,
    markdown_table,
)
from tests.checkpoints.test_checkpoint_bounds import many_tensors, write_header_file
from tests.cli.test_cli import TINY

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "fitgate"
OURS = re.compile(r"^(FITGATE|HF)_")


def _environ_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, key) of every ``os.environ[...]``, ``os.environ.get(...)``, ``os.getenv(...)`` and ``os.environ`` passed on.

    A key that is not a string literal is reported as ``?`` (it could be any variable).
    """
    found: list[tuple[int, str]] = []

    def key(node: ast.expr | None) -> str:
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "?"

    def is_environ(node: ast.expr) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
            isinstance(node, ast.Name) and node.id == "environ"
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_environ(node.value):
            found.append((node.lineno, key(node.slice)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if (func.attr in {"get", "setdefault", "pop", "update"} and is_environ(func.value)) or (
                func.attr in {"getenv", "putenv"}
            ):
                found.append((node.lineno, key(node.args[0] if node.args else None)))
        elif isinstance(node, ast.Call):
            found.extend((node.lineno, "?") for arg in node.args if is_environ(arg))
    return found


def test_only_the_settings_module_reads_fitgate_and_hf_variables() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "settings.py":
            continue
        for line, name in _environ_reads(ast.parse(path.read_text(), str(path))):
            if name == "?" or OURS.match(name):
                offenders.append(f"{path.relative_to(ROOT)}:{line} reads {name}")
    assert offenders == [], "read these through fitgate.settings: " + "; ".join(offenders)


def test_the_scan_sees_each_way_of_reading_the_environment() -> None:
    source = (
        "import os\nos.environ.get('FITGATE_X')\nos.environ['HF_Y']\nos.getenv('FITGATE_Z')\n"
        "os.environ[key] = '1'\ndict(os.environ)\nos.environ.get('HOME')\n"
    )
    assert _environ_reads(ast.parse(source)) == [
        (2, "FITGATE_X"),
        (3, "HF_Y"),
        (4, "FITGATE_Z"),
        (5, "?"),
        (6, "?"),
        (7, "HOME"),
    ]


def test_every_variable_named_in_the_code_and_the_chart_is_documented() -> None:
    documented = {v.name for v in (*VARIABLES, *BUDGET_VARIABLES)}  # the budgets: docs/hardening.md
    named: set[str] = set()
    for path in [*SRC.rglob("*.py"), *(ROOT / "charts").rglob("*")]:
        if path.is_file():
            named |= set(re.findall(r"\b((?:FITGATE|HF)_[A-Z0-9_]*[A-Z0-9])\b", path.read_text(errors="replace")))
    named -= {"FITGATE_HUB"}  # "FITGATE_HUB_*" in prose
    assert named - documented == set()
    assert len(documented) == len(VARIABLES) + len(BUDGET_VARIABLES)


def test_the_docs_table_is_the_generated_one() -> None:
    readme = (ROOT / "docs" / "settings.md").read_text()
    table = readme.split("<!-- settings-table:start -->\n", 1)[1].split("<!-- settings-table:end -->", 1)[0]
    assert table == markdown_table(), "regenerate it: python -m fitgate.settings"


def test_defaults_are_the_documented_ones() -> None:
    documented = {v.name: v.default for v in VARIABLES}
    assert load(documented) == load({}) == Settings(cache_dir=load({}).cache_dir)
    assert load({}).hub == HubSettings() and load({}).limits == HeaderLimits() and load({}).operator == OperatorConfig()


def test_values_are_read_into_types() -> None:
    settings = load(
        {
            "HF_ENDPOINT": "http://hub.local:8080/",
            "HF_HUB_OFFLINE": "yes",
            "FITGATE_HUB_DEADLINE": "6",
            "FITGATE_HUB_CDN_HOSTS": " CDN.example.com , .xet.example ",
            "FITGATE_MAX_TENSORS": "600",
            "FITGATE_CACHE_DIR": "/var/cache/fg",
            "FITGATE_CATALOG_PATH": "/a::/b",
            "FITGATE_WEBHOOK_PORT": "0",
            "FITGATE_UNKNOWN_POLICY": "Reject",
            "FITGATE_MODEL_ROOTS": "/models:/data",
            "FITGATE_NAMESPACES": "ml, serving",
            "FITGATE_PEERING": "fitgate",
        }
    )
    assert settings.hub.endpoint == "http://hub.local:8080" and settings.hub.offline and settings.hub.deadline_s == 6
    assert settings.hub.cdn_hosts == ("cdn.example.com", ".xet.example")
    assert settings.limits.max_tensors == 600 and str(settings.cache_dir) == "/var/cache/fg"
    assert settings.catalog_path == ("/a", "/b")
    op = settings.operator
    assert (op.webhook_port, op.unknown_policy, op.model_roots) == (0, "Deny", ("/models", "/data"))
    assert (op.namespaces, op.peering) == (("ml", "serving"), "fitgate")


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("FITGATE_HUB_TIMEOUT", "0", "a number of seconds above 0"),
        ("FITGATE_HUB_DEADLINE", "soon", "a number of seconds above 0"),
        ("FITGATE_RESYNC_SECONDS", "-5", "a number of seconds above 0"),
        ("FITGATE_MAX_TENSORS", "0", "a positive integer from 1 to"),
        ("FITGATE_MAX_HEADER_BYTES", "1e9", "a positive integer from 1 to"),
        ("FITGATE_WEBHOOK_PORT", "70000", "a port from 0 to 65535"),
        ("FITGATE_METRICS_PORT", "http", "a port from 0 to 65535"),
        ("FITGATE_UNKNOWN_POLICY", "Block", "Allow, Warn or Deny"),
        ("FITGATE_MODEL_ROOTS", "models", "absolute directories"),
        ("FITGATE_PEERING_LIFETIME_SECONDS", "1", "whole seconds from 2 to 3600"),
    ],
)
def test_a_bad_value_is_one_line_naming_variable_value_and_limit(name: str, value: str, expected: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load({name: value})
    message = str(caught.value)
    assert message.startswith(f"{name}: {value!r} is not valid; expected {expected}") and "\n" not in message


def test_the_cli_reports_a_bad_setting_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fitgate.cli import main  # noqa: PLC0415

    monkeypatch.setenv("FITGATE_MAX_TENSORS", "many")
    assert main(["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "fitgate: error: FITGATE_MAX_TENSORS: 'many' is not valid; expected a positive integer from 1 to 1099511627776\n"
    )


def test_a_resolution_uses_the_settings_it_is_given_not_the_environment(tmp_path: Path) -> None:
    """The operator reads the environment once and resolves with that object (FactsStore passes it on)."""
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    write_header_file(tmp_path / "model.safetensors", many_tensors(601))
    assert resolve(str(tmp_path)).tensors is not None  # the environment's limit: 500,000
    with pytest.raises(CheckpointError, match=r"at most 600 tensors per checkpoint"):
        resolve(str(tmp_path), settings=load({"FITGATE_MAX_TENSORS": "600"}))


def test_the_hardening_page_lists_the_budgets() -> None:
    page = (ROOT / "docs" / "hardening.md").read_text()
    table = page.split("<!-- budgets-table:start -->\n", 1)[1].split("<!-- budgets-table:end -->", 1)[0]
    assert table == markdown_table(BUDGET_VARIABLES)
