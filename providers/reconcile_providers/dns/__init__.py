"""The built-in dns provider: ``RecordSet`` resources of ``dns.reconcile.dev/v1`` kept on
authoritative servers (BIND, Knot, PowerDNS, Windows DNS) through TSIG-signed RFC 2136
dynamic updates, observed by direct query, through dnspython.

Registered as the ``dns`` entry point of the ``reconcile.providers`` group; it imports
only reconcile's public API, as a third-party provider would.
"""

from reconcile_providers.dns.provider import DnsProvider
from reconcile_providers.dns.records import API_VERSION, RECORD_SET, RecordSetSpec

__all__ = ["API_VERSION", "RECORD_SET", "DnsProvider", "RecordSetSpec", "provider"]

provider = DnsProvider()
"""The provider object the entry point names."""
