"""One client connection: Kafka's framing, in-order responses, limits and back-pressure.

A :class:`Connection` is an :class:`asyncio.Protocol`. Bytes arrive in a ``bytearray``; each
complete frame (an int32 size, then that many bytes) is a request. Its header is parsed, the
handler for its API key is looked up, and the handler's first step runs at once, in request
order: a handler that never waits is answered right there, without a task; one that waits
goes on as a task from where it stopped (:func:`_go_on`), so a long-polling Fetch does not
hold up the requests behind it. Responses are written in request order, as Kafka answers
them: each request takes a slot in a queue, and a finished response is written only when
every earlier slot is written; the responses finished in one loop turn leave in one write.

Limits, as Kafka's SocketServer applies them:

- a size above ``socket.request.max.bytes`` or below 0 closes the connection (Kafka's
  ``InvalidReceiveException``), before any of the frame is buffered;
- a header that does not parse, an API key not served or a version outside the advertised
  range closes the connection after logging it (Kafka's ``InvalidRequestException``), except
  ApiVersions, which is answered at any version (KIP-511);
- a body that does not decode closes the connection;
- back-pressure: with ``queued.max.requests`` requests read and not yet answered, while the
  transport holds bytes the socket has not taken, while more than
  :data:`RESPONSE_BYTES_HELD_MAX` (or ``fetch.max.bytes`` if larger) of finished responses
  wait to be handed to the transport, or more than :data:`RESPONSE_COPIED_BYTES_HELD_MAX` of
  them are copies in the broker's memory, the connection stops reading (``pause_reading``)
  and dispatching until responses drain;
- an exception escaping a handler is logged and closes this connection only;
- quotas (KIP-219): a response that tells the client a throttle time (``throttle_time`` of a
  kio response, ``throttle_time_ms`` of a RawResponse) mutes the connection for that long
  once it is answered: no request of that client is read meanwhile (:meth:`mute_for_ms`).

Slow readers (issue 23). A client may pipeline requests and never read. What it costs the
broker is bounded whatever it pipelines: its read buffer (one read, or one partial frame up
to ``socket.request.max.bytes``), the frames of its ``queued.max.requests`` requests, the
finished responses under the bounds above (a Fetch response's record sets are views of the
mapped segments: they hold no anonymous memory) and one write chunk. Responses are handed
to the transport a chunk (:data:`RESPONSE_WRITE_CHUNK_BYTES`) at a time, and only while the
transport holds nothing unsent (its high-water mark is 0: any byte the socket did not take
pauses writing, and ``resume_writing`` comes once it has taken them all), so what the
transport copies (Python 3.11 copies what the socket did not take) is at most one chunk;
the rest of a response stays a view of the segment until the socket wants it. Kafka goes further (it
mutes a connection while a response is in flight and sends record sets with sendfile);
seglog keeps pipelining for clients that read, in request order.

Sent pages (issue 11). A Fetch response's record sets are zero-copy views of the segments'
mappings (:class:`~seglog.storage.reads.LogReadResult`), and every page the socket send read
would stay in the broker's page tables (its RSS) after it: consuming a 1 GiB log would leave the
broker with 1 GiB of mapped file pages, where Kafka, which sends with sendfile, maps none.
Once each chunk of a response has been handed to the transport, the pages of its views are
dropped from the broker's page tables (the store backend's ``drop_mapped_pages``, which
gathers small ranges of a segment up to 1 MiB first; about 30 us per MiB sent: the bytes stay
in the page cache, and any view of them still alive faults them back in; it does nothing for
a view of anything else). Python 3.11's transport copies what the socket did not take at
once, so the drop follows the write at once; 3.12's keeps a view of it (zero-copy writes), so
when the write left bytes in the transport the drop waits for ``resume_writing`` (or the
connection's end), lest the kernel map the unsent bytes again as
the transport sends them. A follower's Fetch is served by the same path, so a leader's pages
sent to its followers leave as well.

Everything runs on the event loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Coroutine, Mapping, Protocol, Sequence

from ..errors import IllegalSaslStateError, InvalidRequestError, UnsupportedVersionError
from . import protocol
from .context import BrokerState, BytesLike, CloseConnection, RawResponse, RequestContext
from .principal import ConnectionSecurity
from .registry import ApiHandler, Handle, Response
from .sasl.authenticator import check_request as sasl_check_request
from .sasl.authenticator import request_bytes_max as sasl_request_bytes_max

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["Connection", "DropPages", "Server"]

log = logging.getLogger("seglog.server")

_SIZE = struct.Struct(">i")
#: Response parts smaller than this are joined into one write (see Connection._next_chunk).
_JOIN_BYTES_MAX = 64 * 1024
#: A request at least this large that one read does not hold whole is received into a buffer
#: of its own size (Connection._start_frame); smaller ones gather in the growing buffer.
_FRAME_BYTES_MIN = 64 * 1024
#: Bytes of finished responses one connection may hold unwritten (behind an earlier request
#: still running, or not yet handed to the transport) before it stops reading requests; the
#: server raises it to fetch.max.bytes when that is larger. Views of mapped segments (Fetch's
#: record sets) count here, though they hold no anonymous memory: the bound keeps a client
#: that does not read from pinning more than a couple of responses' segments.
RESPONSE_BYTES_HELD_MAX = 64 * 1024 * 1024
#: Of those, the bytes that are copies in the broker's memory (every part but a view of a
#: mapped file: encoded bodies, headers, a reader's pread copy) one connection may hold before
#: it stops reading requests (or ``held_response_bytes_max`` when that is smaller): what a
#: slow reader pipelining requests with big encoded answers (Metadata, say) costs.
RESPONSE_COPIED_BYTES_HELD_MAX = 4 * 1024 * 1024
#: Bytes handed to the transport in one write: what the transport copies when the socket does
#: not take it all (Python 3.11) is at most this much per connection. One partition's default
#: record set (max.partition.fetch.bytes, 1 MiB) goes in one write: in 256 KiB chunks a 1 MiB
#: Fetch cost the broker 1.35x the CPU (more sends, each waiting for the transport to empty;
#: bench/results-issue27-fetchcpu.md), while 2 MiB gained nothing more.
RESPONSE_WRITE_CHUNK_BYTES = 1024 * 1024


def _nbytes(part: BytesLike) -> int:
    return part.nbytes if isinstance(part, memoryview) else len(part)


def _copied_bytes(part: BytesLike) -> int:
    """The bytes of ``part`` that live in the broker's anonymous memory: all of them, except
    for a view of anything but ``bytes``/``bytearray`` (a Fetch response's view of a mapped
    segment, whose pages belong to the page cache)."""
    if type(part) is memoryview:
        try:
            owner = part.obj
        except ValueError:  # released: holds nothing
            return 0
        if not isinstance(owner, (bytes, bytearray)):
            return 0
        return part.nbytes
    return len(part)


_SIZE_BYTES = _SIZE.size
#: Whether the transport keeps a view of what the socket has not taken (Python 3.12's selector
#: transport writes zero-copy; 3.11's copies it into its buffer).
_TRANSPORT_KEEPS_VIEWS = sys.version_info >= (3, 12)


def _keep_pages(buffer: object) -> int:
    """A ``drop_mapped_pages`` that drops nothing (after madvise failed once)."""
    return 0


async def _go_on(coro: Coroutine[asyncio.Future[Any] | None, None, None],
                 awaited: asyncio.Future[Any] | None) -> None:
    """Drive ``coro`` (already started by hand, now waiting on the future ``awaited``, or on
    None for a bare ``asyncio.sleep(0)`` turn) to its end, as the task it would have been:
    wake when what it waits on is done, then resume it, and it reads the outcome of its own
    awaitable. Cancelling this task cancels what ``coro`` waits on, as a Task does."""
    loop = asyncio.get_running_loop()
    while True:
        if awaited is None:
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                try:
                    awaited = coro.throw(asyncio.CancelledError())
                except StopIteration:
                    return
                continue
        else:
            wake = loop.create_future()

            def on_done(_future: asyncio.Future[Any],
                        wake: asyncio.Future[None] = wake) -> None:
                if not wake.done():
                    wake.set_result(None)

            awaited.add_done_callback(on_done)
            try:
                await wake
            except asyncio.CancelledError:
                awaited.remove_done_callback(on_done)
                if not awaited.cancel():
                    # What it waited on is done already: the cancellation goes in here.
                    try:
                        awaited = coro.throw(asyncio.CancelledError())
                    except StopIteration:
                        return
                    continue
        try:
            awaited = coro.send(None)
        except StopIteration:
            return


def _throttle_ms_of(response: object) -> int:
    """The throttle time a response tells its client (0 for none)."""
    if isinstance(response, RawResponse):
        return response.throttle_time_ms
    throttle = getattr(response, "throttle_time", None)
    if throttle is None or not throttle:
        return 0
    return int(throttle.total_seconds() * 1000)


class _Slot:
    """One request's place in the response order: ``parts`` once answered (an empty tuple
    for no response)."""

    __slots__ = ("parts", "done", "released", "api_key", "received_s")

    def __init__(self, api_key: int = -1, received_s: float = 0.0) -> None:
        self.parts: Sequence[BytesLike] | None = None
        self.done = False
        self.released = False  # never to be answered (see Connection._release)
        self.api_key = api_key  # -1: not timed (RequestMetrics' TotalTimeMs)
        self.received_s = received_s  # when its bytes were read (monotonic)


class DropPages(Protocol):
    """``drop_mapped_pages(buffer)`` of the store's backend: drops the pages of a written view
    of a segment file from the page tables; returns how many bytes it dropped."""

    def __call__(self, buffer: Buffer) -> int:
        """Drop the pages ``buffer`` covers."""


class Server(Protocol):
    """What a :class:`Connection` needs of its server (the broker's ``Server``, which imports
    this module): its limits, the handler table, the in-flight count and the callbacks."""

    in_flight: int
    #: Drops the pages of a written view of a segment file (the backend's; replaced by a
    #: no-op once madvise fails).
    drop_mapped_pages: DropPages

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop everything runs on."""

    @property
    def state(self) -> BrokerState | None:
        """The handlers' broker, made before the listener accepts the first connection."""

    @property
    def handlers(self) -> Mapping[int, ApiHandler]:
        """``{api_key: ApiHandler}``."""

    @property
    def request_bytes_max(self) -> int:
        """``socket.request.max.bytes``."""

    @property
    def sasl_receive_bytes_max(self) -> int:
        """``sasl.server.max.receive.size``: the largest frame before SASL authentication."""

    @property
    def queued_requests_max(self) -> int:
        """``queued.max.requests``."""

    @property
    def held_response_bytes_max(self) -> int:
        """Finished response bytes held before reading stops."""

    @property
    def socket_buffer_bytes(self) -> Mapping[int, int | None]:
        """``{socket option: size in bytes}``; None leaves the OS's size."""

    def admit(self, connection: Connection) -> bool:
        """Register a new connection (or hold it unread until a limit allows it: see
        connection_quotas.py); False when it is refused (the caller closes it)."""

    def forget(self, connection: Connection) -> None:
        """A connection was lost."""

    def request_finished(self) -> None:
        """A request was answered or dropped."""

    def answer_api_versions(self, header: protocol.RequestHeader,
                            frame: bytes) -> Sequence[BytesLike]:
        """The whole response frame (as parts) of an ApiVersions request."""


