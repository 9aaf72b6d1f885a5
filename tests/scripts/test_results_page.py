"""scripts/results_page.py: the results page shows each bench's latest result with its
machine and commit, every figure with its target and verdict, and lists the targets no kept
result judges; bench/results.py writes what it reads."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench import faults, results
from bench.results import Figure, measured, record
from bench.targets import load, target
from sandbox.build import kube_version
from sandbox.faults import FaultRow
from scripts import results_page


def test_a_recorded_result_is_shown_with_its_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    churn = target("extender", "churn-p99")
    retired = target("scheduling", "loadsched-of-plain")
    record(
        "extender",
        [
            measured(churn, 2.5, name="names-only p99 under churn at 5x"),
            Figure("request decode, naive / msgspec", 7.25, "ratio"),
        ],
        quick=True,
    )
    record("scheduling", [measured(retired, 0.7, interval=(0.6, 0.8))])
    # kept as judged then: a target retired since shows as retired, not as MISSED
    kept_retired = json.loads((tmp_path / "scheduling.json").read_text())
    kept_retired["figures"][0]["verdict"] = "MISSED"
    (tmp_path / "scheduling.json").write_text(json.dumps(kept_retired))
    kept = json.loads((tmp_path / "extender.json").read_text())
    assert kept["figures"][0]["verdict"] == "MISSED"
    assert kept["machine"]["cpus"]

    page = results_page.render(results_page.read(tmp_path))

    assert page.startswith(results_page.GENERATED)
    assert "| names-only p99 under churn at 5x | 2.5 ms | ≤ 2 ms | **MISSED** |" in page
    assert "| request decode, naive / msgspec | 7.25 ratio |  |  |" in page
    assert "0.7 ratio (median in 0.6–0.8) | ≥ 0.9 ratio | retired (not judged) |" in page
    assert "(a quick run: fewer rounds)" in page
    assert "| ≤ 1,073,741,824 bytes |" in page  # the memory target, never rounded
    waiting = page.split("## Targets without a kept result", 1)[1]
    assert "`extender.churn-p99`" not in waiting
    assert "`quota.admitted-p99`" in waiting


def test_a_run_on_another_kubernetes_release_is_kept_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    ratio = target("scheduling", "loadsched-of-minimal")
    default = kube_version()
    record("scheduling", [measured(ratio, 1.1)])
    monkeypatch.setenv("LOADSCHED_KUBE_VERSION", "v1.35.4")
    assert default != "v1.35.4"
    record("scheduling", [measured(ratio, 0.9)])
    kept = {path.name: json.loads(path.read_text()) for path in tmp_path.iterdir()}
    assert set(kept) == {"scheduling.json", "scheduling@v1.35.4.json"}
    assert kept["scheduling.json"]["kubernetes"] == default
    other = kept["scheduling@v1.35.4.json"]
    assert other["kubernetes"] == "v1.35.4"
    assert other["command"].startswith("LOADSCHED_KUBE_VERSION=v1.35.4 python -m bench.")

    page = results_page.render(results_page.read(tmp_path))

    assert "## scheduling@v1.35.4" in page and ", Kubernetes v1.35.4." in page
    assert f", Kubernetes {default}." in page


def test_a_fault_run_keeps_what_was_lost_and_each_recovery_with_its_own_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    rows = [
        FaultRow("extender SIGKILL", "20 pods", "all bound", 0, 4.2, "≤ 10 s", met=True),
        FaultRow("etcd stopped 10 s", "5 Jobs", "1 Job twice", 1, 12.5),
    ]
    record("faults", faults.figures(rows))

    page = results_page.render(results_page.read(tmp_path))

    assert "| extender SIGKILL: work lost (20 pods) | 0 items | ≤ 0 items | met |" in page
    assert "| etcd stopped 10 s: work lost (5 Jobs) | 1 items | ≤ 0 items | **MISSED** |" in page
    assert "| extender SIGKILL: recovery | 4.2 s | ≤ 10 s | met |" in page
    assert "| etcd stopped 10 s: recovery | 12.5 s |  |  |" in page


def test_a_bench_with_no_result_here_keeps_its_section_from_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine that ran only the extender bench replaces the extender's section, keeps the
    dispatch section another machine published, and the dispatch target it judges stays out of
    the waiting table; a target judged by neither is listed."""
    monkeypatch.setattr(results, "RESULTS", tmp_path / "elsewhere")
    record("dispatch", [measured(target("dispatch", "p99"), 40.0, name="dispatch p99")])
    published = results_page.render(results_page.read(tmp_path / "elsewhere"))
    assert "<!-- judges: dispatch.p99 -->" in published

    monkeypatch.setattr(results, "RESULTS", tmp_path / "here")
    record("extender", [measured(target("extender", "churn-p99"), 1.5, name="churn p99")])
    kept = results_page.kept_sections(published, load())
    page = results_page.render(results_page.read(tmp_path / "here"), kept)

    dispatch = published.split("## dispatch", 1)[1].split("\n## ", 1)[0]
    assert "## dispatch" + dispatch in page
    assert "| churn p99 | 1.5 ms | ≤ 2 ms | met |" in page
    waiting = page.split("## Targets without a kept result", 1)[1]
    assert "`dispatch.p99`" not in waiting and "`extender.churn-p99`" not in waiting
    assert "`quota.admitted-p99`" in waiting
    # a later run of the same bench replaces the kept section
    record("dispatch", [measured(target("dispatch", "p99"), 60.0, name="dispatch p99")])
    again = results_page.render(
        results_page.read(tmp_path / "here"), results_page.kept_sections(page, load())
    )
    assert again.count("## dispatch") == 1 and "| dispatch p99 | 60.0 ms | ≤ 50 ms" in again


