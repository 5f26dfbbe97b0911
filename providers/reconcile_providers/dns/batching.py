"""Coalescing the changes many concurrent reconciles make to one zone into few UPDATE
messages, the way the store's group commit coalesces writes.

A change waits at most ``window`` seconds (or until ``size`` changes are waiting) for
others to share its message, and while a message of the zone is in flight, the changes
that arrive wait for it to be answered and then go together in the next (a server applies
one zone's updates one at a time anyway: this is the group commit's pipelining). When the
combined message's prerequisites fail, each change is sent again on its own, so that only
the one somebody else's edit conflicts with fails; so, too, when the server will not
apply the message as a whole (REFUSED, SERVFAIL, NOTIMP, FORMERR: a name its
update-policy does not grant, a record it will not take), so that one bad change fails
alone instead of every innocent one sharing its message. The changes that do not fit in one DNS
message (64 KiB) go in the next; a change too large for a message of its own fails alone.
Every caller gets its own outcome.

A change waits at most ``deadline`` seconds for its outcome, from the moment it is
submitted: a server that stops answering holds the message in flight for its timeout,
and the changes queued behind it must not wait out every message ahead of them, one
timeout after another. A change past its deadline fails (TransientError, naming the
server) and, if it was not sent yet, is never sent.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable

from reconcile.errors import PermanentError, TransientError
from reconcile_providers.dns.updates import MAX_MESSAGE, TSIG_RESERVE, Update
from reconcile_providers.dns.wire import MessageFailedError, PrerequisiteFailedError

__all__ = ["Batcher", "Change"]

#: Adds a change's prerequisites and updates to a message.
Change = Callable[[Update], None]
#: A change, and the future its caller waits on.
_Pending = tuple[Change, "asyncio.Future[None]"]


class Batcher:
    """The pending changes of one zone, and the task that sends them."""

    def __init__(
        self,
        make: Callable[[], Update],
        send: Callable[[Update], Awaitable[None]],
        *,
        window: float,
        size: int,
        limit: int = MAX_MESSAGE - TSIG_RESERVE,
        deadline: float | None = None,
        name: str = "the zone",
    ) -> None:
        self._make = make
        self._send = send
        self.window = window
        self.size = size
        #: Seconds a change waits for its outcome at most (None: as long as it takes).
        self.deadline = deadline
        #: What the changes go to, for errors (``zone example.test. at DNS server ...``).
        self.name = name
        #: Bytes a message may hold before its signature.
        self.limit = limit
        self._pending: list[_Pending] = []
        #: Each waiting change's deadline, in order, and the timer of the earliest.
        self._deadlines: collections.deque[tuple[float, asyncio.Future[None]]] = collections.deque()
        self._expiry: asyncio.TimerHandle | None = None
        self._timer: asyncio.Task[None] | None = None
        #: The zone's messages in flight: while there is one, what comes waits for the next.
        self._flushing: set[asyncio.Task[None]] = set()
        #: UPDATE messages sent, and how many changes they carried (for benchmarks).
        self.messages = 0
        self.changes = 0

    @property
    def waiting(self) -> int:
        """Changes waiting for a message."""
        return len(self._pending)

    async def submit(self, change: Change) -> None:
        """Send ``change`` (with others, when they come within the window); raise what its
        own outcome was (PrerequisiteFailedError when somebody else's edit conflicts)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((change, future))
        if self._flushing:
            pass  # goes with the next message, when the one in flight is answered
        elif len(self._pending) >= self.size:
            self._flush_now()
        elif self._timer is None:
            self._timer = asyncio.create_task(self._after_window())
        if self.deadline is not None:
            self._watch(future)
        await future

    def _watch(self, future: asyncio.Future[None]) -> None:
        """Fail ``future`` at its deadline unless settled before: one timer for all, at the
        earliest deadline (changes come in order, so their deadlines do), not one each."""
        assert self.deadline is not None
        loop = future.get_loop()
        self._deadlines.append((loop.time() + self.deadline, future))
        if self._expiry is None:
            self._expiry = loop.call_at(self._deadlines[0][0], self._expire)

    def _expire(self) -> None:
        self._expiry = None
        deadlines = self._deadlines
        now = asyncio.get_running_loop().time() + 0.001  # (a timer may fire a hair early)
        while deadlines and (deadlines[0][0] <= now or deadlines[0][1].done()):
            _, future = deadlines.popleft()
            if not future.done():  # (a change not sent yet never will be: see _messages)
                msg = (
                    f"no answer to the change within {self.deadline:g} s: {self.name} answered neither it "
                    "nor the messages before it"
                )
                future.set_exception(TransientError(msg))
        if deadlines:
            self._expiry = asyncio.get_running_loop().call_at(deadlines[0][0], self._expire)

    async def _after_window(self) -> None:
        await asyncio.sleep(self.window)
        self._timer = None
        self._flush_now()

    def _flush_now(self, *, force: bool = False) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing and not force:
            return  # (the answer to the message in flight sends the rest)
        batch, self._pending = self._pending[: self.size], self._pending[self.size :]
        if batch:
            task = asyncio.create_task(self._flush(batch))
            self._flushing.add(task)
            task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task[None]) -> None:
        self._flushing.discard(task)
        if self._pending and not self._flushing:
            self._flush_now()  # what came while it was in flight: the next message, at once

    async def _flush(self, batch: list[_Pending]) -> None:
        for together, message in self._messages(batch):
            await self._flush_message(together, message)

    def _messages(self, batch: list[_Pending]) -> list[tuple[list[_Pending], Update]]:
        """The batch written into as few messages as it fits in; a change that fails to
        write, or does not fit in a message of its own, is settled with why."""
        messages: list[tuple[list[_Pending], Update]] = []
        together: list[_Pending] = []
        message = self._make()
        for pending in batch:
            if pending[1].done():
                continue  # its caller gave up waiting (its deadline): never sent
            fits = self._write(pending, message)
            if fits is False and together:  # the next message, if it fits in one
                fresh = self._make()
                fits = self._write(pending, fresh)
                if fits:
                    messages.append((together, message))
                    together, message = [], fresh
            if fits is None:
                continue
            if not fits:
                msg = f"the change is too large for one DNS message ({self.limit} bytes at most)"
                _settle(pending[1], PermanentError(msg))
                continue
            together.append(pending)
        if together:
            messages.append((together, message))
        return messages

    def _write(self, pending: _Pending, message: Update) -> bool | None:
        """Write the change into ``message``: True when it fits in :attr:`limit` bytes, False
        (the message as it was) when not; None when it failed (its future says why)."""
        change, future = pending
        point = message.checkpoint()
        try:
            change(message)
        except Exception as exc:  # noqa: BLE001 - its caller hears it
            message.rollback(point)
            _settle(future, exc)
            return None
        if message.size <= self.limit:
            return True
        message.rollback(point)
        return False

    async def _flush_message(self, batch: list[_Pending], message: Update) -> None:
        try:
            await self._send_message(message, len(batch))
        except (PrerequisiteFailedError, MessageFailedError) as exc:
            if len(batch) == 1:
                _settle(batch[0][1], exc)
                return
            # One of them conflicts, or is refused: each on its own, so only that one fails.
            await asyncio.gather(*(self._alone(change, future) for change, future in batch))
            return
        except BaseException as exc:  # noqa: BLE001 - every caller hears it
            for _, future in batch:
                _settle(future, exc)
            return
        for _, future in batch:
            _settle(future, None)

    async def _alone(self, change: Change, future: asyncio.Future[None]) -> None:
        if future.done():
            return  # its caller gave up waiting (its deadline)
        try:
            message = self._make()
            change(message)
            await self._send_message(message, 1)
        except BaseException as exc:  # noqa: BLE001 - the caller hears it
            _settle(future, exc)
        else:
            _settle(future, None)

    async def _send_message(self, message: Update, changes: int) -> None:
        self.messages += 1
        self.changes += changes
        await self._send(message)

    async def close(self) -> None:
        """Send what is pending and wait for the sends in flight."""
        self._flush_now(force=True)
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._flushing, return_exceptions=True)
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None


def _settle(future: asyncio.Future[None], exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)
