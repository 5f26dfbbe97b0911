"""Object uids: RFC 4122 version 4, unique, and never shared with a forked child."""

from __future__ import annotations

import multiprocessing
import uuid

from reconcile.api.uids import new_uid


def _child_uids(queue: multiprocessing.Queue[list[str]]) -> None:
    queue.put([new_uid() for _ in range(100)])


def test_uids_are_version_4_and_unique() -> None:
    """Every uid parses back to itself as a version-4 RFC 4122 UUID; none repeats, across
    several refills of the random buffer."""
    uids = [new_uid() for _ in range(20_000)]
    assert len(set(uids)) == len(uids)
    for uid in uids[:300] + uids[-300:]:
        parsed = uuid.UUID(uid)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, uid)


def test_a_forked_child_draws_its_own_bytes() -> None:
    """A child forked with a half-used buffer does not hand out the parent's next uids."""
    new_uid()  # the buffer is filled and partly used
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[list[str]] = context.Queue()
    child = context.Process(target=_child_uids, args=(queue,))
    child.start()
    theirs = queue.get(timeout=30)
    child.join(timeout=30)
    ours = [new_uid() for _ in range(100)]
    assert child.exitcode == 0
    assert not set(theirs) & set(ours)
