"""Reading the server's own configuration files (the tokens file, the authorization
rules): YAML or CSV read at startup, every refusal a :class:`ConfigError` naming the file
and the field path (``rbac.yaml: document 2 (RoleBinding "dev"): subjects[0].kind: ...``),
which ``reconcile serve`` prints before it exits with code 2, without a traceback.

Nothing read here is ever echoed back: a value that may be a secret (a token's hash) is
named by its field, never quoted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = ["ConfigError", "FieldReader", "read_text", "yaml_documents"]


class ConfigError(ValueError):
    """A configuration file the server cannot use: the file, the field path, the reason."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.reason = message


def read_text(path: Path | str) -> str:
    """The file's text (a :class:`ConfigError` when it cannot be read)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), f"cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(str(path), "is not UTF-8 text") from None


def yaml_documents(path: Path | str) -> list[Any]:
    """The non-empty YAML documents of a file."""
    text = read_text(path)
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(where, f"is not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    return documents


class FieldReader:
    """Reads one mapping of a configuration file, each refusal naming its field path."""

    def __init__(self, where: str, value: Any, path: str = "") -> None:
        self.where = where
        self.path = path
        if not isinstance(value, Mapping):
            raise ConfigError(where, f"{path or 'the document'}: must be a mapping, not {_type(value)}")
        self.value: Mapping[str, Any] = value

    def field(self, name: str) -> str:
        """The path of one of this mapping's fields."""
        return f"{self.path}.{name}" if self.path else name

    def fail(self, field: str, message: str) -> ConfigError:
        """A refusal of ``field`` (a path below this mapping)."""
        return ConfigError(self.where, f"{self.field(field)}: {message}")

    def only(self, allowed: Iterable[str]) -> None:
        """Refuse fields other than ``allowed`` (a typo must not widen or narrow a rule silently)."""
        known = set(allowed)
        for key in self.value:
            if key not in known:
                raise self.fail(str(key), f"unknown field (known: {', '.join(sorted(known))})")

    def string(self, name: str, *, default: str | None = None) -> str:
        """A required (or defaulted) non-empty string."""
        value = self.value.get(name)
        if value is None:
            if default is not None:
                return default
            raise self.fail(name, "required")
        if not isinstance(value, str) or not value:
            raise self.fail(name, f"must be a non-empty string, not {_type(value)}")
        return value

    def optional_string(self, name: str) -> str | None:
        """A string if given."""
        return None if self.value.get(name) is None else self.string(name)

    def strings(self, name: str, *, required: bool = False) -> tuple[str, ...]:
        """A list of non-empty strings (empty when absent, unless ``required``)."""
        value = self.value.get(name)
        if value is None:
            if required:
                raise self.fail(name, "required")
            return ()
        if not isinstance(value, list):
            raise self.fail(name, f"must be a list of strings, not {_type(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f"{name}[{index}]", f"must be a string, not {_type(item)}")
        if required and not value:
            raise self.fail(name, "must not be empty")
        return tuple(value)

    def mapping(self, name: str) -> FieldReader:
        """A required nested mapping."""
        if self.value.get(name) is None:
            raise self.fail(name, "required")
        return FieldReader(self.where, self.value[name], self.field(name))

    def mappings(self, name: str) -> list[FieldReader]:
        """A list of mappings (empty when absent)."""
        value = self.value.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(name, f"must be a list, not {_type(value)}")
        return [FieldReader(self.where, item, f"{self.field(name)}[{i}]") for i, item in enumerate(value)]


def _type(value: Any) -> str:
    return {
        type(None): "null",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)
