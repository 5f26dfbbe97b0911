"""Provider config from the command line, by one generic path for every provider.

The CLI knows no provider by name. Each provider's config (a mapping) is built from, in
rising precedence:

1. the ``--provider-config FILE`` (or ``RECONCILE_PROVIDER_CONFIG``): a YAML mapping of
   provider name to its config;
2. the environment: ``RECONCILE_<PROVIDER>__<KEY>=VALUE`` (a double underscore between
   the provider and the key, as pydantic-settings and dynaconf spell nesting;
   ``RECONCILE_S3__REGION=eu-west-1``), matched case-insensitively;
3. the command line: ``-P PROVIDER.KEY=VALUE`` (repeatable; the last of a key wins, as
   with helm's ``--set``). ``--root DIR`` is ``-P files.roots=DIR`` and
   ``--source-root DIR`` is ``-P files.source_roots=DIR``, each folder made absolute
   (repeated: a list).

A key none of them gives is then taken from what the store remembers (``apply``,
``diff`` and ``plan``: :mod:`reconcile.cli.remembering`).

Values are typed as helm's ``--set`` types them, kept small and predictable (YAML 1.2's
core scalars, none of YAML 1.1's surprises such as ``no`` or ``0644``): ``true`` and
``false`` are booleans, a decimal integer is an int, a decimal with a point or an
exponent a float, ``[a, b]`` a list of such values, ``null`` removes the key from the
config built so far, and a value in quotes (``'"5"'``) is the string inside; anything
else is a string as written.

Bad input is refused before anything is opened (exit 2, nothing written): a setting
without ``=``, a key without a provider, an empty value, an unknown provider (naming the
installed ones), and whatever the provider's own ``check_config`` (when it has one)
says of the result, with the field path. A value is never echoed in an error: it may be
a secret given where it does not belong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from reconcile.cli.failing import BadInput

__all__ = [
    "ENVIRONMENT_PREFIX",
    "Setting",
    "check_settings",
    "command_line_settings",
    "environment_settings",
    "provider_config",
    "typed",
]

#: Environment variables ``RECONCILE_<PROVIDER>__<KEY>`` set provider config keys.
ENVIRONMENT_PREFIX = "RECONCILE_"
_SEPARATOR = "__"

_INTEGER = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?=[eE]))(?:[eE][-+]?[0-9]+)?")
#: What removes a key (helm: ``--set key=null``).
_NULL = "null"


@attrs.frozen
class Setting:
    """One ``provider.key=value`` and where it was given (for messages)."""

    provider: str
    key: str
    value: Any = attrs.field(repr=False)
    #: How the user gave it, without the value: ``-P s3.region``, ``RECONCILE_S3__REGION``.
    origin: str


def _scalar(text: str) -> Any:
    stripped = text.strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "\"'":  # noqa: PLR2004 - two quotes
        return stripped[1:-1]
    lowered = stripped.lower()
    if lowered in {"true", "false"}:
        return lowered == "true"
    if _INTEGER.fullmatch(stripped):
        return int(stripped)
    if _FLOAT.fullmatch(stripped):
        return float(stripped)
    return stripped


def typed(text: str) -> Any:
    """A value as given on the command line or in the environment: a bool, an int, a
    float, a list (``[a, b]``), None for ``null``, else the string (quotes keep a string)."""
    stripped = text.strip()
    if stripped == _NULL:
        return None
    if stripped.startswith("[") and stripped.endswith("]"):
        inside = stripped[1:-1].strip()
        return [_scalar(item) for item in inside.split(",")] if inside else []
    return _scalar(text)


def _split_key(path: str, origin: str) -> tuple[str, str]:
    provider, dot, key = path.partition(".")
    if not dot or not provider.strip() or not key.strip():
        missing = (
            "no provider before the key" if not dot or not provider.strip() else "no key after the provider"
        )
        raise BadInput(f"{origin}: expected PROVIDER.KEY=VALUE (files.roots=/srv/site): {missing}")
    return provider.strip(), key.strip()


def command_line_settings(options: Sequence[str]) -> list[Setting]:
    """The ``-P PROVIDER.KEY=VALUE`` options, in order."""
    settings = []
    for option in options:
        path, equals, value = option.partition("=")
        if not equals:
            raise BadInput(f"-P {path}: expected PROVIDER.KEY=VALUE (files.roots=/srv/site), no '=' given")
        if not path.strip():
            raise BadInput("-P: expected PROVIDER.KEY=VALUE (files.roots=/srv/site), nothing before '='")
        origin = f"-P {path.strip()}"
        provider, key = _split_key(path, origin)
        if not value.strip():
            raise BadInput(f"{origin}: no value after '=' (give one; null removes the key)")
        settings.append(Setting(provider, key, typed(value), origin))
    return settings


def environment_settings(environ: Mapping[str, str]) -> list[Setting]:
    """The ``RECONCILE_<PROVIDER>__<KEY>`` variables, sorted by name (provider and key
    lower-cased)."""
    settings = []
    for variable in sorted(environ):
        if not variable.upper().startswith(ENVIRONMENT_PREFIX) or _SEPARATOR not in variable:
            continue
        provider, _, key = variable[len(ENVIRONMENT_PREFIX) :].partition(_SEPARATOR)
        if not provider or not key:
            raise BadInput(f"{variable}: expected RECONCILE_<PROVIDER>__<KEY> (RECONCILE_S3__REGION)")
        value = environ[variable]
        if not value.strip():
            raise BadInput(f"{variable}: empty (unset it, or give null to remove the key)")
        settings.append(Setting(provider.lower(), key.lower(), typed(value), variable))
    return settings


def _folders(provider: str, key: str, option: str, folders: Sequence[str]) -> list[Setting]:
    if not folders:
        return []
    value = [str(Path(folder).absolute()) for folder in folders]
    return [Setting(provider, key, value, option)]


def _file_config(path: Path) -> dict[str, dict[str, Any]]:
    import yaml  # noqa: PLC0415 - only with --provider-config (yaml takes 10 ms to import)

    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise BadInput(f"--provider-config: {path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise BadInput(f"--provider-config: {path}: invalid YAML ({' '.join(str(exc).split())})") from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict) or not all(isinstance(v, dict) for v in loaded.values()):
        raise BadInput(f"--provider-config: {path}: expected a mapping of provider name to its config")
    return {str(name): dict(value) for name, value in loaded.items()}


def provider_config(
    path: Path | None,
    settings: Sequence[Setting] = (),
    *,
    environ: Mapping[str, str] | None = None,
    roots: Sequence[str] = (),
    source_roots: Sequence[str] = (),
) -> tuple[dict[str, dict[str, Any]], list[Setting]]:
    """Each provider's config from the file, the environment and the command line (in
    that order of precedence, the last winning); with the settings that were given
    beside the file (what :func:`check_settings` checks)."""
    config = _file_config(path) if path is not None else {}
    short_forms = [
        *_folders("files", "roots", "--root", roots),
        *_folders("files", "source_roots", "--source-root", source_roots),
    ]
    for short in short_forms:
        clash = next((s for s in settings if (s.provider, s.key) == (short.provider, short.key)), None)
        if clash is not None:
            raise BadInput(
                f"{short.origin} is {short.provider}.{short.key}: give it or {clash.origin}, not both"
            )
    given = [*environment_settings(environ or {}), *short_forms, *settings]
    for setting in given:
        section = config.setdefault(setting.provider, {})
        if setting.value is None:
            section.pop(setting.key, None)
        else:
            section[setting.key] = setting.value
    return config, given


def check_settings(
    config: Mapping[str, Mapping[str, Any]], given: Iterable[Setting], providers: Mapping[str, object]
) -> None:
    """BadInput for a setting of an unknown provider (naming the known ones); then each
    given provider's whole config through its ``check_config``, when it has one (its
    InvalidError names the field path)."""
    given = list(given)
    for setting in given:
        if setting.provider not in providers:
            known = ", ".join(sorted(providers)) or "none installed"
            raise BadInput(f"{setting.origin}: unknown provider {setting.provider!r} (known: {known})")
    for name in sorted({setting.provider for setting in given}):
        check = getattr(providers[name], "check_config", None)
        if callable(check):
            check(config.get(name, {}))
