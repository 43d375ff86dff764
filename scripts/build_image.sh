#!/usr/bin/env bash
# Build the operator image without Docker or a registry: buildah (vfs storage, chroot isolation) on a base image
# made here from Debian bookworm's packages (mmdebstrap), from the same Dockerfile `docker build` uses.
#
#   scripts/build_image.sh                 # -> .cache/image/fitgate-<version>.oci.tar (an OCI archive)
#   IMAGE=ghcr.io/fitgate/fitgate:0.1.0 scripts/build_image.sh
#
# Needs root (or a user namespace) and: apt-get install -y buildah mmdebstrap (Debian 12). Manual/optional: it
# downloads ~60 MB of .debs and the Python dependencies, so `make test` never runs it; tests/test_dockerfile.py
# lints the Dockerfile instead. Steps and figures: docs/image.md.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
IMAGE=${IMAGE:-localhost/fitgate:${VERSION}}
BASE_IMAGE=${BASE_IMAGE:-localhost/fitgate-base:bookworm}
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${SECURITY:-http://deb.debian.org/debian-security}
WORK=${WORK:-$PWD/.cache/image}
UID_EXPECTED=10001

mkdir -p "$WORK"
for tool in buildah mmdebstrap; do
  command -v "$tool" > /dev/null || { echo "build_image: $tool missing (apt-get install -y buildah mmdebstrap)" >&2; exit 2; }
done
CHROOT=$(command -v chroot)
bh() { buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs "$@"; }
step() { printf '[build_image %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# 1. The base: a minimal bookworm with python3 (3.11, as python:3.11-slim) and its venv module, cached by suite.
rootfs="$WORK/base-$SUITE.tar"
if [ ! -f "$rootfs" ] || [ ! -s "$rootfs" ]; then
  step "mmdebstrap $SUITE from $MIRROR"
  # dpkg's path-exclude takes fnmatch globs (no braces): one option per folder; copyright files are kept
  mmdebstrap --variant=minbase --format=tar --include=python3,python3-venv,ca-certificates \
    --aptopt='Acquire::Retries "3"' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "$SUITE" "$rootfs.part" \
    "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" "deb $SECURITY $SUITE-security main"
  mv "$rootfs.part" "$rootfs"
fi
if ! bh inspect --type image "$BASE_IMAGE" > /dev/null 2>&1; then
  step "import $rootfs as $BASE_IMAGE"
  ctr=$(bh from scratch)
  bh add "$ctr" "$rootfs" /
  bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --cmd python3 "$ctr"
  bh commit --rm "$ctr" "$BASE_IMAGE" > /dev/null
fi

# 2. The image, from the repository's Dockerfile; the base is the local one, never pulled.
# Behind a TLS-inspecting proxy pip needs its CA: BUILD_CA_BUNDLE (default: the host's PIP_CERT) is bind-mounted
# over the base's /etc/ssl/certs/ca-certificates.crt for the RUN steps only (Debian's pip reads that bundle, not
# certifi's); a bind mount on a file that exists leaves nothing in a layer (checked in step 3).
volumes=()
ca=${BUILD_CA_BUNDLE:-${PIP_CERT:-}}
if [ -n "$ca" ]; then
  volumes=(-v "$ca:/etc/ssl/certs/ca-certificates.crt:ro")
fi
step "buildah bud $IMAGE (BASE=$BASE_IMAGE${ca:+, pip CA $ca})"
bh bud --isolation chroot --pull=never --layers=false "${volumes[@]}" --build-arg "BASE=$BASE_IMAGE" \
  -f Dockerfile -t "$IMAGE" .

# 3. Checks: the configured user, and `fitgate --help` run as that user in the image's rootfs.
user=$(bh inspect --type image --format '{{.OCIv1.Config.User}}' "$IMAGE")
[ "$user" = "$UID_EXPECTED:$UID_EXPECTED" ] || { echo "build_image: image user is '$user'" >&2; exit 1; }
ctr=$(bh from --pull=never "$IMAGE")
trap 'bh umount "$ctr" > /dev/null 2>&1 || true; bh rm "$ctr" > /dev/null 2>&1 || true' EXIT
mnt=$(bh mount "$ctr")
step "run fitgate --help as $user (chroot --userspec)"
help=$(env -i PATH=/opt/fitgate/bin:/usr/bin:/bin HOME=/tmp "$CHROOT" --userspec="$user" "$mnt" fitgate --help)
printf '%s\n' "$help" | head -2
help=$(env -i PATH=/opt/fitgate/bin:/usr/bin:/bin HOME=/tmp "$CHROOT" --userspec="$user" "$mnt" kubectl-fitgate --help)
printf '%s\n' "$help" | head -1
whoami_in=$(env -i PATH=/usr/bin:/bin "$CHROOT" --userspec="$user" "$mnt" /usr/bin/id -u)
[ "$whoami_in" = "$UID_EXPECTED" ] || { echo "build_image: ran as uid $whoami_in" >&2; exit 1; }
if [ -e "$mnt/etc/pip.conf" ] || { [ -n "$ca" ] && cmp -s "$ca" "$mnt/etc/ssl/certs/ca-certificates.crt"; }; then
  echo "build_image: the build's CA bundle or pip.conf was left in the image" >&2; exit 1
fi
# the code is root's, not writable by the runtime user (readOnlyRootFilesystem or not)
if env -i PATH=/usr/bin:/bin "$CHROOT" --userspec="$user" "$mnt" /usr/bin/touch /opt/fitgate/bin/x 2> /dev/null; then
  echo "build_image: /opt/fitgate is writable by $user" >&2; exit 1
fi

# The chart's conditions: a read-only root (readOnlyRootFilesystem), tmpfs on /tmp and /cache (its emptyDirs),
# uid 10001, no network (HF_HUB_OFFLINE: the built-in catalog). A private mount namespace keeps the mounts here.
mkdir -p "$mnt/cache"
step "fitgate plan as $user on a read-only root with tmpfs /tmp and /cache (unshare --mount)"
plan=$(unshare --mount --propagation private sh -ec '
  mount --bind "$1" "$1"; mount -o remount,bind,ro "$1"
  mount -t tmpfs -o size=64m tmpfs "$1/tmp"; mount -t tmpfs -o size=64m tmpfs "$1/cache"
  exec env -i PATH=/opt/fitgate/bin:/usr/bin:/bin HOME=/tmp FITGATE_CACHE_DIR=/cache PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 "$2" --userspec="$3" "$1" fitgate plan --model meta-llama/Llama-3.1-8B-Instruct --gpu H100 -o json
' sh "$mnt" "$CHROOT" "$user")
verdict=$(printf '%s' "$plan" | python3 -c 'import json, sys; print(json.load(sys.stdin)["verdict"])')
[ "$verdict" = Fits ] || { echo "build_image: plan on a read-only root gave '$verdict'" >&2; exit 1; }
echo "Llama-3.1-8B-Instruct on H100: $verdict"

# 4. Export an OCI archive (load it with `skopeo copy`, `podman load` or `docker load` after conversion).
out="$WORK/fitgate-$VERSION.oci.tar"
rm -f "$out"
bh push "$IMAGE" "oci-archive:$out:$IMAGE" > /dev/null
step "sizes: rootfs $(du -sm "$mnt" | cut -f1) MiB unpacked; $(du -m "$out" | cut -f1) MiB OCI archive ($out)"
bh images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep -F "${IMAGE%:*}" || true
