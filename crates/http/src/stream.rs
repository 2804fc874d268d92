//! A connection's byte stream: plain TCP or TLS over TCP. An enum rather
//! than a boxed trait object, so the plain path stays a direct call.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// Reads what arrived while the connection sat idle, without waiting
    /// and without leaving a waker behind (the next request's read
    /// registers its own): `None` when nothing did.
    pub fn read_idle(&mut self, spare: &mut [u8]) -> Option<io::Result<usize>> {
        match self {
            // Answered from tokio's readiness flag: no system call unless
            // the socket was seen readable, no waker registered.
            Stream::Plain(s) => match s.try_read(spare) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
                read => Some(read),
            },
            // TLS may hold decrypted bytes or a close_notify of its own.
            Stream::Tls(s) => {
                let mut cx = Context::from_waker(std::task::Waker::noop());
                let mut read = ReadBuf::new(spare);
                match Pin::new(s.as_mut()).poll_read(&mut cx, &mut read) {
                    Poll::Pending => None,
                    Poll::Ready(r) => Some(r.map(|()| read.filled().len())),
                }
            }
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
