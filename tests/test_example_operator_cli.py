"""The example operator (examples/operator/sites.py) end to end through the CLI, as
child processes: a StaticSite owning a Directory and a File per page (and a Bucket with
an Object per page), created, a page changed, a page removed, a child edited by hand and
put back, deleted under each propagation policy; all told by ``reconcile history``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import checkout_path
from s3_server import moto_server, reset

PROJECT = Path(__file__).parents[1] / "examples" / "operator"
SITE = {"apiVersion": "sites.example.dev/v1", "kind": "StaticSite", "metadata": {"name": "docs"}}


class Reconcile:
    """``python -m reconcile --db DB --root WWW --import sites:operator ARGS`` as a child
    process, in a fresh folder: the operator end to end, as a user runs it."""

    def __init__(self, folder: Path, *options: str) -> None:
        self.folder = folder
        self.www = folder / "www"
        self.www.mkdir()
        self.options = (
            "--db",
            str(folder / "sites.db"),
            "--root",
            str(self.www),
            "--import",
            "sites:operator",
        )
        self.options += options
        self.env = {**os.environ, "PYTHONPATH": checkout_path(PROJECT), "PYTHONUNBUFFERED": "1"}

    def __call__(self, *args: str, expect: int = 0) -> str:
        """Run a command; its output (stdout), after checking its exit code."""
        result = subprocess.run(
            [sys.executable, "-m", "reconcile", *self.options, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.folder,
            timeout=120,
            check=False,
        )
        assert result.returncode == expect, f"{args}: {result.returncode}\n{result.stdout}\n{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        return result.stdout

    def apply(self, name: str, pages: dict[str, str], **spec: object) -> None:
        """Apply a StaticSite (written to a manifest first, as a user would)."""
        manifest = {**SITE, "metadata": {"name": name}, "spec": {"pages": pages, **spec}}
        path = self.folder / f"{name}.yaml"
        path.write_text(json.dumps(manifest))  # JSON is YAML
        self("apply", "-f", str(path))

    def converge(self) -> None:
        """``run --once``: every controller (the operator's, the providers') and the
        garbage collector until nothing is left to do."""
        self("run", "--once", "--timeout", "60", "-q")

    def get(self, kind: str, *names: str) -> list[dict[str, Any]]:
        """The objects ``get -o json`` lists."""
        out = json.loads(self("get", kind, *names, "-o", "json"))
        return list(out["items"]) if "items" in out else [out]

    def names(self, kind: str) -> set[str]:
        """The names of the objects of ``kind``."""
        return {o["metadata"]["name"] for o in self.get(kind)}

    def history(self, kind: str, name: str) -> list[tuple[str, str]]:
        """(type, actor) of each event of an object, from ``history -o json``."""
        return [(e["type"], e["actor"]) for e in json.loads(self("history", kind, name, "-o", "json"))]

    def on_disk(self) -> dict[str, str]:
        """The site folders' files, by path under the root."""
        return {
            str(p.relative_to(self.www)): p.read_text() for p in sorted(self.www.rglob("*")) if p.is_file()
        }


@pytest.fixture
def user(tmp_path: Path) -> Reconcile:
    """The operator's user, at a shell."""
    return Reconcile(tmp_path)


PAGES = {"index.html": "<h1>Welcome</h1>", "about.html": "<p>About us</p>"}
MANAGER = "site-controller"
COLLECTOR = "garbage-collector"


def page(title: str, body: str) -> str:
    """A page as the operator renders it."""
    return f"<!doctype html>\n<title>{title}</title>\n{body}\n"


