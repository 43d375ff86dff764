"""plugins/krew/fitgate.yaml, rendered by scripts/krew_plugin.py, is a plugin manifest krew v0.4.3 accepts.

The fields are krew's (sigs.k8s.io/krew@v0.4.3 pkg/index/types.go: Plugin, PluginSpec, Platform, FileOperation, the
json tags); the rules its index validation applies (internal/index/validation/validate.go ValidatePlugin,
validatePlatform, validateFiles, validateSelector; internal/installation/semver/version.go Parse;
pkg/constants/constants.go CurrentAPIVersion, PluginKind), read from the Go module proxy
(`go mod download sigs.k8s.io/krew@v0.4.3`). krew itself decodes non-strictly (indexscanner/scanner.go
decodeFile: yaml.Unmarshal), so a misspelt field would be dropped in silence: this check is strict.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("krew_plugin", REPO / "scripts" / "krew_plugin.py")
assert _spec is not None and _spec.loader is not None
krew_plugin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(krew_plugin)

# pkg/index/types.go: the json field names of each struct (TypeMeta inline, ObjectMeta as metadata).
PLUGIN_FIELDS = {"apiVersion", "kind", "metadata", "spec"}
SPEC_FIELDS = {"version", "shortDescription", "description", "caveats", "homepage", "platforms"}
PLATFORM_FIELDS = {"uri", "sha256", "selector", "files", "bin"}
FILE_FIELDS = {"from", "to"}
SELECTOR_FIELDS = {"matchLabels", "matchExpressions"}  # metav1.LabelSelector
# pkg/constants/constants.go
API_VERSION, KIND = "krew.googlecontainertools.github.com/v1alpha2", "Plugin"
# validate.go
SAFE_NAME = re.compile(r"^[\w-]+$")
SHA256 = re.compile(r"^[a-f0-9]{64}$")
WINDOWS_FORBIDDEN = {"CON", "PRN", "AUX", "NUL"} | {f"COM{i}" for i in range(1, 10)} | {f"LPT{i}" for i in range(1, 10)}
# k8s.io/apimachinery pkg/util/version ParseSemantic, after semver.Parse's required "v"
SEMVER = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def krew_problems(name: str, p: dict[str, Any]) -> list[str]:
    """What krew v0.4.3's ValidatePlugin (plus a strict decode) says about manifest ``p`` of plugin ``name``."""
    out = [f"unknown field {k}" for k in set(p) - PLUGIN_FIELDS]
    if p.get("apiVersion") != API_VERSION:
        out.append(f"apiVersion={p.get('apiVersion')!r}")
    if p.get("kind") != KIND:
        out.append(f"kind={p.get('kind')!r}")
    if not SAFE_NAME.match(name) or name.upper() in WINDOWS_FORBIDDEN:
        out.append(f"plugin name {name!r} not allowed")
    if (p.get("metadata") or {}).get("name") != name:
        out.append(f"plugin should be named {name!r}")
    spec = p.get("spec") or {}
    out += [f"unknown field spec.{k}" for k in set(spec) - SPEC_FIELDS]
    short = spec.get("shortDescription") or ""
    if not short or "\n" in short or "\r" in short:
        out.append("shortDescription empty or with a line break")
    if not spec.get("platforms"):
        out.append("should have a platform specified")
    if not SEMVER.match(str(spec.get("version") or "")):
        out.append(f"version {spec.get('version')!r} is not v-prefixed semver")
    for i, pl in enumerate(spec.get("platforms") or []):
        where = f"platforms[{i}]"
        out += [f"unknown field {where}.{k}" for k in set(pl) - PLATFORM_FIELDS]
        if not pl.get("uri"):
            out.append(f"{where}: `uri` has to be set")
        if not SHA256.match(str(pl.get("sha256") or "")):
            out.append(f"{where}: `sha256` {pl.get('sha256')!r} is not valid")
        if not pl.get("bin"):
            out.append(f"{where}: `bin` has to be set")
        files = pl.get("files")
        if files is not None:
            if not files:
                out.append(f"{where}: `files` has to be unspecified or non-empty")
            for f in files:
                out += [f"unknown field {where}.files.{k}" for k in set(f) - FILE_FIELDS]
                if not f.get("from") or not f.get("to"):
                    out.append(f"{where}: `from` and `to` have to be set")
        sel = pl.get("selector")
        if not sel or (sel.get("matchLabels") is None and not sel.get("matchExpressions")):
            out.append(f"{where}: nil or empty selector is not supported")
            continue
        out += [f"unknown field {where}.selector.{k}" for k in set(sel) - SELECTOR_FIELDS]
        keys = list(sel.get("matchLabels") or {}) + [e.get("key") for e in sel.get("matchExpressions") or []]
        out += [f"{where}: selector key {k!r} not supported" for k in keys if k not in {"os", "arch"}]
    return out


