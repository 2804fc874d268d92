//! gRPC calls as headroom sends them: a method's message types (from
//! `.proto` files compiled at run time, a protoset, or the server's
//! reflection service), its JSON messages encoded to protobuf and framed
//! as gRPC frames them, answers decoded back to JSON for checks, and the
//! status codes.
//!
//! Messages are dynamic (prost-reflect): no code is generated per
//! service, so any method a schema describes can be called.

mod reflection;

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};
use std::path::{Path, PathBuf};

pub use reflection::{reflect, REFLECTION_TIMEOUT};

/// The message types a run's calls use.
#[derive(Clone, Debug)]
pub struct Schema {
    pool: DescriptorPool,
}

impl Schema {
    /// `.proto` files compiled here (protox: no `protoc` needed), their
    /// imports found in `include` (and beside each file).
    pub fn from_protos(files: &[PathBuf], include: &[PathBuf]) -> Result<Schema, String> {
        let mut paths: Vec<PathBuf> = include.to_vec();
        for f in files {
            let dir = f
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            let dir = if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir
            };
            if !paths.contains(&dir) {
                paths.push(dir);
            }
        }
        let set = protox::compile(files, &paths).map_err(|e| format!("{e}"))?;
        let pool = DescriptorPool::from_file_descriptor_set(set).map_err(|e| e.to_string())?;
        Ok(Schema { pool })
    }

    /// A protoset: a `FileDescriptorSet` as `protoc
    /// --descriptor_set_out --include_imports` writes it.
    pub fn from_protoset(bytes: &[u8]) -> Result<Schema, String> {
        let pool = DescriptorPool::decode(bytes)
            .map_err(|e| format!("not a protoset (FileDescriptorSet): {e}"))?;
        Ok(Schema { pool })
    }

    fn from_pool(pool: DescriptorPool) -> Schema {
        Schema { pool }
    }

    /// The services it describes, by full name.
    pub fn services(&self) -> Vec<String> {
        self.pool
            .services()
            .map(|s| s.full_name().to_string())
            .collect()
    }

    /// Method `name`: `package.Service/Method` (or `package.Service.Method`).
    pub fn method(&self, name: &str) -> Result<Method, String> {
        let (service, method) = name
            .rsplit_once('/')
            .or_else(|| name.rsplit_once('.'))
            .ok_or_else(|| format!("`{name}` is not package.Service/Method"))?;
        let service = service.trim_start_matches('/');
        let Some(s) = self.pool.get_service_by_name(service) else {
            let known = self.services().join(", ");
            return Err(format!(
                "no service `{service}` in the schema (it has: {})",
                if known.is_empty() { "none" } else { &known }
            ));
        };
        let Some(m) = s.methods().find(|m| m.name() == method) else {
            let known: Vec<String> = s.methods().map(|m| m.name().to_string()).collect();
            return Err(format!(
                "service `{service}` has no method `{method}` (it has: {})",
                known.join(", ")
            ));
        };
        Ok(Method {
            path: format!("/{}/{}", s.full_name(), m.name()),
            input: m.input(),
            output: m.output(),
            client_streaming: m.is_client_streaming(),
            server_streaming: m.is_server_streaming(),
            compression: Compression::Identity,
        })
    }
}

/// One method: its HTTP/2 path and message types.
#[derive(Clone, Debug, PartialEq)]
pub struct Method {
    /// `/package.Service/Method`.
    pub path: String,
    pub input: MessageDescriptor,
    pub output: MessageDescriptor,
    pub client_streaming: bool,
    pub server_streaming: bool,
    /// How its messages are compressed each way (`[grpc] compression`).
    pub compression: Compression,
}

/// gRPC message compression (`grpc-encoding`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    #[default]
    Identity,
    Gzip,
}

impl Compression {
    pub fn parse(text: &str) -> Option<Compression> {
        match text {
            "identity" | "none" => Some(Compression::Identity),
            "gzip" => Some(Compression::Gzip),
            _ => None,
        }
    }

