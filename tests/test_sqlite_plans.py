"""The SQLite store's list reads a page's rows in order off the index by (api_group,
kind, namespace, name) and stops at its limit: no statement of a page sorts, or walks
the keys of other namespaces after its start."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from reconcile import ObjectKey
from reconcile.store import Put, SQLiteStore, StoredObject
from reconcile.store.sqlite.backend import listing

GROUP, KIND = "example.reconcile.dev", "Widget"


def _put(name: str):  # type: ignore[no-untyped-def]
    def mutation(_current: StoredObject | None) -> Put:
        return Put("Created", {"metadata": {"name": name, "uid": f"u-{name}"}, "spec": {}})

    return mutation


@pytest.mark.parametrize(
    ("namespace", "after", "searched"),
    [
        (None, None, "(api_group=? AND kind=?)"),
        (None, ("default", "w1"), "(api_group=? AND kind=? AND (namespace,name)>(?,?))"),
        ("default", None, "(api_group=? AND kind=? AND namespace=?)"),
        ("default", ("default", "w1"), "(api_group=? AND kind=? AND namespace=? AND name>?)"),
        ("default", ("a", "w1"), "(api_group=? AND kind=? AND namespace=?)"),
    ],
)
@pytest.mark.parametrize("read", [None, 3])
async def test_a_page_walks_the_index_in_order(
    tmp_path: Path, namespace: str | None, after: tuple[str, str] | None, searched: str, read: int | None
) -> None:
    """Each page's statement searches the key index as far as its bounds allow and
    neither sorts nor scans a table."""
    path = tmp_path / "plans.db"
    store = await SQLiteStore(path).open()
    try:
        for ns in ("a", "default", "z"):
            for i in range(5):
                await store.write(ObjectKey(GROUP, KIND, ns, f"w{i}"), _put(f"w{i}"), actor="t")
    finally:
        await store.close()
    sql, values = listing(GROUP, KIND, namespace, after, read)
    conn = sqlite3.connect(path)
    try:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", values)]
        rows = conn.execute(sql, values).fetchall()
    finally:
        conn.close()
    assert plan[0] == f"SEARCH o USING INDEX sqlite_autoindex_objects_1 {searched}", plan
    assert not [step for step in plan if "TEMP B-TREE" in step or step.startswith("SCAN")], plan
    expected = [
        (ns, f"w{i}")
        for ns in ("a", "default", "z")
        for i in range(5)
        if (namespace is None or ns == namespace) and (after is None or (ns, f"w{i}") > after)
    ]
    assert [(row[1], row[2]) for row in rows] == expected[:read]
