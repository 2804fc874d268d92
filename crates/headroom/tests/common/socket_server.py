#!/usr/bin/python3
"""WebSocket and server-sent-event servers for headroom's socket tests.

Usage: socket_server.py MODE PORT

  echo        the `websockets` library: echoes every message; counts them
  sse         event streams by hand: GET /events sends `tick` events, ends
              after 5, resumes after Last-Event-ID
  upgrade-200, no-handshake, fragmented, masked, oversized, ping-flood,
  close-1011, silent, invalid-utf8, bad-close-code, http-after-upgrade,
  ping-in-fragments, no-close-reply
              hostile WebSocket servers written by hand (see below)
  sse-huge, sse-no-newline, sse-retry-0, sse-retry-huge, sse-comments
              hostile event streams (see hostile_stream)

Every mode answers `GET /count` (on a fresh connection) with JSON: the
messages (or events) it received and sent, and the handshakes (echo: and
the `traceparent` of each traced handshake).
Prints `ready PORT` once listening (PORT 0: any free port, the one
printed — no race with another test for a port picked beforehand).
"""

import asyncio
import base64
import hashlib
import http
import json
import os
import struct
import sys

MODE, PORT = sys.argv[1], int(sys.argv[2])
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
counts = {"received": 0, "sent": 0, "handshakes": 0, "last_event_ids": []}


def accept_key(key):
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


async def read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return method, path, headers


def frame(opcode, payload, fin=True, mask=False):
    first = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", first, (0x80 if mask else 0) | n)
    elif n < 65536:
        head = struct.pack("!BBH", first, (0x80 if mask else 0) | 126, n)
    else:
        head = struct.pack("!BBQ", first, (0x80 if mask else 0) | 127, n)
    if mask:
        key = os.urandom(4)
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        return head + key + payload
    return head + payload


async def read_frame(reader):
    """One client frame: (opcode, payload)."""
    b1, b2 = await reader.readexactly(2)
    n = b2 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    key = await reader.readexactly(4) if b2 & 0x80 else b"\0\0\0\0"
    data = await reader.readexactly(n)
    return b1 & 0x0F, bytes(b ^ key[i % 4] for i, b in enumerate(data))


async def answer_count(writer):
    body = json.dumps(counts).encode()
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n" % len(body) + body
    )
    await writer.drain()
    writer.close()


