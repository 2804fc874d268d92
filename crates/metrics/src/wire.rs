//! [`Stats`] as JSON, for a shard to send each second to the process that
//! shows and judges its fleet (`--report-to`). Exact: counts as numbers,
//! histograms in HdrHistogram V2 + DEFLATE (base64), so the receiver adds
//! the shards' seconds up with the same `+=` a run's own workers use.
//! Error classes and statuses go by name and code, so a shard one version
//! apart still reads; QUIC's own counters stay in the final results only.

use crate::{histogram, ErrorClass, SocketStats, Stats, MAX_STATUS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsWire {
    pub requests: u64,
    #[serde(default)]
    pub attempts: u64,
    pub ok: u64,
    pub failed: u64,
    #[serde(default)]
    pub bytes: u64,
    /// Base64 histograms; empty when nothing was recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latency: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latency_ok: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_time: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub send_lag: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    /// Count per status code (keys are the codes as text: JSON keys).
    pub status: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<u64>,
    #[serde(default)]
    pub connection_events: Vec<u64>,
    #[serde(default)]
    pub limits_reached: Vec<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<SocketStats>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scripts: BTreeMap<String, crate::scripts::FunctionWire>,
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("{field}: {source}")]
    Histogram {
        field: &'static str,
        source: histogram::DecodeError,
    },
    #[error("status `{0}` is not an HTTP status code")]
    Status(String),
    #[error("error class `{0}` is not one this version knows (is the shard's headroom another version?)")]
    ErrorClass(String),
}

fn encode(h: &hdrhistogram::Histogram<u64>) -> String {
    if h.is_empty() {
        String::new()
    } else {
        histogram::to_base64(h)
    }
}

fn decode(field: &'static str, text: &str) -> Result<hdrhistogram::Histogram<u64>, WireError> {
    if text.is_empty() {
        return Ok(histogram::new());
    }
    histogram::from_base64(text).map_err(|source| WireError::Histogram { field, source })
}

impl From<&Stats> for StatsWire {
    fn from(s: &Stats) -> StatsWire {
        // Every field named: a counted figure added to `Stats` does not
        // compile until it says whether it travels.
        let Stats {
            requests: _,
            attempts: _,
            ok: _,
            failed: _,
            bytes: _,
            latency: _,
            latency_ok: _,
            service_time: _,
            send_lag: _,
            status: _,
            errors: _,
            checks: _,
            connection_events: _,
            limits_reached: _,
            // QUIC's own counters stay in the final results (see above).
            quic: _,
            sockets: k,
            scripts,
        } = s;
        StatsWire {
            requests: s.requests,
            attempts: s.attempts,
            ok: s.ok,
            failed: s.failed,
            bytes: s.bytes,
            latency: encode(&s.latency),
            latency_ok: encode(&s.latency_ok),
            service_time: encode(&s.service_time),
            send_lag: encode(&s.send_lag),
            status: s
                .status_counts()
                .map(|(code, n)| (code.to_string(), n))
                .collect(),
            errors: s
                .error_counts()
                .map(|(c, n)| (c.key().to_string(), n))
                .collect(),
            checks: s.checks.clone(),
            connection_events: s.connection_events.to_vec(),
            limits_reached: s.limits_reached.to_vec(),
            sockets: (!k.is_empty()).then(|| k.clone()),
            scripts: scripts.to_wire(),
        }
    }
}

impl StatsWire {
    /// Back into [`Stats`].
    pub fn to_stats(&self) -> Result<Stats, WireError> {
        let mut s = Stats::new();
        s.requests = self.requests;
        s.attempts = self.attempts;
        s.ok = self.ok;
        s.failed = self.failed;
        s.bytes = self.bytes;
        s.latency = decode("latency", &self.latency)?;
        s.latency_ok = decode("latency_ok", &self.latency_ok)?;
        s.service_time = decode("service_time", &self.service_time)?;
        s.send_lag = decode("send_lag", &self.send_lag)?;
        for (code, &n) in &self.status {
            match code.parse::<usize>() {
                Ok(i) if i <= MAX_STATUS => s.status[i] += n,
                _ => return Err(WireError::Status(code.clone())),
            }
        }
        for (key, &n) in &self.errors {
            let class =
                ErrorClass::from_key(key).ok_or_else(|| WireError::ErrorClass(key.clone()))?;
            s.errors[class.index()] += n;
        }
        s.checks = self.checks.clone();
        for (into, n) in s.connection_events.iter_mut().zip(&self.connection_events) {
            *into = *n;
        }
        for (into, n) in s.limits_reached.iter_mut().zip(&self.limits_reached) {
            *into = *n;
        }
        if let Some(k) = &self.sockets {
            s.sockets = k.clone();
        }
        s.scripts = crate::ScriptStats::from_wire(&self.scripts).map_err(|source| {
            WireError::Histogram {
                field: "scripts",
                source,
            }
        })?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ConnectionEvent;

    #[test]
    fn stats_survive_the_wire_exactly() {
        let mut s = Stats::new();
        s.requests = 5;
        s.attempts = 6;
        s.ok = 3;
        s.failed = 2;
        s.bytes = 900;
        for us in [100, 2_000, 30_000, 400_000, 5_000_000] {
            histogram::record_us(&mut s.latency, us);
        }
        histogram::record_us(&mut s.send_lag, 70);
        s.status[200] = 3;
        s.status[503] = 1;
        s.errors[ErrorClass::Http5xx.index()] = 1;
        s.errors[ErrorClass::RequestTimeout.index()] = 1;
        s.checks = vec![0, 2];
        s.connection_events[ConnectionEvent::Opened as usize] = 4;
        s.sockets.messages_sent = 9;
        s.sockets.close("client:1000");
        let text = serde_json::to_string(&StatsWire::from(&s)).unwrap();
        let back: StatsWire = serde_json::from_str(&text).unwrap();
        let t = back.to_stats().unwrap();
        assert_eq!((t.requests, t.attempts, t.ok, t.failed), (5, 6, 3, 2));
        assert_eq!(t.latency, s.latency);
        assert_eq!(t.send_lag, s.send_lag);
        assert!(t.latency_ok.is_empty());
        assert_eq!(t.status, s.status);
        assert_eq!(t.errors, s.errors);
        assert_eq!(t.checks, s.checks);
        assert_eq!(t.connection_events, s.connection_events);
        assert_eq!(t.sockets, s.sockets);
    }

    #[test]
    fn unknown_error_classes_and_bad_histograms_are_refused() {
        let w: StatsWire =
            serde_json::from_str(r#"{"requests":1,"ok":0,"failed":1,"errors":{"new_kind":1}}"#)
                .unwrap();
        assert!(w.to_stats().unwrap_err().to_string().contains("new_kind"));
        let bad: StatsWire =
            serde_json::from_str(r#"{"requests":1,"ok":1,"failed":0,"latency":"!!"}"#).unwrap();
        assert!(bad
            .to_stats()
            .unwrap_err()
            .to_string()
            .starts_with("latency"));
        let bad: StatsWire =
            serde_json::from_str(r#"{"requests":1,"ok":1,"failed":0,"status":{"1200":1}}"#)
                .unwrap();
        assert!(bad.to_stats().is_err());
    }
}
