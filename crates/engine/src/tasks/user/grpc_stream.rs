//! A gRPC streaming call (server, client or bidirectional streaming) on
//! one HTTP/2 stream: its messages sent one after the other — each once,
//! or `count` in turn, `interval` apart — while the answer's messages are
//! read as they come, each counted and timed.
//!
//! The latency policy (the guide's gRPC chapter states it): the first
//! message received is timed from the stream's start (its head sent); each
//! later one from the later of the previous message received and the last
//! message sent — the time the stream waited for it. Each goes to its own
//! request entry ([`GrpcStream::first_message`], `next_message`), an HDR
//! histogram like any request's; the call's own entry times the whole
//! stream (its lifetime) and judges how it ended (its `grpc-status`, or
//! cancelled at its deadline, or reset).
//!
//! Streams and their messages are also counted in the run's socket
//! figures: streams opened, messages and bytes each way, and how each
//! ended (`server:ok`, `server:unavailable`, `error:<class>`,
//! `client:cancelled`).

use crate::connections::{Carrier, StreamSlot};
use crate::metrics::{ErrorClass, Outcome};
use crate::plan::GrpcStream;
use crate::shared::Shared;
use bytes::Bytes;
use futures_util::future::{select, Either};
use headroom_grpc::{MessageBoundaries, Method};
use headroom_http::exchange::Attempts;
use headroom_http::h2::{Duplex, H2Parts, Incoming};
use headroom_http::response::append_limited;
use headroom_http::{Capture, Captured, Failure, Response, MAX_CAPTURED_BODY};
use std::sync::Arc;
use std::time::Instant;

/// Sends the call's messages (its body's frames, as `plan` says;
/// `compressed`: the answer's may be, as `grpc-encoding` asked) and
/// reads its answer to the end: the response as [`Carrier::exchange`]
/// gives it (the body is the answer's frames, as far as `want` keeps
/// them).
pub(crate) async fn call(
    shared: &Shared,
    (plan, compressed): (&GrpcStream, bool),
    carrier: &Carrier,
    ((head, body), (want, captured), attempts): (H2Parts, (Capture, &mut Captured), &Attempts),
) -> Result<Response, Failure> {
    captured.clear();
    let messages = split_messages(body)?;
    // The body's length is not the stream's (its messages go `count`
    // times, or until the server ends it): no content-length, as gRPC
    // clients send none on a stream.
    let mut head = head;
    head.headers_mut().remove("content-length");
    let total = plan.count.map_or(messages.len(), |n| n as usize);
    let mut stream = carrier.h2()?.open_duplex(head, false, attempts).await?;
    let mut tally = Tally::opened(shared);
    let started = Instant::now();
    let mut sends = Sends {
        messages,
        total,
        sent: 0,
        next_due: started,
        last_sent: started,
    };
    let mut receiving = Receiving {
        boundaries: MessageBoundaries::new(compressed),
        since: started,
        first: true,
    };
    let mut response = Response {
        status: 0,
        bytes: 0,
        keep_alive: true,
    };
    loop {
        if let Err(failure) = sends.due(&mut stream, plan, &mut tally) {
            return Err(tally.failed(failure));
        }
        let incoming = {
            let next = std::pin::pin!(stream.next(want, captured));
            match sends.pending() {
                Some(due) => {
                    let due = std::pin::pin!(tokio::time::sleep_until(due.into()));
                    match select(next, due).await {
                        Either::Left((incoming, _)) => incoming,
                        Either::Right(_) => continue,
                    }
                }
                None => next.await,
            }
        };
        match incoming {
            Err(failure) => return Err(tally.failed(failure)),
            Ok(Incoming::Head { status, bytes }) => {
                response.status = status;
                response.bytes += bytes;
            }
            Ok(Incoming::Data(chunk)) => {
                response.bytes += chunk.len() as u64;
                if want.body {
                    append_limited(&mut captured.body, &chunk, MAX_CAPTURED_BODY);
                }
                let last_sent = sends.last_sent;
                if receiving.read(shared, plan, &chunk, last_sent).is_err() {
                    // Not gRPC's framing: nothing more of it can be read.
                    stream.cancel();
                    tally.ended(format!("error:{}", ErrorClass::GrpcMalformed.key()));
                    captured.grpc_status = None;
                    captured.body.clear();
                    return Ok(response);
                }
            }
            Ok(Incoming::End { bytes }) => {
                response.bytes += bytes;
                tally.ended(grpc_end(captured.grpc_status));
                return Ok(response);
            }
        }
    }
}