class TestEndToEnd:
    """The example operator through the CLI, as child processes: create, change a page,
    remove one, edit a child by hand, delete under each propagation policy; all told by
    ``reconcile history``."""

    def test_create_change_remove_and_put_back(self, user: Reconcile) -> None:
        """Each step converges with ``run --once``; the disk and history say what happened."""
        user.apply("docs", PAGES)
        user.converge()
        assert user.on_disk() == {
            "docs/about.html": page("Docs", "<p>About us</p>"),
            "docs/index.html": page("Docs", "<h1>Welcome</h1>"),
        }
        [site] = user.get("site", "docs")
        assert (site["status"]["pages"], site["status"]["readyChildren"]) == (2, 3)
        assert user.names("file") == {"docs.about.html", "docs.index.html"}
        [child] = user.get("file", "docs.index.html")
        [reference] = child["metadata"]["ownerReferences"]
        assert (reference["kind"], reference["name"], reference["uid"]) == (
            "StaticSite",
            "docs",
            site["metadata"]["uid"],
        )
        assert (reference["controller"], reference["blockOwnerDeletion"]) == (True, True)
        assert "spec/content" in child["metadata"]["managedFields"][MANAGER]
        assert user.history("file", "docs.index.html")[0] == ("Created", MANAGER)

        # Change a page: its File's spec, then the file on disk.
        user.apply("docs", {**PAGES, "index.html": "<h1>Welcome back</h1>"})
        user.converge()
        assert user.on_disk()["docs/index.html"] == page("Docs", "<h1>Welcome back</h1>")
        assert ("SpecChanged", MANAGER) in user.history("file", "docs.index.html")

        # Remove a page: its File goes, from the store and from the disk.
        user.apply("docs", {"index.html": "<h1>Welcome back</h1>"})
        user.converge()
        assert user.names("file") == {"docs.index.html"}
        assert list(user.on_disk()) == ["docs/index.html"]
        gone = user.history("file", "docs.about.html")
        assert ("DeletionRequested", MANAGER) in gone
        assert gone[-1][0] == "Deleted"

        # Edit a child by hand: the operator takes its field back.
        events = len(user.history("file", "docs.index.html"))
        user("patch", "file", "docs.index.html", "--type", "merge", "-p", '{"spec": {"content": "by hand"}}')
        user.converge()
        [child] = user.get("file", "docs.index.html")
        assert child["spec"]["content"] == page("Docs", "<h1>Welcome back</h1>")
        assert user.on_disk()["docs/index.html"] == child["spec"]["content"]
        edits = [(t, a) for t, a in user.history("file", "docs.index.html")[events:] if t == "SpecChanged"]
        assert [a for _, a in edits][-1] == MANAGER  # the hand edit, then the operator's
        assert len(edits) == 2

        # Change the file on disk: the files provider's drift repair puts it back.
        (user.www / "docs" / "index.html").write_text("by hand\n")
        user.converge()
        assert user.on_disk()["docs/index.html"] == page("Docs", "<h1>Welcome back</h1>")
        assert "DriftDetected" in [t for t, _ in user.history("file", "docs.index.html")]

    def test_delete_in_the_background(self, user: Reconcile) -> None:
        """The site goes at once; the collector deletes its children, then their files."""
        user.apply("docs", PAGES)
        user.converge()
        user("delete", "site", "docs", "--cascade=background")
        assert user.names("site") == set()
        user.converge()
        assert user.names("file") == user.names("directory") == set()
        assert user.on_disk() == {}
        assert not (user.www / "docs").exists()
        told = user.history("file", "docs.index.html")
        assert ("GarbageCollected", COLLECTOR) in told
        assert told[-1][0] == "Deleted"

    def test_delete_in_the_foreground(self, user: Reconcile) -> None:
        """The site waits, with the foregroundDeletion finalizer, until its children are
        gone; the collector removes it last."""
        user.apply("docs", PAGES)
        user.converge()
        user("delete", "site", "docs", "--cascade=foreground")
        [site] = user.get("site", "docs")
        assert site["metadata"]["finalizers"] == ["foregroundDeletion"]
        assert site["metadata"]["deletionTimestamp"]
        user.converge()
        assert user.names("site") == user.names("file") == user.names("directory") == set()
        assert user.on_disk() == {}
        site_told = user.history("site", "docs")
        assert site_told[-2][0] == "DeletionRequested"
        assert site_told[-1] == ("Deleted", COLLECTOR)
        assert ("GarbageCollected", COLLECTOR) in user.history("file", "docs.about.html")

    def test_delete_orphaning_the_children(self, user: Reconcile) -> None:
        """The site goes; its children stay, their files too, without the owner
        reference; an apply of the site again adopts them."""
        user.apply("docs", PAGES)
        user.converge()
        user("delete", "site", "docs", "--cascade=orphan")
        user.converge()
        assert user.names("site") == set()
        assert user.names("file") == {"docs.about.html", "docs.index.html"}
        assert all("ownerReferences" not in f["metadata"] for f in user.get("file"))  # (none: left out)
        assert set(user.on_disk()) == {"docs/about.html", "docs/index.html"}
        told = user.history("file", "docs.index.html")
        assert told[-2:] == [("Orphaned", COLLECTOR), ("MetadataChanged", COLLECTOR)]
        user.apply("docs", PAGES)
        user.converge()
        [site] = user.get("site", "docs")
        uids = {f["metadata"]["ownerReferences"][0]["uid"] for f in user.get("file")}
        assert uids == {site["metadata"]["uid"]}

    def test_an_unknown_policy_is_refused(self, user: Reconcile) -> None:
        """--cascade with another value: a usage error (exit 2); nothing is deleted."""
        user.apply("docs", PAGES)
        user("delete", "site", "docs", "--cascade=sideways", expect=2)
        assert user.names("site") == {"docs"}


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    """A moto_server (skipped loudly when absent; under CI=true it must be there)."""
    with moto_server() as url:
        yield url