class Connection(asyncio.Protocol):
    """One client connection of ``server`` (a :class:`~seglog.server.broker.Server`, not
    imported here: the broker imports this module); see the module docstring.
    ``connection_id`` is unique per server; ``last_active_s`` is the monotonic time of the
    last read or write (for ``connections.max.idle.ms``); ``closed`` is a future done once
    the connection is lost."""

    def __init__(self, server: Server, connection_id: int,
                 security: ConnectionSecurity | None = None):
        self.server = server
        self.connection_id = connection_id
        #: The listener this connection came in on and who it is (see principal.py): every
        #: request's context carries it.
        self.security = security if security is not None else ConnectionSecurity()
        self.transport: asyncio.Transport | None = None
        self.client_host = ""
        self.client_port = 0
        self._buffer = bytearray()
        # A large request being received (see _start_frame): filled in place as it arrives,
        # then handed to its handler without a copy; _frame_filled bytes of it so far.
        self._frame: bytearray | None = None
        self._frame_filled = 0
        self._slots: deque[_Slot] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._reading_paused = False
        self._writing_paused = False
        self._closing = False  # no more requests are read; close once answered
        self._aborted = False
        self._processing = False  # inside _process_buffer (a response finishing in it waits)
        # Responses ready to write, written together at the end of this loop iteration: the
        # responses of pipelined requests that finish together leave in one send.
        self._out: list[BytesLike] = []
        self._flush_scheduled = False
        self._stalled = False  # complete frames wait in the buffer (back-pressure)
        # Response parts in order, finished and written in order but not yet handed to the
        # transport (the head may be the rest of a part already partly handed over).
        self._unwritten: deque[BytesLike] = deque()
        self._close_when_written = False  # close the transport once _unwritten is handed over
        self._close_scheduled = False
        self._held_bytes = 0  # finished responses not yet handed to the transport
        self._held_copied_bytes = 0  # of those, copies in the broker's memory (_copied_bytes)
        # Views written while the transport was over its high-water mark, whose pages are
        # dropped once it drains (Python >= 3.12 only; see the module docstring).
        self._unsent_views: list[memoryview] = []
        self.closed = asyncio.get_running_loop().create_future()
        self.last_active_s = time.monotonic()
        self._received_s = self.last_active_s  # the last read (RequestQueueTimeMs)
        self._muted_until_s = 0.0  # a quota's throttle: no reading before (loop time)
        self._unmute_handle: asyncio.TimerHandle | None = None

    # --- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.client_host, self.client_port = str(peer[0]), int(peer[1])
        if not self.server.admit(self):
            self._closing = True
            transport.abort()
            return
        if log.isEnabledFor(logging.DEBUG):
            log.debug("connection %d opened on listener %s from %s:%d", self.connection_id,
                      self.security.listener_name, self.client_host, self.client_port)
        # Any byte the socket does not take pauses writing, and writing resumes once it has
        # taken them all (see "Slow readers" in the module docstring). asyncio's TLS
        # transport pauses at size >= high (the socket transport at size > high): 1 there.
        tls = transport.get_extra_info("ssl_object") is not None
        transport.set_write_buffer_limits(high=1 if tls else 0, low=0)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            for option, size_bytes in self.server.socket_buffer_bytes.items():
                if size_bytes is not None:
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, option, size_bytes)
                    except OSError as exc:  # the OS refused the size: keep its own
                        log.warning("connection %d: socket buffer size %d refused: %s",
                                    self.connection_id, size_bytes, exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._unmute_handle is not None:
            self._unmute_handle.cancel()
            self._unmute_handle = None
        self._drop_pages(self._unsent_views)
        self._unsent_views = []
        # Nothing more is sent: let go of the responses (and the segments their views hold).
        self._out = []
        self._unwritten.clear()
        self._held_bytes = self._held_copied_bytes = 0
        for task in list(self._tasks):
            task.cancel()
        # Requests that will never be answered: a task cancelled before it ran never gets
        # to release its slot itself.
        dropped = len(self._slots)
        self._slots.clear()
        if dropped:
            self.server.in_flight -= dropped
            self.server.request_finished()
        self.server.forget(self)
        if not self.closed.done():
            self.closed.set_result(None)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("connection %d closed on listener %s from %s:%d (principal %s)%s",
                          self.connection_id, self.security.listener_name, self.client_host,
                          self.client_port, self.security.principal,
                          f": {exc}" if exc is not None else "")

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self.last_active_s = self._received_s = time.monotonic()
        start = 0
        if self._frame is not None:
            start = self._fill_frame(data)
            if start == len(data) or self._closing:
                self._flush_or_update_reading()
                return
        if self._buffer or self._processing or type(data) is not bytes:
            self._buffer += memoryview(data)[start:] if start else data
            self._process_buffer()
            return
        # Nothing held from before: the whole frames are read from ``data`` itself, each a
        # view of it (bytes do not change: no copy into the buffer, none out of it), and
        # only what is left (a part of a frame, or frames back-pressure holds back) is kept.
        self._processing = True
        try:
            with memoryview(data) as whole:
                view = whole[start:] if start else whole
                position = self._process_frames_of(view, copy=False)
                if position < len(view) and not self._aborted:
                    rest = view[position:]
                    if not self._start_frame(rest):
                        self._buffer += rest
        finally:
            self._processing = False
        self._flush_or_update_reading()

    def _start_frame(self, rest: memoryview) -> bool:
        """When ``rest`` (what is left of the bytes read, nothing held before it) is the start
        of one large request not yet whole: copy it into a buffer of the request's size, which
        the next reads fill (:meth:`_fill_frame`); True then. A large request gathered in the
        growing buffer instead is copied each time the buffer grows and once more out of it
        (a 350 KB Produce of librdkafka's defaults arrives in two or three reads): a quarter
        of the broker's CPU went to those copies. The size is committed only once a quarter
        of it has arrived (a client cannot make the broker hold more than four times what it
        sent); Kafka allocates a request's declared size from its first read."""
        if self._stalled or self._closing or len(rest) < _SIZE_BYTES:
            return False  # the frames after a back-pressure stop were not checked
        (size,) = _SIZE.unpack_from(rest)
        received = len(rest) - _SIZE_BYTES
        # _process_frames_of checked the size against the limit before it stopped here.
        if size < _FRAME_BYTES_MIN or received >= size or received * 4 < size:
            return False
        state = self.server.state
        assert state is not None  # made before the listener accepts the first connection
        frame = state.wire.frame_buffer(size)
        with memoryview(frame) as into:  # see _fill_frame: one copy, not two
            into[:received] = rest[_SIZE_BYTES:]
        self._frame = frame
        self._frame_filled = received
        return True

    def _fill_frame(self, data: bytes) -> int:
        """Copy the start of ``data`` into the large request being received; once it is whole,
        dispatch it (a view of the buffer, which nothing writes again). Returns the bytes of
        ``data`` taken. Back-pressure is checked as for any whole frame: a read the loop had
        already scheduled is delivered even after ``pause_reading`` (asyncio's selector
        transport does not look again), so the request may arrive while it must wait."""
        frame = self._frame
        assert frame is not None
        filled = self._frame_filled
        taken = min(len(frame) - filled, len(data))
        chunk = memoryview(data)[:taken] if taken < len(data) else data
        # Through a memoryview: CPython's bytearray slice assignment copies a value that is
        # not a bytearray into a new one first, then from it (two copies of each read).
        with memoryview(frame) as into:
            into[filled:filled + taken] = chunk
        filled += taken
        self._frame_filled = filled
        if filled < len(frame):
            return taken
        self._frame = None
        self._processing = True
        try:
            if self._reading_paused_by_us():
                # It waits in the buffer as any whole frame does (one copy, rarely).
                self._buffer += _SIZE.pack(len(frame))
                self._buffer += frame
                self._stalled = True
            else:
                self._dispatch(memoryview(frame))
        finally:
            self._processing = False
        return taken

    def eof_received(self) -> bool:
        # The client closed its side. Kafka closes the connection then (it has no half-open
        # connections): the responses already finished are written, handlers still waiting
        # are cancelled (connection_lost) and their answers dropped. The transport stays
        # open (True) until the responses are handed to it; _write_some closes it then.
        self._closing = True
        self._close_once_written()
        # asyncio's TLS transport cannot stay half open (it warns on True and shuts down
        # after flushing what it was handed).
        return not self.security.uses_tls

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._unsent_views:
            self._drop_pages(self._unsent_views)
            self._unsent_views = []
        self._write_some()  # the next chunks, then reading resumes if it may

    # --- reading requests --------------------------------------------------------------------

    def _process_buffer(self) -> None:
        if self._processing:
            return
        self._processing = True
        try:
            self._process_frames()
        finally:
            self._processing = False
        self._flush_or_update_reading()

    def _flush_or_update_reading(self) -> None:
        """After the frames read so far were dispatched: the answers they finished at once go
        out now, in one write (a ``call_soon`` would cost each read a second turn of the loop,
        an ``epoll_wait`` with it); then reading goes on or pauses as the state says."""
        if self._out and not self._flush_scheduled:
            self._flush()  # ends by updating reading (or going on with held frames)
        else:
            self._update_reading()

    def _process_frames(self) -> None:
        buffer = self._buffer
        with memoryview(buffer) as view:  # released before the buffer is trimmed
            position = self._process_frames_of(view, copy=True)
        if self._aborted:
            return
        if position:
            del buffer[:position]
        if len(buffer) > _SIZE_BYTES:
            with memoryview(buffer) as rest:
                started = self._start_frame(rest)
            if started:
                buffer.clear()

    def _process_frames_of(self, view: memoryview, *, copy: bool) -> int:
        """Dispatch the whole frames at the start of ``view`` (each a copy when ``copy``: the
        buffer under ``view`` changes afterwards; else a view of it) while reading may go on;
        returns the bytes taken."""
        limit = sasl_request_bytes_max(  # sasl.server.max.receive.size until authenticated
            self.security, authenticated_max=self.server.request_bytes_max,
            unauthenticated_max=self.server.sasl_receive_bytes_max)
        position = 0
        end = len(view)
        self._stalled = False
        while end - position >= _SIZE_BYTES and not self._closing:
            if self._reading_paused_by_us():
                # Back-pressure: the frames left wait until responses drain.
                self._stalled = True
                break
            (size,) = _SIZE.unpack_from(view, position)
            if size < 0 or size > limit:
                # Kafka's NetworkReceive: InvalidReceiveException; the connection closes.
                log.warning("connection %d from %s:%d: request size %d outside 0..%d "
                            "(socket.request.max.bytes); closing", self.connection_id,
                            self.client_host, self.client_port, size, limit)
                # Answers to the requests before it still go out, as Kafka's do (it
                # reads one request at a time): a stored Produce's ack is never lost.
                self.close_when_answered()
                break
            start = position + _SIZE_BYTES
            if end - start < size:
                break
            position = start + size
            self._dispatch(bytes(view[start:position]) if copy else view[start:position])
        return position

    def _dispatch(self, frame: bytes | memoryview) -> None:
        server = self.server
        try:
            api_key, api_version, _ = protocol.peek_request_head(frame)
            sasl_check_request(self.security, api_key)  # SASL: Kafka's order, or closed
            handler = server.handlers.get(api_key)
            if type(frame) is not bytes and (handler is None or not handler.raw_request):
                frame = bytes(frame)  # the decoders and ApiVersions read bytes
            if api_key == protocol.API_VERSIONS_KEY:
                header = protocol.parse_request_header(
                    frame, flexible=protocol.is_flexible_request(api_key, api_version))
                parts = server.answer_api_versions(
                    header, frame if isinstance(frame, bytes) else bytes(frame))
                state = server.state
                if state is not None:
                    state.metrics.received(api_key, api_version,
                                           (time.monotonic() - self._received_s) * 1000.0)
                self._finish(self._new_slot(_Slot(api_key, self._received_s)), parts)
                return
            if handler is None:
                raise UnsupportedVersionError(f"API key {api_key} is not served")
            if not handler.min_version <= api_version <= handler.max_version:
                raise UnsupportedVersionError(
                    f"API key {api_key} version {api_version} outside "
                    f"{handler.min_version}..{handler.max_version}")
            state = server.state
            assert state is not None  # made before the listener accepts the first connection
            flexible = protocol.is_flexible_request(api_key, api_version)
            # The backend's fast path reads the usual header; the full parser any other
            # (and refuses what is malformed).
            head = state.wire.read_request_header(frame, flexible)
            if head is None:
                head = protocol.parse_request_header(frame, flexible=flexible)
            correlation_id, client_id, body_offset = head[2], head[3], head[4]
            if handler.raw_request:
                request: Any = memoryview(frame)[body_offset:]
            else:
                request = protocol.read_request_body(api_key, api_version, frame, body_offset)
        except (InvalidRequestError, UnsupportedVersionError, IllegalSaslStateError) as exc:
            log.warning("connection %d from %s:%d: %s; closing", self.connection_id,
                        self.client_host, self.client_port, exc)
            self.close_when_answered()  # after the earlier answers, as Kafka
            return
        ctx = RequestContext(api_key, api_version, correlation_id, client_id,
                             self.connection_id, self.client_host, self.client_port, state,
                             self.security)
        now_s = time.monotonic()
        state.metrics.received(api_key, api_version, (now_s - self._received_s) * 1000.0)
        slot = _Slot(api_key, self._received_s)
        self._slots.append(slot)  # _new_slot, written out: once per request
        server.in_flight += 1
        # The handler's first step runs now, in request order: a handler that never waits
        # (most of them: Produce, Metadata, commits) is answered without a task, and the
        # bytes it holds count before the next frame is dispatched. One that waits goes on
        # as a task from where it stopped.
        run = self._run(handler.handle, ctx, request, slot)
        try:
            awaited = run.send(None)
        except StopIteration:
            return
        task = server.loop.create_task(_go_on(run, awaited))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _new_slot(self, slot: _Slot | None = None) -> _Slot:
        slot = _Slot() if slot is None else slot
        self._slots.append(slot)
        self.server.in_flight += 1
        return slot

    async def _run(self, handle: Handle, ctx: RequestContext, request: Any,
                   slot: _Slot) -> None:
        try:
            response = await handle(ctx, request)
            parts = self._encode(ctx, response)
        except asyncio.CancelledError:
            self._release(slot)
            raise
        except CloseConnection as exc:
            log.info("connection %d from %s:%d: closed after API key %d v%d: %s",
                     self.connection_id, self.client_host, self.client_port, ctx.api_key,
                     ctx.api_version, exc)
            if exc.response is not None:  # answered, then closed (a failed SASL login)
                self._finish(slot, self._encode(ctx, exc.response))
                self.close_when_answered()
                return
            self._close_at(slot)
            return
        except Exception:
            log.exception("connection %d from %s:%d: handler of API key %d v%d failed; closing",
                          self.connection_id, self.client_host, self.client_port, ctx.api_key,
                          ctx.api_version)
            self._close_at(slot)
            return
        self._finish(slot, parts)
        throttle_ms = response.throttle_time_ms if type(response) is RawResponse \
            else _throttle_ms_of(response)
        if throttle_ms > 0:
            self.mute_for_ms(throttle_ms)

    def mute_for_ms(self, throttle_ms: int) -> None:
        """A quota throttles this client (KIP-219): read no request from it for
        ``throttle_ms`` from now (the responses already finished still go out)."""
        loop = self.server.loop
        until_s = loop.time() + throttle_ms / 1000.0
        if until_s <= self._muted_until_s:
            return
        self._muted_until_s = until_s
        if self._unmute_handle is not None:
            self._unmute_handle.cancel()
        self._unmute_handle = loop.call_at(until_s, self._unmute)
        self._update_reading()

    @property
    def muted(self) -> bool:
        """Whether a quota's throttle keeps this connection from reading now."""
        return self._unmute_handle is not None

    def _unmute(self) -> None:
        self._unmute_handle = None
        if self._closing:
            return
        if self._stalled and not self._processing and not self._reading_paused_by_us():
            self._process_buffer()
        else:
            self._update_reading()

    def _encode(self, ctx: RequestContext, response: Response) -> Sequence[BytesLike]:
        if type(response) is RawResponse and response.parts:  # the usual hand-encoded body
            return protocol.encode_response(
                ctx.correlation_id, body_parts=response.parts,
                flexible=protocol.is_flexible_response(ctx.api_key, ctx.api_version))
        if response is None or (isinstance(response, RawResponse) and not response.parts):
            return ()  # no response (a RawResponse without parts only mutes: acks=0)
        flexible = protocol.is_flexible_response(ctx.api_key, ctx.api_version)
        if isinstance(response, RawResponse):
            body = response.parts
        else:
            expected = protocol.response_class(ctx.api_key, ctx.api_version)
            if type(response) is not expected:
                raise TypeError(f"handler of API key {ctx.api_key} v{ctx.api_version} returned "
                                f"{type(response).__name__}, not {expected}")
            body = (protocol.encode_body(response),)
        return tuple(protocol.encode_response(ctx.correlation_id, flexible=flexible,
                                              body_parts=body))

    # --- writing responses -------------------------------------------------------------------

    def _finish(self, slot: _Slot, parts: Sequence[BytesLike]) -> None:
        if slot.released:
            return  # a request after one that closed the connection: never answered
        slot.parts = parts
        slot.done = True
        state = self.server.state
        if slot.api_key >= 0 and state is not None:
            state.metrics.answered(slot.api_key, (time.monotonic() - slot.received_s) * 1000.0)
        held = copied = 0
        for part in parts:
            if type(part) is bytes:  # the usual encoded header and body: in our memory
                held += len(part)
                copied += len(part)
            else:
                held += _nbytes(part)
                copied += _copied_bytes(part)
        self._held_bytes += held
        self._held_copied_bytes += copied
        slots = self._slots
        transport = self.transport
        while slots and slots[0].done:
            head = slots.popleft()
            self.server.in_flight -= 1
            if head.parts:
                self._out.extend(head.parts)
        if self._out and not self._flush_scheduled and not self._processing:
            # A handler that finished later (a task): written from the next turn, with the
            # other answers finished in this one. While frames are being dispatched, the
            # dispatch writes what they finished when it ends (_flush_or_update_reading).
            self._flush_scheduled = True
            self.server.loop.call_soon(self._flush)
        self.last_active_s = time.monotonic()
        self.server.request_finished()
        if self._closing:
            if not slots and transport is not None and not self._aborted:
                self._close_once_written()
            return
        if self._processing:
            return  # _process_buffer goes on with the next frame itself
        if self._stalled and not self._reading_paused_by_us():
            self._process_buffer()
        else:
            self._update_reading()

    def _flush(self) -> None:
        """Queue the responses gathered since the last flush for writing, and write what the
        transport takes now (one send for the small responses finished together)."""
        self._flush_scheduled = False
        if self._out:
            self._unwritten.extend(self._out)
            self._out = []
        self._write_some()

    def _write_some(self) -> None:
        """Hand the transport the queued response bytes a chunk at a time while it holds
        nothing unsent; then close (when asked) or let reading go on."""
        transport = self.transport
        unwritten = self._unwritten
        if transport is None or transport.is_closing():
            unwritten.clear()  # the connection is going: nothing more is sent
            self._held_bytes = self._held_copied_bytes = 0
            return
        views: list[memoryview] = []
        while unwritten and not self._writing_paused and not transport.is_closing():
            chunk = self._next_chunk()
            transport.write(chunk)  # may call pause_writing at once
            if type(chunk) is memoryview:
                views.append(chunk)
        if views:
            self.last_active_s = time.monotonic()
            # The pages sent leave the page tables (see the module docstring).
            if _TRANSPORT_KEEPS_VIEWS and self._writing_paused:
                self._unsent_views.extend(views)
            else:
                self._drop_pages(views)
        if not unwritten and self._close_when_written:
            # Closed from the next loop turn: this may run inside the transport's own write
            # callback (resume_writing), where a close with nothing buffered makes the
            # transport report the connection lost twice.
            if not self._close_scheduled:
                self._close_scheduled = True
                self.server.loop.call_soon(self._close_transport)
            return
        if self._stalled and not self._closing and not self._processing \
                and not self._reading_paused_by_us():
            self._process_buffer()  # the held responses that stopped reading are written
        else:
            self._update_reading()

    def _close_transport(self) -> None:
        """Close the transport (it sends what it holds first), unless responses came to be
        written since the close was planned: those first."""
        self._close_scheduled = False
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self._out or self._unwritten:
            self._flush()  # plans the close again once they are handed over
            return
        transport.close()

    def _next_chunk(self) -> BytesLike:
        """Take the next write off the queue: small parts (headers, encoded bodies) joined up
        to about a chunk, or up to a chunk of a large part (a view of it, no copy), so that a
        record set is copied at most once, by the transport, a chunk at most."""
        unwritten = self._unwritten
        head = unwritten[0]
        if _nbytes(head) >= _JOIN_BYTES_MAX:
            view = head if type(head) is memoryview else memoryview(head)
            if view.nbytes <= RESPONSE_WRITE_CHUNK_BYTES:
                unwritten.popleft()
                chunk: BytesLike = head
            else:
                if view.itemsize != 1:
                    view = view.cast("B")
                chunk = view[:RESPONSE_WRITE_CHUNK_BYTES]
                unwritten[0] = view[RESPONSE_WRITE_CHUNK_BYTES:]
            self._held_bytes -= _nbytes(chunk)
            self._held_copied_bytes -= _copied_bytes(chunk)
            return chunk
        small: list[BytesLike] = []
        small_bytes = 0
        while unwritten and small_bytes < RESPONSE_WRITE_CHUNK_BYTES:
            part = unwritten[0]
            size_bytes = _nbytes(part)
            if size_bytes >= _JOIN_BYTES_MAX:
                break
            unwritten.popleft()
            small.append(part)
            small_bytes += size_bytes
            self._held_copied_bytes -= _copied_bytes(part)
        self._held_bytes -= small_bytes
        return small[0] if len(small) == 1 else b"".join(small)

    def _drop_pages(self, views: list[memoryview]) -> None:
        """Drop the segment pages of ``views``, written, from the broker's page tables (see
        the module docstring); the backend leaves views of anything else alone."""
        server = self.server
        for part in views:
            try:
                server.drop_mapped_pages(part)
            except OSError as exc:
                # madvise refused (a broker with its memory locked, say): serve on, with
                # the pages mapped as before.
                log.warning("dropping a sent Fetch response's pages failed (%s); sent segment "
                            "pages stay mapped from now on", exc)
                server.drop_mapped_pages = _keep_pages
                return

    def _close_at(self, slot: _Slot) -> None:
        """Close once the requests before ``slot`` are answered; ``slot`` and every request
        read after it go unanswered (Kafka reads one request of a connection at a time, so
        it never reads those), keeping the answers a client gets in request order."""
        slots = list(self._slots)
        index = slots.index(slot) if slot in slots else len(slots)
        for doomed in slots[index:]:
            self._release(doomed)
        self.close_when_answered()
        if not self._slots and self.transport is not None and not self.transport.is_closing():
            self._close_once_written()

    def _release(self, slot: _Slot) -> None:
        # A request that will never be answered (cancelled, or its connection is going).
        slot.released = True
        if slot in self._slots:
            if slot.parts:  # finished behind an earlier request: never to be written
                for part in slot.parts:
                    self._held_bytes -= _nbytes(part)
                    self._held_copied_bytes -= _copied_bytes(part)
                slot.parts = ()
            self._slots.remove(slot)
            self.server.in_flight -= 1
            self.server.request_finished()

    def _reading_paused_by_us(self) -> bool:
        server = self.server
        held_max = server.held_response_bytes_max
        return (len(self._slots) >= server.queued_requests_max or self._writing_paused
                or self._unmute_handle is not None
                or self._held_bytes > held_max
                or self._held_copied_bytes > min(held_max, RESPONSE_COPIED_BYTES_HELD_MAX))

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self._closing:
            return
        should_pause = self._reading_paused_by_us()
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    # --- closing -----------------------------------------------------------------------------

    @property
    def pending_requests(self) -> int:
        """Requests read and not yet answered (or not yet written)."""
        return len(self._slots)

    @property
    def unsent_response_bytes(self) -> int:
        """Bytes of finished responses not yet taken by the socket: held by the connection
        (behind an earlier request, or queued for the transport) or in the transport."""
        transport = self.transport
        in_transport = transport.get_write_buffer_size() if transport is not None else 0
        return self._held_bytes + in_transport

    @property
    def held_copied_response_bytes(self) -> int:
        """Of the finished response bytes the connection holds (not yet handed to the
        transport), those that are copies in the broker's memory rather than views of a
        mapped file (bounded by :data:`RESPONSE_COPIED_BYTES_HELD_MAX`, plus one response)."""
        return self._held_copied_bytes

    def _close_once_written(self) -> None:
        """Close the transport once every finished response is handed to it (it then sends
        them before it closes)."""
        self._close_when_written = True
        self._flush()

    def abort(self) -> None:
        """Close now, dropping unwritten responses (bad input, a failed handler)."""
        self._closing = True
        self._aborted = True
        if self.transport is not None:
            self.transport.abort()

    def close_when_answered(self) -> None:
        """Stop reading; close once every request read so far is answered (shutdown)."""
        if self._closing:
            return
        self._closing = True
        if self.transport is None:
            return
        if not self._slots:
            self._close_once_written()
        elif not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
