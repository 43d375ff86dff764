"""The RBAC the operator needs, derived from the handlers registered with kopf.

The Helm chart's ClusterRole must grant exactly these rules (a test renders the chart and compares),
so adding a handler on a new resource without granting it, or granting more than is used, fails CI.

Mapping from handler kinds to verbs:

* indexers (``@kopf.index``): list, watch; the node watch (:mod:`fitgate.operator.watches.nodewatch`): list, watch
  nodes;
  the DRA and pod watches (:mod:`fitgate.operator.watches.resourcewatch`): list, watch resourceslices, deviceclasses,
  resourceclaimtemplates, resourceclaims (resource.k8s.io) and pods;
* resource handlers and timers (``@kopf.on.create/update/resume/delete``, ``@kopf.timer``): get, list,
  watch and patch on the resource (annotations, kopf's progress annotations) and patch on its
  ``/status`` subresource;
* the observer (``spec.observe``, and the audit's workload observation): list pods, get pods/log;
* kopf itself: create Events (``kopf.event``), list/watch CRDs (resource discovery), and with peering
  get/list/watch/patch ``clusterkopfpeerings`` (``kopfpeerings`` when it watches given namespaces: kopf
  then peers per namespace); watching given namespaces, kopf also lists and watches ``namespaces`` (to
  follow them appearing and going; without it, it logs nine failed attempts, then assumes they exist).
"""

from __future__ import annotations

from dataclasses import dataclass

import kopf

from fitgate.operator.watches.resourcewatch import DRA_GROUP, DRA_KINDS, TEMPLATE_KINDS


@dataclass(frozen=True, order=True)
class Rule:
    """One (group, resource) with its verbs."""

    group: str
    resource: str
    verbs: tuple[str, ...]


def _selectors(registry: object, name: str) -> set[tuple[str, str]]:
    sub = getattr(registry, name)
    out = set()
    for selector in sub.get_all_selectors():
        out.add((selector.group or "", selector.plural or selector.any_name or ""))
    return out


def required_rules(*, peering: bool, namespaced: bool = False, pod_logs: bool = True) -> list[Rule]:
    """The rules the registered handlers need; ``namespaced``: the operator watches given namespaces.

    ``pod_logs`` (chart ``operator.podLogs``): the observer reads a failed pod's log (issue 22: cluster-wide
    only without watched namespaces; with them, :func:`pod_log_rules` in a Role per namespace).
    """
    from fitgate.operator.runtime import handlers  # noqa: F401, PLC0415 - registers the handlers

    # kopf keeps the registries per handler kind in private attributes; they are stable across 1.3x-1.4x.
    registry = kopf.get_default_registry()
    verbs: dict[tuple[str, str], set[str]] = {}
    for key in _selectors(registry, "_indexing") | _selectors(registry, "_watching"):
        verbs.setdefault(key, set()).update({"list", "watch"})
    for key in _selectors(registry, "_changing") | _selectors(registry, "_spawning"):
        verbs.setdefault(key, set()).update({"get", "list", "watch", "patch"})
        verbs.setdefault((key[0], f"{key[1]}/status"), set()).add("patch")
    verbs.setdefault(("", "nodes"), set()).update({"list", "watch"})  # the node watch (the GPU inventory)
    verbs.setdefault(("", "events"), set()).add("create")
    # The observer (operator/observation/observe.py, spec.observe; operator/observation/workload_observe.py for
    # audited workloads): it lists the serving pods and reads the log of one that failed to start; it never gets a
    # single pod.
    verbs.setdefault(("", "pods"), set()).add("list")
    # The DRA and pod watches (operator/watches/resourcewatch.py): list and watch, nothing else.
    verbs.setdefault(("", "pods"), set()).add("watch")
    for plural, _namespaced in DRA_KINDS:
        verbs.setdefault((DRA_GROUP, plural), set()).update({"list", "watch"})
    # The autoscaler templates (operator/gpus/prospects.py): Karpenter NodePools, Cluster API MachineDeployments.
    for group, _version, plural in TEMPLATE_KINDS:
        verbs.setdefault((group, plural), set()).update({"list", "watch"})
    if pod_logs and not namespaced:  # with watched namespaces: a Role in each (pod_log_rules), never cluster-wide
        verbs.setdefault(("", "pods/log"), set()).add("get")
    verbs.setdefault(("apiextensions.k8s.io", "customresourcedefinitions"), set()).update({"list", "watch"})
    if namespaced:
        verbs.setdefault(("", "namespaces"), set()).update({"list", "watch"})
    if peering:
        peerings = "kopfpeerings" if namespaced else "clusterkopfpeerings"
        verbs.setdefault(("kopf.dev", peerings), set()).update({"get", "list", "watch", "patch"})
    return sorted(Rule(group, resource, tuple(sorted(v))) for (group, resource), v in verbs.items())


def pod_log_rules() -> list[Rule]:
    """The Role of each watched namespace (chart ``operator.podLogs`` with ``operator.watchNamespaces``)."""
    return [Rule("", "pods/log", ("get",))]


def workload_audit_rules(*, patch: bool = False, policy_reports: bool = True) -> list[Rule]:
    """What the workload audit (:mod:`fitgate.operator.observation.audit`) calls, on top of :func:`required_rules`.

    It lists the opted-in namespaces and, in them, the kinds of :data:`fitgate.operator.observation.audit.AUDITED`,
    and merge-patches their annotations only with ``patch`` (chart ``workloadWebhook.annotate`` or ``.observe``);
    its PolicyReports need ``policy_reports``; Events are already granted. The ConfigMaps of ``--config`` files
    are :func:`workload_configmap_rules`.
    """
    from fitgate.operator.observation.audit import AUDITED  # noqa: PLC0415

    verbs = ("list", "patch") if patch else ("list",)  # patch: chart workloadWebhook.annotate / .observe
    rules = [Rule("", "namespaces", ("list",))]
    rules += [Rule(group, plural, verbs) for group, _version, plural, _kind in AUDITED]
    if policy_reports:  # fitgate.operator.observation.policyreport: list (by name), create, update
        rules.append(Rule("wgpolicyk8s.io", "policyreports", ("create", "list", "update")))
    return sorted(rules)


def workload_configmap_rules() -> list[Rule]:
    """What reading a workload's ``--config`` ConfigMap (:mod:`~fitgate.operator.runtime.configmaps`) calls: get."""
    return [Rule("", "configmaps", ("get",))]
