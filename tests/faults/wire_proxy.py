"""A TCP proxy in front of the database that can lose ONE reply: the request is forwarded
and applied by the server, then the connection is cut before the client reads the reply
(as when the server dies right after applying a request). Nothing in the app is mocked:
only the network between the app and a real embedded server is cut."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable
from typing import Any


class ReplyLosingProxy:
    """Forwards MongoDB wire messages both ways, one request and its reply at a time;
    `lose_reply_of` picks the one reply to drop (then `on_lost` runs, then the connection
    is cut)."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        # On (request, reply) bytes: True → drop that reply and cut the connection.
        self.lose_reply_of: Callable[[bytes, bytes], bool] | None = None
        # Run in a thread once the reply is dropped, before the connection is cut (e.g.
        # SIGKILL and restart the server).
        self.on_lost: Callable[[], None] | None = None
        self.lost: list[tuple[bytes, bytes]] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(BaseException):
                await t

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        sw = None
        try:
            sr, sw = await asyncio.open_connection(*self.upstream)
            while True:
                request = await _read_message(cr)
                if request is None:
                    break
                sw.write(request)
                await sw.drain()
                reply = await _read_message(sr)
                if reply is None:
                    break
                lose = self.lose_reply_of
                if lose is not None and lose(request, reply):
                    self.lose_reply_of = None
                    self.lost.append((request, reply))
                    if self.on_lost is not None:
                        await asyncio.to_thread(self.on_lost)
                    break  # applied by the server, reply never delivered
                cw.write(reply)
                await cw.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            for w in (cw, sw):
                if w is not None:
                    with contextlib.suppress(Exception):
                        w.close()
            self._tasks.discard(task)


async def _read_message(reader: asyncio.StreamReader) -> bytes | None:
    try:
        header = await reader.readexactly(4)
        (length,) = struct.unpack("<i", header)
        return header + await reader.readexactly(length - 4)
    except (asyncio.IncompleteReadError, OSError):
        return None
