//! Schemas from a `.proto` file and from a protoset, messages both ways.

use super::*;
use prost_reflect::prost_types::FileDescriptorSet;

const PROTO: &str = r#"syntax = "proto3";
package demo.v1;
message HelloRequest { string name = 1; int32 times = 2; }
message HelloReply { string message = 1; repeated string tags = 2; }
service Greeter {
  rpc SayHello (HelloRequest) returns (HelloReply);
  rpc Chat (stream HelloRequest) returns (stream HelloReply);
}
"#;

fn schema() -> (tempfile::TempDir, Schema) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("greeter.proto");
    std::fs::write(&file, PROTO).unwrap();
    let schema = Schema::from_protos(&[file], &[]).unwrap();
    (dir, schema)
}

#[test]
fn methods_are_found_by_either_spelling_and_unknown_ones_say_what_there_is() {
    let (_dir, s) = schema();
    let m = s.method("demo.v1.Greeter/SayHello").unwrap();
    assert_eq!(m.path, "/demo.v1.Greeter/SayHello");
    assert!(!m.client_streaming && !m.server_streaming);
    let chat = s.method("demo.v1.Greeter.Chat").unwrap();
    assert!(chat.client_streaming && chat.server_streaming);
    let e = s.method("demo.v1.Nope/SayHello").unwrap_err();
    assert!(e.contains("it has: demo.v1.Greeter"), "{e}");
    let e = s.method("demo.v1.Greeter/Nope").unwrap_err();
    assert!(e.contains("it has: SayHello, Chat"), "{e}");
}

