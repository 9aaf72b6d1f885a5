"""SQLAlchemy is the poller's optional extra: the services never import it, and the poller
without it says which extra to install."""

import subprocess
import sys

import pytest

from poller.cli import MISSING_SQLALCHEMY
from poller.cli import main as poll_main


def test_the_services_start_without_sqlalchemy() -> None:
    """Import every module the extender's and annotator's entry points load, with SQLAlchemy
    made unimportable: nothing reaches for it."""
    code = (
        "import sys; sys.modules['sqlalchemy'] = None\n"
        "import extender.cli, extender.app, annotator.cli, annotator.main\n"
        "assert not any(m.startswith('sqlalchemy.') for m in sys.modules), 'sqlalchemy imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_poller_names_its_extra_when_sqlalchemy_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    assert poll_main(["--once"]) == 2
    err = capsys.readouterr().err
    assert MISSING_SQLALCHEMY in err and "loadsched[poller]" in err
