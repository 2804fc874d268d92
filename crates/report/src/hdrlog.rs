//! `--hdr-log FILE`: each second's latency histogram in HdrHistogram's
//! interval log format (the Java `HistogramLogWriter` layout: V2 +
//! DEFLATE, values in microseconds, max column in milliseconds), so
//! HistogramLogProcessor, HdrHistogramVisualizer and the hdrhistogram
//! crates read it. Latency counts from the intended send time.

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;
use headroom_metrics::histogram;
use std::time::{Duration, SystemTime};

/// The log text for `intervals` (one per second from `started_at`).
pub fn interval_log(
    intervals: &[String],
    started_at: SystemTime,
) -> Result<Vec<u8>, std::io::Error> {
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    {
        let mut writer = IntervalLogWriterBuilder::new()
            .add_comment("headroom latency per second, from the intended send time")
            .add_comment("values in microseconds; the max column in milliseconds")
            .with_start_time(started_at)
            .with_base_time(started_at)
            .with_max_value_divisor(1000.0)
            .begin_log_with(&mut out, &mut serializer)?;
        writer.write_comment(
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"",
        )?;
        for (i, encoded) in intervals.iter().enumerate() {
            let h = histogram::from_base64(encoded).map_err(std::io::Error::other)?;
            writer
                .write_histogram(
                    &h,
                    Duration::from_secs(i as u64),
                    Duration::from_secs(1),
                    None,
                )
                .map_err(|e| std::io::Error::other(format!("{e}")))?;
        }
    }
    Ok(out)
}
