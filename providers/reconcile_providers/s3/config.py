"""The s3 provider's configuration (``provider_config["s3"]``, ``--provider-config``).

Every key is optional. What is not given comes from the standard AWS configuration
chain, exactly as boto users expect: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
``AWS_SESSION_TOKEN``, ``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL`` and
``AWS_ENDPOINT_URL_S3``, ``AWS_PROFILE``, the shared config and credentials files.
Credentials are never part of this configuration: it may be shared, logged and stored.

A config is checked whole when the provider connects (:meth:`S3Config.from_mapping`,
then :func:`check_chain`): its keys, and the parts of the chain that are read from
files and can only be fixed outside (a profile that no file holds, a config or
credentials file that cannot be parsed). The Runtime connects every provider before the
first reconcile, so such a mistake stops ``reconcile run`` at once with the reason,
instead of surfacing later as a transient error on every object. Credentials are not
resolved here: that may ask the network (an instance's metadata service), and refused
credentials are the server's to say.
"""

from __future__ import annotations

import difflib
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from reconcile.errors import FieldError, InvalidError

__all__ = ["ADDRESSING_STYLES", "S3Config", "check_chain"]

ADDRESSING_STYLES = ("auto", "virtual", "path")
_MIN_PART = 5 * 1024 * 1024
_SECRETS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token", "secret_access_key")


def _is_endpoint(url: str) -> bool:
    """Whether botocore can make a client for ``url`` (it raises "Invalid endpoint" at the
    first call otherwise, which would be retried as if the network had failed)."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return False
    return parts.scheme in {"http", "https"} and bool(parts.hostname) and not any(c.isspace() for c in url)


def _paths(value: str | Sequence[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@attrs.frozen
class S3Config:
    """Where and how to reach S3."""

    #: An S3-compatible endpoint (MinIO, Ceph, R2, moto); None: AWS (or AWS_ENDPOINT_URL_S3).
    endpoint_url: str | None = None
    #: The default region of buckets that name none; None: the chain's.
    region: str | None = None
    #: A profile of the shared config files; None: AWS_PROFILE or the default.
    profile: str | None = None
    #: ``auto``, ``virtual`` or ``path`` (path style for most S3-compatible servers).
    addressing_style: str = "auto"
    #: HTTP connections per client (the Runtime's workers share them).
    max_pool_connections: int = 16
    #: Objects larger than this are uploaded in parts of this size (S3's minimum: 5 MiB).
    multipart_threshold: int = 64 * 1024 * 1024
    #: The folders an Object's ``source`` may be read from (default: the manifest's).
    source_roots: tuple[str, ...] = attrs.field(default=(), converter=_paths)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> S3Config:
        """Check and read a provider config; InvalidError naming each bad key."""
        errors = []
        for key in config:
            if key.lower() in _SECRETS:
                errors.append(
                    FieldError(f"s3.{key}", "credentials do not go in the provider config: use the AWS chain")
                )
            elif key not in attrs.fields_dict(cls):
                known = ", ".join(attrs.fields_dict(cls))
                close = difflib.get_close_matches(str(key), list(attrs.fields_dict(cls)), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                errors.append(FieldError(f"s3.{key}", f"unknown setting{hint} (known: {known})"))
        errors.extend(
            FieldError(f"s3.{key}", "expected a string")
            for key in ("endpoint_url", "region", "profile")
            if config.get(key) is not None and not isinstance(config[key], str)
        )
        endpoint = config.get("endpoint_url")
        if isinstance(endpoint, str) and not _is_endpoint(endpoint):
            errors.append(
                FieldError("s3.endpoint_url", f"{endpoint!r} is not an http:// or https:// URL with a host")
            )
        style = config.get("addressing_style", "auto")
        if style not in ADDRESSING_STYLES:
            errors.append(FieldError("s3.addressing_style", f"must be one of {', '.join(ADDRESSING_STYLES)}"))
        pool = config.get("max_pool_connections", 16)
        if not isinstance(pool, int) or isinstance(pool, bool) or pool < 1:
            errors.append(FieldError("s3.max_pool_connections", "expected an integer >= 1"))
        threshold = config.get("multipart_threshold", 64 * 1024 * 1024)
        if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < _MIN_PART:
            errors.append(
                FieldError("s3.multipart_threshold", "expected an integer of at least 5 MiB (5242880)")
            )
        roots = config.get("source_roots", ())
        if not isinstance(roots, str) and not (
            isinstance(roots, list | tuple) and all(isinstance(r, str) for r in roots)
        ):
            errors.append(FieldError("s3.source_roots", "expected a folder or a list of folders"))
        if errors:
            raise InvalidError(errors, subject="provider config")
        return cls(**{k: v for k, v in config.items() if k in attrs.fields_dict(cls)})


def check_chain(config: S3Config) -> None:
    """InvalidError when the AWS chain's files cannot serve ``config``: the profile it
    (or ``AWS_PROFILE``) names is in no shared file, or a shared file cannot be parsed.
    Reads only local files (``AWS_CONFIG_FILE``, ``AWS_SHARED_CREDENTIALS_FILE``)."""
    from botocore.exceptions import (  # noqa: PLC0415 - botocore loads when the provider connects
        ConfigParseError,
        ProfileNotFound,
    )
    from botocore.session import Session  # noqa: PLC0415

    session = Session()
    if config.profile is not None:
        session.set_config_variable("profile", config.profile)
    try:
        session.get_scoped_config()
    except ProfileNotFound as exc:
        path = "s3.profile" if config.profile is not None else "s3 (AWS_PROFILE)"
        reason = (
            f"no profile {exc.kwargs.get('profile')!r} in the shared config or credentials file "
            "(AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, ~/.aws)"
        )
        raise InvalidError([FieldError(path, reason)], subject="provider config") from exc
    except ConfigParseError as exc:
        path = exc.kwargs.get("path")
        reason = f"the AWS chain's file {path} cannot be parsed (an INI file of [profile] sections)"
        raise InvalidError([FieldError("s3", reason)], subject="provider config") from exc
