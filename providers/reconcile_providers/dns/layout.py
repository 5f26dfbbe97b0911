"""The DNS message layout (RFC 1035 section 4.1): the fixed-size parts of a message, for
queries (:mod:`reconcile_providers.dns.wire`) and UPDATE messages
(:mod:`reconcile_providers.dns.updates`, whose zone section is a question's layout).

Its own module so that both write messages with it and neither imports the other for it.
"""

from __future__ import annotations

import struct

__all__ = ["FIRST_NAME", "HEADER", "QUESTION_TAIL", "RR_TAIL"]

HEADER = struct.Struct("!HHHHHH")  # id, flags, and the four section counts
QUESTION_TAIL = struct.Struct("!HH")  # type, class
RR_TAIL = struct.Struct("!HHIH")  # type, class, ttl, rdata length
#: A compressed name pointing at offset 12: the first section's (the question's, or an
#: UPDATE's zone's) name.
FIRST_NAME = b"\xc0\x0c"