/// How a gRPC stream the server ended is counted in `closes`:
/// `server:<status>` (`server:no_status` without one).
pub(crate) fn grpc_end(status: Option<u32>) -> String {
    match status {
        Some(code) => match headroom_grpc::STATUS_NAMES.get(code as usize) {
            Some(name) => format!("server:{name}"),
            None => format!("server:{code}"),
        },
        None => "server:no_status".to_string(),
    }
}

/// The framed messages of a rendered or encoded body, each a slice of it.
fn split_messages(body: Bytes) -> Result<Vec<Bytes>, Failure> {
    let mut out = Vec::new();
    let mut at = 0;
    let frames = headroom_grpc::flagged_frames(&body).map_err(|_| Failure::MalformedRequest)?;
    for (_, payload) in frames {
        let len = 5 + payload.len();
        out.push(body.slice(at..at + len));
        at += len;
    }
    if out.is_empty() {
        return Err(Failure::MalformedRequest);
    }
    Ok(out)
}

/// The call's messages on their way out.
struct Sends {
    messages: Vec<Bytes>,
    total: usize,
    sent: usize,
    next_due: Instant,
    last_sent: Instant,
}

impl Sends {
    /// Sends every message due by now; the last one closes our side.
    fn due(
        &mut self,
        stream: &mut headroom_http::h2::Duplex,
        plan: &GrpcStream,
        tally: &mut Tally,
    ) -> Result<(), Failure> {
        let now = Instant::now();
        while self.sent < self.total && self.next_due <= now {
            let message = self.messages[self.sent % self.messages.len()].clone();
            let payload = message.len() as u64 - 5;
            self.sent += 1;
            stream.send(message, self.sent == self.total)?;
            self.last_sent = now;
            tally.sent(payload);
            if let Some(every) = plan.interval {
                // Paced from the stream's start: a late wake-up does not
                // push the messages after it later.
                self.next_due += every;
            }
        }
        Ok(())
    }

    /// When the next message is due, while some are left to send.
    fn pending(&self) -> Option<Instant> {
        (self.sent < self.total).then_some(self.next_due)
    }
}

/// The answer's messages as they are read.
struct Receiving {
    boundaries: MessageBoundaries,
    /// When the previous message was received (the stream's start before
    /// the first).
    since: Instant,
    first: bool,
}

impl Receiving {
    /// Counts and times the messages that end in `chunk`.
    fn read(
        &mut self,
        shared: &Shared,
        plan: &GrpcStream,
        chunk: &[u8],
        last_sent: Instant,
    ) -> Result<(), String> {
        let now = Instant::now();
        let mut recorder = shared.recorder.borrow_mut();
        self.boundaries.feed(chunk, |payload| {
            let (entry, since) = match self.first {
                true => (plan.first_message, self.since),
                false => (plan.next_message, self.since.max(last_sent)),
            };
            self.first = false;
            self.since = now;
            let outcome = Outcome {
                bytes: payload,
                attempts: 1,
                ..Default::default()
            };
            recorder.request_started();
            recorder.record(entry, since, Some(since), now, &outcome);
            let counts = recorder.sockets();
            counts.messages_received += 1;
            counts.bytes_received += payload;
        })
    }
}

/// The stream in the run's socket figures: opened now, ended once (how,
/// or `client:cancelled` when the call is dropped before its end — its
/// deadline passed, or the run stopped).
struct Tally<'a> {
    shared: &'a Shared,
    ended: bool,
}

impl<'a> Tally<'a> {
    fn opened(shared: &'a Shared) -> Tally<'a> {
        let mut recorder = shared.recorder.borrow_mut();
        recorder.socket_open(true);
        recorder.sockets().opened_grpc += 1;
        Tally {
            shared,
            ended: false,
        }
    }

    fn sent(&mut self, payload: u64) {
        let mut recorder = self.shared.recorder.borrow_mut();
        let counts = recorder.sockets();
        counts.messages_sent += 1;
        counts.bytes_sent += payload;
    }

    fn ended(&mut self, how: String) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let mut recorder = self.shared.recorder.borrow_mut();
        recorder.socket_open(false);
        recorder.sockets().close(how);
    }

    fn failed(&mut self, failure: Failure) -> Failure {
        self.ended(format!("error:{}", ErrorClass::from(failure).key()));
        failure
    }
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        self.ended("client:cancelled".into());
    }
}