def test_a_section_written_before_sections_named_their_targets_judges_those_not_waiting() -> None:
    """Such a section judges its bench's targets that its page did not list as waiting."""
    targets = load()
    page = "\n".join(
        [
            results_page.GENERATED,
            "",
            "# Results",
            "",
            "## quota",
            "",
            "| figure | measured | target | verdict |",
            "| --- | --- | --- | --- |",
            "",
            "## Targets without a kept result",
            "",
            "| target | bound | what |",
            "| --- | --- | --- |",
            "| `quota.admitted-p99` | ≤ 1 s | ... |",
            "",
        ]
    )
    kept = results_page.kept_sections(page, targets)
    own = {key for key, t in targets.items() if t.bench == "quota"}
    assert len(own) > 1 and "quota.admitted-p99" in own
    assert kept["quota"].judges == own - {"quota.admitted-p99"}
    text = kept["quota"].text
    assert text.startswith("## quota\n<!-- judges: ") and "Targets without" not in text
    # the guess is written down: a target added later is not taken as judged there
    added = {**targets, "quota.later": replace(targets["quota.admitted-p99"], name="later")}
    again = results_page.kept_sections(results_page.render([], kept), added)
    assert again["quota"].judges == kept["quota"].judges


def test_drop_removes_a_kept_section_and_refuses_an_unknown_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path / "elsewhere")
    record("dispatch", [measured(target("dispatch", "p99"), 40.0, name="dispatch p99")])
    record("extender", [measured(target("extender", "churn-p99"), 1.5, name="churn p99")])
    page = tmp_path / "results.md"
    page.write_text(results_page.render(results_page.read(tmp_path / "elsewhere")))
    monkeypatch.setattr(results_page, "PAGE", page)
    monkeypatch.setattr(results_page, "ROOT", tmp_path)
    monkeypatch.setattr(results_page, "RESULTS", tmp_path / "here")
    assert results_page.main(["--drop", "dispatch"]) == 0
    text = page.read_text()
    assert "## dispatch" not in text and "## extender" in text
    assert "| `dispatch.p99` |" in text.split("## Targets without a kept result", 1)[1]
    with pytest.raises(SystemExit):
        results_page.main(["--drop", "dispatch"])
    assert "--drop: no kept section dispatch; kept: extender" in capsys.readouterr().err


def test_a_result_names_the_commit_its_process_started_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(results, "STARTED_ON", "0123456789ab")
    # a commit made while the bench ran: not what it ran
    monkeypatch.setattr(results, "_git", lambda *args: "fedcba987654")
    record("quota", [measured(target("quota", "admitted-p99"), 10.0)])
    assert json.loads((tmp_path / "quota.json").read_text())["commit"] == "0123456789ab"
