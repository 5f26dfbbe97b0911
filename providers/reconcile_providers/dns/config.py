"""The dns provider's configuration (``--provider-config`` key ``dns``).

Its shape::

    dns:
      servers:
        - {address: 127.0.0.1, port: 5353, zones: [example.test.]}
      zones:
        example.test.:
          key_name: reconciler-key.
          algorithm: hmac-sha256          # the default
          secret_file: /etc/reconcile/tsig.secret   # or secret_env: TSIG_SECRET
      owner_prefix: _reconcile            # the ownership TXT records' prefix
      owner_id: ...                       # who "we" are in those records (default: the store's identity)
      batch_window: 0.01                  # seconds a zone's changes wait to share a message
      batch_max: 100                      # changes per UPDATE message at most
      timeout: 5                          # seconds per query or update
      max_connections: 16                 # queries and updates on the wire at once

A TSIG secret is read from an environment variable or a file, never from the config
itself (a shared file), and never reaches the event log, logs, spans or errors: a
secret given inline is refused, naming the two ways that work.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import dns.name
import dns.tsig

from reconcile.errors import FieldError, InvalidError

__all__ = ["DnsConfig", "Server", "ZoneKey", "check_keys"]

ALGORITHMS = {
    "hmac-sha256": dns.tsig.HMAC_SHA256,
    "hmac-sha384": dns.tsig.HMAC_SHA384,
    "hmac-sha512": dns.tsig.HMAC_SHA512,
    "hmac-sha224": dns.tsig.HMAC_SHA224,
    "hmac-sha1": dns.tsig.HMAC_SHA1,
    "hmac-md5": dns.tsig.HMAC_MD5,
}
_KEYS = {
    "servers",
    "zones",
    "owner_prefix",
    "owner_id",
    "batch_window",
    "batch_max",
    "timeout",
    "max_connections",
}
_ZONE_KEYS = {"key_name", "algorithm", "secret_file", "secret_env"}


@attrs.frozen
class Server:
    """An authoritative server and the zones it serves."""

    address: str
    port: int
    zones: tuple[str, ...]


@attrs.frozen(repr=False)
class ZoneKey:
    """A zone's TSIG key (its secret kept out of every repr)."""

    name: str
    algorithm: str
    secret: bytes = attrs.field(repr=False)

    def key(self) -> dns.tsig.Key:
        """The key, as dnspython signs with it."""
        return dns.tsig.Key(self.name, self.secret, ALGORITHMS[self.algorithm])

    def __repr__(self) -> str:
        return f"ZoneKey(name={self.name!r}, algorithm={self.algorithm!r})"


@attrs.frozen
class DnsConfig:
    """The provider config, checked."""

    servers: tuple[Server, ...]
    keys: Mapping[str, ZoneKey]
    owner_prefix: str = "_reconcile"
    #: Who "we" are in the ownership marks; None: the store's identity (``bind_store``).
    owner_id: str | None = None
    batch_window: float = 0.01
    batch_max: int = 100
    timeout: float = 5.0
    max_connections: int = 16
    #: Each zone's first server (looked up for every query and update).
    _by_zone: Mapping[str, Server] = attrs.field(
        init=False,
        repr=False,
        eq=False,
        default=attrs.Factory(lambda self: _first_servers(self.servers), takes_self=True),
    )

    def server_of(self, zone: str) -> Server | None:
        """The first server that serves ``zone``."""
        return self._by_zone.get(zone)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> DnsConfig:
        """Check the mapping and read the secrets; InvalidError lists every problem (by
        path, without any secret)."""
        environ = os.environ if environ is None else environ
        errors = _unknown_keys(raw)
        servers = tuple(_servers(raw.get("servers", []), errors))
        keys = {}
        zones = raw.get("zones", {})
        if not isinstance(zones, Mapping):
            errors.append(FieldError("dns.zones", "a mapping of zone to its TSIG key"))
            zones = {}
        for zone, settings in zones.items():
            key = _zone_key(str(zone), settings, environ, errors)
            if key is not None:
                keys[_canonical_zone(str(zone))] = key
        options: dict[str, Any] = {}
        for name, kind in (
            ("owner_prefix", str),
            ("owner_id", str),
            ("batch_window", float),
            ("batch_max", int),
            ("max_connections", int),
        ):
            if name in raw:
                value = raw[name]
                if not isinstance(value, kind | int) or isinstance(value, bool):
                    errors.append(FieldError(f"dns.{name}", f"must be a {kind.__name__}"))
                else:
                    options[name] = kind(value)
        if "timeout" in raw:
            timeout = raw["timeout"]
            if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0:
                errors.append(FieldError("dns.timeout", "must be a number of seconds > 0"))
            else:
                options["timeout"] = float(timeout)
        _check_mark_options(options, errors)
        if errors:
            raise InvalidError(errors, subject="the dns provider config")
        return cls(servers=servers, keys=keys, **options)


