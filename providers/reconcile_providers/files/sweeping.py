"""Sweeping: removing the temporary files and folders a crashed write left behind.

Every write is prepared under a temporary name (the entry's slot ``.name.inflight.tmp``,
or ``.name.<random>.tmp`` while another write of it holds the slot) and renamed into
place. A process killed in between leaves the temporary behind, and a leftover in a
folder would block deleting that folder for good. The next write or delete of the same
entry takes its slot back (:func:`~reconcile_providers.files.walking.claim_temporary`);
beyond that a folder is swept before the first write into it by this process, and
before a ``Directory`` is removed.

Only our own leftovers go: an entry whose name has the temporary shape, that carries
the owner mark (set right after the temporary is created), and whose ``flock`` can be
taken. A writer holds the lock from before it marks the temporary until after the
rename, so a write in progress, in this process or another, is never swept from under
it.
"""

from __future__ import annotations

import os
import re

from reconcile_providers.files.walking import remove_abandoned

__all__ = ["TEMPORARY", "sweep"]

#: ``.name.<random>.tmp``: eight characters of mkstemp's alphabet or of hex, or the
#: entry's own slot ``.name.inflight.tmp``.
TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")


def sweep(folder: int) -> list[str]:
    """Remove the abandoned temporaries in an open folder; returns their names."""
    candidates = [name for name in os.listdir(folder) if TEMPORARY.fullmatch(name)]
    return [name for name in candidates if remove_abandoned(folder, name)]
