"""The connection state machine (cloudseed/provider/server/engine/connection.py) over an in-memory transport.

``MemoryTransport`` implements the transport side of the contract (write, pause/resume reading,
close, unsent bytes) in memory, and the clock is a variable: keep-alive, pipelining, backpressure
and deadlines are checked without sockets and without sleeping.
"""

from __future__ import annotations

import asyncio

from cloudseed.provider.server.engine.connection import Connection, ConnectionTable, Limits
from cloudseed.provider.server.engine.http import Request, Response

GET = b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class MemoryTransport:
    """Accepts up to ``room`` bytes at once, keeps the rest unsent, like a socket whose peer
    stopped reading; ``drain`` is the peer reading everything."""

    def __init__(self, peer: str = "10.0.0.1", room: int = 1 << 30):
        self.peer = peer
        self.room = room
        self.sent = bytearray()
        self.pending = bytearray()
        self.reading = True
        self.closed = False
        self.protocol: Connection = None  # type: ignore[assignment]

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        self.pending += data
        taken = min(self.room - len(self.sent), len(self.pending))
        if taken > 0:
            self.sent += self.pending[:taken]
            del self.pending[:taken]

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def set_ttl(self, ttl: int) -> None:
        pass

    def close(self) -> None:
        self.closed = True
        self.protocol.connection_lost(None)

    def drain(self) -> None:
        self.room = 1 << 30
        self.sent += self.pending
        self.pending.clear()
        self.protocol.writable()


class Listener:
    kind = "metadata"
    network = None

    def __init__(self) -> None:
        self.answered: list[str] = []

    def on_response(self, request: Request, response: Response) -> None:
        self.answered.append(request.path)


def connect(limits: Limits, handler=None, room: int = 1 << 30, clock: Clock | None = None):
    table = ConnectionTable(max_per_source=2, max_connections=10, clock=clock or Clock())
    listener = Listener()
    body = Response(200, "x" * 1000)
    connection = Connection(handler or (lambda request: body), listener, table, limits)
    transport = MemoryTransport(room=room)
    transport.protocol = connection
    connection.connection_made(transport)
    return connection, transport, listener, table


def test_keep_alive_pipelining_and_close():
    async def run():
        connection, transport, listener, _ = connect(Limits())
        connection.data_received(GET * 3 + b"GET /last HTTP/1.1\r\nConnection: close\r\n\r\n" + GET)
        assert transport.sent.count(b"HTTP/1.1 200 OK") == 4
        assert transport.sent.endswith(b"Connection: close\r\n\r\n" + b"x" * 1000)
        assert transport.closed and listener.answered == ["/x", "/x", "/x", "/last"]
    asyncio.run(run())


def test_pipelined_requests_beyond_the_cap_wait_for_the_next_turn():
    async def run():
        connection, transport, listener, _ = connect(Limits(max_pipelined=4))
        connection.data_received(GET * 10)
        assert len(listener.answered) == 4  # the rest after the other connections' turn
        await asyncio.sleep(0)
        assert len(listener.answered) == 8
        await asyncio.sleep(0)
        assert len(listener.answered) == 10 and not connection.scheduled
    asyncio.run(run())


def test_a_client_that_does_not_read_is_not_read_either():
    async def run():
        limits = Limits(max_pipelined=8, max_unsent=16 * 1024, max_buffered=4096)
        connection, transport, listener, _ = connect(limits, room=8 * 1024)
        connection.data_received(GET * 1000)
        for _ in range(10):
            await asyncio.sleep(0)
        answered = len(listener.answered)
        assert answered < 40, "kept answering a client that reads nothing"
        assert not transport.reading and len(transport.pending) <= limits.max_unsent + 8 * 1100
        connection.data_received(GET * 100)  # what was already on its way: kept, not answered
        assert len(listener.answered) == answered
        transport.drain()  # the client reads
        for _ in range(200):
            await asyncio.sleep(0)
            if transport.pending:
                transport.drain()
        assert len(listener.answered) == 1100 and transport.reading
    asyncio.run(run())


def test_while_a_handler_waits_only_max_buffered_bytes_are_read():
    async def run():
        gate = asyncio.Event()

        async def slow(request):
            await gate.wait()
            return Response(200, "ok")
        connection, transport, listener, _ = connect(Limits(max_buffered=1000), handler=slow)
        connection.data_received(GET)
        assert connection.busy and transport.reading
        connection.data_received(GET * 100)
        assert not transport.reading
        gate.set()
        for _ in range(1000):  # each answer takes a task and its callback: a few turns of the loop
            await asyncio.sleep(0)
            if len(listener.answered) == 101:
                break
        assert len(listener.answered) == 101 and transport.reading
    asyncio.run(run())


def test_head_deadline_and_idle_timeout_with_an_injected_clock():
    async def run():
        clock = Clock()
        limits = Limits(head_timeout=10, idle_timeout=60)
        connection, transport, _, table = connect(limits, clock=clock)
        connection.data_received(b"GET /x HTTP/1.1\r\n")
        assert connection.check(clock.now) is None  # the sweep sees the request begun
        clock.now += 9
        connection.data_received(b"X-Slow: 1\r\n")  # bytes keep coming, the request never ends
        assert connection.check(clock.now) is None
        clock.now += 2
        assert connection.check(clock.now) == "request not completed in time"
        table.sweep()
        assert transport.closed and len(table) == 0 and table.expired == 1

        idle, idle_transport, _, table = connect(limits, clock=clock)
        idle.data_received(GET)  # answered; then nothing
        table.sweep()  # the idle time counts from the first sweep after the last activity
        clock.now += 59
        table.sweep()
        assert not idle_transport.closed
        clock.now += 2
        table.sweep()
        assert idle_transport.closed
    asyncio.run(run())


def test_an_answer_may_ask_for_a_shorter_idle_deadline():
    """``close_when_idle`` (what the metadata app asks after an EC2 error answer): the connection
    closes after that many idle seconds, not ``idle_timeout``; more requests before then keep it open."""
    async def run():
        clock = Clock()

        def handler(request: Request) -> Response:
            if request.path == "/missing":
                request.connection.close_when_idle(1.0)
                return Response(404, "not found")
            return Response(200, "x")

        connection, transport, _, table = connect(Limits(idle_timeout=60), handler, clock=clock)
        connection.data_received(b"GET /missing HTTP/1.1\r\n\r\n")
        table.sweep()
        clock.now += 0.5
        connection.data_received(GET)  # the client goes on: not idle
        table.sweep()
        clock.now += 0.9
        table.sweep()
        assert not transport.closed and transport.sent.count(b"HTTP/1.1 ") == 2
        clock.now += 0.2
        table.sweep()
        assert transport.closed and table.expired == 1
    asyncio.run(run())


def test_connections_per_source_are_capped_and_counted_down():
    async def run():
        first, _, _, table = connect(Limits())
        assert table.refusal("10.0.0.1") is None
        second = Connection(lambda r: Response(200), Listener(), table, Limits())
        transport = MemoryTransport()
        transport.protocol = second
        second.connection_made(transport)
        refused = table.refusal("10.0.0.1")
        assert refused is not None and refused.startswith(b"HTTP/1.1 503") and b"10.0.0.1" in refused
        assert table.refusal("10.0.0.2") is None
        transport.close()
        assert table.refusal("10.0.0.1") is None and table.per_source == {"10.0.0.1": 1}
    asyncio.run(run())
