"""The kube-scheduler versions whose bodies the e2e capture recorded (``tests/fixtures``)."""

from sandbox.capture import FIXTURES

VERSIONS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
