"""What of the web view anybody may fetch: the page and its assets, which hold no data
(every request the page makes for data carries the user's own credentials). Authentication
lets them through without credentials, as the anonymous user."""

from __future__ import annotations

from starlette.types import Scope

__all__ = ["is_public_asset"]

PAGE_PATHS = frozenset({"/ui", "/ui/"})
ASSET_PREFIX = "/ui/static/"


def is_public_asset(scope: Scope) -> bool:
    """Whether the request is a ``GET`` (or ``HEAD``) of the web view's page or assets."""
    if scope.get("type") != "http" or scope.get("method") not in {"GET", "HEAD"}:
        return False
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root):
        path = path[len(root) :]
    return path in PAGE_PATHS or (path.startswith(ASSET_PREFIX) and ".." not in path)