/// A gRPC stream a session holds open (`grpc_stream` step): messages sent
/// one at a time by `send` steps, the answer's messages read one at a
/// time (decoded to JSON) by `expect` and `hold`, closed by `close` (our
/// side half-closed, the server's status awaited). Its opening entry is
/// recorded when it ends: the stream's lifetime and how it ended.
pub(crate) struct GrpcSocket {
    duplex: Duplex,
    method: Arc<Method>,
    /// The answer's bytes read and not yet a whole message.
    partial: Vec<u8>,
    captured: Captured,
    /// The opening entry, and when the stream opened.
    entry: usize,
    opened: Instant,
    /// Its place on an HTTP/2 connection.
    _slot: StreamSlot,
}

/// What a held gRPC stream gave next.
pub(crate) enum StreamRead {
    /// A message, decoded to JSON.
    Message(Vec<u8>),
    /// The server ended the stream: its `grpc-status` (`None`: none sent).
    Ended(Option<u32>),
}

impl GrpcSocket {
    /// Opens request `entry`'s stream (its head sent; no message yet).
    pub(crate) async fn open(
        (carrier, (mut head, _)): (&Carrier, H2Parts),
        method: Arc<Method>,
        (entry, slot): (usize, StreamSlot),
        attempts: &Attempts,
    ) -> Result<GrpcSocket, Failure> {
        // Messages go by `send` steps, as many as the session sends.
        head.headers_mut().remove("content-length");
        let duplex = carrier.h2()?.open_duplex(head, false, attempts).await?;
        Ok(GrpcSocket {
            duplex,
            method,
            partial: Vec::new(),
            captured: Captured::default(),
            entry,
            opened: Instant::now(),
            _slot: slot,
        })
    }

    /// Sends one message: `json` encoded as the method's input.
    pub(crate) fn send(&mut self, json: &[u8]) -> Result<u64, ErrorClass> {
        let json = std::str::from_utf8(json).map_err(|_| ErrorClass::MalformedRequest)?;
        let framed = self
            .method
            .encode_json(json)
            .map_err(|_| ErrorClass::MalformedRequest)?;
        let payload = framed.len() as u64 - 5;
        self.duplex
            .send(Bytes::from(framed), false)
            .map_err(ErrorClass::from)?;
        Ok(payload)
    }

    /// How the server's status judges the stream (`None`: OK; none sent:
    /// malformed).
    pub(crate) fn status_class(&self) -> Option<ErrorClass> {
        match self.captured.grpc_status {
            Some(code) => ErrorClass::of_grpc_status(code),
            None => Some(ErrorClass::GrpcMalformed),
        }
    }

    /// Gives the stream up (RST_STREAM CANCEL).
    pub(crate) fn cancel(&mut self) {
        self.duplex.cancel();
    }

    /// Closes our side: no more messages.
    pub(crate) fn half_close(&mut self) -> Result<(), Failure> {
        self.duplex.send(Bytes::new(), true)
    }

    /// The next message of the answer, or its end.
    pub(crate) async fn next(&mut self) -> Result<StreamRead, ErrorClass> {
        let want = Capture {
            grpc: true,
            ..Capture::default()
        };
        loop {
            if let Some(message) = self.whole_message()? {
                return Ok(StreamRead::Message(message));
            }
            match self
                .duplex
                .next(want, &mut self.captured)
                .await
                .map_err(ErrorClass::from)?
            {
                Incoming::Head { .. } => {}
                Incoming::Data(chunk) => self.partial.extend_from_slice(&chunk),
                Incoming::End { .. } => return Ok(StreamRead::Ended(self.captured.grpc_status)),
            }
        }
    }

    /// The first whole message in `partial`, decoded to JSON (taken out).
    fn whole_message(&mut self) -> Result<Option<Vec<u8>>, ErrorClass> {
        if self.partial.len() < 5 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([
            self.partial[1],
            self.partial[2],
            self.partial[3],
            self.partial[4],
        ]) as usize;
        if self.partial.len() < 5 + len {
            return Ok(None);
        }
        let frame: Vec<u8> = self.partial.drain(..5 + len).collect();
        let json = self
            .method
            .decode_message_to_json(&frame)
            .map_err(|_| ErrorClass::GrpcMalformed)?;
        Ok(Some(json.into_bytes()))
    }

    /// Records the opening entry: the stream's lifetime, ended as `error`
    /// says (`None`: OK), at `done`.
    pub(crate) fn record_end(&self, shared: &Shared, error: Option<ErrorClass>, done: Instant) {
        let outcome = Outcome {
            status: Some(200),
            error,
            attempts: 1,
            ..Default::default()
        };
        let mut recorder = shared.recorder.borrow_mut();
        recorder.request_started();
        recorder.record(self.entry, self.opened, Some(self.opened), done, &outcome);
    }
}
