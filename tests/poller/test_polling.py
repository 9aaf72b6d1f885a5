import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from poller.cli import main as poll_main
from poller.polling import DatabaseError, poll_once, read_only_engine, read_rows
from shared.errors import ConfigError

pytestmark = pytest.mark.anyio


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.db"
    with sqlite3.connect(path) as db:
        db.execute("create table tasks (id integer primary key, ROW_ID text, NOTE text)")
        db.executemany(
            "insert into tasks values (?, ?, ?)",
            [(i, f"r{i}", None if i == 2 else "x") for i in range(1, 6)],
        )
    return path


class Service:
    """/v1/jobs: 201 for a new key, 200 for a known one, 422 for key 3, 429 once full."""

    def __init__(self, capacity: int = 100) -> None:
        self.seen: dict[str, dict[str, Any]] = {}
        self.capacity = capacity

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        key = body["key"]
        if key == "3":
            return httpx.Response(422, json={"detail": [{"loc": ["body", "data"], "msg": "no"}]})
        if key in self.seen:
            return httpx.Response(200, json={"created": False})
        if len(self.seen) >= self.capacity:
            return httpx.Response(429, json={"detail": "template has 2 Pending pods"})
        self.seen[key] = body
        return httpx.Response(201, json={"created": True})

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler), base_url="http://x")


async def test_each_row_once_across_passes(database: Path) -> None:
    service = Service()
    engine = read_only_engine(f"sqlite:///{database}")
    query = "select id, ROW_ID, NOTE from tasks order by id"
    async with service.client() as client:
        first = await poll_once(engine=engine, query=query, client=client, template="work")
        second = await poll_once(engine=engine, query=query, client=client, template="work")
    assert (first.rows, first.created, first.existing, list(first.refused)) == (5, 4, 0, ["3"])
    assert (second.created, second.existing) == (0, 4)
    assert service.seen["1"] == {
        "template": "work",
        "key": "1",
        "data": {"ROW_ID": "r1", "NOTE": "x"},
    }
    assert service.seen["2"]["data"] == {"ROW_ID": "r2"}  # NULL columns are left out


async def test_backpressure_ends_the_pass_and_the_next_resumes(database: Path) -> None:
    service = Service(capacity=2)
    engine = read_only_engine(f"sqlite:///{database}")
    query = "select * from tasks order by id"
    async with service.client() as client:
        first = await poll_once(engine=engine, query=query, client=client, template="work")
        assert first.created == 2 and first.stopped.startswith("backpressure at row 4")
        service.capacity = 100
        second = await poll_once(engine=engine, query=query, client=client, template="work")
    assert (second.created, second.existing) == (2, 2)
    assert sorted(service.seen) == ["1", "2", "4", "5"]


def test_the_database_is_never_written(database: Path) -> None:
    engine = read_only_engine(f"sqlite:///{database}")
    with pytest.raises(DatabaseError, match="readonly"):
        read_rows(engine, "delete from tasks")
    assert len(read_rows(engine, "select * from tasks")) == 5


async def test_missing_id_column_stops_the_pass(database: Path) -> None:
    engine = read_only_engine(f"sqlite:///{database}")
    async with Service().client() as client:
        report = await poll_once(
            engine=engine, query="select ROW_ID from tasks", client=client, template="w"
        )
    assert "no 'id' column" in report.stopped


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:///nowhere.db", "no such SQLite file"),
        ("sqlite://", "needs a file path"),
        ("::", "not a database URL"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        read_only_engine(url)


def test_cli_names_missing_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert poll_main(["--query", "select 1", "--template", "t"]) == 2
    assert "--database-url" in capsys.readouterr().err
