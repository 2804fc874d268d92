#!/usr/bin/env python3
"""A hostile HTTP/2 server (cleartext, prior knowledge) for headroom's tests,
on Python's `h2` library (Debian's python3-h2).

    h2_hostile.py MODE PORT_FILE COUNTS_FILE

Listens on a free loopback port (written to PORT_FILE), misbehaves as MODE
says, and keeps COUNTS_FILE (JSON) current with what it did, so a test can
hold headroom's counts to the server's (a request with `content-type:
application/grpc` is answered as gRPC: an empty message, `grpc-status: 0`):

  answered  requests answered 200 (they reached "the application")
  refused   streams reset with REFUSED_STREAM (never processed)
  reset     streams reset with INTERNAL_ERROR (processed, then failed)
  unprocessed  streams above the last stream id of a GOAWAY (never processed)
  dropped   streams open when the server closed the TCP connection
  pings     PINGs received (each answered)

MODES
  goaway      after 20 requests on a connection, GOAWAY (NO_ERROR) naming the
              last one answered; later streams are left unprocessed; the
              connection closes 50 ms later
  refuse      every 4th stream is refused (REFUSED_STREAM)
  reset       every 4th stream is reset (INTERNAL_ERROR)
  window0     SETTINGS_INITIAL_WINDOW_SIZE 0 and no WINDOW_UPDATE ever: a
              request body can never be sent
  floods      100 PINGs and 20 SETTINGS before every answer
  bigheaders  every 10th answer carries a 1 MB header block
  close       every 3rd connection is closed after 5 requests, streams open
  maxstreams1 SETTINGS_MAX_CONCURRENT_STREAMS 1; counts the most streams
              ever open at once on a connection (`most_concurrent`)
  plain       no misbehaviour: every request answered
"""

import json
import os
import socket
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.errors
import h2.exceptions
import h2.settings

MODE, PORT_FILE, COUNTS_FILE = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()
counts = {
    "answered": 0,
    "refused": 0,
    "reset": 0,
    "unprocessed": 0,
    "dropped": 0,
    "connections": 0,
    "most_concurrent": 0,
    "pings": 0,
}


def save():
    tmp = COUNTS_FILE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(counts, f)
    os.replace(tmp, COUNTS_FILE)


def count(key, n=1):
    with lock:
        counts[key] += n
        save()


def serve(sock, number):
    config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    if MODE == "window0":
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    if MODE == "maxstreams1":
        conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1})
    sock.sendall(conn.data_to_send())
    state = {"streams": 0, "answered": 0, "last": 0, "going_away": None}
    open_streams = set()
    grpc_streams = set()

    def handle(sid):
        """A whole request arrived on stream `sid`: misbehave or answer.
        Returns False when the connection is to be closed now."""
        state["streams"] += 1
        open_streams.discard(sid)
        if state["going_away"]:
            count("unprocessed")
            return True
        if MODE == "goaway" and state["answered"] >= 20:
            conn.close_connection(
                error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=state["last"]
            )
            state["going_away"] = time.monotonic()
            count("unprocessed")
            return True
        if MODE in ("refuse", "reset") and state["streams"] % 4 == 0:
            code = h2.errors.ErrorCodes.REFUSED_STREAM
            if MODE == "reset":
                code = h2.errors.ErrorCodes.INTERNAL_ERROR
            conn.reset_stream(sid, code)
            count("refused" if MODE == "refuse" else "reset")
            return True
        if MODE == "close" and number % 3 == 0 and state["streams"] > 5:
            count("dropped", len(open_streams) + 1)
            return False
        if MODE == "floods":
            for i in range(100):
                conn.ping(i.to_bytes(8, "big"))
            for _ in range(20):
                conn.update_settings({h2.settings.SettingCodes.HEADER_TABLE_SIZE: 4096})
        if sid in grpc_streams:
            grpc_streams.discard(sid)
            conn.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc")])
            conn.send_data(sid, b"\x00\x00\x00\x00\x00")
            conn.send_headers(sid, [("grpc-status", "0")], end_stream=True)
        else:
            headers = [(":status", "200"), ("content-type", "text/plain")]
            if MODE == "bigheaders" and state["streams"] % 10 == 0:
                headers += [("x-big-%d" % i, "v" * 1000) for i in range(1000)]
            conn.send_headers(sid, headers)
            conn.send_data(sid, b"hello h2\n", end_stream=True)
        state["answered"] += 1
        state["last"] = sid
        count("answered")
        return True

    try:
        while True:
            going_away = state["going_away"]
            if going_away and time.monotonic() - going_away > 0.05:
                return
            sock.settimeout(0.05 if going_away else 30)
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    open_streams.add(event.stream_id)
                    if ("content-type", "application/grpc") in event.headers:
                        grpc_streams.add(event.stream_id)
                    if MODE == "maxstreams1":
                        with lock:
                            counts["most_concurrent"] = max(
                                counts["most_concurrent"], len(open_streams)
                            )
                    if event.stream_ended is not None and not handle(event.stream_id):
                        return
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(
                        event.flow_controlled_length, event.stream_id
                    )
                    if event.stream_ended is not None and not handle(event.stream_id):
                        return
                elif isinstance(event, h2.events.PingReceived):
                    count("pings")
                elif isinstance(event, h2.events.StreamReset):
                    open_streams.discard(event.stream_id)
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
    except (ConnectionError, OSError, h2.exceptions.ProtocolError):
        return
    finally:
        sock.close()


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    save()
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.replace(PORT_FILE + ".tmp", PORT_FILE)
    number = 0
    while True:
        sock, _ = listener.accept()
        number += 1
        count("connections")
        threading.Thread(target=serve, args=(sock, number), daemon=True).start()


main()
