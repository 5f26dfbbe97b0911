"""Bearer tokens, stored hashed: the tokens file ``reconcile serve --token-file`` reads.

Like Kubernetes' static token file, each line gives a token, a user, a uid and groups,
but the token is never written down: the file holds its SHA-256 (``sha256:`` and 64 hex
digits), made by ``reconcile serve --hash-token`` (which reads the token from standard
input, never from the command line, where ``ps`` would show it) or :func:`hash_token`.

A fast hash is the right one here: the tokens are random (``--hash-token`` refuses one
shorter than :data:`MIN_TOKEN_LENGTH` characters), so nobody can guess one from its hash, and
a slow password hash would cost every request tens of milliseconds. The presented token's
hash is looked up in a table keyed by the hashes (the time that takes depends on a hash the
caller cannot choose, never on a token) and confirmed with :func:`hmac.compare_digest`: one
lookup per request whatever the number of tokens (comparing with every entry in turn
cost 170 µs a request at 1,000 tokens).

Two spellings, chosen by the file's name: ``*.yaml``/``*.yml``/``*.json``::

    tokens:
      - hash: sha256:9f86d0...
        user: alice
        uid: "1001"          # optional
        groups: [dev, ops]   # optional

and anything else as CSV, as Kubernetes' ``--token-auth-file`` (``#`` starts a comment)::

    sha256:9f86d0...,alice,1001,"dev,ops"
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import re
from collections.abc import Sequence
from pathlib import Path

import attrs

from reconcile.http.configfiles import ConfigError, FieldReader, read_text, yaml_documents
from reconcile.http.context import User

__all__ = ["AUTHENTICATED", "MIN_TOKEN_LENGTH", "TokenEntry", "TokenTable", "hash_token", "load_tokens"]

#: The group every authenticated user is in (Kubernetes' name).
AUTHENTICATED = "system:authenticated"
#: The shortest token ``--hash-token`` accepts: 20 characters of a random token are >= 100 bits.
MIN_TOKEN_LENGTH = 20

_HASH = re.compile(r"sha256:[0-9a-f]{64}")


def hash_token(token: str) -> str:
    """The line a tokens file keeps for ``token``: ``sha256:`` and its hex digest."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


@attrs.frozen(repr=False)
class TokenEntry:
    """One token's hash and whom it stands for."""

    digest: bytes
    user: User
    uid: str | None = None

    def __repr__(self) -> str:  # the digest stays out of reprs and logs
        return f"TokenEntry(user={self.user.name!r})"


@attrs.frozen
class TokenTable:
    """The tokens a server accepts, found by their hash."""

    entries: tuple[TokenEntry, ...]
    _by_digest: dict[bytes, TokenEntry] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_by_digest", {entry.digest: entry for entry in self.entries})

    def lookup(self, token: str) -> User | None:
        """The user ``token`` belongs to, or None."""
        presented = hashlib.sha256(token.encode()).digest()
        # The dictionary is keyed by the hash: how long finding a slot takes depends on a
        # hash the caller cannot choose (that would take a preimage), never on the token.
        # The last comparison is constant-time all the same.
        entry = self._by_digest.get(presented)
        if entry is None or not hmac.compare_digest(entry.digest, presented):
            return None
        return entry.user


def _digest(value: str, where: str, field: str) -> bytes:
    if not _HASH.fullmatch(value):
        # Never quote the value: it may be a token written down by mistake.
        raise ConfigError(
            where,
            f"{field}: must be sha256: and 64 lowercase hex digits (a token is stored hashed; "
            "make the line with `reconcile serve --hash-token`)",
        )
    return bytes.fromhex(value.removeprefix("sha256:"))


def _user(name: str, groups: Sequence[str]) -> User:
    return User(name, (*dict.fromkeys(groups), AUTHENTICATED))


def _from_yaml(path: Path) -> list[TokenEntry]:
    documents = yaml_documents(path)
    if len(documents) != 1:
        raise ConfigError(str(path), "must hold one YAML document with a `tokens` list")
    root = FieldReader(str(path), documents[0])
    root.only(["tokens"])
    entries = []
    for item in root.mappings("tokens"):
        item.only(["hash", "user", "uid", "groups"])
        digest = _digest(item.string("hash"), str(path), item.field("hash"))
        entries.append(
            TokenEntry(
                digest, _user(item.string("user"), item.strings("groups")), item.optional_string("uid")
            )
        )
    return entries


def _from_csv(path: Path) -> list[TokenEntry]:
    entries = []
    text = read_text(path)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{number}"
        try:
            [row] = list(csv.reader(io.StringIO(line), strict=True))
        except (csv.Error, ValueError):
            raise ConfigError(where, 'is not a CSV line (hash,user,uid,"group1,group2")') from None
        if len(row) < 3 or len(row) > 4:  # noqa: PLR2004 - the format's columns
            raise ConfigError(where, f'has {len(row)} columns; expected hash,user,uid[,"groups"]')
        digest = _digest(row[0].strip(), where, "column 1 (hash)")
        name = row[1].strip()
        if not name:
            raise ConfigError(where, "column 2 (user): must not be empty")
        groups = [g.strip() for g in row[3].split(",") if g.strip()] if len(row) == 4 else []  # noqa: PLR2004
        entries.append(TokenEntry(digest, _user(name, groups), row[2].strip() or None))
    return entries


def load_tokens(path: Path | str) -> TokenTable:
    """The tokens file at ``path`` (a :class:`ConfigError` naming the line or field)."""
    path = Path(path)
    entries = _from_yaml(path) if path.suffix in {".yaml", ".yml", ".json"} else _from_csv(path)
    seen: dict[bytes, str] = {}
    for entry in entries:
        if entry.digest in seen:
            raise ConfigError(
                str(path), f"one token is listed twice (for {seen[entry.digest]!r} and {entry.user.name!r})"
            )
        seen[entry.digest] = entry.user.name
    return TokenTable(tuple(entries))
