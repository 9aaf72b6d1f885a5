"""Choosing the Kubernetes release the sandbox builds and runs, and the Go module generated
for a release other than the default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sandbox import build

UPSTREAM = """module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
)
"""


def test_a_generated_module_pins_every_staging_module_to_the_release() -> None:
    text = build.module_text("v1.36.3", UPSTREAM)
    assert re.search(r"^go 1\.26\.0$", text, re.M)
    assert re.search(r"^require k8s\.io/kubernetes v1\.36\.3$", text, re.M)
    assert re.findall(r"^\t(\S+) => (\S+) (\S+)$", text, re.M) == [
        ("k8s.io/api", "k8s.io/api", "v0.36.3"),
        ("k8s.io/client-go", "k8s.io/client-go", "v0.36.3"),
        ("k8s.io/kube-scheduler", "k8s.io/kube-scheduler", "v0.36.3"),
    ]


@pytest.mark.parametrize(
    ("upstream", "error"),
    [(UPSTREAM.replace("go 1.26.0", ""), "no go directive"), ("go 1.26.0\n", "no staging")],
)
def test_an_upstream_module_it_cannot_read_is_a_clear_error(upstream: str, error: str) -> None:
    with pytest.raises(RuntimeError, match=error):
        build.module_text("v1.36.3", upstream)


def test_each_kept_module_builds_the_release_its_folder_names() -> None:
    folders = sorted(p for p in build.VERSIONS.iterdir() if p.is_dir())
    assert folders, build.VERSIONS
    for folder in folders:
        minor, patch = folder.name.removeprefix("v1.").split(".")
        text = (folder / "go.mod").read_text()
        assert re.search(rf"^require k8s\.io/kubernetes {folder.name}$", text, re.M), folder
        pins = re.findall(r"^\t(k8s\.io/\S+) => \1 (\S+)$", text, re.M)
        assert pins and {pin for _, pin in pins} == {f"v0.{minor}.{patch}"}, folder
        assert (folder / "go.sum").read_text().count("k8s.io/kubernetes " + folder.name) >= 1


def test_the_default_release_is_hack_kube_go_mod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(build.VERSION_ENV, raising=False)
    pinned = re.search(
        r"^require k8s\.io/kubernetes (\S+)$", (build.MODULE / "go.mod").read_text(), re.M
    )
    assert pinned is not None
    assert build.selected_version() == pinned.group(1)
    assert build.module_dir(pinned.group(1)) == build.MODULE


def test_a_release_is_chosen_by_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(build.VERSION_ENV, "v1.36.3")
    monkeypatch.setenv("LOADSCHED_CACHE", str(tmp_path))
    assert build.selected_version() == "v1.36.3"
    assert build.bin_dir() == tmp_path / "loadsched" / "kube" / "v1.36.3" / "bin"
    assert build.module_dir("v1.36.3") == build.VERSIONS / "v1.36.3"


@pytest.mark.parametrize("value", ["1.36.3", "v1.36", "v2.0.0", "latest", "v1.36.3-rc.0"])
def test_a_release_that_is_not_one_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(build.VERSION_ENV, value)
    with pytest.raises(ValueError, match=f"^{build.VERSION_ENV}: '{re.escape(value)}' is not"):
        build.selected_version()


def test_the_command_line_refuses_a_bad_release(capsys: pytest.CaptureFixture[str]) -> None:
    assert build.main(["--version", "v1.x", "--kube-only"]) == 2
    assert "--version: 'v1.x' is not a Kubernetes release" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("version", "flags"),
    [
        ("v1.34.4", []),
        ("v1.36.3", []),
        ("v1.37.2", ["--endpoint-reconciler-type", "none"]),
        ("v1.38.0", ["--endpoint-reconciler-type", "none"]),
    ],
)
def test_kube_apiserver_flags_follow_the_release(
    tmp_path: Path, version: str, flags: list[str]
) -> None:
    assert build.apiserver_flags(tmp_path / version / "bin") == flags


def test_binaries_outside_a_release_folder_are_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a folder of a Kubernetes release"):
        build.apiserver_flags(tmp_path / "bin")
