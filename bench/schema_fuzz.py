"""Bad input, generated: requests from the extender's OpenAPI schema (schemathesis, both its
positive and negative modes) against every ``/v1`` operation, with a token the cluster
accepts, until at least ``--requests`` (5,000) have been answered. Prints the requests per
operation, the status counts and every failure: a 5xx, or a 4xx that does not name the field
it refuses (what that means: :mod:`tests.extender.test_schema_fuzz`, whose checks this runs
with more examples). Exits 1 on any failure.

The dispatch API runs in-process against a fake API server (token and access reviews, Job
and CronJob creates), as in the unit tier.

    .venv/bin/python -m bench.schema_fuzz [--requests 5000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.results import Figure, measured, record
from bench.targets import target
from tests.extender.test_schema_fuzz import FuzzReport, fuzz, serving

FAILURES = target("schema_fuzz", "failures")

EXAMPLES_PER_ROUND = 150
"""Examples per operation and mode in one round; rounds repeat until the target is met."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000, help="at least this many")
    args = parser.parse_args()
    report = FuzzReport()
    started = time.perf_counter()
    rounds = 0
    with tempfile.TemporaryDirectory() as tmp, serving(Path(tmp)) as (schema, send):
        while report.requests < args.requests:
            before = report.requests
            round_report = fuzz(send, schema, examples=EXAMPLES_PER_ROUND)
            rounds += 1
            report.requests += round_report.requests
            report.statuses.update(round_report.statuses)
            report.failures += round_report.failures
            report.operations = round_report.operations
            report.per_operation.update(round_report.per_operation)
            if report.requests == before:
                print("no request could be generated", file=sys.stderr)
                return 1
    elapsed = time.perf_counter() - started
    print(f"operations under /v1 ({len(report.operations)}), requests:")
    for operation in report.operations:
        print(f"  {operation:<45} {report.per_operation[operation]:>6}")
    print(f"\nrequests: {report.requests} in {rounds} round(s), {elapsed:.0f} s")
    print("status   count")
    for status, count in sorted(report.statuses.items()):
        print(f"{status:>6}  {count:>6}")
    fivexx = sum(c for s, c in report.statuses.items() if s >= 500)
    fourxx = sum(c for s, c in report.statuses.items() if 400 <= s < 500)
    print(f"\n5xx: {fivexx}; 4xx: {fourxx}; failures (5xx, or a 4xx naming no field): ", end="")
    print(len(report.failures))
    for failure in report.failures[:50]:
        print(f"  {failure}")
    record(
        "schema_fuzz",
        [
            measured(
                FAILURES,
                len(report.failures),
                name=f"of {report.requests} generated requests: 5xx, or a 4xx naming no field",
            ),
            Figure("5xx answers", fivexx, "answers"),
        ],
        cluster=False,
    )
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
