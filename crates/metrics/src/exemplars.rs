//! Exemplars: the slowest requests of a run, each with the trace ID it
//! was sent with (`traceparent`), so a slow second in the results leads to
//! the exact traces in the user's tracing backend. A run keeps, for each
//! request and each second, the [`PER_SECOND`] slowest, and over the whole
//! run the [`SLOWEST`] slowest — bounded however long the run, and merged
//! exactly: the slowest k of a union are the slowest k of the parts'
//! slowest k.

use crate::ErrorClass;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Exemplars kept per request name per second.
pub const PER_SECOND: usize = 5;
/// Exemplars kept over the whole run (all names).
pub const SLOWEST: usize = 100;

/// The W3C trace context one request was sent with: its trace ID and the
/// span ID sent as `traceparent`'s parent-id. Neither is ever 0 (the
/// specification's invalid value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceIds {
    pub trace_id: u128,
    pub span_id: u64,
}

impl TraceIds {
    /// The trace ID as `traceparent` writes it: 32 lower-case hex digits.
    pub fn trace_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    pub fn span_hex(&self) -> String {
        format!("{:016x}", self.span_id)
    }
}

/// One traced request, as kept among the slowest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exemplar {
    /// The plan's request (index), named by the record.
    pub request: u32,
    pub trace: TraceIds,
    /// From its intended send to its end, in microseconds.
    pub latency_us: u64,
    /// The second of the run it ended in (0: the first).
    pub second: u32,
    /// From the run's start to its end, in microseconds (its span's end).
    pub end_us: u64,
    pub status: Option<u16>,
    #[serde(with = "error_key")]
    pub error: Option<ErrorClass>,
}

/// The slowest `keep` exemplars offered. `floor` makes the usual offer —
/// a request no slower than those held — one comparison.
#[derive(Clone, Debug, Default)]
pub struct Slowest {
    keep: usize,
    held: Vec<Exemplar>,
    /// The smallest latency held once `held` is full.
    floor: u64,
}

impl Slowest {
    pub fn new(keep: usize) -> Self {
        Slowest {
            keep,
            held: Vec::with_capacity(keep.min(SLOWEST)),
            floor: 0,
        }
    }

    pub fn offer(&mut self, e: Exemplar) {
        if self.held.len() < self.keep {
            self.held.push(e);
            if self.held.len() == self.keep {
                self.floor = self.min().1;
            }
        } else if e.latency_us > self.floor {
            let (at, _) = self.min();
            self.held[at] = e;
            self.floor = self.min().1;
        }
    }

    /// Every exemplar `other` holds offered to this one.
    pub fn merge(&mut self, other: &Slowest) {
        for e in &other.held {
            self.offer(*e);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Slowest first (ties: earlier second first, then trace ID, so the
    /// order does not depend on which worker offered first).
    pub fn into_sorted(mut self) -> Vec<Exemplar> {
        sort_slowest_first(&mut self.held);
        self.held
    }

    fn min(&self) -> (usize, u64) {
        self.held
            .iter()
            .enumerate()
            .map(|(i, e)| (i, e.latency_us))
            .min_by_key(|&(_, l)| l)
            .unwrap_or((0, 0))
    }
}

/// Slowest first; ties by second, then trace ID.
pub fn sort_slowest_first(exemplars: &mut [Exemplar]) {
    exemplars.sort_by(|a, b| {
        b.latency_us
            .cmp(&a.latency_us)
            .then(a.second.cmp(&b.second))
            .then(a.trace.trace_id.cmp(&b.trace.trace_id))
    });
}

/// One second's exemplars, [`PER_SECOND`] per request (index = request).
#[derive(Clone, Debug, Default)]
pub struct SecondExemplars {
    by_request: Vec<Slowest>,
}

impl SecondExemplars {
    pub fn offer(&mut self, e: Exemplar) {
        let at = e.request as usize;
        while self.by_request.len() <= at {
            self.by_request.push(Slowest::new(PER_SECOND));
        }
        self.by_request[at].offer(e);
    }

    pub fn merge(&mut self, other: &SecondExemplars) {
        while self.by_request.len() < other.by_request.len() {
            self.by_request.push(Slowest::new(PER_SECOND));
        }
        for (into, from) in self.by_request.iter_mut().zip(&other.by_request) {
            into.merge(from);
        }
    }

    /// By request, each request's slowest first.
    pub fn into_list(self) -> Vec<Exemplar> {
        self.by_request
            .into_iter()
            .flat_map(Slowest::into_sorted)
            .collect()
    }
}

/// An error class by its results name, so spilled exemplars read back.
mod error_key {
    use super::*;

    pub fn serialize<S: Serializer>(e: &Option<ErrorClass>, s: S) -> Result<S::Ok, S::Error> {
        e.map(ErrorClass::key).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ErrorClass>, D::Error> {
        let key: Option<String> = Option::deserialize(d)?;
        Ok(key.and_then(|k| ErrorClass::from_key(&k)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exemplar(request: u32, latency_us: u64, trace_id: u128) -> Exemplar {
        Exemplar {
            request,
            trace: TraceIds {
                trace_id,
                span_id: 1,
            },
            latency_us,
            second: 0,
            end_us: latency_us,
            status: Some(200),
            error: None,
        }
    }

    #[test]
    fn keeps_the_slowest_k_in_any_order_of_offers() {
        let latencies: Vec<u64> = (0..1000).map(|i| (i * 7919) % 1000).collect();
        let mut slowest = Slowest::new(5);
        for (i, &l) in latencies.iter().enumerate() {
            slowest.offer(exemplar(0, l, i as u128 + 1));
        }
        let kept: Vec<u64> = slowest.into_sorted().iter().map(|e| e.latency_us).collect();
        assert_eq!(kept, vec![999, 998, 997, 996, 995]);
    }

    #[test]
    fn the_slowest_of_merged_parts_are_the_slowest_of_the_whole() {
        let mut whole = Slowest::new(SLOWEST);
        let mut parts = [Slowest::new(SLOWEST), Slowest::new(SLOWEST)];
        let mut rng = fastrand::Rng::with_seed(7);
        for i in 0..5000u128 {
            let e = exemplar(0, rng.u64(0..1_000_000), i + 1);
            whole.offer(e);
            parts[(i % 2) as usize].offer(e);
        }
        let [a, b] = parts;
        let mut merged = a;
        merged.merge(&b);
        assert_eq!(merged.into_sorted(), whole.into_sorted());
    }

    #[test]
    fn a_second_keeps_its_slowest_per_request() {
        let mut second = SecondExemplars::default();
        for l in 0..20 {
            second.offer(exemplar(0, l, u128::from(l) + 1));
            second.offer(exemplar(2, 100 + l, u128::from(l) + 100));
        }
        let list = second.into_list();
        let of = |r: u32| -> Vec<u64> {
            list.iter()
                .filter(|e| e.request == r)
                .map(|e| e.latency_us)
                .collect()
        };
        assert_eq!(of(0), vec![19, 18, 17, 16, 15]);
        assert_eq!(of(1), Vec::<u64>::new());
        assert_eq!(of(2), vec![119, 118, 117, 116, 115]);
    }

    #[test]
    fn spilled_exemplars_read_back_with_their_error_class() {
        let e = Exemplar {
            error: Some(ErrorClass::RequestTimeout),
            status: None,
            ..exemplar(1, 5, u128::MAX)
        };
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<Exemplar>(&text).unwrap(), e);
    }
}
