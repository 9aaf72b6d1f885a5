"""The retry settings both services share: flags, environment, validation naming the field."""

from typing import Any

import pytest

from annotator.cli import parse_args as annotator_args
from annotator.settings import load_settings as annotator_settings
from extender.cli import parse_args as extender_args
from extender.settings import load_settings as extender_settings
from shared.errors import ConfigError
from shared.kube.retrying import RetryPolicy

PROMETHEUS = {"prometheus_url": "http://prometheus:9090"}


def test_flags_become_the_retry_policy_of_both_services() -> None:
    argv = ["--kube-retry-attempts", "3", "--kube-retry-backoff", "0.5"]
    argv += ["--kube-retry-backoff-max", "4", "--kube-timeout", "2.5"]
    expected = RetryPolicy(attempts=3, backoff=0.5, backoff_max=4.0, timeout=2.5)
    annotator = annotator_settings(**vars(annotator_args([*argv, "--prometheus-url", "http://p"])))
    extender = extender_settings(**vars(extender_args(argv)))
    assert annotator.kube_retry() == expected
    assert extender.kube_retry() == expected


def test_environment_sets_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOADSCHED_KUBE_RETRY_ATTEMPTS", "1")
    monkeypatch.setenv("LOADSCHED_KUBE_TIMEOUT", "30")
    policy = extender_settings().kube_retry()
    assert (policy.attempts, policy.timeout) == (1, 30.0)


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"kube_retry_attempts": 0}, "--kube-retry-attempts / LOADSCHED_KUBE_RETRY_ATTEMPTS"),
        ({"kube_retry_backoff": -1}, "--kube-retry-backoff / LOADSCHED_KUBE_RETRY_BACKOFF"),
        (
            {"kube_retry_backoff": 2, "kube_retry_backoff_max": 1},
            "--kube-retry-backoff-max / LOADSCHED_KUBE_RETRY_BACKOFF_MAX",
        ),
        ({"kube_timeout": 0}, "--kube-timeout / LOADSCHED_KUBE_TIMEOUT"),
        ({"kube_timeout": "soon"}, "--kube-timeout / LOADSCHED_KUBE_TIMEOUT"),
    ],
)
def test_bad_values_are_refused_naming_the_setting(given: dict[str, Any], named: str) -> None:
    for load in (extender_settings, lambda **kw: annotator_settings(**PROMETHEUS, **kw)):
        with pytest.raises(ConfigError) as raised:
            load(**given)
        assert str(raised.value).startswith(named)