def fake_archives(tmp_path: Path, version: str) -> list[Path]:
    """One real (tiny) archive per platform, with the launcher, as `archive` lays them out."""
    out = []
    for platform in krew_plugin.PIP_PLATFORMS:
        root = tmp_path / platform.replace("/", "-")
        (root / "lib" / "cp311").mkdir(parents=True)
        (root / "kubectl-fitgate").write_text(krew_plugin.LAUNCHER + f"# {platform}\n")
        path = tmp_path / krew_plugin.archive_name(platform, version)
        krew_plugin.write_tar(root, path)
        out.append(path)
    return out


def test_rendered_manifest_is_one_krew_accepts(tmp_path: Path) -> None:
    archives = fake_archives(tmp_path, "0.1.0")
    text = krew_plugin.render("0.1.0", "https://example.invalid/v0.1.0/", archives)
    doc = yaml.safe_load(text)
    assert krew_problems("fitgate", doc) == []
    platforms = doc["spec"]["platforms"]
    by_platform = {f"{p['selector']['matchLabels']['os']}/{p['selector']['matchLabels']['arch']}": p for p in platforms}
    assert set(by_platform) == set(krew_plugin.PIP_PLATFORMS)  # one entry per archive the script builds
    for archive in archives:
        platform = "/".join(archive.name.removesuffix(".tar.gz").split("-")[-2:])
        entry = by_platform[platform]
        assert entry["uri"] == f"https://example.invalid/v0.1.0/{archive.name}"
        assert entry["sha256"] == krew_plugin.sha256(archive)  # the hash of that very file
        assert entry["bin"] == "kubectl-fitgate"
    assert doc["spec"]["version"] == "v0.1.0" and "${" not in text


def test_the_validator_catches_what_krew_refuses(tmp_path: Path) -> None:
    doc = yaml.safe_load(krew_plugin.render("0.1.0", "https://x.invalid", fake_archives(tmp_path, "0.1.0")))
    bad = [
        ({**doc, "apiVersion": "krew.googlecontainertools.github.com/v1alpha1"}, "apiVersion"),
        ({**doc, "spec": {**doc["spec"], "version": "0.1.0"}}, "v-prefixed"),
        ({**doc, "spec": {**doc["spec"], "shortDescription": "a\nb"}}, "line break"),
        ({**doc, "spec": {**doc["spec"], "shortdescription": "typo"}}, "unknown field spec.shortdescription"),
        ({**doc, "spec": {**doc["spec"], "platforms": [{**doc["spec"]["platforms"][0], "sha256": "abc"}]}}, "sha256"),
        (
            {**doc, "spec": {**doc["spec"], "platforms": [{**doc["spec"]["platforms"][0], "selector": {}}]}},
            "empty selector",
        ),
    ]
    for manifest, says in bad:
        assert any(says in p for p in krew_problems("fitgate", manifest)), says
    assert krew_problems("CON", {**doc, "metadata": {"name": "CON"}})


def test_render_refuses_a_missing_or_foreign_platform(tmp_path: Path) -> None:
    archives = fake_archives(tmp_path, "0.1.0")
    with pytest.raises(SystemExit, match="no archive for SHA256_DARWIN_AMD64, URI_DARWIN_AMD64"):
        krew_plugin.render("0.1.0", "https://x.invalid", [a for a in archives if "darwin-amd64" not in a.name])
    with pytest.raises(SystemExit, match=r"not an archive of version 0\.2\.0"):
        krew_plugin.render("0.2.0", "https://x.invalid", archives)


def test_archives_are_reproducible(tmp_path: Path) -> None:
    first = fake_archives(tmp_path / "a", "0.1.0")
    second = fake_archives(tmp_path / "b", "0.1.0")
    assert [krew_plugin.sha256(a) for a in first] == [krew_plugin.sha256(b) for b in second]


def test_launcher_runs_the_plugin_from_its_lib_folder_or_says_why_not(tmp_path: Path) -> None:
    """The launcher as krew installs it: a symlink in krew's bin to the file in the install folder."""
    install = tmp_path / "store" / "fitgate" / "v0.1.0"
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    (install / "lib").mkdir(parents=True)
    (install / "lib" / tag).symlink_to(REPO / "src")  # stands in for the unpacked wheels (fitgate importable)
    (install / "kubectl-fitgate").write_text(krew_plugin.LAUNCHER)
    (install / "kubectl-fitgate").chmod(0o755)
    link = tmp_path / "bin" / "kubectl-fitgate"
    link.parent.mkdir()
    link.symlink_to(install / "kubectl-fitgate")
    ok = subprocess.run([sys.executable, str(link), "--help"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and "why RESOURCE" in ok.stdout, ok.stderr
    (install / "lib" / tag).unlink()
    (install / "lib" / "cp39").mkdir()
    refused = subprocess.run([sys.executable, str(link), "--help"], capture_output=True, text=True, check=False)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert f"fitgate for cp39, not for python3 {sys.version_info[0]}.{sys.version_info[1]}" in refused.stderr
