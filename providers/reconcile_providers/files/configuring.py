"""The files provider's config, checked when it connects (``provider_config["files"]``).

``roots`` and ``source_roots`` are a folder or a list of folders, ``special_modes`` a
boolean; nothing else. A mistake here is said by ``Runtime.start`` (and so at once by
``reconcile run``), with the key's path, before anything is reconciled.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from reconcile.errors import FieldError, InvalidError

__all__ = ["check_config"]

_FOLDERS = ("roots", "source_roots")
_KEYS = (*_FOLDERS, "special_modes")


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, _KEYS, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_config(config: Mapping[str, Any]) -> None:
    """InvalidError naming each bad key of a files provider config."""
    errors = [
        FieldError(f"files.{key}", f"unknown setting{_did_you_mean(str(key))} (known: {', '.join(_KEYS)})")
        for key in config
        if key not in _KEYS
    ]
    for key in _FOLDERS:
        value = config.get(key)
        if (
            value is not None
            and not isinstance(value, str)
            and not (isinstance(value, list | tuple) and all(isinstance(item, str) for item in value))
        ):
            errors.append(FieldError(f"files.{key}", "expected a folder or a list of folders"))
    if not isinstance(config.get("special_modes", False), bool):
        errors.append(FieldError("files.special_modes", "expected true or false"))
    if errors:
        raise InvalidError(errors, subject="provider config")