#[test]
fn json_messages_encode_framed_and_answers_decode_to_json() {
    let (_dir, s) = schema();
    let m = s.method("demo.v1.Greeter/SayHello").unwrap();
    let framed = m.encode_json(r#"{"name": "ann", "times": 3}"#).unwrap();
    // name = 1 (length-delimited "ann"), times = 2 (varint 3).
    assert_eq!(framed, [0, 0, 0, 0, 7, 0x0a, 3, b'a', b'n', b'n', 0x10, 3]);
    let e = m.encode_json(r#"{"nmae": "ann"}"#).unwrap_err();
    assert!(e.contains("demo.v1.HelloRequest"), "{e}");
    assert!(m.encode_json("{} trailing").is_err());
    // A reply: message = 1 "hi", tags = 2 ["a", "b"].
    let reply = [0x0a, 2, b'h', b'i', 0x12, 1, b'a', 0x12, 1, b'b'];
    let json = m.decode_to_json(&frame(&reply)).unwrap();
    assert_eq!(json, r#"{"message":"hi","tags":["a","b"]}"#);
    // Two messages (a server stream): an array.
    let two = [frame(&reply), frame(&reply[..4])].concat();
    let json: serde_json::Value = serde_json::from_str(&m.decode_to_json(&two).unwrap()).unwrap();
    assert_eq!(json[1]["message"], "hi");
    assert!(m
        .decode_to_json(&[0, 0, 0, 0, 9, 1])
        .unwrap_err()
        .contains("cut short"));
    assert!(m
        .decode_to_json(&[1, 0, 0, 0, 0])
        .unwrap_err()
        .contains("compressed"));
}

#[test]
fn a_protoset_gives_the_same_schema() {
    let (_dir, s) = schema();
    let set = FileDescriptorSet {
        file: s.pool.file_descriptor_protos().cloned().collect(),
    };
    let from_set = Schema::from_protoset(&set.encode_to_vec()).unwrap();
    assert_eq!(from_set.services(), ["demo.v1.Greeter"]);
    assert!(from_set.method("demo.v1.Greeter/SayHello").is_ok());
    assert!(Schema::from_protoset(b"not a protoset").is_err());
}

#[test]
fn a_proto_that_does_not_compile_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.proto");
    std::fs::write(&file, "syntax = \"proto3\";\nmessage A { strin x = 1; }\n").unwrap();
    let e = Schema::from_protos(&[file], &[]).unwrap_err();
    assert!(e.contains("strin") || e.contains("bad.proto"), "{e}");
}

#[test]
fn deadlines_are_written_as_grpc_timeout_wants_them() {
    use std::time::Duration;
    assert_eq!(timeout_header(Duration::from_millis(250)), "250000u");
    assert_eq!(timeout_header(Duration::from_secs(30)), "30000000u");
    assert_eq!(timeout_header(Duration::from_secs(3600)), "3600000m");
    assert_eq!(timeout_header(Duration::from_nanos(5)), "5n");
}

#[test]
fn message_boundaries_are_found_across_any_chunking() {
    let body = [frame(b"abc"), frame(b""), frame(&[7u8; 300])].concat();
    for size in [1, 2, 4, 5, 6, 9, 64, body.len()] {
        let mut b = MessageBoundaries::default();
        let mut ended = Vec::new();
        for chunk in body.chunks(size) {
            b.feed(chunk, |len| ended.push(len)).unwrap();
        }
        assert_eq!(ended, [3, 0, 300], "chunks of {size}");
        assert!(!b.is_cut());
    }
    let mut b = MessageBoundaries::default();
    b.feed(&body[..7], |_| {}).unwrap();
    assert!(b.is_cut());
    let mut b = MessageBoundaries::default();
    assert!(b.feed(&[1, 0, 0, 0, 1, 9], |_| {}).is_err());
}

#[test]
fn a_streaming_method_takes_an_array_of_messages_and_answers_as_an_array() {
    let (_dir, s) = schema();
    let chat = s.method("demo.v1.Greeter/Chat").unwrap();
    let framed = chat
        .encode_json(r#"[{"name": "a"}, {"name": "b"}]"#)
        .unwrap();
    assert_eq!(
        frames(&framed).unwrap(),
        [&[0x0a, 1, b'a'][..], &[0x0a, 1, b'b']]
    );
    assert!(chat.encode_json(r#"[{"nmae": "a"}]"#).is_err());
    // A unary method's message is never an array.
    let hello = s.method("demo.v1.Greeter/SayHello").unwrap();
    assert!(hello.encode_json(r#"[{"name": "a"}]"#).is_err());
    // One message of a server stream is still an array.
    let json = chat.decode_to_json(&frame(&[0x0a, 2, b'h', b'i'])).unwrap();
    assert_eq!(json, r#"[{"message":"hi"}]"#);
}

#[test]
fn gzip_messages_are_sent_compressed_and_compressed_answers_unpacked() {
    let (_dir, s) = schema();
    let m = Method {
        compression: Compression::Gzip,
        ..s.method("demo.v1.Greeter/SayHello").unwrap()
    };
    let name = "a".repeat(10_000);
    let framed = m.encode_json(&format!(r#"{{"name": "{name}"}}"#)).unwrap();
    assert_eq!(framed[0], 1, "flagged compressed");
    assert!(framed.len() < 200, "{} bytes", framed.len());
    let (_, payload) = flagged_frames(&framed).unwrap()[0];
    let plain = Compression::Gzip.unpacked(true, payload).unwrap();
    // Field 1: its tag, a 2-byte length, the name.
    assert_eq!(plain.len(), 1 + 2 + 10_000);
    // An answer compressed so is read; a plain one too (a server may not
    // compress); without compression asked, a compressed one is refused.
    let reply = [0x0a, 2, b'h', b'i'];
    let packed = Compression::Gzip.frame(&reply);
    assert_eq!(m.decode_to_json(&packed).unwrap(), r#"{"message":"hi"}"#);
    assert_eq!(
        m.decode_to_json(&frame(&reply)).unwrap(),
        r#"{"message":"hi"}"#
    );
    let plain_method = s.method("demo.v1.Greeter/SayHello").unwrap();
    assert!(plain_method.decode_to_json(&packed).is_err());
    // Bytes that are no gzip stream are an error, not a panic.
    let mut bad = frame(b"not gzip");
    bad[0] = 1;
    assert!(m.decode_to_json(&bad).unwrap_err().contains("gzip"));
}
