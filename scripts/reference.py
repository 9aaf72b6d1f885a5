"""The reference pages of the docs site, generated from the code (``make reference``):
``docs/reference/`` gets ``cli.md`` (every entry point's flags), ``metrics.md`` (every
Prometheus metric), ``annotations.md`` (every annotation and label), ``policy.md`` with
``policy.schema.json``, ``chart-values.md`` and ``api.md`` with ``openapi.json``. One module of
``scripts/reference_pages`` per page.

The pages are deterministic (sorted where the code has no order of its own, no timestamps,
``LOADSCHED_*`` variables of the environment ignored), so ``--check`` compares them with the
committed files and exits 1 naming the stale ones; tests/test_reference.py does the same.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference"
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from reference_pages import api, chart, cli, keys, metrics, policy  # noqa: E402

from extender.app import ExtenderApp, create_app  # noqa: E402
from extender.settings import ExtenderSettings  # noqa: E402
from shared.settings import ENV_PREFIX  # noqa: E402


@contextlib.contextmanager
def plain_environment() -> Iterator[None]:
    """No ``LOADSCHED_*`` variables while the pages are made: settings read them."""
    kept = {name: value for name, value in os.environ.items() if name.startswith(ENV_PREFIX)}
    for name in kept:
        del os.environ[name]
    try:
        yield
    finally:
        os.environ.update(kept)


def extender_app() -> ExtenderApp:
    """The extender's app as the defaults build it: every route and metric is there whatever
    it serves (the routers are included and the metrics registered in every room)."""
    return create_app(ExtenderSettings())


def pages(root: Path = ROOT) -> dict[str, str]:
    """Every file of docs/reference: name → content."""
    with plain_environment():
        app = extender_app()
        return {
            **cli.files(root),
            **metrics.files(app),
            **keys.files(),
            **policy.files(),
            **chart.files(root),
            **api.files(app),
        }


def stale(generated: dict[str, str], out: Path = OUT) -> list[str]:
    """The files of ``out`` that differ from ``generated`` (or are missing)."""
    found = []
    for name, text in sorted(generated.items()):
        path = out / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            found.append(str(path.relative_to(out.parents[1])))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="compare, write nothing; exit 1 if any is stale"
    )
    args = parser.parse_args(argv)
    generated = pages()
    changed = stale(generated)
    if args.check:
        if changed:
            sys.stderr.write(
                "stale (run `make reference` and commit the result): " + ", ".join(changed) + "\n"
            )
            return 1
        sys.stdout.write(f"docs/reference: {len(generated)} files up to date\n")
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in generated.items():
        (OUT / name).write_text(text, encoding="utf-8")
    sys.stdout.write(f"docs/reference: {len(changed)} of {len(generated)} files written anew\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