def _unknown_keys(raw: Mapping[str, Any]) -> list[FieldError]:
    errors = []
    for key in raw:
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), sorted(_KEYS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            known = ", ".join(sorted(_KEYS))
            errors.append(FieldError(f"dns.{key}", f"unknown key{hint} (known: {known})"))
    return errors


def check_keys(raw: Mapping[str, Any]) -> None:
    """InvalidError naming each unknown key of a config, a ``servers`` or ``zones`` of the
    wrong shape and each secret written inline, without reading any secret (the values
    are checked by :meth:`DnsConfig.from_mapping`)."""
    errors = _unknown_keys(raw)
    if not isinstance(raw.get("servers", []), list):
        errors.append(FieldError("dns.servers", "a list of {address, port, zones}"))
    zones = raw.get("zones", {})
    if not isinstance(zones, Mapping):
        errors.append(FieldError("dns.zones", "a mapping of zone to its TSIG key"))
    else:
        errors.extend(
            FieldError(
                f"dns.zones[{str(zone)!r}].secret",
                "a secret is never written in the config: use secret_env or secret_file",
            )
            for zone, settings in zones.items()
            if isinstance(settings, Mapping) and "secret" in settings
        )
    if errors:
        raise InvalidError(errors, subject="the dns provider config")


#: What ``owner_prefix`` may be: one DNS label (the marks live at ``<prefix>.<name>``, a
#: delegation's at ``<first label>.<prefix>.<rest>``).
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,63}")
#: What ``owner_id`` may be: no ``,`` or ``=``, which would be read as another field of a mark.
_OWNER = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def _check_mark_options(options: dict[str, Any], errors: list[FieldError]) -> None:
    prefix, owner = options.get("owner_prefix"), options.get("owner_id")
    if prefix is not None and not _LABEL.fullmatch(prefix):
        errors.append(FieldError("dns.owner_prefix", "one DNS label: letters, digits, '_' and '-', 1 to 63"))
    if owner is not None and not _OWNER.fullmatch(owner):
        errors.append(FieldError("dns.owner_id", "letters, digits, '.', '_', ':' and '-', 1 to 64"))


def _canonical_zone(zone: str) -> str:
    return dns.name.from_text(zone).to_text().lower()


def _servers(raw: Any, errors: list[FieldError]) -> list[Server]:
    if not isinstance(raw, list):
        errors.append(FieldError("dns.servers", "a list of {address, port, zones}"))
        return []
    servers = []
    for index, entry in enumerate(raw):
        where = f"dns.servers[{index}]"
        if not isinstance(entry, Mapping) or "address" not in entry:
            errors.append(FieldError(where, "needs address (and port, zones)"))
            continue
        port = entry.get("port", 53)
        if not isinstance(port, int) or not 0 < port < 65536:  # noqa: PLR2004 - TCP ports
            errors.append(FieldError(f"{where}.port", "a TCP port, 1 to 65535"))
            continue
        zones = entry.get("zones", [])
        if not isinstance(zones, list) or not all(isinstance(z, str) and z.endswith(".") for z in zones):
            errors.append(FieldError(f"{where}.zones", "a list of absolute zone names (ending with a dot)"))
            continue
        servers.append(Server(str(entry["address"]), port, tuple(_canonical_zone(z) for z in zones)))
    return servers


def _zone_key(zone: str, raw: Any, environ: Mapping[str, str], errors: list[FieldError]) -> ZoneKey | None:
    where = f"dns.zones[{zone!r}]"
    if not isinstance(raw, Mapping) or "key_name" not in raw:
        errors.append(FieldError(where, "needs key_name and secret_file or secret_env"))
        return None
    unknown = [k for k in raw if k not in _ZONE_KEYS]
    if "secret" in raw:
        errors.append(
            FieldError(
                f"{where}.secret", "a secret is never written in the config: use secret_env or secret_file"
            )
        )
        return None
    if unknown:
        errors.append(FieldError(where, f"unknown keys {unknown} (known: {', '.join(sorted(_ZONE_KEYS))})"))
    algorithm = str(raw.get("algorithm", "hmac-sha256")).lower()
    if algorithm not in ALGORITHMS:
        errors.append(FieldError(f"{where}.algorithm", f"one of {', '.join(ALGORITHMS)}"))
        return None
    text = _secret_text(where, raw, environ, errors)
    if text is None:
        return None
    try:
        secret = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        errors.append(FieldError(where, "the TSIG secret is not base64 (as tsig-keygen writes it)"))
        return None
    return ZoneKey(dns.name.from_text(str(raw["key_name"])).to_text(), algorithm, secret)


def _secret_text(
    where: str, raw: Mapping[str, Any], environ: Mapping[str, str], errors: list[FieldError]
) -> str | None:
    if "secret_env" in raw:
        variable = str(raw["secret_env"])
        if variable not in environ:
            errors.append(
                FieldError(f"{where}.secret_env", f"the environment variable {variable} is not set")
            )
            return None
        return environ[variable]
    if "secret_file" in raw:
        path = Path(str(raw["secret_file"]))
        try:
            return path.read_text()
        except OSError as exc:
            errors.append(FieldError(f"{where}.secret_file", f"cannot read {path}: {exc.strerror}"))
            return None
    errors.append(FieldError(where, "needs secret_file or secret_env"))
    return None


def _first_servers(servers: tuple[Server, ...]) -> dict[str, Server]:
    by_zone: dict[str, Server] = {}
    for server in servers:
        for zone in server.zones:
            by_zone.setdefault(zone, server)
    return by_zone
