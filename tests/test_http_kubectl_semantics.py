"""kubectl against ``reconcile serve``, for the semantics a review checked: a server-side
apply followed by a client-side one, ``diff``'s exit codes, ``-o name``, and a stale
replace refused in Kubernetes' words."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from http_helpers import kubeconfig, kubectl, served


def _manifest(folder: Path, name: str, content: str) -> Path:
    path = folder / f"{name}.yaml"
    document = {
        "apiVersion": "files.reconcile.dev/v1",
        "kind": "File",
        "metadata": {"name": name},
        "spec": {"path": f"{name}.html", "root": str(folder), "content": content},
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_server_side_then_client_side_apply_diff_and_a_stale_replace(tmp_path: Path) -> None:
    """``apply --server-side`` then ``apply`` (client-side) of a change; ``diff`` exits 0
    when nothing differs and 1 when something does; ``get -o name``; ``replace`` of a
    document read before a change is a Conflict with Kubernetes' message, and stores
    nothing."""
    with served(tmp_path / "state.db") as url:
        config = kubeconfig(tmp_path / "kubeconfig", url)
        manifest = _manifest(tmp_path, "page", "one\n")
        assert "serverside-applied" in kubectl(config, "apply", "--server-side", "-f", str(manifest)).stdout
        assert kubectl(config, "diff", "-f", str(manifest), check=False).returncode == 0
        read = kubectl(config, "get", "file", "page", "-o", "json").stdout
        _manifest(tmp_path, "page", "two\n")
        assert kubectl(config, "diff", "-f", str(manifest), check=False).returncode == 1
        assert "configured" in kubectl(config, "apply", "-f", str(manifest)).stdout
        assert kubectl(config, "diff", "-f", str(manifest), check=False).returncode == 0
        assert kubectl(config, "get", "files", "-o", "name").stdout.split() == [
            "file.files.reconcile.dev/page"
        ]
        stale = tmp_path / "stale.json"
        stale.write_text(read.replace("one\\n", "three\\n"))
        refused = kubectl(config, "replace", "-f", str(stale), check=False)
        assert refused.returncode == 1
        assert "Error from server (Conflict)" in refused.stderr
        assert (
            "the object has been modified; please apply your changes to the latest version" in refused.stderr
        )
        document = json.loads(
            kubectl(config, "get", "file", "page", "-o", "json", "--show-managed-fields").stdout
        )
        assert document["spec"]["content"] == "two\n"
        managers = {(e["manager"], e["operation"]) for e in document["metadata"]["managedFields"]}
        assert ("kubectl-client-side-apply", "Update") in managers
