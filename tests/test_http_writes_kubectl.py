"""kubectl's writes against ``reconcile serve``: create, replace, patch (merge, JSON, the
strategic default refused as for a custom resource), label, annotate, apply (client-side
and server-side), edit, diff, a server dry run and delete, as against a cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from http_helpers import kubeconfig, kubectl, served

FILES = "/apis/files.reconcile.dev/v1/namespaces/default/files"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One ``reconcile serve`` for the module, and a kubeconfig pointing at it."""
    folder = tmp_path_factory.mktemp("kubectl-writes")
    with served(folder / "state.db") as url:
        yield url, kubeconfig(folder / "kubeconfig", url)


def write_manifest(folder: Path, name: str, **spec: str) -> Path:
    """A File manifest in ``folder`` (its root), saved as NAME.yaml."""
    path = folder / f"{name}.yaml"
    document = {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": name},
        "spec": {"path": f"{name}.html", "root": str(folder), "content": "hello\n", **spec},
    }
    path.write_text(yaml.safe_dump(document))
    return path


def get(config: Path, name: str) -> dict[str, object]:
    """``kubectl get file NAME -o json``."""
    document: dict[str, object] = json.loads(kubectl(config, "get", "file", name, "-o", "json").stdout)
    return document


def history(url: str, name: str) -> list[dict[str, object]]:
    """The object's events, through the HTTP API's history."""
    response = httpx.get(f"{url}{FILES}/{name}/history")
    response.raise_for_status()
    items: list[dict[str, object]] = response.json()["items"]
    return items


def test_create_replace_and_delete(server: tuple[str, Path], tmp_path: Path) -> None:
    """create -f, replace -f, delete: kubectl's messages, the stored object, the history
    naming kubectl's field managers. A replace from a file drops the finalizers the file
    does not list (as Kubernetes' does), so the delete removes the object at once; one
    held by its finalizer is marked, and goes when the finalizer is removed."""
    url, config = server
    manifest = write_manifest(tmp_path, "created")
    created = kubectl(config, "create", "-f", str(manifest))
    assert created.stdout.strip() == "file.files.reconcile.dev/created created"
    again = kubectl(config, "create", "-f", str(manifest), check=False)
    assert again.returncode != 0
    assert "AlreadyExists" in again.stderr
    write_manifest(tmp_path, "created", content="replaced\n")
    assert "replaced" in kubectl(config, "replace", "-f", str(manifest)).stdout
    assert get(config, "created")["spec"]["content"] == "replaced\n"  # type: ignore[index]
    assert [event["actor"] for event in history(url, "created")] == ["kubectl-create", "kubectl-replace"]
    deleted = kubectl(config, "delete", "file", "created")
    assert deleted.stdout.strip() == 'file.files.reconcile.dev "created" deleted'
    assert "NotFound" in kubectl(config, "get", "file", "created", check=False).stderr
    kubectl(config, "create", "-f", str(write_manifest(tmp_path, "held")))
    kubectl(config, "delete", "file", "held", "--wait=false")
    assert get(config, "held")["metadata"]["deletionTimestamp"]  # type: ignore[index]
    remove = '[{"op": "remove", "path": "/metadata/finalizers"}]'
    kubectl(config, "patch", "file", "held", "--type", "json", "-p", remove)
    assert "NotFound" in kubectl(config, "get", "file", "held", check=False).stderr


def test_patch_label_annotate(server: tuple[str, Path], tmp_path: Path) -> None:
    """patch --type merge and json; the default strategic patch refused as Kubernetes
    refuses it for a custom resource; an immutable field refused; the status subresource
    patched; label and annotate."""
    _, config = server
    kubectl(config, "create", "-f", str(write_manifest(tmp_path, "patched")))
    merge = kubectl(
        config, "patch", "file", "patched", "--type", "merge", "-p", '{"spec": {"content": "m\\n"}}'
    )
    assert merge.stdout.strip() == "file.files.reconcile.dev/patched patched"
    operations = '[{"op": "replace", "path": "/spec/mode", "value": "0600"}]'
    kubectl(config, "patch", "file", "patched", "--type", "json", "-p", operations)
    strategic = kubectl(config, "patch", "file", "patched", "-p", '{"spec": {"content": "s"}}', check=False)
    assert strategic.returncode != 0
    assert "application/strategic-merge-patch+json is not supported" in strategic.stderr
    immutable = kubectl(
        config, "patch", "file", "patched", "--type", "merge", "-p", '{"spec": {"path": "x"}}', check=False
    )
    assert immutable.returncode != 0
    assert "spec.path" in immutable.stderr
    status = '{"status": {"atProvider": {"seen": "yes"}}}'
    kubectl(config, "patch", "file", "patched", "--subresource=status", "--type", "merge", "-p", status)
    kubectl(config, "label", "file", "patched", "tier=web")
    kubectl(config, "annotate", "file", "patched", "note=hi")
    document = get(config, "patched")
    assert document["spec"]["content"] == "m\n"  # type: ignore[index]
    assert document["spec"]["mode"] == "0600"  # type: ignore[index]
    assert document["metadata"]["labels"] == {"tier": "web"}  # type: ignore[index]
    assert document["metadata"]["annotations"] == {"note": "hi"}  # type: ignore[index]
    assert document["status"]["atProvider"] == {"seen": "yes"}  # type: ignore[index]


def test_apply_edit_diff_and_dry_run(server: tuple[str, Path], tmp_path: Path) -> None:
    """Client-side apply (create, then a three-way merge), server-side apply (with the
    move of last-applied), edit with an EDITOR script, diff, and a server dry run that
    stores nothing."""
    _, config = server
    manifest = write_manifest(tmp_path, "applied")
    assert "created" in kubectl(config, "apply", "-f", str(manifest)).stdout
    write_manifest(tmp_path, "applied", content="second\n")
    assert "configured" in kubectl(config, "apply", "-f", str(manifest)).stdout
    assert "serverside-applied" in kubectl(config, "apply", "--server-side", "-f", str(manifest)).stdout
    assert "Warning" not in kubectl(config, "apply", "--server-side", "-f", str(manifest)).stderr
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/second/edited/' \"$1\"\n")
    editor.chmod(0o755)
    kubectl(config, "edit", "file", "applied", env={"EDITOR": str(editor)})
    assert get(config, "applied")["spec"]["content"] == "edited\n"  # type: ignore[index]
    differs = kubectl(config, "diff", "-f", str(manifest), check=False)
    assert differs.returncode == 1, differs.stderr
    assert "-    edited" in differs.stdout
    assert "+    second" in differs.stdout
    dry = write_manifest(tmp_path, "rehearsed")
    kubectl(config, "create", "-f", str(dry), "--dry-run=server")
    assert kubectl(config, "get", "file", "rehearsed", check=False).returncode != 0
    unknown = write_manifest(tmp_path, "unknown", colour="red")
    strict = kubectl(config, "create", "-f", str(unknown), check=False)
    assert strict.returncode != 0
    assert 'unknown field "spec.colour"' in strict.stderr
