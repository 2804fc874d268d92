//! HDR histogram helpers. Values are microseconds; 3 significant figures
//! (±0.1 %); auto-resizing, so an idle second costs a few KiB and a stall of
//! an hour still records exactly.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

pub const SIGNIFICANT_FIGURES: u8 = 3;

pub fn new() -> Histogram<u64> {
    Histogram::new(SIGNIFICANT_FIGURES).expect("3 significant figures is valid")
}

/// Adds `other` into `into`. Auto-resizing histograms cannot fail to add.
pub fn add(into: &mut Histogram<u64>, other: &Histogram<u64>) {
    into.add(other)
        .expect("auto-resizing histogram accepts any value");
}

/// Records a duration in microseconds; never fails. `record` (not
/// `saturating_record`, which clamps to the current range instead of
/// growing it) lets the histogram resize to any value.
pub fn record_us(h: &mut Histogram<u64>, us: u64) {
    if h.record(us).is_err() {
        h.saturating_record(us);
    }
}

/// HdrHistogram V2 + DEFLATE, base64: the exact, mergeable form in results.
pub fn to_base64(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("serialising to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram is not a valid HdrHistogram V2 encoding: {0:?}")]
    Hdr(hdrhistogram::serialization::DeserializeError),
}

pub fn from_base64(text: &str) -> Result<Histogram<u64>, DecodeError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text)?;
    let mut h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(DecodeError::Hdr)?;
    h.auto(true);
    Ok(h)
}

/// Microseconds to milliseconds as a float, for reports.
pub fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip_is_exact() {
        let mut h = new();
        for v in [1u64, 17, 950, 1_000, 250_000, 3_600_000_000] {
            record_us(&mut h, v);
        }
        let back = from_base64(&to_base64(&h)).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.len(), 6);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
    }

    /// Regression: values far above a fresh histogram's range were clamped
    /// (a 2 µs minimum in a loopback run) when recorded with saturation.
    #[test]
    fn large_values_grow_the_histogram_not_clamp() {
        let mut total = new();
        for round in 1..=3u64 {
            let mut h = new();
            for v in [150u64, 300, 2047, 900, 40_000] {
                record_us(&mut h, v * round);
            }
            assert_eq!(h.min(), 150 * round);
            assert!(h.max() >= 40_000 * round);
            add(&mut total, &h);
        }
        assert_eq!(total.len(), 15);
        assert_eq!(total.min(), 150);
        assert!(total.max() >= 120_000 && total.max() < 120_200);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(from_base64("not base64!").is_err());
        assert!(from_base64("aGVsbG8=").is_err());
    }
}