class TestWithABucket:
    """A site that names a bucket publishes to S3 too: a Bucket and an Object per page
    (moto_server, a real S3 HTTP server)."""

    def test_a_bucket_and_its_objects(self, s3_url: str, tmp_path: Path) -> None:
        """Created with the site, a removed page's Object deleted from the bucket, the
        bucket emptied and deleted with the site (in the background)."""
        reset(s3_url)
        user = Reconcile(tmp_path, "-P", f"s3.endpoint_url={s3_url}", "-P", "s3.addressing_style=path")
        user.env.update(
            AWS_ACCESS_KEY_ID="AKIATESTING",
            AWS_SECRET_ACCESS_KEY="testing-secret",  # noqa: S106 - moto's, to nobody
            AWS_DEFAULT_REGION="eu-west-1",
            AWS_CONFIG_FILE="/nonexistent/aws-config",
            AWS_SHARED_CREDENTIALS_FILE="/nonexistent/aws-credentials",
        )
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
            user.env.pop(name, None)
        user.apply("docs", PAGES, bucket="docs-site")
        user.converge()
        assert user.names("bucket") == {"docs-site"}
        assert user.names("object") == {"docs.about.html", "docs.index.html"}
        [site] = user.get("site", "docs")
        assert (site["status"]["readyChildren"], site["status"]["conditions"][0]["status"]) == (6, "True")
        assert keys_in(s3_url, "docs-site") == {
            "about.html": page("Docs", "<p>About us</p>"),
            "index.html": page("Docs", "<h1>Welcome</h1>"),
        }

        user.apply("docs", {"index.html": "<h1>Welcome</h1>"}, bucket="docs-site")
        user.converge()
        assert set(keys_in(s3_url, "docs-site")) == {"index.html"}
        assert ("DeletionRequested", MANAGER) in user.history("object", "docs.about.html")

        user("delete", "site", "docs")
        user.converge()
        assert user.names("bucket") == user.names("object") == set()
        assert ("GarbageCollected", COLLECTOR) in user.history("bucket", "docs-site")
        assert keys_in(s3_url, "docs-site") is None


def keys_in(url: str, bucket: str) -> dict[str, str] | None:
    """The objects of ``bucket`` on the S3 server at ``url``, by key (None: no bucket)."""
    import boto3  # noqa: PLC0415 - only with a server
    from botocore.exceptions import ClientError  # noqa: PLC0415

    s3 = boto3.client(
        "s3",
        endpoint_url=url,
        region_name="eu-west-1",
        aws_access_key_id="AKIATESTING",
        aws_secret_access_key="testing-secret",  # noqa: S106 - moto's, to nobody
    )
    try:
        listed = s3.list_objects_v2(Bucket=bucket)
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "NoSuchBucket":
            return None
        raise
    keys = [entry["Key"] for entry in listed.get("Contents", [])]
    return {key: s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode() for key in keys}
