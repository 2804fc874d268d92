"""An HTTP/3 server on aioquic (a second implementation beside Caddy, and a
hostile one), for headroom's HTTP/3 tests.

    h3_server.py MODE PORT_FILE COUNTS_FILE CERT KEY

Binds UDP 127.0.0.1 on a free port and writes the port to PORT_FILE. Every
request is answered `200 hello\\n` unless MODE says otherwise; COUNTS_FILE
(JSON) holds what the server did, rewritten after each request:
`answered`, `rejected`, `reset`, `closed`, `silent_dropped`.

Modes:
  ok        answer everything
  reject    every 5th request: RESET_STREAM H3_REQUEST_REJECTED (0x10b),
            never processed (the client may send it again)
  reset     every 5th request: RESET_STREAM H3_INTERNAL_ERROR (0x102)
            after it was processed (counted as answered by the app, then
            cut off)
  close     after 50 answers on a connection, close it with the
            application error H3_INTERNAL_ERROR
  silent    after 30 answers, drop every datagram (the server stops
            answering, as if its packets were filtered)
  resume    after 50 answers on a connection, close it (H3_NO_ERROR); session
            tickets kept, 0-RTT early data accepted on the next ones
  resume-reject  the same, but no ticket is ever found again: a client's
            0-RTT is refused (a full handshake instead)
"""
import asyncio
import json
import os
import signal
import socket
import sys

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.asyncio.server import QuicServer
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted, ProtocolNegotiated

MODE, PORT_FILE, COUNTS_FILE, CERT, KEY = sys.argv[1:6]
counts = {"answered": 0, "rejected": 0, "reset": 0, "closed": 0, "silent_dropped": 0,
          "handshakes": 0, "resumed": 0, "early_data_accepted": 0}
tickets = {}
seen = 0


def save():
    tmp = COUNTS_FILE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(counts, f)
    os.replace(tmp, COUNTS_FILE)


class Protocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = None
        self.answered_here = 0
        self.started = set()

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            counts["handshakes"] += 1
            counts["resumed"] += int(event.session_resumed)
            counts["early_data_accepted"] += int(event.early_data_accepted)
            save()
        if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
            self.h3 = H3Connection(self._quic)
        if self.h3 is None:
            return
        for e in self.h3.handle_event(event):
            # The tests send GETs: the head is the whole request (aioquic
            # reports a FIN that comes alone with no event).
            if isinstance(e, HeadersReceived) and e.stream_id not in self.started:
                self.started.add(e.stream_id)
                self.request(e.stream_id)

    def request(self, stream_id):
        global seen
        # One datagram may carry several requests: past the 30th, none is
        # answered even if its datagram came in before the silence.
        if MODE == "silent" and counts["answered"] >= 30:
            counts["silent_dropped"] += 1
            return
        seen += 1
        if MODE == "reject" and seen % 5 == 0:
            counts["rejected"] += 1
            self._quic.reset_stream(stream_id, 0x10B)
        elif MODE == "reset" and seen % 5 == 0:
            counts["answered"] += 1
            counts["reset"] += 1
            self._quic.reset_stream(stream_id, 0x102)
        else:
            counts["answered"] += 1
            self.answered_here += 1
            self.h3.send_headers(stream_id, [(b":status", b"200"), (b"content-length", b"6")])
            self.h3.send_data(stream_id, b"hello\n", end_stream=True)
            if MODE == "close" and self.answered_here == 50:
                counts["closed"] += 1
                self._quic.close(error_code=0x102, reason_phrase="closing under load")
            if MODE.startswith("resume") and self.answered_here == 50:
                counts["closed"] += 1
                self._quic.close(error_code=0x100, reason_phrase="done")
        save()
        self.transmit()


def main():
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    config.load_cert_chain(CERT, KEY)
    # A free port, taken and handed over (aioquic binds by number).
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()

    if MODE == "silent":
        received = QuicServer.datagram_received

        def datagram_received(self, data, addr):
            if counts["answered"] >= 30:
                counts["silent_dropped"] += 1
                return
            received(self, data, addr)

        QuicServer.datagram_received = datagram_received

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    resume = {}
    if MODE == "resume":
        resume = dict(session_ticket_handler=lambda t: tickets.__setitem__(t.ticket, t),
                      session_ticket_fetcher=lambda label: tickets.pop(label, None))
    elif MODE == "resume-reject":
        resume = dict(session_ticket_handler=lambda t: None,
                      session_ticket_fetcher=lambda label: None)
    loop.run_until_complete(
        serve("127.0.0.1", port, configuration=config, create_protocol=Protocol, **resume)
    )
    save()
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(str(port))
    os.replace(PORT_FILE + ".tmp", PORT_FILE)
    loop.add_signal_handler(signal.SIGTERM, loop.stop)
    loop.run_forever()
    save()


main()
