"""Build the krew archives of ``kubectl fitgate`` and render plugins/krew/fitgate.yaml for them.

krew installs a plugin from one archive per platform, checked against a sha256 (krew v0.4.3 pkg/index/types.go,
``Platform``). fitgate is a Python package with compiled dependencies (pydantic-core, aiohttp, yarl, ...), so an
archive holds, per CPython version, the wheels for its platform unpacked into ``lib/cp3XX`` (``pip install
--target --platform --python-version --only-binary=:all:``), and a ``kubectl-fitgate`` launcher that picks the
folder of the running ``python3`` (shiv-style, without the zip: compiled modules cannot be imported from a zip).

    python scripts/krew_plugin.py archive --platform linux/amd64 --python 3.11 --python 3.12 --out dist/krew
    python scripts/krew_plugin.py manifest --version 0.1.0 \
        --base-url https://github.com/fitgate/fitgate/releases/download/v0.1.0 dist/krew/*.tar.gz

``archive`` downloads wheels from PyPI (manual, as a release step; never part of ``make test``). ``manifest`` only
hashes files. docs/kubectl-plugin.md has the whole procedure.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "plugins" / "krew" / "fitgate.yaml"
#: krew platform -> pip platform tags whose wheels run there (PEP 600 manylinux; macOS 11 = the first arm64 one).
PIP_PLATFORMS = {
    "linux/amd64": ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"),
    "linux/arm64": ("manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_28_aarch64"),
    "darwin/amd64": ("macosx_10_12_x86_64", "macosx_10_15_x86_64", "macosx_11_0_x86_64"),
    "darwin/arm64": ("macosx_11_0_arm64",),
}
PYTHONS = ("3.11", "3.12", "3.13")

LAUNCHER = '''#!/usr/bin/env python3
"""kubectl-fitgate from a krew archive: fitgate and its dependencies for this CPython in lib/cp3XX."""
import os
import sys

here = os.path.dirname(os.path.realpath(__file__))  # krew links bin from its own bin folder
lib = os.path.join(here, "lib", "cp%d%d" % sys.version_info[:2])
if not os.path.isdir(lib):
    have = sorted(d for d in os.listdir(os.path.join(here, "lib")) if d.startswith("cp"))
    sys.stderr.write(
        "error: kubectl-fitgate: this archive has fitgate for %s, not for python3 %d.%d; "
        "install it with `pipx install fitgate` instead\\n" % (", ".join(have), *sys.version_info[:2])
    )
    sys.exit(1)
sys.path.insert(0, lib)
from fitgate.kubectl_plugin import main  # noqa: E402

sys.exit(main())
'''


def archive_name(platform: str, version: str) -> str:
    """``kubectl-fitgate-0.1.0-linux-amd64.tar.gz``."""
    return f"kubectl-fitgate-{version}-{platform.replace('/', '-')}.tar.gz"


def project_version() -> str:
    """The version in pyproject.toml."""
    match = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert match, "pyproject.toml has no version"
    return match.group(1)


def build_archive(platform: str, pythons: list[str], out: Path) -> Path:
    """Wheels for ``platform`` x ``pythons`` into a reproducible .tar.gz (sorted members, mtime 0, root-owned)."""
    version = project_version()
    with tempfile.TemporaryDirectory(prefix="krew-") as tmp:
        root = Path(tmp) / "root"
        wheels = Path(tmp) / "wheels"
        pip = [sys.executable, "-m", "pip"]
        subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(REPO)], check=True)
        wheel = next(wheels.glob("fitgate-*.whl"))
        for py in pythons:
            tags = [f"--platform={t}" for t in PIP_PLATFORMS[platform]]
            target = root / "lib" / f"cp{py.replace('.', '')}"
            subprocess.run(
                [*pip, "install", "--no-cache-dir", "--no-compile", "--only-binary=:all:", "--implementation=cp",
                 f"--python-version={py}", *tags, "--target", str(target), "-c", str(REPO / "constraints.txt"),
                 str(wheel)],
                check=True,
            )  # fmt: skip
            shutil.rmtree(target / "bin", ignore_errors=True)  # console scripts with this host's shebang
        launcher = root / "kubectl-fitgate"
        launcher.write_text(LAUNCHER)
        launcher.chmod(0o755)
        out.mkdir(parents=True, exist_ok=True)
        path = out / archive_name(platform, version)
        write_tar(root, path)
    return path


def write_tar(root: Path, path: Path) -> None:
    """A deterministic .tar.gz of ``root``'s contents: the same inputs give the same sha256."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for item in sorted(root.rglob("*")):
            info = tar.gettarinfo(str(item), arcname=str(item.relative_to(root)))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o755 if item.is_dir() or item.stat().st_mode & 0o111 else 0o644
            if item.is_file():
                with item.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(buf.getvalue())


def sha256(path: Path) -> str:
    """The SHA-256 of a file, as krew's manifest writes it."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def render(version: str, base_url: str, archives: list[Path], template: str | None = None) -> str:
    """The template with ``${VERSION}``, ``${URI_OS_ARCH}`` and ``${SHA256_OS_ARCH}`` filled from ``archives``.

    Raises:
        SystemExit: a platform of the template has no archive, or an archive is for no platform of it.
    """
    text = TEMPLATE.read_text() if template is None else template
    lines = text.splitlines(keepends=True)
    body = "".join(lines[next(i for i, line in enumerate(lines) if not line.startswith("#")) :])
    text = f"# Generated by scripts/krew_plugin.py from plugins/krew/fitgate.yaml (fitgate {version}).\n{body}"
    values = {"VERSION": version}
    for path in archives:
        match = re.fullmatch(rf"kubectl-fitgate-{re.escape(version)}-(\w+)-(\w+)\.tar\.gz", path.name)
        if match is None:
            raise SystemExit(f"krew_plugin: {path.name}: not an archive of version {version}")
        key = f"{match.group(1)}_{match.group(2)}".upper()
        values[f"URI_{key}"] = f"{base_url.rstrip('/')}/{path.name}"
        values[f"SHA256_{key}"] = sha256(path)
    wanted = set(re.findall(r"\$\{(\w+)\}", text))
    if missing := sorted(wanted - set(values)):
        raise SystemExit(f"krew_plugin: no archive for {', '.join(missing)}")
    if extra := sorted(set(values) - wanted):
        raise SystemExit(f"krew_plugin: the template has no platform for {', '.join(extra)}")
    return re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], text)


def main(argv: list[str] | None = None) -> int:
    """``archive`` or ``manifest`` (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("archive", help="build the archive of one platform (downloads wheels)")
    a.add_argument("--platform", choices=sorted(PIP_PLATFORMS), required=True)
    a.add_argument("--python", action="append", choices=PYTHONS, help="CPython versions (default: all)")
    a.add_argument("--out", type=Path, default=REPO / "dist" / "krew")
    m = sub.add_parser("manifest", help="render plugins/krew/fitgate.yaml for built archives")
    m.add_argument("--version", default=project_version())
    m.add_argument("--base-url", required=True, help="where the archives are published (a release's download URL)")
    m.add_argument("archives", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "archive":
        path = build_archive(args.platform, args.python or list(PYTHONS), args.out)
        print(f"{path} sha256 {sha256(path)}")
    else:
        sys.stdout.write(render(args.version, args.base_url, args.archives))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