    /// Its `grpc-encoding` name; `None` for no compression.
    pub fn header(self) -> Option<&'static str> {
        match self {
            Compression::Identity => None,
            Compression::Gzip => Some("gzip"),
        }
    }

    /// A message as gRPC frames it, compressed so (flag 1) or not.
    fn frame(self, message: &[u8]) -> Vec<u8> {
        match self {
            Compression::Identity => frame(message),
            Compression::Gzip => {
                use std::io::Write as _;
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                let _ = gz.write_all(message);
                let packed = gz.finish().unwrap_or_default();
                let mut out = frame(&packed);
                out[0] = 1;
                out
            }
        }
    }

    /// A frame's payload as the message it carries: unpacked when its
    /// flag says compressed (refused when no compression was asked for).
    fn unpacked<'a>(
        self,
        compressed: bool,
        payload: &'a [u8],
    ) -> Result<std::borrow::Cow<'a, [u8]>, String> {
        use std::io::Read as _;
        match (compressed, self) {
            (false, _) => Ok(std::borrow::Cow::Borrowed(payload)),
            (true, Compression::Identity) => {
                Err("a compressed gRPC frame (none was asked for)".into())
            }
            (true, Compression::Gzip) => {
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(payload)
                    .take(MAX_UNPACKED as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| format!("a gzip gRPC frame that does not unpack: {e}"))?;
                if out.len() > MAX_UNPACKED {
                    return Err(format!(
                        "a gzip gRPC frame unpacks past {MAX_UNPACKED} bytes"
                    ));
                }
                Ok(std::borrow::Cow::Owned(out))
            }
        }
    }
}

/// Most bytes a compressed message may unpack to (a small frame that
/// unpacks to gigabytes is refused, not held).
pub const MAX_UNPACKED: usize = 64 * 1024 * 1024;

impl Method {
    /// A JSON request message (proto3's JSON mapping: field names as in
    /// the `.proto` or lowerCamelCase) encoded and framed. A method that
    /// streams its requests also takes a JSON array: each element one
    /// message, framed one after the other. Each compressed as the method
    /// says.
    pub fn encode_json(&self, json: &str) -> Result<Vec<u8>, String> {
        let wrong =
            |e: &dyn std::fmt::Display| format!("message for {}: {e}", self.input.full_name());
        if self.client_streaming && json.trim_start().starts_with('[') {
            let messages: Vec<serde_json::Value> =
                serde_json::from_str(json).map_err(|e| wrong(&e))?;
            let mut out = Vec::new();
            for value in messages {
                let message = DynamicMessage::deserialize(self.input.clone(), value)
                    .map_err(|e| wrong(&e))?;
                out.extend_from_slice(&self.compression.frame(&message.encode_to_vec()));
            }
            return Ok(out);
        }
        let mut de = serde_json::Deserializer::from_str(json);
        let message =
            DynamicMessage::deserialize(self.input.clone(), &mut de).map_err(|e| wrong(&e))?;
        de.end().map_err(|e| wrong(&e))?;
        Ok(self.compression.frame(&message.encode_to_vec()))
    }

    /// Whether a call carries more than one message either way (a stream).
    pub fn is_streaming(&self) -> bool {
        self.client_streaming || self.server_streaming
    }

    /// The answer's messages (gRPC frames) as JSON: a unary answer's one
    /// message as an object, a server stream's messages as an array of
    /// them (however many came).
    pub fn decode_to_json(&self, framed: &[u8]) -> Result<String, String> {
        let mut messages = self.decoded(framed)?;
        let value = match (self.server_streaming, messages.len()) {
            (false, 1) => messages.pop().expect("one message"),
            _ => serde_json::Value::Array(messages),
        };
        Ok(value.to_string())
    }

    /// One message of an answer (one frame) as a JSON object: a message a
    /// stream held in a session received.
    pub fn decode_message_to_json(&self, framed: &[u8]) -> Result<String, String> {
        match &self.decoded(framed)?[..] {
            [one] => Ok(one.to_string()),
            more => Err(format!("{} messages where one was expected", more.len())),
        }
    }

    /// The messages of `framed`, each decoded as the method's output.
    fn decoded(&self, framed: &[u8]) -> Result<Vec<serde_json::Value>, String> {
        let mut messages = Vec::new();
        for (compressed, payload) in flagged_frames(framed)? {
            let payload = self.compression.unpacked(compressed, payload)?;
            let message = DynamicMessage::decode(self.output.clone(), &payload[..])
                .map_err(|e| format!("answer is not a {}: {e}", self.output.full_name()))?;
            messages.push(serde_json::to_value(&message).map_err(|e| e.to_string())?);
        }
        Ok(messages)
    }
}

