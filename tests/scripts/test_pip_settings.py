"""scripts/pip_settings.py: which of this machine's pip settings a build or a container gets."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pip_settings.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pip_settings", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pip_settings = load()


@pytest.mark.parametrize(
    ("listed", "expected"),
    [
        ("", {}),
        # what pip needs to reach the index is kept; the rest (local wheel folders) is not
        (
            "global.cert='/etc/ssl/certs/ca-certificates.crt'\n"
            ":env:.default-timeout='180'\n"
            ":env:.find-links='/opt/wheels'\n"
            ":env:.disable-pip-version-check='1'\n",
            {"cert": "/etc/ssl/certs/ca-certificates.crt", "PIP_DEFAULT_TIMEOUT": "180"},
        ),
        # a variable beats [install], which beats [global], whatever the order listed
        (
            ":env:.index-url='https://env.example/simple'\n"
            "install.index-url='https://install.example/simple'\n"
            "global.index-url='https://global.example/simple'\n"
            "global.timeout='60'\n"
            "install.timeout='90'\n",
            {"PIP_INDEX_URL": "https://env.example/simple", "PIP_DEFAULT_TIMEOUT": "90"},
        ),
        # lists, one per line in a file, become the space-separated form pip's variables take
        (
            "global.trusted-host='a.example\\nb.example'\n"
            "global.extra-index-url='https://a.example/simple  https://b.example/simple'\n",
            {
                "PIP_TRUSTED_HOST": "a.example b.example",
                "PIP_EXTRA_INDEX_URL": "https://a.example/simple https://b.example/simple",
            },
        ),
    ],
)
def test_settings(listed: str, expected: dict[str, str]) -> None:
    assert pip_settings.settings(listed) == expected
