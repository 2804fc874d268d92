//! HTTP response parsing: any bytes are incomplete, invalid or a head; a
//! head parses the same from exactly its own bytes, and from any bytes that
//! start with it (so a `HeadCache` answers what a parse
//! would); the chunked decoder never consumes more than it is given,
//! however the bytes are split.
#![no_main]

use headroom_http::response::{parse_head, ChunkedDecoder, HeadCache};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The cache holds what the first bytes parsed to; the whole must parse
    // as it would without it.
    let split = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    for head_request in [false, true] {
        let cache = HeadCache::default();
        let _ = cache.parse(&data[..split], head_request);
        assert_eq!(
            cache.parse(data, head_request),
            parse_head(data, head_request)
        );
    }
    if let Ok(Some(head)) = parse_head(data, false) {
        assert!(head.len <= data.len());
        assert_eq!(parse_head(&data[..head.len], false), Ok(Some(head)));
    }
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
