"""BIND9 for the dns provider's tests: ``named -g`` on a free 127.0.0.1 port, from a fresh
temporary directory with a generated TSIG key, the test zones and an update-policy;
ready only when a TCP SOA query of the zone answers with authority; stopped and its
directory removed afterwards. The update-policy grants the key the whole zone but the
names under :data:`REFUSED_NAME`, which it refuses (REFUSED), as a narrowed policy does.

Under ``CI=true`` a server that does not start fails the run; elsewhere the tests that
need it are skipped with the reason (``make test`` installs bind9 when named is missing).
"""

from __future__ import annotations

import base64
import contextlib
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import dns.exception
import dns.flags
import dns.message
import dns.query
from servers import free_port, running, unavailable

NEEDED_BY = "the dns provider's tests"
ZONE = "example.test."
#: A zone the server is configured for in the provider config, but does not serve.
FOREIGN_ZONE = "elsewhere.test."
KEY_NAME = "reconciler-key."
#: Updates of this name, or any below it, are REFUSED by the update-policy.
REFUSED_NAME = f"refused.{ZONE}"

_CONF = """
key "{key}" {{ algorithm hmac-sha256; secret "{secret}"; }};
options {{
    directory "{dir}";
    pid-file "{dir}/named.pid";
    listen-on port {port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    dnssec-validation no;
    notify no;
    allow-transfer {{ key "{key}"; }};
}};
controls {{ }};
zone "{zone}" {{
    type primary;
    file "{dir}/zone.db";
    update-policy {{ deny {key} subdomain {refused} ANY; grant {key} zonesub ANY; }};
}};
"""
_ZONE_FILE = """$TTL 300
@   IN SOA ns.{zone} admin.{zone} 1 3600 600 86400 300
@   IN NS  ns.{zone}
ns  IN A   127.0.0.1
"""


@attrs.frozen
class Bind:
    """A running named: where it listens, the TSIG secret (base64) it trusts, and its
    process id (for a test that stops it with SIGSTOP)."""

    address: str
    port: int
    secret: str
    directory: Path
    pid: int = 0

    def config(self, **extra: object) -> dict[str, object]:
        """The dns provider config for it, the secret from the environment variable
        TSIG_SECRET (set it to :attr:`secret`)."""
        return {
            "servers": [{"address": self.address, "port": self.port, "zones": [ZONE, FOREIGN_ZONE]}],
            "zones": {
                ZONE: {"key_name": KEY_NAME, "secret_env": "TSIG_SECRET"},
                FOREIGN_ZONE: {"key_name": KEY_NAME, "secret_env": "TSIG_SECRET"},
            },
            **extra,
        }

    def served_config(self) -> dict[str, object]:
        """:meth:`config` with only the zone the server is authoritative for (the foreign
        zone cannot be transferred: listing what a store owns needs every zone to be)."""
        return {
            "servers": [{"address": self.address, "port": self.port, "zones": [ZONE]}],
            "zones": {ZONE: {"key_name": KEY_NAME, "secret_env": "TSIG_SECRET"}},
        }


def _answers(port: int) -> bool:
    request = dns.message.make_query(ZONE, "SOA")
    request.flags &= ~dns.flags.RD
    try:
        response = dns.query.tcp(request, "127.0.0.1", port=port, timeout=1)
    except (OSError, dns.exception.DNSException):
        return False
    return bool(response.answer) and bool(response.flags & dns.flags.AA)


@contextlib.contextmanager
def bind_server() -> Iterator[Bind]:
    """Run named; yield where it is; stop it and remove its directory."""
    named = shutil.which("named") or ("/usr/sbin/named" if Path("/usr/sbin/named").exists() else None)
    if named is None:
        unavailable(
            "BIND9 (named)", NEEDED_BY, "named is not installed (apt-get install bind9 bind9-dnsutils)"
        )
    directory = Path(tempfile.mkdtemp(prefix="reconcile-bind-"))
    port = free_port()
    secret = base64.b64encode(secrets.token_bytes(32)).decode()
    conf = directory / "named.conf"
    conf.write_text(
        _CONF.format(key=KEY_NAME, secret=secret, dir=directory, port=port, zone=ZONE, refused=REFUSED_NAME)
    )
    (directory / "zone.db").write_text(_ZONE_FILE.format(zone=ZONE))
    try:
        with (
            (directory / "named.log").open("wb") as log,
            running(
                [named, "-g", "-c", str(conf), "-p", str(port)],
                server="BIND9 (named)",
                needed_by=NEEDED_BY,
                answers=lambda: _answers(port),
                log=log,
                tail=lambda: (directory / "named.log").read_text(errors="replace")[-800:],
            ) as process,
        ):
            yield Bind("127.0.0.1", port, secret, directory, process.pid)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
