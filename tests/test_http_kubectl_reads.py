"""kubectl's read commands against ``reconcile serve``: discovery (api-resources,
api-versions, version), explain from the OpenAPI documents, get as tables with the same
columns as ``reconcile get``, the output formats, selectors, describe, and the errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from http_helpers import CHECKOUT, kubeconfig, kubectl, reconcile_command, served

#: The example operator's StaticSite: a kind with printer columns (one wide) and a short name.
IMPORT = "examples.operator.sites:operator"
MANIFESTS = [
    {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": "index", "labels": {"app": "site"}},
        "spec": {"path": "out/index.html", "content": "hello\n"},
    },
    {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": "about", "labels": {"app": "blog"}},
        "spec": {"path": "out/about.html", "content": "about\n"},
    },
    {
        "apiVersion": "sites.example.dev/v1",
        "kind": "StaticSite",
        "metadata": {"name": "docs"},
        "spec": {"title": "Docs", "pages": {"index.html": "<h1>Hi</h1>"}, "bucket": "public"},
    },
]


class Setup:
    """A served store with the manifests applied, and a kubeconfig pointing at it."""

    def __init__(self, folder: Path, config: Path, db: Path, env: dict[str, str]) -> None:
        self.folder, self.config, self.db, self.env = folder, config, db, env

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """kubectl with this setup's kubeconfig."""
        return kubectl(self.config, *args, check=check)

    def reconcile(self, *args: str) -> str:
        """``reconcile --db DB ARGS``'s output (the CLI kubectl is compared with)."""
        result = subprocess.run(
            reconcile_command("--db", str(self.db), *args),
            capture_output=True,
            text=True,
            env={**os.environ, **self.env},
            cwd=CHECKOUT,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """``reconcile serve`` over a store holding two files and a site."""
    folder = tmp_path_factory.mktemp("kubectl-reads")
    db = folder / "api.db"
    manifest = folder / "site.yaml"
    manifest.write_text(yaml.safe_dump_all(MANIFESTS))
    env = {"PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'providers'}", "RECONCILE_IMPORT": IMPORT}
    setup = Setup(folder, folder / "kubeconfig", db, env)
    setup.reconcile("apply", "-f", str(manifest))
    with served(db, env=env) as url:
        kubeconfig(setup.config, url)
        yield setup


def table(output: str) -> list[list[str]]:
    """A table kubectl printed, as rows of cells, cut where the header's columns start
    (an empty cell stays an empty cell)."""
    lines = output.rstrip().splitlines()
    starts = [found.start() for found in re.finditer(r"\S+", lines[0])]
    ends = [*starts[1:], None]
    return [[line[start:end].strip() for start, end in zip(starts, ends, strict=True)] for line in lines]


class TestDiscovery:
    """What kubectl learns before it asks for anything."""

    def test_api_resources_lists_the_kinds_with_short_names(self, setup: Setup) -> None:
        """Every kind: its plural, short names, group version, namespaced, kind."""
        rows = {row[0]: row for row in table(setup.kubectl("api-resources").stdout)[1:]}
        assert rows["directories"] == ["directories", "dir", "files.reconcile.dev/v1", "true", "Directory"]
        assert rows["staticsites"] == ["staticsites", "site", "sites.example.dev/v1", "true", "StaticSite"]
        assert rows["files"] == ["files", "", "files.reconcile.dev/v1", "true", "File"]  # no short name
        categorised = setup.kubectl("api-resources", "--categories", "reconcile", "-o", "name").stdout
        assert "files.files.reconcile.dev" in categorised.split()

    def test_api_versions_lists_every_group_version(self, setup: Setup) -> None:
        """The groups' versions and the core v1."""
        versions = setup.kubectl("api-versions").stdout.split()
        assert {"files.reconcile.dev/v1", "sites.example.dev/v1", "s3.reconcile.dev/v1", "v1"} <= set(
            versions
        )

    def test_version_gives_no_skew_warning(self, setup: Setup) -> None:
        """The server says 1.32: kubectl 1.32 prints it and warns of nothing."""
        result = setup.kubectl("version")
        assert "Server Version: v1.32.0-reconcile." in result.stdout
        assert "WARNING" not in result.stderr

    def test_an_unknown_resource_is_kubectls_error(self, setup: Setup) -> None:
        """A type discovery does not list: kubectl's own message, exit 1."""
        result = setup.kubectl("get", "widgets", check=False)
        assert result.returncode == 1
        assert 'the server doesn\'t have a resource type "widgets"' in result.stderr


class TestExplain:
    """kubectl explain, from /openapi/v3."""

    def test_explain_a_kind(self, setup: Setup) -> None:
        """The kind's description and its top-level fields."""
        out = setup.kubectl("explain", "file").stdout
        assert "KIND:       File" in out
        assert "A regular file" in out
        assert "spec\t<Object>" in out

    def test_explain_the_spec_lists_its_fields_with_their_docs(self, setup: Setup) -> None:
        """Each field, its type, its doc, the required one, the allowed values."""
        out = setup.kubectl("explain", "file.spec").stdout
        assert "content\t<string>" in out
        assert "The file's text (UTF-8)." in out
        assert "path\t<string> -required-" in out
        assert "enum: present, absent" in out

    def test_explain_one_field(self, setup: Setup) -> None:
        """A field's own doc."""
        out = setup.kubectl("explain", "file.spec.content").stdout
        assert "FIELD: content <string>" in out
        assert "The file's text (UTF-8)." in out
        site = setup.kubectl("explain", "site.spec.title").stdout
        assert "The site's title; defaults to its name, capitalised." in site


class TestGet:
    """kubectl get: tables, formats, selectors."""

    def test_get_prints_reconcile_gets_columns(self, setup: Setup) -> None:
        """The header of kubectl get is reconcile get's, with and without -o wide; the
        cells too, but for AGE, which may tick between the two."""
        for kind in ("files", "staticsites"):
            for wide in ((), ("-o", "wide")):
                ours = table(setup.reconcile("get", kind, *wide))
                theirs = table(setup.kubectl("get", kind, *wide).stdout)
                assert theirs[0] == ours[0], (kind, wide)
                age = ours[0].index("AGE")
                strip = [[c for i, c in enumerate(row) if i != age] for row in ours[1:]]
                assert [[c for i, c in enumerate(row) if i != age] for row in theirs[1:]] == strip

    def test_wide_adds_the_priority_columns(self, setup: Setup) -> None:
        """-o wide shows BUCKET (priority 1) and the generations; plain get does not."""
        plain = table(setup.kubectl("get", "staticsites").stdout)[0]
        wide = table(setup.kubectl("get", "staticsites", "-o", "wide").stdout)[0]
        assert plain == ["NAME", "TITLE", "PAGES", "READY", "SYNCED", "REASON", "AGE"]
        assert wide[:4] == ["NAME", "TITLE", "PAGES", "BUCKET"]
        assert wide[-3:] == ["GENERATION", "OBSERVED", "MESSAGE"]

    def test_get_one_object(self, setup: Setup) -> None:
        """kubectl get file index: its row."""
        rows = table(setup.kubectl("get", "file", "index").stdout)
        assert [row[0] for row in rows] == ["NAME", "index"]

    def test_all_namespaces_and_labels_come_from_the_rows_metadata(self, setup: Setup) -> None:
        """-A adds NAMESPACE, --show-labels LABELS: kubectl reads both from each row's object."""
        rows = table(setup.kubectl("get", "files", "-A", "--show-labels").stdout)
        assert rows[0][0] == "NAMESPACE"
        assert rows[0][-1] == "LABELS"
        assert [(row[0], row[1], row[-1]) for row in rows[1:]] == [
            ("default", "about", "app=blog"),
            ("default", "index", "app=site"),
        ]

    def test_a_label_selector(self, setup: Setup) -> None:
        """-l app=site: only what matches; nothing matching is kubectl's 'No resources found'."""
        rows = table(setup.kubectl("get", "files", "-l", "app=site").stdout)
        assert [row[0] for row in rows[1:]] == ["index"]
        none = setup.kubectl("get", "files", "-l", "app=none")
        assert none.stdout == ""
        assert "No resources found in default namespace." in none.stderr

    def test_yaml_and_json(self, setup: Setup) -> None:
        """-o yaml and -o json: a List of the documents."""
        listed = yaml.safe_load(setup.kubectl("get", "files", "-o", "yaml").stdout)
        assert listed["kind"] == "List"
        assert [i["metadata"]["name"] for i in listed["items"]] == ["about", "index"]
        one = json.loads(setup.kubectl("get", "file", "index", "-o", "json").stdout)
        assert one["kind"] == "File"
        assert one["spec"]["content"] == "hello\n"
        assert one["metadata"]["resourceVersion"]

    def test_jsonpath(self, setup: Setup) -> None:
        """-o jsonpath over the list."""
        out = setup.kubectl("get", "files", "-o", "jsonpath={.items[*].metadata.name}").stdout
        assert out == "about index"

    def test_a_missing_object_is_not_found(self, setup: Setup) -> None:
        """kubectl get of a name that is not there: kubectl's NotFound message."""
        result = setup.kubectl("get", "file", "nothing", check=False)
        assert result.returncode == 1
        assert 'files.files.reconcile.dev "nothing" not found' in result.stderr


class TestDescribe:
    """kubectl describe, through its generic describer."""

    def test_describe_an_object(self, setup: Setup) -> None:
        """Name, namespace, labels, kind and the spec's fields."""
        out = setup.kubectl("describe", "file", "index").stdout
        lines = [line.split() for line in out.splitlines()]
        assert ["Name:", "index"] in lines
        assert ["Namespace:", "default"] in lines
        assert ["Labels:", "app=site"] in lines
        assert ["Kind:", "File"] in lines
        assert ["Content:", "hello"] in lines
