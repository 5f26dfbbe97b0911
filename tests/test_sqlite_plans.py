"""The SQLite store's list reads a page's rows in order off the index by (api_group,
kind, namespace, name) and stops at its limit: no statement of a page sorts, or walks
the keys of other namespaces after its start."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from reconcile import ObjectKey
from reconcile.store import Put, SQLiteStore, StoredObject, paging
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


async def test_a_selector_page_holds_the_reader_for_its_budget_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's one reader serves every other read while a selector's page is read on
    it: past ``paging.BUDGET`` rows in one call the page comes back short, with the key
    of the last row read, and going on finds every match once, in order."""
    monkeypatch.setattr(paging, "SCAN", 2)
    monkeypatch.setattr(paging, "BUDGET", 5)
    store = await SQLiteStore(tmp_path / "budget.db").open()
    try:
        for i in range(12):
            await store.write(ObjectKey(GROUP, KIND, "default", f"w{i:02}"), _put(f"w{i:02}"), actor="t")

        def picked(item: StoredObject) -> bool:
            return item.key.name in {"w01", "w11"}

        pages, after = [], None
        while True:
            page = await store.list(GROUP, KIND, limit=3, predicate=picked, after=after)
            pages.append(([i.key.name for i in page.items], page.next_after))
            after = page.next_after
            if after is None:
                break
    finally:
        await store.close()
    # A page of 3 reads 4 rows, then what is left of the budget (1): short at w04, at w09;
    # then w10-w11, fewer than asked: the end.
    assert pages == [(["w01"], ("default", "w04")), ([], ("default", "w09")), (["w11"], None)]
