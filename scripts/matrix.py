"""The version matrix (``make matrix``): for each Kubernetes release of
``sandbox.build.MATRIX_VERSIONS`` (or ``--versions``), one after the other:

1. build   its control plane from the Go module (cached: seconds once built);
2. capture its kube-scheduler's bodies for every verb in both node-cache modes, checked
           against tests/fixtures/kube-scheduler/<version>/ (``--write-fixtures`` rewrites
           them), the preempt verb included (tests/e2e/test_version_smoke.py);
3. contract the extender's answers to those bodies
           (tests/extender/scheduling/test_versions_contract.py);
4. smoke   overloaded nodes avoided in both modes on that release's kube-scheduler.

A step is not run once an earlier one failed for the release. Each step's output goes to
out/matrix/<version>-<step>.log; a table of pass/fail per release and step is printed last.
Exit status 1 if anything failed."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox.build import MATRIX_VERSIONS, VERSION_ENV, check_version  # noqa: E402

PYTHON = sys.executable
SMOKE = "tests/e2e/test_version_smoke.py"
STEPS = ("build", "capture", "contract", "smoke")


def say(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def commands(version: str) -> dict[str, list[str]]:
    pytest = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    return {
        "build": [PYTHON, "-m", "sandbox.build", "--version", version, "--kube-only"],
        "capture": [
            *pytest,
            "-m",
            "e2e",
            SMOKE,
            "-k",
            "release_asked_for or bodies_of_every_verb",
        ],
        "contract": [
            *pytest,
            "-m",
            "not e2e",
            "tests/extender/scheduling/test_versions_contract.py",
            "-k",
            version,
        ],
        "smoke": [*pytest, "-m", "e2e", SMOKE, "-k", "overloaded"],
    }


def run_step(version: str, step: str, command: list[str], env: dict[str, str], logs: Path) -> str:
    log = logs / f"{version}-{step}.log"
    started = time.monotonic()
    with log.open("w") as out:
        result = subprocess.run(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
        )
    summary = log.read_text().strip().splitlines()[-1:] or [""]
    verdict = "pass" if result.returncode == 0 else "FAIL"
    say(f"{version} {step:<8} {verdict} ({time.monotonic() - started:.0f}s) {summary[0][:90]}")
    if verdict == "FAIL":
        say(f"  see {log.relative_to(ROOT)}")
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/matrix.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--versions",
        default=",".join(MATRIX_VERSIONS),
        help="comma-separated Kubernetes releases (default: %(default)s)",
    )
    parser.add_argument(
        "--write-fixtures",
        action="store_true",
        help="rewrite each release's captured bodies instead of checking them",
    )
    args = parser.parse_args(argv)
    try:
        versions = [check_version(v.strip(), source="--versions") for v in args.versions.split(",")]
    except ValueError as error:
        parser.error(str(error))
    logs = ROOT / "out" / "matrix"
    logs.mkdir(parents=True, exist_ok=True)
    table: dict[str, dict[str, str]] = {}
    for version in versions:
        env = {**os.environ, VERSION_ENV: version}
        if args.write_fixtures:
            env["LOADSCHED_WRITE_FIXTURES"] = "1"
        table[version] = {}
        for step, command in commands(version).items():
            if "FAIL" in table[version].values():
                table[version][step] = "skipped"
                continue
            table[version][step] = run_step(version, step, command, env, logs)
    say()
    say(f"{'release':<10}" + "".join(f"{step:<10}" for step in STEPS))
    for version, verdicts in table.items():
        say(f"{version:<10}" + "".join(f"{verdicts[step]:<10}" for step in STEPS))
    failed = any("FAIL" in verdicts.values() for verdicts in table.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
