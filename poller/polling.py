"""The scan-a-table flow: every period, run a read-only SQL query and dispatch each row through
``/v1/jobs`` (the row's id as the key, its other columns as data).

It never writes to the database and keeps no state of its own: the key makes dispatch
idempotent, so a row seen again (next period, or after a restart) gets its existing Job, and a
pod stuck Pending can never cause a second Job. On ``429`` the pass stops and resumes next
period; a row the service refuses (``4xx``) is logged and skipped; a server or network error
ends the pass.

Read-only is enforced by the database where it can be: SQLite is opened with ``mode=ro``, and
PostgreSQL sessions run with ``default_transaction_read_only``; every pass is rolled back.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, create_engine, make_url, text
from sqlalchemy.exc import SQLAlchemyError

from shared.errors import ConfigError, LoadschedError

logger = logging.getLogger(__name__)


class DatabaseError(LoadschedError):
    """The query could not be run (message from the driver)."""


def read_only_engine(url: str) -> Engine:
    """An engine that cannot write: SQLite opened read-only, PostgreSQL read-only sessions."""
    try:
        parsed = make_url(url)
    except Exception as e:
        raise ConfigError("--database-url", "", f"not a database URL: {e}") from e
    if parsed.get_backend_name() == "sqlite":
        path = parsed.database
        if not path or path == ":memory:":
            raise ConfigError("--database-url", "", "an SQLite URL needs a file path")
        if not Path(path).exists():
            raise ConfigError("--database-url", "", f"no such SQLite file: {path}")
        uri = f"file:{Path(path).resolve()}?mode=ro"
        return create_engine(
            "sqlite://", creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False)
        )
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(
            parsed, connect_args={"options": "-c default_transaction_read_only=on"}
        )
    return create_engine(parsed)


def read_rows(engine: Engine, query: str) -> list[dict[str, Any]]:
    try:
        with engine.connect() as connection:
            try:
                result = connection.execute(text(query))
                return [dict(row) for row in result.mappings()]
            finally:
                connection.rollback()
    except SQLAlchemyError as e:
        raise DatabaseError(str(e).splitlines()[0]) from e


@dataclass
class PassReport:
    rows: int = 0
    created: int = 0
    existing: int = 0
    refused: dict[str, str] = field(default_factory=dict)
    stopped: str = ""
    """Why the pass ended before the last row (backpressure, an error), or empty."""


def row_requests(
    rows: list[dict[str, Any]], *, template: str, id_column: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    for row in rows:
        if row.get(id_column) is None:
            raise DatabaseError(f"the query's rows have no {id_column!r} column (--id-column)")
        key = str(row[id_column])
        data = {k: str(v) for k, v in row.items() if k != id_column and v is not None}
        yield key, {"template": template, "key": key, "data": data}


async def poll_once(
    *,
    engine: Engine,
    query: str,
    client: httpx.AsyncClient,
    template: str,
    id_column: str = "id",
    headers: Mapping[str, str] | None = None,
) -> PassReport:
    report = PassReport()
    try:
        rows = read_rows(engine, query)
    except DatabaseError as e:
        report.stopped = f"query failed: {e}"
        return report
    report.rows = len(rows)
    try:
        for key, body in row_requests(rows, template=template, id_column=id_column):
            try:
                response = await client.post("/v1/jobs", json=body, headers=dict(headers or {}))
            except httpx.HTTPError as e:
                report.stopped = f"dispatch service unreachable: {e}"
                return report
            if response.status_code == 201:
                report.created += 1
            elif response.status_code == 200:
                report.existing += 1
            elif response.status_code == 429:
                report.stopped = f"backpressure at row {key}: {_detail(response)}"
                return report
            elif response.status_code in (401, 403) or response.status_code >= 500:
                report.stopped = f"HTTP {response.status_code}: {_detail(response)}"
                return report
            else:
                report.refused[key] = f"HTTP {response.status_code}: {_detail(response)}"
                logger.warning("row %s: refused: %s", key, report.refused[key])
    except DatabaseError as e:
        report.stopped = str(e)
    return report


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text
    return str(detail)[:300]
