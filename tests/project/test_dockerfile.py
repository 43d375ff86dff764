"""The operator image's Dockerfile follows its rules and agrees with the Helm chart that runs it.

A lint, not a build (the build needs a network and minutes: scripts/build_image.sh, docs/image.md). Rules from
Docker's best practices (https://docs.docker.com/build/building/best-practices/) and the restricted Pod Security
Standard the chart sets (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
VALUES = REPO / "charts" / "fitgate" / "values.yaml"
DEPLOYMENT = REPO / "charts" / "fitgate" / "templates" / "deployment.yaml"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def parse(text: str) -> list[Instruction]:
    """Dockerfile instructions: comments dropped, backslash continuations joined (the default escape)."""
    out: list[Instruction] = []
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1].rstrip() + " "
            continue
        buf += line
        keyword, _, args = buf.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
        buf = ""
    assert not buf, "a continuation runs off the end of the file"
    return out


def stages(ins: list[Instruction]) -> list[list[Instruction]]:
    out: list[list[Instruction]] = []
    for i in ins:
        if i.keyword == "FROM":
            out.append([])
        if out:
            out[-1].append(i)
    return out


INS = parse(DOCKERFILE.read_text())
STAGES = stages(INS)
FINAL = STAGES[-1]
VALUES_DOC = yaml.safe_load(VALUES.read_text())


def _args() -> dict[str, str]:
    """The global ARGs (before the first FROM) and their defaults."""
    out = {}
    for i in INS:
        if i.keyword == "FROM":
            break
        if i.keyword == "ARG":
            name, _, default = i.args.partition("=")
            out[name] = default
    return out


def _pinned(ref: str) -> bool:
    """A digest, or a tag that names a version (not latest, not bare)."""
    if "@sha256:" in ref:
        return bool(re.search(r"@sha256:[0-9a-f]{64}$", ref))
    _name, sep, tag = ref.rpartition(":")
    return bool(sep) and "/" not in tag and tag != "latest" and bool(re.match(r"\d", tag))


def test_parser_sees_continuations_and_comments() -> None:
    ins = parse("# c\nFROM a:1 AS b\nRUN x \\\n  # inner comment\n  && y\nUSER 1:1\n")
    assert [(i.keyword, i.args) for i in ins] == [("FROM", "a:1 AS b"), ("RUN", "x && y"), ("USER", "1:1")]
    assert [len(s) for s in stages(ins)] == [3]


def test_every_base_is_pinned_or_an_arg_with_a_pinned_default() -> None:
    args = _args()
    for stage in STAGES:
        ref = stage[0].args.split()[0]
        if ref.startswith("${") or ref.startswith("$"):
            name = ref.strip("${}")
            assert name in args, f"FROM {ref}: no global ARG {name}"
            ref = args[name]
        assert ref and _pinned(ref), f"line {stage[0].line}: base {ref!r} is neither a digest nor a version tag"
    assert not _pinned("python:latest") and not _pinned("python") and _pinned("python:3.11-slim")
    assert _pinned("python@sha256:" + "a" * 64) and not _pinned("python@sha256:abc")


def test_no_latest_no_remote_add() -> None:
    for i in INS:
        assert not re.search(r"(^|[:\s])latest(\s|$)", i.args), f"line {i.line}: {i.keyword} {i.args}"
        assert i.keyword != "ADD", f"line {i.line}: ADD (use COPY; never ADD a URL)"


def test_pip_installs_cache_nothing_and_are_constrained() -> None:
    installs = [i for i in INS if i.keyword == "RUN" and "pip install" in i.args]
    assert installs
    for i in installs:
        for part in i.args.split("&&"):
            if "pip install" in part:
                assert "--no-cache-dir" in part and "-c constraints.txt" in part, f"line {i.line}: {part.strip()}"


def test_multi_stage_final_copies_only_the_venv_root_owned() -> None:
    assert len(STAGES) >= 2
    build_name = STAGES[0][0].args.split()[-1]
    assert STAGES[0][0].args.split()[-2].upper() == "AS"
    copies = [i for i in FINAL if i.keyword == "COPY"]
    assert copies and all(f"--from={build_name}" in c.args for c in copies)
    for c in copies:  # the code belongs to root: the runtime user (10001) cannot rewrite it
        assert "--chown=0:0" in c.args, f"line {c.line}: COPY without --chown=0:0"
    assert not [i for i in FINAL if i.keyword == "RUN" and "pip" in i.args], "no build tools in the final stage"


def test_build_context_paths_exist() -> None:
    for i in STAGES[0]:
        if i.keyword == "COPY":
            *sources, _dest = i.args.split()
            for s in sources:
                assert (REPO / s).exists(), f"line {i.line}: COPY {s}: not in the repository"


def test_runs_as_the_charts_non_root_user() -> None:
    users = [i for i in FINAL if i.keyword == "USER"]
    assert users, "the final stage sets no USER (it would run as root)"
    uid, _, gid = users[-1].args.partition(":")
    assert uid.isdigit() and gid.isdigit(), "USER must be numeric for runAsNonRoot to verify it"
    assert int(uid) != 0 and int(gid) != 0
    # kubelet can check runAsNonRoot only against a numeric image user; the chart pins the same ids
    pod = VALUES_DOC["podSecurityContext"]
    assert pod["runAsNonRoot"] is True and (pod["runAsUser"], pod["runAsGroup"]) == (int(uid), int(gid))
    useradd = next(i for i in FINAL if i.keyword == "RUN" and "useradd" in i.args)
    assert f"--uid {uid}" in useradd.args
    after = FINAL[FINAL.index(users[-1]) :]
    assert not [i for i in after if i.keyword in {"RUN", "COPY", "USER"} and i is not users[-1]]


def test_read_only_root_filesystem_has_its_writable_paths_mounted() -> None:
    assert VALUES_DOC["securityContext"]["readOnlyRootFilesystem"] is True
    env = " ".join(i.args for i in FINAL if i.keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env  # no .pyc written beside the (read-only) code
    deployment = DEPLOYMENT.read_text()
    for var, path in (("HOME", "/tmp"), ("FITGATE_CACHE_DIR", "/cache")):
        assert f"{var}={path}" in env
        assert re.search(rf"mountPath: {path}\b", deployment), f"{path} is not a volume in the chart"


def test_exec_form_entrypoint_and_ports_of_the_chart() -> None:
    for keyword in ("ENTRYPOINT", "CMD"):
        i = next(i for i in FINAL if i.keyword == keyword)
        assert isinstance(json.loads(i.args), list), f"{keyword} must be the exec form (signals reach fitgate)"
    assert json.loads(next(i for i in FINAL if i.keyword == "ENTRYPOINT").args) == ["fitgate"]
    exposed = {int(p) for i in FINAL if i.keyword == "EXPOSE" for p in i.args.split()}
    assert exposed == {VALUES_DOC["webhook"]["port"], VALUES_DOC["metrics"]["port"]}


def test_no_healthcheck_because_the_chart_probes() -> None:
    """The kubelet ignores HEALTHCHECK (and OCI images have no field for it): the chart's probes do the work."""
    checks = [i for i in INS if i.keyword == "HEALTHCHECK"]
    assert all(i.args.upper() == "NONE" for i in checks)
    deployment = DEPLOYMENT.read_text()
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert probe in deployment


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("FROM python:latest\nUSER 1:1\n", "latest"),
        ("FROM python\n", "neither a digest"),
        ("ARG BASE=python\nFROM ${BASE}\n", "neither a digest"),
    ],
)
def test_the_lint_catches_what_it_forbids(text: str, rule: str) -> None:
    ins = parse(text)
    problems = []
    for i in ins:
        if re.search(r"(^|[:\s])latest(\s|$)", i.args):
            problems.append("latest")
    for stage in stages(ins):
        ref = stage[0].args.split()[0]
        if ref.startswith("$"):
            ref = next(i.args.partition("=")[2] for i in ins if i.keyword == "ARG")
        if not _pinned(ref):
            problems.append("neither a digest nor a version tag")
    assert any(rule in p for p in problems)
