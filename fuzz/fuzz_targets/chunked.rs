//! The chunked decoder streamed as a socket delivers: the body arrives in
//! pieces of any size (the first bytes choose them), each fed after the
//! unused rest of the previous one. Fed whole or in pieces, it decodes the
//! same body, ends at the same byte, or fails alike.
#![no_main]

use headroom_http::response::ChunkedDecoder;
use libfuzzer_sys::fuzz_target;

const LIMIT: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Some((&sizes, data)) = data.split_first() else { return };
    let mut whole = ChunkedDecoder::default();
    let mut whole_body = Vec::new();
    let whole_used = whole.feed_into(data, Some((&mut whole_body, LIMIT)));

    let mut parts = ChunkedDecoder::default();
    let mut body = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut consumed = 0usize;
    let mut offset = 0usize;
    let mut failed = false;
    let mut piece = 0u32;
    while offset < data.len() && !parts.is_done() {
        // Piece sizes 1..=16, varying with the seed byte.
        let size = 1 + ((sizes as u32).wrapping_mul(31).wrapping_add(piece * 7) % 16) as usize;
        piece += 1;
        let end = (offset + size).min(data.len());
        pending.extend_from_slice(&data[offset..end]);
        offset = end;
        match parts.feed_into(&pending, Some((&mut body, LIMIT))) {
            Ok(n) => {
                assert!(n <= pending.len(), "used more than it was given");
                consumed += n;
                pending.drain(..n);
            }
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    match whole_used {
        Ok(n) if whole.is_done() => {
            assert!(!failed, "whole: a body; in pieces: malformed");
            assert!(parts.is_done(), "whole: done; in pieces: not done");
            assert_eq!(consumed, n, "ends at another byte");
            assert_eq!(body, whole_body, "another body");
        }
        Ok(_) => assert!(!parts.is_done(), "in pieces: done; whole: not done"),
        Err(_) => assert!(failed || !parts.is_done()),
    }
});
