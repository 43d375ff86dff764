# The fitgate operator image: non-root, read-only-root friendly, the package installed from this repo.
#   docker build -t ghcr.io/fitgate/fitgate:0.1.0 .
#   scripts/build_image.sh            (no Docker: buildah on a Debian-made base; docs/image.md)
# BASE is any image with python3 >= 3.11 and its venv module at the same path in both stages: the official
# python:3.11-slim by default; a release passes it pinned by digest (--build-arg BASE=python:3.11-slim@sha256:...),
# and scripts/build_image.sh passes a Debian bookworm rootfs made with mmdebstrap. tests/test_dockerfile.py
# checks these rules against the chart's securityContext.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY src ./src
# A virtual environment at one path (/opt/fitgate) instead of pip --prefix into /usr/local: the same layout works
# whether the base's python3 is /usr/local/bin (python:3.11-slim) or /usr/bin with Debian's dist-packages.
RUN python3 -m venv /opt/fitgate \
 && /opt/fitgate/bin/pip install --no-cache-dir --disable-pip-version-check -c constraints.txt . \
 && /opt/fitgate/bin/pip uninstall --yes pip \
 && /opt/fitgate/bin/fitgate --help > /dev/null

FROM ${BASE}
RUN useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin fitgate
# Owned by root, read-only to the runtime user: the operator cannot rewrite its own code.
COPY --from=build --chown=0:0 /opt/fitgate /opt/fitgate
ENV PATH=/opt/fitgate/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 HOME=/tmp FITGATE_CACHE_DIR=/cache
USER 10001:10001
EXPOSE 9443 8080
# No HEALTHCHECK: the kubelet ignores it (and the OCI image format has no field for it); the chart's liveness,
# readiness and startup probes call /healthz and /readyz.
ENTRYPOINT ["fitgate"]
CMD ["operator"]
