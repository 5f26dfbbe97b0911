"""The HTTP API: Kubernetes' REST conventions over a reconcile store, so kubectl and the
Kubernetes client libraries work against it unchanged.

``create_app(client)`` is an ASGI app (Starlette) to serve alone or mount in a host's
Starlette or FastAPI service; ``reconcile serve`` serves it with uvicorn.
"""

from __future__ import annotations

from reconcile.http.app import create_app
from reconcile.http.context import AllowAll, ApiState, Attributes, Authorizer, User

__all__ = ["AllowAll", "ApiState", "Attributes", "Authorizer", "User", "create_app"]
