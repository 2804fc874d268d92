#!/usr/bin/env python3
"""The shop `examples/shop/` runs against, written to verify what it gets:
HTTP/1.1 and HTTP/2 (cleartext, prior knowledge; Debian's python3-h2) on
one loopback port.

    shop_server.py PORT_FILE COUNTS_FILE

  GET  /products   a session's product list (`sid` cookie; a new session
                   gets one): 12 products, prices 5..120, some out of stock
  POST /cart       {"product": ID}, signed: adds it -> {"total": N}
  POST /checkout   {}, signed: the cart must be over 100 -> {"ok": true}

A signed request carries X-Timestamp and X-Signature = hex HMAC-SHA256 of
"TIMESTAMP\\nBODY" with the key "s3cr3t". COUNTS_FILE (JSON) keeps what the
server saw: requests per path, bad signatures, products added that were not
in stock in the list that session was last shown, adds to a cart already
over 100, checkouts of a cart not over 100, checkouts, and adds that took a
cart over 100 (each should be followed by a checkout).
"""

import hashlib
import hmac
import json
import os
import random
import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events

PORT_FILE, COUNTS_FILE = sys.argv[1], sys.argv[2]
SECRET = b"s3cr3t"
lock = threading.Lock()
counts = {
    "products": 0,
    "cart": 0,
    "checkout": 0,
    "bad_signature": 0,
    "not_in_stock": 0,
    "added_over_100": 0,
    "early_checkout": 0,
    "checkouts": 0,
    "passed_100": 0,
    "sessions": 0,
}
# sid -> {"shown": {id: stock}, "total": int}
sessions = {}
rng = random.Random(7)


def save():
    tmp = COUNTS_FILE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(counts, f)
    os.replace(tmp, COUNTS_FILE)


def cookie_sid(headers):
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "sid":
            return value
    return None


def signed(headers, body):
    ts = headers.get("x-timestamp", "")
    want = hmac.new(SECRET, (ts + "\n").encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, headers.get("x-signature", ""))


def app(method, path, headers, body):
    """(status, extra headers, JSON body) for one request."""
    with lock:
        try:
            return answer(method, path, headers, body)
        finally:
            save()


def answer(method, path, headers, body):
    extra = []
    sid = cookie_sid(headers)
    if path == "/products" and method == "GET":
        counts["products"] += 1
        if sid not in sessions:
            sid = "%016x" % rng.getrandbits(64)
            sessions[sid] = {"shown": {}, "total": 0}
            counts["sessions"] += 1
            extra.append(("set-cookie", "sid=%s; Path=/" % sid))
        products = [
            {"id": "p%d" % i, "price": rng.randint(5, 120), "stock": rng.choice([0, 0, 1, 3, 7])}
            for i in range(12)
        ]
        sessions[sid]["shown"] = {p["id"]: p for p in products}
        return 200, extra, {"products": products}
    if path not in ("/cart", "/checkout") or method != "POST":
        return 404, extra, {"error": "no such route"}
    counts[path[1:]] += 1
    if not signed(headers, body):
        counts["bad_signature"] += 1
        return 401, extra, {"error": "bad signature"}
    session = sessions.get(sid)
    if session is None:
        return 400, extra, {"error": "no session"}
    if path == "/cart":
        product = json.loads(body or b"{}").get("product")
        shown = session["shown"].get(product)
        if shown is None or shown["stock"] <= 0:
            counts["not_in_stock"] += 1
            return 409, extra, {"error": "not in stock"}
        if session["total"] > 100:
            counts["added_over_100"] += 1
            return 409, extra, {"error": "cart already over 100"}
        session["total"] += shown["price"]
        if session["total"] > 100:
            counts["passed_100"] += 1
        return 200, extra, {"total": session["total"]}
    if session["total"] <= 100:
        counts["early_checkout"] += 1
        return 409, extra, {"error": "cart not over 100"}
    counts["checkouts"] += 1
    session["total"] = 0
    return 200, extra, {"ok": True}


def serve_h1(sock, first):
    buf = first
    while True:
        while b"\r\n\r\n" not in buf:
            data = sock.recv(65536)
            if not data:
                return
            buf += data
        head, _, buf = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", "0"))
        while len(buf) < length:
            data = sock.recv(65536)
            if not data:
                return
            buf += data
        body, buf = buf[:length], buf[length:]
        status, extra, doc = app(method, target.split("?")[0], headers, body)
        payload = json.dumps(doc).encode()
        out = ["HTTP/1.1 %d X" % status, "Content-Type: application/json",
               "Content-Length: %d" % len(payload)]
        out += ["%s: %s" % kv for kv in extra]
        sock.sendall(("\r\n".join(out) + "\r\n\r\n").encode() + payload)


def serve_h2(sock, first):
    conn = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    streams = {}
    data = first
    while True:
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                streams[event.stream_id] = [dict(event.headers), b""]
            elif isinstance(event, h2.events.DataReceived):
                streams[event.stream_id][1] += event.data
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if getattr(event, "stream_ended", None) is not None:
                sid = event.stream_id
                headers, body = streams.pop(sid)
                plain = {k.lower(): v for k, v in headers.items() if not k.startswith(":")}
                # HTTP/2 may split cookies over several fields; h2 joins none.
                status, extra, doc = app(
                    headers[":method"], headers[":path"].split("?")[0], plain, body)
                payload = json.dumps(doc).encode()
                conn.send_headers(sid, [(":status", str(status)),
                                        ("content-type", "application/json"),
                                        ("content-length", str(len(payload)))] + extra)
                conn.send_data(sid, payload, end_stream=True)
        sock.sendall(conn.data_to_send())
        data = sock.recv(65536)
        if not data:
            return


def connection(sock):
    try:
        first = b""
        while len(first) < 24:
            data = sock.recv(65536)
            if not data:
                return
            first += data
            if not b"PRI * HTTP/2.0".startswith(first[:14]):
                break
        if first.startswith(b"PRI * HTTP/2.0"):
            serve_h2(sock, first)
        else:
            serve_h1(sock, first)
    except (OSError, ValueError, KeyError):
        pass
    finally:
        sock.close()


def main():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(512)
    save()
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.replace(PORT_FILE + ".tmp", PORT_FILE)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=connection, args=(sock,), daemon=True).start()


main()
