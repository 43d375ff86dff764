# The fitgate operator image: non-root, read-only-root friendly, the package installed from this repo.
#   docker build -t ghcr.io/fitgate/fitgate:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY src ./src
RUN pip install --no-cache-dir --prefix=/install -c constraints.txt .

FROM python:3.11-slim
COPY --from=build /install /usr/local
RUN useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin fitgate
USER 10001:10001
ENV PYTHONUNBUFFERED=1 HOME=/tmp FITGATE_CACHE_DIR=/cache
EXPOSE 9443 8080
ENTRYPOINT ["fitgate"]
CMD ["operator"]
