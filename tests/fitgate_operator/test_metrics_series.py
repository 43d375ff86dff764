"""A deployment's verdict and memory series, looked up once and kept (issue 23), say what the last reconcile found."""

from __future__ import annotations

from fitgate.operator.base.metrics import Metrics


def sample(m: Metrics, metric: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(metric, {"namespace": "ml", "name": "a", **labels})


def test_series_follow_the_latest_evaluation_removed_and_added_again() -> None:
    m = Metrics()
    m.observe("ml", "a", "Fits", 10, 5, 1000)
    assert sample(m, "fitgate_deployment_verdict", verdict="Fits") == 1
    assert sample(m, "fitgate_deployment_verdict", verdict="DoesNotFit") == 0
    assert sample(m, "fitgate_deployment_headroom_bytes") == 5
    # no headroom now: its series is gone from the exposition, not left at the old value
    m.observe("ml", "a", "DoesNotFit", 10, None, None)
    assert sample(m, "fitgate_deployment_verdict", verdict="DoesNotFit") == 1
    assert sample(m, "fitgate_deployment_verdict", verdict="Fits") == 0
    assert sample(m, "fitgate_deployment_headroom_bytes") is None
    # and back: a kept series that was removed would be set but never exposed again
    m.observe("ml", "a", "Fits", 10, 7, 900)
    assert sample(m, "fitgate_deployment_headroom_bytes") == 7
    m.forget("ml", "a")
    assert sample(m, "fitgate_deployment_verdict", verdict="Fits") is None
    assert sample(m, "fitgate_deployment_headroom_bytes") is None
    # a deployment created again under the same name gets its series again
    m.observe("ml", "a", "Tight", 1, 2, 3)
    assert (
        sample(m, "fitgate_deployment_verdict", verdict="Tight") == 1
        and sample(m, "fitgate_deployment_headroom_bytes") == 2
    )
