"""``loadsched-dispatch-poll`` / ``python -m poller.cli``: dispatch the rows of a
read-only SQL query through ``/v1/jobs``, every period (:mod:`poller.polling`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.errors import ConfigError
from shared.logs import LogFormat, configure_logging
from shared.settings import ENV_PREFIX, build_settings
from shared.version import add_version_flag

if TYPE_CHECKING:
    from poller.polling import PassReport

logger = logging.getLogger("poller")

MISSING_SQLALCHEMY = (
    "loadsched-dispatch-poll needs SQLAlchemy, an optional extra: "
    "pip install 'loadsched[poller]' (SQLite) or 'loadsched[postgres]' (PostgreSQL)"
)


class PollSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    database_url: str
    """SQLAlchemy URL: sqlite:///path/tasks.db, postgresql://user@host/db."""
    query: str
    """The read-only query; each row is one task."""
    template: str
    """The job template rows are dispatched with."""
    id_column: str = "id"
    """The column that is the task's idempotency key; the other columns are its data."""
    dispatch_url: str = "http://127.0.0.1:8888"
    """Base URL of the extender serving /v1/jobs."""
    token_file: Path | None = None
    """File with the bearer token for /v1/jobs (read before every pass)."""
    period: float = Field(default=60.0, gt=0)
    """Seconds between passes."""
    timeout: float = Field(default=30.0, gt=0)
    """Seconds per dispatch request."""
    once: bool = False
    """One pass, then exit (non-zero if it stopped early)."""
    log_level: str = Field(default="INFO", pattern=r"(?i)^(debug|info|warning|error)$")
    log_format: LogFormat = "text"


def build_parser() -> argparse.ArgumentParser:
    """The flags; each sets the setting of its name, also read from ``LOADSCHED_<NAME>``
    (docs/reference/cli.md is generated from them)."""
    parser = argparse.ArgumentParser(
        prog="loadsched-dispatch-poll",
        description="Dispatch each row of a read-only SQL query as a Job, every period. "
        f"Every flag has an environment equivalent: {ENV_PREFIX}<FLAG>.",
    )
    add_version_flag(parser)
    add = parser.add_argument
    add("--database-url", help="SQLAlchemy URL (sqlite:///tasks.db, postgresql://...)")
    add("--query", help="read-only SQL; one task per row")
    add("--template", help="job template name")
    add("--id-column", help="column with the task's key (default id)")
    add("--dispatch-url", help="extender base URL (default http://127.0.0.1:8888)")
    add("--token-file", help="bearer token for /v1/jobs")
    add("--period", type=float, help="seconds between passes (default 60)")
    add("--timeout", type=float, help="seconds per request (default 30)")
    add("--once", action="store_true", default=None, help="one pass, then exit")
    add("--log-level", help="debug, info, warning or error")
    add("--log-format", help="text or json")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


async def run(settings: PollSettings) -> int:
    from poller.polling import poll_once, read_only_engine

    engine = read_only_engine(settings.database_url)
    async with httpx.AsyncClient(
        base_url=settings.dispatch_url, timeout=settings.timeout
    ) as client:
        while True:
            headers = {}
            if settings.token_file is not None:
                headers["Authorization"] = f"Bearer {settings.token_file.read_text().strip()}"
            report = await poll_once(
                engine=engine,
                query=settings.query,
                client=client,
                template=settings.template,
                id_column=settings.id_column,
                headers=headers,
            )
            log_pass(report)
            if settings.once:
                return 1 if report.stopped else 0
            await asyncio.sleep(settings.period)


def log_pass(report: PassReport) -> None:
    logger.info(
        "pass: %d rows, %d Jobs created, %d already there, %d refused%s",
        report.rows,
        report.created,
        report.existing,
        len(report.refused),
        f"; stopped: {report.stopped}" if report.stopped else "",
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        import sqlalchemy  # noqa: F401
    except ImportError:
        sys.stderr.write(f"{MISSING_SQLALCHEMY}\n")
        return 2
    try:
        settings = build_settings(PollSettings, vars(parse_args(argv)))
        configure_logging(settings.log_level, settings.log_format)
        return asyncio.run(run(settings))
    except ConfigError as e:
        sys.stderr.write(f"loadsched-dispatch-poll: {e}\n")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
