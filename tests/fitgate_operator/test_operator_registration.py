"""Which handlers ``fitgate operator`` registers is decided from its settings, flags applied, at start-up.

The workload webhook's paths were registered when ``workload_handlers`` was imported, from the environment
alone: ``fitgate operator --webhook-managed X`` with ``FITGATE_WORKLOAD_WEBHOOK=1`` served them in a
configuration without namespace selectors, although flags win over the environment (``fitgate.settings``).
Each case runs in its own process, because the defect lived at import time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import kopf

from fitgate.operator.runtime import handlers
from fitgate.settings import OperatorConfig, Settings

WORKLOAD_PATHS = {"workloads-enforce", "workloads-warn", "workloads-object"}

#: ``kopf.run`` replaced by a recorder: the webhook ids (= paths) of the registry kopf would have run with.
#: kopf keeps webhook handlers in ``OperatorRegistry._webhooks`` (kopf 1.45 ``_core/intents/registries.py``);
#: its managed configuration and its admission engine both read them from there (``_core/engines/admission.py``).
RECORD = textwrap.dedent(
    """
    import json, sys
    import kopf
    seen = {}
    kopf.run = lambda **kw: seen.update(kw)
    CALL
    registry = seen.get("registry") or kopf.get_default_registry()
    print(json.dumps(sorted({str(h.id) for h in registry._webhooks.get_all_handlers()})))
    """
)


def served(call: str, env: dict[str, str]) -> set[str]:
    """The webhook paths ``fitgate operator`` would serve after ``call``, in a fresh process with ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FITGATE_")}
    code = RECORD.replace("CALL", call)
    done = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_managed_flag_wins_over_the_workload_webhook_variable() -> None:
    # before: registered at import from FITGATE_WORKLOAD_WEBHOOK=1, the flag unseen -> the three paths served
    paths = served(
        "from fitgate.cli import main; main(['operator', '--webhook-managed', 'x.fitgate.io'])",
        {"FITGATE_WORKLOAD_WEBHOOK": "1"},
    )
    assert "fit" in paths and not paths & WORKLOAD_PATHS


def test_the_variable_alone_registers_the_workload_paths() -> None:
    paths = served("from fitgate.cli import main; main(['operator'])", {"FITGATE_WORKLOAD_WEBHOOK": "1"})
    assert paths >= WORKLOAD_PATHS and "fit" in paths


def test_settings_given_to_run_operator_register_them_whatever_the_environment() -> None:
    # vice versa: the settings (not the environment, which leaves it off) ask for the workload webhook;
    # before: decided at import from the environment -> not served
    call = (
        "from fitgate.operator.runtime.run import run_operator; from fitgate.settings import Settings, OperatorConfig; "
        "run_operator(Settings(operator=OperatorConfig(workload_webhook=True)))"
    )
    assert served(call, {}) >= WORKLOAD_PATHS


def test_register_follows_the_settings_it_is_given() -> None:
    def ids(config: OperatorConfig) -> tuple[set[str], set[str]]:
        registry = kopf.OperatorRegistry()
        handlers.register(registry, Settings(operator=config))
        webhooks = {str(h.id) for h in registry._webhooks.get_all_handlers()}
        return webhooks, {str(h.id) for h in registry._activities.get_all_handlers()}

    webhooks, activities = ids(OperatorConfig(workload_webhook=True))
    assert webhooks == WORKLOAD_PATHS and activities == {"operator_startup"}
    assert ids(OperatorConfig(workload_webhook=True, webhook_managed="x.fitgate.io"))[0] == set()
    assert ids(OperatorConfig())[0] == set()
