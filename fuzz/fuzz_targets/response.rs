//! HTTP response parsing: any bytes are incomplete, invalid or a head; a
//! head parses the same from exactly its own bytes; the chunked decoder
//! never consumes more than it is given, however the bytes are split.
#![no_main]

use headroom_http::response::{parse_head, ChunkedDecoder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(head)) = parse_head(data, false) {
        assert!(head.len <= data.len());
        assert_eq!(parse_head(&data[..head.len], false), Ok(Some(head)));
    }
    let split = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    let mut whole = ChunkedDecoder::default();
    let used_whole = whole.feed(data);
    let mut parts = ChunkedDecoder::default();
    let mut pending = data[..split].to_vec();
    let mut used_parts = 0;
    if let Ok(n) = parts.feed(&pending) {
        assert!(n <= pending.len());
        used_parts += n;
        pending.drain(..n);
        pending.extend_from_slice(&data[split..]);
        if let Ok(n) = parts.feed(&pending) {
            assert!(n <= pending.len());
            used_parts += n;
        }
    }
    // Fed whole or in two pieces, a valid body ends at the same byte.
    if let (Ok(n), true, true) = (used_whole, whole.is_done(), parts.is_done()) {
        assert_eq!(n, used_parts);
    }
});
