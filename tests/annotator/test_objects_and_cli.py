from datetime import timedelta
from pathlib import Path

import pytest

from annotator.cli import main, parse_args
from annotator.settings import load_settings
from annotator.sync.bindings import POD_DECODER, BindingStore
from annotator.sync.hot_value import BindingWindows
from shared.errors import ConfigError
from shared.policy import default_policy
from tests.fakes.clock import NOW


def pod(uid: str, node: str = "", scheduled: str | None = None) -> bytes:
    conditions = (
        f'[{{"type":"PodScheduled","status":"True","lastTransitionTime":"{scheduled}"}}]'
        if scheduled
        else "[]"
    )
    return (
        f'{{"metadata":{{"name":"p-{uid}","namespace":"d","uid":"{uid}"}},"spec":{{"nodeName":"{node}"}},'
        f'"status":{{"phase":"Pending","conditions":{conditions}}}}}'
    ).encode()


def test_bindings_come_from_bound_pods_at_their_scheduling_time() -> None:
    changed: list[set[str]] = []
    windows = BindingWindows(default_policy().spec.hot_value)
    bindings = BindingStore(windows, clock=lambda: NOW, on_change=changed.append)
    # after a restart: rebuilt from PodScheduled times; old and unbound pods do not count
    bindings.replace(
        [
            POD_DECODER.decode(pod("a", "n1", "2026-11-22T11:59:30Z")),
            POD_DECODER.decode(pod("b", "n1", "2026-11-22T11:50:00Z")),
            POD_DECODER.decode(pod("c")),
        ]
    )
    assert changed == [{"n1"}] and len(windows) == 1
    # a pod that becomes bound; MODIFIED events of the same pod do not count again
    bindings.apply("ADDED", POD_DECODER.decode(pod("d", "n2")))
    bindings.apply("MODIFIED", POD_DECODER.decode(pod("d", "n2", "2026-11-22T12:00:00Z")))
    bindings.apply("DELETED", POD_DECODER.decode(pod("a", "n1")))
    assert changed == [{"n1"}, {"n2"}]
    assert windows.hot_value("n2", NOW + timedelta(seconds=1)) == 0 and len(windows) == 2


def test_settings_need_a_prometheus_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOADSCHED_PROMETHEUS_URL", raising=False)
    with pytest.raises(ConfigError, match="--prometheus-url / LOADSCHED_PROMETHEUS_URL: required"):
        load_settings()
    with pytest.raises(ConfigError, match="--prometheus-url"):
        load_settings(prometheus_url="prometheus:9090")
    with pytest.raises(ConfigError, match="needs --prometheus-username"):
        load_settings(prometheus_url="http://p:9090", prometheus_password_file="/x")
    monkeypatch.setenv("LOADSCHED_PROMETHEUS_URL", "http://p:9090")
    settings = load_settings(**vars(parse_args(["--once", "--dry-run", "--lease-name", "x"])))
    assert (
        settings.once and settings.dry_run and settings.lease_name == "x" and settings.leader_elect
    )


def test_cli_reports_bad_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("spec:\n  hotValue:\n  - {timeRange: 5m, count: 0}\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    code = main(
        [
            "--prometheus-url",
            "http://127.0.0.1:1",
            "--policy",
            str(policy),
            "--kubeconfig",
            str(kubeconfig),
            "--once",
        ]
    )
    assert code == 2
    assert f"{policy}: spec.hotValue[0].count: must be > 0" in capsys.readouterr().err
