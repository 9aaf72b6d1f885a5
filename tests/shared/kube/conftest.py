import pytest


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client tests talk to servers on 127.0.0.1: a proxy named in the environment of
    whoever runs them must not come between."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
