//! A user's connection on the event loop: its TCP socket and, to an
//! `https://` endpoint, the rustls session over it. rustls is sans-IO —
//! records in, records out — so the loop drives it on the socket's
//! readiness, as it drives the HTTP reader: no task, no tokio.
//!
//! Plain sockets pass reads and writes straight through; a TLS session
//! turns the request into records (queued in the session when the socket
//! is full, sent on its next writable edge) and the records read into the
//! response's bytes. The sockets are edge-triggered: a read goes on until
//! the socket is empty — a short read of it says so ([`Socket::emptied`];
//! over TLS, the socket's read, not the plaintext's, which one record may
//! cut short) — and the handshake runs until it must wait for the socket.

use headroom_http::tls::TlsClient;
use headroom_http::{tls_failure, Failure};
use mio::net::TcpStream;
use rustls::ClientConnection;
use std::io::{self, Read, Write};

pub(super) struct Socket {
    pub tcp: TcpStream,
    /// The TLS session, boxed: a plain connection's slot stays small.
    tls: Option<Box<ClientConnection>>,
    /// The last read of the socket under the TLS session came back short.
    socket_emptied: bool,
}

impl Socket {
    pub fn plain(tcp: TcpStream) -> Socket {
        Socket {
            tcp,
            tls: None,
            socket_emptied: false,
        }
    }

    /// Starts TLS on the connected socket (the handshake is driven by
    /// [`Socket::handshake`]).
    pub fn start_tls(&mut self, client: &TlsClient) -> Result<(), Failure> {
        let session = client.session().map_err(|e| tls_failure(&e))?;
        self.tls = Some(Box::new(session));
        Ok(())
    }

    /// Drives the TLS handshake after an event on the socket: `Ok(true)`
    /// once it is done (at once without TLS), `Ok(false)` while it waits
    /// for the socket.
    pub fn handshake(&mut self) -> Result<bool, Failure> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return Ok(true);
        };
        loop {
            match flush(tls, &mut self.tcp) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(_) => return Err(Failure::TlsHandshake),
            }
            if !tls.is_handshaking() {
                return Ok(true);
            }
            match tls.read_tls(&mut Noting::new(&mut self.tcp, &mut self.socket_emptied)) {
                // Closed during the handshake.
                Ok(0) => return Err(Failure::TlsHandshake),
                Ok(_) => {
                    if let Err(e) = tls.process_new_packets() {
                        // Its alert, if the socket takes it.
                        let _ = flush(tls, &mut self.tcp);
                        return Err(tls_failure(&e));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Failure::TlsHandshake),
            }
        }
    }

    /// Writes `bytes` of the request: `Ok(n)`, the bytes taken (sent, or
    /// queued as records in the TLS session until the socket takes them:
    /// [`Socket::flush`]); `WouldBlock` when nothing could be.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return self.tcp.write(bytes);
        };
        // Records still queued go first.
        flush(tls, &mut self.tcp)?;
        let n = tls.writer().write(bytes)?;
        match flush(tls, &mut self.tcp) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }

    /// Sends the TLS records still queued, on a writable edge.
    pub fn flush(&mut self) -> io::Result<()> {
        match self.tls.as_deref_mut() {
            Some(tls) => flush(tls, &mut self.tcp),
            None => Ok(()),
        }
    }

    /// Reads response bytes into `buf`: `Ok(0)` at the end of the stream
    /// (over TLS, the server's close_notify or a close without one, as
    /// browsers and the task path take it), `WouldBlock` when the socket
    /// has no more.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return self.tcp.read(buf);
        };
        loop {
            match tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            // No plaintext: more records from the socket (WouldBlock when
            // it has none; at its end, the reader says so next turn).
            tls.read_tls(&mut Noting::new(&mut self.tcp, &mut self.socket_emptied))?;
            if let Err(e) = tls.process_new_packets() {
                let _ = flush(tls, &mut self.tcp);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            // A reply the session owes (a key update): best effort.
            let _ = flush(tls, &mut self.tcp);
        }
    }
}

impl Socket {
    /// Whether a read that gave `short` (fewer bytes than asked for) left
    /// the socket empty, so that the next bytes bring an event: a plain
    /// socket's short read does; over TLS, only with the socket's own last
    /// read short too (a record may end a read of plaintext early while
    /// more wait in the socket).
    pub fn emptied(&self, short: bool) -> bool {
        short && (self.tls.is_none() || self.socket_emptied)
    }
}

/// The socket under a TLS session, noting whether its reads come back
/// short.
struct Noting<'a> {
    tcp: &'a mut TcpStream,
    short: &'a mut bool,
}

impl<'a> Noting<'a> {
    fn new(tcp: &'a mut TcpStream, short: &'a mut bool) -> Noting<'a> {
        Noting { tcp, short }
    }
}

impl Read for Noting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.tcp.read(buf)?;
        *self.short = n < buf.len();
        Ok(n)
    }
}

/// Writes the session's queued records until none is left or the socket
/// is full (`WouldBlock`).
fn flush(tls: &mut ClientConnection, tcp: &mut TcpStream) -> io::Result<()> {
    while tls.wants_write() {
        match tls.write_tls(tcp) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
