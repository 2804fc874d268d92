//! `exemplars` in results.json: the slowest requests of a run that sent
//! trace context, each with its trace ID — for each request name and each
//! second the [`PER_SECOND`] slowest, and over the run the [`SLOWEST`]
//! slowest, ranked. One selection serves a run's own record and a merge
//! of shards: the slowest k of a union are the slowest k of each part's
//! slowest k, so selecting again from the shards' lists is exact.

use headroom_metrics::exemplars::{self as measured, PER_SECOND, SLOWEST};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// One traced request among the slowest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Exemplar {
    /// The W3C trace ID it was sent with (`traceparent`): 32 lower-case
    /// hex digits.
    pub trace_id: String,
    /// Its span: `traceparent`'s parent-id, 16 hex digits (the server's
    /// span is a child of it).
    pub span_id: String,
    /// The request's name.
    pub name: String,
    /// The second of the run it ended in, as `timeline[].t_s` (1: the
    /// first).
    pub second: u32,
    /// From its intended send to its end.
    pub latency_ms: f64,
    /// From the run's start (`started_at_unix_ms`) to its end: with
    /// `latency_ms`, when its span began and ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Its error class, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its place among the run's slowest traced requests (1: the slowest),
    /// when it is one of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

impl Exemplar {
    /// A measured exemplar, its request named from `names` (the plan's).
    pub fn of(e: &measured::Exemplar, names: &[String]) -> Exemplar {
        Exemplar {
            trace_id: e.trace.trace_hex(),
            span_id: e.trace.span_hex(),
            name: names.get(e.request as usize).cloned().unwrap_or_default(),
            second: e.second + 1,
            latency_ms: e.latency_us as f64 / 1000.0,
            end_ms: Some(e.end_us as f64 / 1000.0),
            status: e.status,
            error: e.error.map(|c| c.key().to_string()),
            rank: None,
        }
    }

    fn key(&self) -> (&str, &str) {
        (&self.trace_id, &self.span_id)
    }
}

/// The run's `n` slowest traced requests, slowest first (those ranked).
pub fn ranked(exemplars: &[Exemplar], n: usize) -> Vec<&Exemplar> {
    let mut ranked: Vec<&Exemplar> = exemplars.iter().filter(|e| e.rank.is_some()).collect();
    ranked.sort_by_key(|e| e.rank);
    ranked.truncate(n);
    ranked
}

/// The exemplars to keep from `candidates` (a run's seconds and slowest,
/// or the union of shards' lists): each name's [`PER_SECOND`] slowest in
/// each second, and the run's [`SLOWEST`] slowest ranked — each request
/// once, by second, then name, slowest first.
pub fn select(candidates: impl IntoIterator<Item = Exemplar>) -> Vec<Exemplar> {
    let mut seen = HashSet::new();
    let mut all: Vec<Exemplar> = candidates
        .into_iter()
        .filter(|e| seen.insert((e.trace_id.clone(), e.span_id.clone())))
        .map(|e| Exemplar { rank: None, ..e })
        .collect();
    // Slowest first; ties by second and trace ID, so the order never
    // depends on which shard or worker came first.
    all.sort_by(|a, b| {
        b.latency_ms
            .total_cmp(&a.latency_ms)
            .then(a.second.cmp(&b.second))
            .then(a.trace_id.cmp(&b.trace_id))
            .then(a.span_id.cmp(&b.span_id))
    });
    let mut per_second: BTreeMap<(u32, &str), usize> = BTreeMap::new();
    let mut keep = vec![false; all.len()];
    for (i, e) in all.iter().enumerate() {
        let held = per_second.entry((e.second, e.name.as_str())).or_default();
        if *held < PER_SECOND {
            *held += 1;
            keep[i] = true;
        }
    }
    for (i, e) in all.iter_mut().enumerate().take(SLOWEST) {
        e.rank = Some(i as u32 + 1);
        keep[i] = true;
    }
    let mut kept: Vec<Exemplar> = all
        .into_iter()
        .zip(keep)
        .filter_map(|(e, k)| k.then_some(e))
        .collect();
    kept.sort_by(|a, b| {
        (a.second, &a.name)
            .cmp(&(b.second, &b.name))
            .then(b.latency_ms.total_cmp(&a.latency_ms))
            .then(a.key().cmp(&b.key()))
    });
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exemplar(n: u32, name: &str, second: u32, latency_ms: f64) -> Exemplar {
        Exemplar {
            trace_id: format!("{n:032x}"),
            span_id: format!("{n:016x}"),
            name: name.into(),
            second,
            latency_ms,
            end_ms: None,
            status: Some(200),
            error: None,
            rank: None,
        }
    }

    #[test]
    fn keeps_five_per_name_per_second_and_ranks_the_run_s_slowest() {
        // Second 1: eight requests of `a`, 1..8 ms, and one of `b`.
        let mut list: Vec<Exemplar> = (1..=8).map(|n| exemplar(n, "a", 1, f64::from(n))).collect();
        list.push(exemplar(100, "b", 1, 0.5));
        let kept = select(list);
        let a: Vec<f64> = (kept.iter().filter(|e| e.name == "a"))
            .map(|e| e.latency_ms)
            .collect();
        // Every one is among the run's 100 slowest, so all eight stay.
        assert_eq!(a, vec![8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]);
        assert_eq!(kept[0].rank, Some(1));
        assert_eq!(kept.iter().find(|e| e.name == "b").unwrap().rank, Some(9));
    }

    #[test]
    fn beyond_the_run_s_slowest_a_second_keeps_five_per_name() {
        // 150 slow requests in second 1, then second 2 with 7 fast ones.
        let mut list: Vec<Exemplar> = (1..=150)
            .map(|n| exemplar(n, "a", 1, 1000.0 + f64::from(n)))
            .collect();
        list.extend((200..207).map(|n| exemplar(n, "a", 2, f64::from(n - 199))));
        let kept = select(list);
        let second_2: Vec<&Exemplar> = kept.iter().filter(|e| e.second == 2).collect();
        assert_eq!(second_2.len(), 5);
        assert!(second_2.iter().all(|e| e.rank.is_none()));
        assert_eq!(kept.iter().filter(|e| e.rank.is_some()).count(), SLOWEST);
        assert_eq!(kept.len(), SLOWEST + 5);
    }

    #[test]
    fn selecting_from_parts_equals_selecting_from_the_whole() {
        let mut rng = fastrand::Rng::with_seed(3);
        let whole: Vec<Exemplar> = (1..=2000)
            .map(|n| {
                let name = ["a", "b", "c"][rng.usize(0..3)];
                exemplar(n, name, rng.u32(1..20), rng.f64() * 1000.0)
            })
            .collect();
        let (one, two): (Vec<_>, Vec<_>) = whole.iter().cloned().partition(|_| rng.bool());
        let merged = select(select(one).into_iter().chain(select(two)));
        assert_eq!(merged, select(whole));
    }
}
