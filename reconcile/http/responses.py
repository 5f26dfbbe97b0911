"""JSON responses, encoded once with orjson."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.responses import Response

__all__ = ["json_response"]


def json_response(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """``data`` as an ``application/json`` response."""
    return Response(orjson.dumps(data), status_code=status, media_type="application/json", headers=headers)
