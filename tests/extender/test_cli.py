from pathlib import Path

import pytest

from extender.cli import main, parse_args
from extender.settings import load_settings
from shared.errors import ConfigError


def test_flags_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOADSCHED_PORT", "9000")
    monkeypatch.setenv("LOADSCHED_HOST", "0.0.0.0")
    settings = load_settings(**vars(parse_args(["--port", "9100"])))
    assert settings.port == 9100
    assert settings.host == "0.0.0.0"


@pytest.mark.parametrize(
    ("env", "value", "mentions"),
    [
        ("LOADSCHED_PORT", "http", "--port / LOADSCHED_PORT"),
        ("LOADSCHED_PORT", "70000", "--port / LOADSCHED_PORT"),
        ("LOADSCHED_MAX_BODY_BYTES", "0", "--max-body-bytes / LOADSCHED_MAX_BODY_BYTES"),
        ("LOADSCHED_LOG_FORMAT", "xml", "--log-format / LOADSCHED_LOG_FORMAT"),
        ("LOADSCHED_LOG_LEVEL", "loud", "--log-level / LOADSCHED_LOG_LEVEL"),
        ("LOADSCHED_FILTER_MESSAGES", "short", "--filter-messages / LOADSCHED_FILTER_MESSAGES"),
        (
            "LOADSCHED_FILTER_REJECTIONS",
            "some",
            "--filter-rejections / LOADSCHED_FILTER_REJECTIONS",
        ),
    ],
)
def test_bad_settings_name_the_flag_and_variable(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, mentions: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=mentions):
        load_settings()


def test_bad_policy_exits_2_with_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("spec:\n  syncPolicy:\n  - name: cpu\n    period: 0s\n")
    assert main(["--policy", str(policy)]) == 2
    assert f"{policy}: spec.syncPolicy[0].period: must be > 0" in capsys.readouterr().err


def test_bad_kubeconfig_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    assert main(["--kubeconfig", str(kubeconfig)]) == 2
    assert "cannot load Kubernetes client configuration" in capsys.readouterr().err