async def hostile(reader, writer):
    try:
        method, path, headers = await read_head(reader)
        if path == "/count":
            return await answer_count(writer)
        if MODE == "sse":
            return await event_stream(path, headers, writer)
        if MODE.startswith("sse-"):
            return await hostile_stream(writer)
        if MODE == "upgrade-200":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
            await writer.drain()
            await asyncio.sleep(5)
            return
        if MODE == "no-handshake":
            await asyncio.sleep(3600)
            return
        counts["handshakes"] += 1
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept_key(headers["sec-websocket-key"]).encode() + b"\r\n\r\n"
        )
        await writer.drain()
        if MODE == "http-after-upgrade":
            # Upgraded, then an HTTP answer with a page: read as a frame,
            # 'H' sets RSV1 on a fragmented close (no frame may).
            page = b"<html>" + b"x" * 300 + b"</html>"
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(page) + page)
            await writer.drain()
            await asyncio.sleep(5)
            return
        while True:
            opcode, data = await read_frame(reader)
            if opcode == 8:
                if MODE == "no-close-reply":
                    # The close handshake never answered, the socket held.
                    await asyncio.sleep(30)
                    return
                writer.write(frame(8, data[:2]))
                await writer.drain()
                return
            if opcode not in (1, 2):
                continue
            counts["received"] += 1
            if MODE == "fragmented":
                third = max(1, len(data) // 3)
                writer.write(frame(opcode, data[:third], fin=False))
                writer.write(frame(0, data[third : 2 * third], fin=False))
                writer.write(frame(0, data[2 * third :], fin=True))
            elif MODE == "masked":
                writer.write(frame(opcode, data, mask=True))
            elif MODE == "oversized":
                # A header announcing 32 MiB; the body never comes.
                writer.write(struct.pack("!BBQ", 0x82, 127, 32 << 20))
            elif MODE == "ping-flood":
                for _ in range(2000):
                    writer.write(frame(9, b"p"))
                writer.write(frame(opcode, data))
            elif MODE == "close-1011":
                writer.write(frame(8, struct.pack("!H", 1011) + b"boom"))
                await writer.drain()
                await asyncio.sleep(1)
                return
            elif MODE == "silent":
                continue
            elif MODE == "invalid-utf8":
                writer.write(frame(1, b"hello \xff\xfe"))
            elif MODE == "bad-close-code":
                # 999 is no close code (RFC 6455 7.4): a protocol error.
                writer.write(frame(8, struct.pack("!H", 999) + b"odd"))
                await writer.drain()
                await asyncio.sleep(1)
                return
            elif MODE == "no-close-reply":
                writer.write(frame(opcode, data))
            elif MODE == "ping-in-fragments":
                half = max(1, len(data) // 2)
                writer.write(frame(opcode, data[:half], fin=False))
                writer.write(frame(9, b"mid"))
                writer.write(frame(0, data[half:], fin=True))
            counts["sent"] += 1
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def event_stream(path, headers, writer):
    """`tick` events 1..; the stream ends after 5 (a reconnect resumes
    after Last-Event-ID). Not an event stream for any path but /events."""
    if path != "/events":
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        return
    counts["handshakes"] += 1
    last = headers.get("last-event-id")
    if last is not None:
        counts["last_event_ids"].append(last)
    start = int(last) + 1 if last else 1
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Connection: close\r\n\r\nretry: 200\n: hello\n\n"
    )
    for n in range(start, start + 5):
        writer.write(b"id: %d\nevent: tick\ndata: n=%d\n\n" % (n, n))
        counts["sent"] += 1
        await writer.drain()
        await asyncio.sleep(0.02)
    writer.close()


async def hostile_stream(writer):
    """An event stream that misbehaves as MODE says."""
    counts["handshakes"] += 1
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Connection: close\r\n\r\n"
    )
    if MODE == "sse-huge":
        # One event of 20 MiB, then a good one: the first is refused whole.
        writer.write(b"data: ")
        for _ in range(20):
            writer.write(b"x" * (1 << 20))
            await writer.drain()
        writer.write(b"\n\ndata: after\n\n")
    elif MODE == "sse-no-newline":
        # Data that never ends a line, for as long as anyone listens.
        for _ in range(600):
            writer.write(b"data: " + b"y" * 1000)
            await writer.drain()
            await asyncio.sleep(0.01)
    elif MODE in ("sse-retry-0", "sse-retry-huge"):
        # One event, then the stream ends, asking for a reconnect at once
        # (0) or after 31,700 years.
        retry = b"0" if MODE == "sse-retry-0" else b"1000000000000"
        writer.write(b"retry: " + retry + b"\nid: 1\ndata: one\n\n")
    elif MODE == "sse-comments":
        # Only comments: no event ever.
        for _ in range(300):
            writer.write(b": keep-alive\n")
            await writer.drain()
            await asyncio.sleep(0.01)
    counts["sent"] += 1
    try:
        await writer.drain()
    except ConnectionError:
        pass
    writer.close()


async def main():
    if MODE == "echo":
        import websockets

        async def count_route(path, request_headers):
            # A traced handshake's trace context, as the server got it.
            if path != "/count" and "traceparent" in request_headers:
                counts.setdefault("traceparents", []).append(request_headers["traceparent"])
            if path == "/count":
                return (http.HTTPStatus.OK, [("Content-Type", "application/json")], json.dumps(counts).encode())
            return None

        async def echo(ws, path):
            counts["handshakes"] += 1
            async for message in ws:
                counts["received"] += 1
                await ws.send(message)
                counts["sent"] += 1

        server = await websockets.serve(
            echo, "127.0.0.1", PORT, process_request=count_route, max_size=None
        )
    else:
        server = await asyncio.start_server(hostile, "127.0.0.1", PORT)
    port = server.sockets[0].getsockname()[1]
    print(f"ready {port}", flush=True)
    async with server:
        await asyncio.sleep(3600)


asyncio.run(main())