/// A message as gRPC frames it: uncompressed, its length, its bytes.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// The messages of a body of gRPC frames. Compressed frames are refused
/// (headroom asks for none unless `[grpc] compression` says).
pub fn frames(body: &[u8]) -> Result<Vec<&[u8]>, String> {
    flagged_frames(body)?
        .into_iter()
        .map(|(compressed, payload)| match compressed {
            false => Ok(payload),
            true => Err("a compressed gRPC frame (none was asked for)".to_string()),
        })
        .collect()
}

/// The frames of a body: each one's compressed flag and payload.
pub fn flagged_frames(mut body: &[u8]) -> Result<Vec<(bool, &[u8])>, String> {
    let mut out = Vec::new();
    while !body.is_empty() {
        if body.len() < 5 {
            return Err(format!("a gRPC frame cut short ({} bytes)", body.len()));
        }
        if body[0] > 1 {
            return Err(format!("a gRPC frame with flags {:#04x}", body[0]));
        }
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        let Some(payload) = body.get(5..5 + len) else {
            return Err(format!(
                "a gRPC frame of {len} bytes cut short at {}",
                body.len() - 5
            ));
        };
        out.push((body[0] == 1, payload));
        body = &body[5 + len..];
    }
    Ok(out)
}

/// Where gRPC messages end in a body read chunk by chunk, found without
/// keeping the body: each frame's 5-byte prefix read (across chunks when
/// split), its payload skipped.
#[derive(Clone, Debug, Default)]
pub struct MessageBoundaries {
    /// Compressed frames are expected (`grpc-encoding` was asked for).
    compressed: bool,
    prefix: [u8; 5],
    /// Prefix bytes read of the frame now being read.
    have: usize,
    /// Payload bytes of that frame still to come (once its prefix is read).
    left: u64,
}

impl MessageBoundaries {
    /// `compressed`: frames flagged compressed are expected too.
    pub fn new(compressed: bool) -> MessageBoundaries {
        MessageBoundaries {
            compressed,
            ..Default::default()
        }
    }

    /// Reads `chunk`, calling `ended` with the payload size of each
    /// message that ends in it. A compressed frame is an error unless
    /// `compressed`.
    pub fn feed(&mut self, mut chunk: &[u8], mut ended: impl FnMut(u64)) -> Result<(), String> {
        while !chunk.is_empty() {
            if self.have < 5 {
                let take = (5 - self.have).min(chunk.len());
                self.prefix[self.have..self.have + take].copy_from_slice(&chunk[..take]);
                self.have += take;
                chunk = &chunk[take..];
                if self.have < 5 {
                    return Ok(());
                }
                if self.prefix[0] > u8::from(self.compressed) {
                    return Err(format!("a gRPC frame with flags {:#04x}", self.prefix[0]));
                }
                let [_, a, b, c, d] = self.prefix;
                self.left = u32::from_be_bytes([a, b, c, d]) as u64;
            }
            let take = self.left.min(chunk.len() as u64);
            self.left -= take;
            chunk = &chunk[take as usize..];
            if self.left == 0 {
                ended(u32::from_be_bytes([
                    self.prefix[1],
                    self.prefix[2],
                    self.prefix[3],
                    self.prefix[4],
                ]) as u64);
                self.have = 0;
            }
        }
        Ok(())
    }

    /// A message begun and not ended (the answer ended mid-frame).
    pub fn is_cut(&self) -> bool {
        self.have > 0
    }
}

/// gRPC's status codes by name (`grpc-status` 0–16), as its spec names
/// them in snake case.
pub const STATUS_NAMES: [&str; 17] = [
    "ok",
    "cancelled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
    "unauthenticated",
];

/// `grpc-timeout`'s value for a deadline: the fewest digits in the finest
/// unit that holds it (at most 8 digits, as the spec allows).
pub fn timeout_header(d: std::time::Duration) -> String {
    let units = [
        (1u128, "n"),
        (1_000, "u"),
        (1_000_000, "m"),
        (1_000_000_000, "S"),
        (60_000_000_000, "M"),
        (3_600_000_000_000, "H"),
    ];
    let nanos = d.as_nanos();
    for (size, unit) in units {
        let n = nanos.div_ceil(size);
        if n < 100_000_000 {
            return format!("{n}{unit}");
        }
    }
    "99999999H".to_string()
}

#[cfg(test)]
mod tests;
