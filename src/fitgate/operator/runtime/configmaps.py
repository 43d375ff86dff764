"""The ConfigMaps a vLLM workload reads (its ``--config`` file, its env), read from the API server for one workload.

``fitgate check`` finds a ``--config`` file's ConfigMap in the same manifest set; the webhook and the
audit see one object, so they read the ConfigMap it mounts (:attr:`fitgate.workloads.Reading.config_map`)
from the API server: a ``get`` of that one ConfigMap (never a list), bounded in time (the caller's budget:
the admission resolve timeout for the webhook, which must never hold admission past it) and size
(:data:`MAX_BYTES`), cached :data:`TTL_S` seconds (a rollout reviews the same object many times; a
failure is not cached, so a ConfigMap applied after its Deployment counts at once) and
it runs only with ``FITGATE_WORKLOAD_CONFIGMAPS=1`` (off by default: RBAC can only grant it cluster-wide;
off, the verdict is Unknown). A ConfigMap that is
missing, forbidden, too big or too slow makes the verdict Unknown, naming the ConfigMap and the key.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from fitgate.operator.base import kubeconfig
from fitgate.operator.base.bounded import read_workload_bounded
from fitgate.sizing.memo import BoundedMemo, Miss
from fitgate.workloads import Reading

#: Seconds a ConfigMap (or the failure to read it) is remembered.
TTL_S = 30.0
#: The most bytes one ConfigMap's data may hold (the API server's own limit is 1 MiB).
MAX_BYTES = 1024 * 1024
#: ConfigMaps one workload may need read (a ``--config`` file, its env's ``configMapKeyRef`` / ``envFrom``).
MAX_PER_WORKLOAD = 4
#: ConfigMaps remembered at once. Bound 1024: one per ``--config`` file the cluster's vLLM workloads mount
#: (a few per model served); each holds at most MAX_BYTES, so 1 GiB at the very worst.
ENTRIES = 1024


class ConfigMapError(Exception):
    """A ConfigMap that cannot be read: missing, forbidden, too big, or not in time."""


class ConfigMaps:
    """ConfigMaps by (namespace, name), remembered :data:`TTL_S` seconds (failures are not).

    ``api_client``: a ``kubernetes.client.ApiClient`` (None: configured on first use).
    """

    def __init__(self, api_client: Any = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._api = api_client
        self._clock = clock
        self._entries: BoundedMemo[tuple[str, str], tuple[float, dict[str, str]]] = BoundedMemo(ENTRIES)
        self.reads = 0  # API server reads, for tests

    def _client(self) -> Any:
        if self._api is None:
            from kubernetes import client  # noqa: PLC0415 - only the operator needs the client

            kubeconfig.load()
            configuration = client.Configuration.get_default_copy()
            configuration.retries = False  # one try: urllib3's 3 retries would triple the time bound
            self._api = client.ApiClient(configuration)
        return self._api

    def _fetch(self, namespace: str, name: str, timeout_s: float) -> dict[str, str] | str:
        """The ConfigMap's data, or why it cannot be read (one line).

        A raw GET with the client's auth, as the audit's calls: the typed ``CoreV1Api`` loads every model
        class on first use (1.5 s here), more than the admission budget.
        """
        self.reads += 1
        api = self._client()
        try:
            verb, url, headers, data, post = api.param_serialize(
                method="GET",
                resource_path=f"/api/v1/namespaces/{namespace}/configmaps/{name}",
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            response = api.call_api(
                verb, url, header_params=headers, body=data, post_params=post, _request_timeout=timeout_s
            )
            body = response.read()
        except Exception as exc:  # a timeout, a refused connection: Unknown, never a crash
            return f"cannot be read ({type(exc).__name__})"
        if response.status != 200:
            known = {404: "not found", 403: "forbidden to fitgate (RBAC: get configmaps)"}
            return known.get(response.status, f"HTTP {response.status}")
        if len(body) > 2 * MAX_BYTES:  # binaryData, annotations: whatever the object holds besides data
            return f"is {len(body)} bytes, more than fitgate reads ({2 * MAX_BYTES})"
        try:
            cm = json.loads(body)
        except ValueError:
            return "is not JSON"
        data = {str(k): str(v) for k, v in ((cm.get("data") if isinstance(cm, dict) else None) or {}).items()}
        size = sum(len(k) + len(v.encode()) for k, v in data.items())
        if size > MAX_BYTES:
            return f"holds {size} bytes, more than fitgate reads ({MAX_BYTES})"
        return data

    async def get(self, namespace: str, name: str, timeout_s: float) -> dict[str, str]:
        """The data of ConfigMap ``namespace/name``.

        Raises:
            ConfigMapError: it cannot be read within ``timeout_s`` (the reason is the message).
        """
        key = (namespace, name)
        now = self._clock()
        hit = self._entries.get(key)
        if isinstance(hit, Miss) or hit[0] <= now:
            try:
                got = await asyncio.wait_for(asyncio.to_thread(self._fetch, namespace, name, timeout_s), timeout_s)
            except TimeoutError:
                raise ConfigMapError(f"not read within {timeout_s:g} s") from None  # not remembered: try again
            if isinstance(got, str):  # not remembered: a ConfigMap created after its Deployment is seen at once
                raise ConfigMapError(got)
            hit = (now + TTL_S, got)
            self._entries.put(key, hit)
        return hit[1]

    async def resolve(
        self,
        obj: Mapping[str, Any],
        reading: Reading | None,
        timeout_s: float,
        extra_paths: Mapping[str, str] | None = None,
    ) -> Reading | None:
        """``reading`` of ``obj`` with the ConfigMaps it needs read from the cluster.

        Its ``--config`` file's, its env's ``configMapKeyRef`` / ``envFrom``: one at a time, as each reading
        names the next, at most :data:`MAX_PER_WORKLOAD`, all within ``timeout_s``.
        """
        deadline = self._clock() + timeout_s
        read: dict[str, dict[str, str]] = {}
        for _ in range(MAX_PER_WORKLOAD):
            if reading is None or reading.config_map is None or reading.unknown is None:
                return reading
            name, key = reading.config_map
            if name in read:  # read, and the key is not there: the reading says so
                return reading
            try:
                left = timeout_s if not read else max(0.001, deadline - self._clock())
                read[name] = await self.get(reading.namespace, name, left)
            except ConfigMapError as exc:
                return replace(reading, unknown=f"ConfigMap {name} (key {key}) in {reading.namespace}: {exc}")
            resolved = await read_workload_bounded(dict(obj), read, extra_paths)
            if resolved is None:
                return reading
            reading = replace(resolved, namespace=reading.namespace, name=reading.name)
        return reading


def unread(reading: Reading) -> Reading:
    """``reading`` when ConfigMaps are not read (``FITGATE_WORKLOAD_CONFIGMAPS=0``): Unknown, saying so."""
    if reading.config_map is None or reading.unknown is None:
        return reading
    name, key = reading.config_map
    why = "fitgate does not read ConfigMaps (chart workloadWebhook.readConfigMaps: false)"
    return replace(reading, unknown=f"ConfigMap {name} (key {key}) in {reading.namespace}: {why}")
