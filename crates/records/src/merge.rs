//! `headroom merge`: the results of a plan's shards (`run --shard K/N`) as
//! one run, exactly. Counts, statuses, errors, bytes and distribution
//! buckets are summed; every latency figure is read from the shards' HDR
//! histograms merged (never an average of percentiles); timelines are laid
//! on one axis by absolute second. What cannot be summed is said: each
//! shard's server samples are kept apart (`shard_servers`), and a second's
//! send-lag p99, and each request's percentiles in a second, are the
//! highest of the shards'.
//!
//! Every field of the record, the timeline and the counts is named in the
//! merge (no `..` copying the first shard's), so a field added to them
//! does not compile until it is merged.

use crate::exemplars::Exemplar;
use crate::results::{
    Connections, Histograms, LatencySummary, LimitsReached, Meta, RequestHistograms, Requests,
    Results, ScriptFunction, ShardInfo, ShardInput, Sockets, Summary,
};
use hdrhistogram::Histogram;
use headroom_metrics::aggregate::{RequestPoint, TimelinePoint};
use headroom_metrics::histogram;
use std::collections::{BTreeMap, BTreeSet};

/// One input: where it came from (for messages) and what it holds.
pub struct ShardFile {
    pub file: String,
    pub results: Results,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    #[error("nothing to merge: give the shards' results files")]
    Empty,
    #[error("{file} is not a shard's results (it has no `shard` field): merge takes the results files of `headroom run --shard K/N`")]
    NotShard { file: String },
    #[error("{a} and {b} are shards of different plans (plan_hash {hash_a:.12}… vs {hash_b:.12}…): every shard must run the same scenario and flags")]
    DifferentPlans {
        a: String,
        b: String,
        hash_a: String,
        hash_b: String,
    },
    #[error("{a} is shard {shard_a} but {b} is shard {shard_b}: the plan was split into different numbers of shards")]
    DifferentCounts {
        a: String,
        b: String,
        shard_a: String,
        shard_b: String,
    },
    #[error("{a} and {b} are both shard {shard}")]
    Duplicate { a: String, b: String, shard: String },
    #[error("shard {missing} missing (given: {given}); merge what there is with --allow-partial")]
    Missing { missing: String, given: String },
    #[error("{file}: {what}")]
    Damaged { file: String, what: String },
}

/// Merges the shards. With `allow_partial`, missing shards are named in a
/// warning instead of refused. `command` is recorded as the merged file's
/// `meta.command`.
pub fn merge(
    mut files: Vec<ShardFile>,
    allow_partial: bool,
    command: Vec<String>,
) -> Result<Results, MergeError> {
    let shards = check_inputs(&mut files)?;
    let count = shards[0].count;
    let missing = missing_shards(&shards, allow_partial)?;
    let parts: Vec<&Results> = files.iter().map(|f| &f.results).collect();
    let decoded = files
        .iter()
        .map(Decoded::new)
        .collect::<Result<Vec<_>, _>>()?;
    let axis = Axis::of(&parts);
    let totals = Totals::of(&decoded);
    let (per_request, per_request_histograms) =
        merge_per_request(&parts, &decoded, axis.duration_s);
    let (timeline, per_second) = merge_timelines(&parts, &decoded, &axis.offsets);
    let base = parts[0];
    let mut warnings = per_shard_union(&parts, |r| r.warnings.clone());
    if !missing.is_empty() {
        warnings.insert(
            0,
            format!(
                "partial merge: shard {} missing — the figures cover {} of {count} shards",
                missing.join(", "),
                parts.len()
            ),
        );
    }
    let mut connections = Connections::default();
    let mut limits_reached = LimitsReached::default();
    for r in &parts {
        connections += &r.connections;
        limits_reached += r.limits_reached;
    }
    // Every field of the record is named here (no `..base`): a field added
    // to `Results` does not compile until the merge says how shards add up
    // in it.
    Ok(Results {
        meta: merge_meta(&files, &shards, command, axis.first_start_ms),
        config: base.config.clone(),
        summary: merge_summary(
            parts.iter().map(|r| &r.summary),
            &totals.latency,
            &totals.latency_ok,
            axis.duration_s,
        ),
        duration_s: axis.duration_s,
        service_time_ms: LatencySummary::from_histogram(&totals.service_time),
        target_rate_rps: sum_options(parts.iter().map(|r| r.target_rate_rps)),
        achieved_rate_rps: sum_options(parts.iter().map(|r| r.achieved_rate_rps)),
        send_lag_ms: base
            .send_lag_ms
            .map(|_| LatencySummary::from_histogram(&totals.send_lag)),
        waited_for_connection: sum_options(parts.iter().map(|r| r.waited_for_connection)),
        per_request,
        scripts: ScriptFunction::merge(&parts.iter().map(|r| &r.scripts).collect::<Vec<_>>()),
        sockets: Sockets::merge(
            &parts.iter().map(|r| r.sockets.as_ref()).collect::<Vec<_>>(),
            &timeline,
            axis.duration_s,
        ),
        timeline,
        exemplars: merge_exemplars(&parts, &axis),
        connections_opened: parts.iter().map(|r| r.connections_opened).sum(),
        connections,
        limits_reached,
        interrupted: parts.iter().any(|r| r.interrupted),
        stop_reason: joined_per_shard(&parts, |r| r.stop_reason.iter().cloned().collect()),
        warnings,
        generator_bound: parts.iter().any(|r| r.generator_bound),
        generator_bound_reasons: per_shard_union(&parts, |r| r.generator_bound_reasons.clone()),
        // Judged again on the merged record by whoever merges (`headroom
        // merge --threshold`): a shard's verdict is not the plan's.
        thresholds: Vec::new(),
        // What cannot be summed is kept apart, per shard.
        server: None,
        shard_servers: files
            .iter()
            .zip(&shards)
            .filter_map(|(f, s)| f.results.server.clone().map(|srv| (s.label(), srv)))
            .collect(),
        shard: None,
        start_at: None,
        // Only shard 1 acts on events (docs/src/events.md): its record of
        // them, whose windows are its own users' view.
        events: base.events.clone(),
        abort: parts.iter().find_map(|r| r.abort.clone()),
        histograms: Histograms {
            unit: "us".into(),
            latency: histogram::to_base64(&totals.latency),
            latency_ok: histogram::to_base64(&totals.latency_ok),
            service_time: histogram::to_base64(&totals.service_time),
            send_lag: histogram::to_base64(&totals.send_lag),
            per_request: per_request_histograms,
            per_second: per_second.iter().map(histogram::to_base64).collect(),
        },
    })
}

/// The shards' exemplars, each shard's seconds on the merged axis,
/// selected again: exact (see `exemplars`).
fn merge_exemplars(parts: &[&Results], axis: &Axis) -> Vec<Exemplar> {
    let shifted = parts.iter().zip(&axis.offsets).flat_map(|(r, offset)| {
        // Its end from the first shard's start, to the millisecond.
        let later_ms = (start_ms(r) - axis.first_start_ms) as f64;
        r.exemplars.iter().map(move |e| Exemplar {
            second: e.second + offset,
            end_ms: e.end_ms.map(|end| end + later_ms),
            ..e.clone()
        })
    });
    crate::exemplars::select(shifted)
}

/// The shards on one time axis: the earliest start; each shard's seconds
/// shifted by how much later it started (whole seconds: shards with a
/// shared `--start-at` start together).
struct Axis {
    first_start_ms: u64,
    duration_s: f64,
    /// Shard i's second t is merged second t + offsets[i].
    offsets: Vec<u32>,
}

impl Axis {
    fn of(parts: &[&Results]) -> Axis {
        let starts: Vec<u64> = parts.iter().map(|r| start_ms(r)).collect();
        let first_start_ms = *starts.iter().min().expect("at least one shard");
        let last_end = parts
            .iter()
            .zip(&starts)
            .map(|(r, s)| s + (r.duration_s * 1000.0).round() as u64)
            .max()
            .unwrap_or(first_start_ms);
        Axis {
            first_start_ms,
            duration_s: (last_end - first_start_ms) as f64 / 1000.0,
            offsets: starts
                .iter()
                .map(|s| ((s - first_start_ms) as f64 / 1000.0).round() as u32)
                .collect(),
        }
    }
}

/// The whole run's histograms, the shards' added.
struct Totals {
    latency: Histogram<u64>,
    latency_ok: Histogram<u64>,
    service_time: Histogram<u64>,
    send_lag: Histogram<u64>,
}

impl Totals {
    fn of(decoded: &[Decoded]) -> Totals {
        Totals {
            latency: sum_histograms(decoded.iter().map(|d| &d.latency)),
            latency_ok: sum_histograms(decoded.iter().map(|d| &d.latency_ok)),
            service_time: sum_histograms(decoded.iter().map(|d| &d.service_time)),
            send_lag: sum_histograms(decoded.iter().map(|d| &d.send_lag)),
        }
    }
}

/// Each request's summary and histograms, the shards' added.
fn merge_per_request(
    parts: &[&Results],
    decoded: &[Decoded],
    duration_s: f64,
) -> (
    BTreeMap<String, Summary>,
    BTreeMap<String, RequestHistograms>,
) {
    let mut summaries = BTreeMap::new();
    let mut histograms = BTreeMap::new();
    for name in parts[0].per_request.keys() {
        let of_shards = parts.iter().filter_map(|r| r.per_request.get(name));
        let hists: Vec<&RequestDecoded> = decoded
            .iter()
            .filter_map(|d| d.per_request.get(name))
            .collect();
        let lat = sum_histograms(hists.iter().map(|h| &h.latency));
        let lat_ok = sum_histograms(hists.iter().map(|h| &h.latency_ok));
        summaries.insert(
            name.clone(),
            merge_summary(of_shards, &lat, &lat_ok, duration_s),
        );
        histograms.insert(
            name.clone(),
            RequestHistograms {
                latency: histogram::to_base64(&lat),
                latency_ok: histogram::to_base64(&lat_ok),
            },
        );
    }
    (summaries, histograms)
}

/// The merged file's `meta`: the first shard's version and machine, the
/// threads of all, the earliest start, the inputs listed.
fn merge_meta(
    files: &[ShardFile],
    shards: &[ShardInfo],
    command: Vec<String>,
    first_start_ms: u64,
) -> Meta {
    let base = &files[0].results.meta;
    Meta {
        headroom_version: base.headroom_version.clone(),
        command,
        started_at: humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(first_start_ms),
        )
        .to_string(),
        machine: base.machine.clone(),
        generator_threads: files.iter().map(|f| f.results.meta.generator_threads).sum(),
        generator_engine: base.generator_engine.clone(),
        fd_limit: base.fd_limit,
        started_at_unix_ms: Some(first_start_ms),
        shards: files
            .iter()
            .zip(shards)
            .map(|(f, s)| ShardInput {
                file: f.file.clone(),
                shard: s.label(),
                host: f.results.meta.machine.hostname.clone(),
                started_at: f.results.meta.started_at.clone(),
                requests: f.results.summary.requests.total,
                late_ms: f.results.start_at.as_ref().map_or(0.0, |s| s.late_ms),
            })
            .collect(),
        http_version: base.http_version.clone(),
    }
}

/// The shards of the plan not given (`K/N`); refused unless
/// `allow_partial`.
fn missing_shards(shards: &[ShardInfo], allow_partial: bool) -> Result<Vec<String>, MergeError> {
    let count = shards[0].count;
    let present: BTreeSet<u32> = shards.iter().map(|s| s.index).collect();
    let missing: Vec<String> = (1..=count)
        .filter(|i| !present.contains(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() && !allow_partial {
        return Err(MergeError::Missing {
            missing: missing.join(", "),
            given: shards
                .iter()
                .map(ShardInfo::label)
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(missing)
}

/// Every input is a shard of one plan, split the same way, each shard
/// once; sorted by shard. Returns their `shard` fields.
fn check_inputs(files: &mut [ShardFile]) -> Result<Vec<ShardInfo>, MergeError> {
    if files.is_empty() {
        return Err(MergeError::Empty);
    }
    for f in files.iter() {
        if f.results.shard.is_none() {
            return Err(MergeError::NotShard {
                file: f.file.clone(),
            });
        }
    }
    files.sort_by_key(|f| f.results.shard.as_ref().map(|s| s.index));
    let shard = |f: &ShardFile| f.results.shard.clone().expect("checked above");
    let first = &files[0];
    let s0 = shard(first);
    for f in files.iter().skip(1) {
        let s = shard(f);
        if s.plan_hash != s0.plan_hash {
            return Err(MergeError::DifferentPlans {
                a: first.file.clone(),
                b: f.file.clone(),
                hash_a: s0.plan_hash.clone(),
                hash_b: s.plan_hash,
            });
        }
        if s.count != s0.count {
            return Err(MergeError::DifferentCounts {
                a: first.file.clone(),
                b: f.file.clone(),
                shard_a: s0.label(),
                shard_b: s.label(),
            });
        }
    }
    for pair in files.windows(2) {
        let (a, b) = (shard(&pair[0]), shard(&pair[1]));
        if a.index == b.index {
            return Err(MergeError::Duplicate {
                a: pair[0].file.clone(),
                b: pair[1].file.clone(),
                shard: a.label(),
            });
        }
    }
    Ok(files.iter().map(shard).collect())
}

/// A shard's histograms, decoded.
struct Decoded {
    latency: Histogram<u64>,
    latency_ok: Histogram<u64>,
    service_time: Histogram<u64>,
    send_lag: Histogram<u64>,
    per_request: BTreeMap<String, RequestDecoded>,
    per_second: Vec<Histogram<u64>>,
}

struct RequestDecoded {
    latency: Histogram<u64>,
    latency_ok: Histogram<u64>,
}

impl Decoded {
    fn new(f: &ShardFile) -> Result<Decoded, MergeError> {
        let h = &f.results.histograms;
        let decode = |text: &str, what: &str| {
            histogram::from_base64(text).map_err(|e| MergeError::Damaged {
                file: f.file.clone(),
                what: format!("histograms.{what}: {e}"),
            })
        };
        if h.per_second.len() != f.results.timeline.len() {
            return Err(MergeError::Damaged {
                file: f.file.clone(),
                what: format!(
                    "histograms.per_second has {} seconds but the timeline {}",
                    h.per_second.len(),
                    f.results.timeline.len()
                ),
            });
        }
        let mut per_request = BTreeMap::new();
        for name in f.results.per_request.keys() {
            let r = h.per_request.get(name).ok_or_else(|| MergeError::Damaged {
                file: f.file.clone(),
                what: format!("histograms.per_request has no `{name}`"),
            })?;
            per_request.insert(
                name.clone(),
                RequestDecoded {
                    latency: decode(&r.latency, "per_request.latency")?,
                    latency_ok: decode(&r.latency_ok, "per_request.latency_ok")?,
                },
            );
        }
        Ok(Decoded {
            latency: decode(&h.latency, "latency")?,
            latency_ok: decode(&h.latency_ok, "latency_ok")?,
            service_time: decode(&h.service_time, "service_time")?,
            send_lag: decode(&h.send_lag, "send_lag")?,
            per_request,
            per_second: h
                .per_second
                .iter()
                .map(|s| decode(s, "per_second"))
                .collect::<Result<_, _>>()?,
        })
    }
}

fn start_ms(r: &Results) -> u64 {
    r.meta.started_at_unix_ms.unwrap_or_else(|| {
        humantime::parse_rfc3339(&r.meta.started_at)
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64)
    })
}

fn sum_histograms<'a>(parts: impl Iterator<Item = &'a Histogram<u64>>) -> Histogram<u64> {
    let mut sum = histogram::new();
    for h in parts {
        histogram::add(&mut sum, h);
    }
    sum
}

fn sum_options<T: std::iter::Sum<T> + Copy>(parts: impl Iterator<Item = Option<T>>) -> Option<T> {
    let parts: Vec<T> = parts.flatten().collect();
    (!parts.is_empty()).then(|| parts.into_iter().sum())
}

fn add_maps(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// The shards' summaries as one: counts summed, latency from the merged
/// histograms, rates over the merged duration.
fn merge_summary<'a>(
    parts: impl Iterator<Item = &'a Summary>,
    latency: &Histogram<u64>,
    latency_ok: &Histogram<u64>,
    duration_s: f64,
) -> Summary {
    let parts: Vec<&Summary> = parts.collect();
    let mut requests = Requests {
        total: 0,
        ok: 0,
        failed: 0,
        not_delivered: 0,
        error_rate: 0.0,
        attempts: 0,
        retried: Default::default(),
    };
    let (mut bytes, mut status_codes, mut errors) = (0, BTreeMap::new(), BTreeMap::new());
    let mut distribution = parts
        .first()
        .map_or_else(Vec::new, |p| p.distribution.clone());
    distribution.iter_mut().for_each(|b| b.count = 0);
    for p in &parts {
        requests.total += p.requests.total;
        requests.ok += p.requests.ok;
        requests.failed += p.requests.failed;
        requests.not_delivered += p.requests.not_delivered;
        requests.attempts += p.requests.attempts;
        requests.retried += p.requests.retried;
        bytes += p.bytes_received;
        add_maps(&mut status_codes, &p.status_codes);
        add_maps(&mut errors, &p.errors);
        for (into, b) in distribution.iter_mut().zip(&p.distribution) {
            into.count += b.count;
        }
    }
    let share = |n: u64| {
        if requests.total == 0 {
            0.0
        } else {
            n as f64 / requests.total as f64
        }
    };
    requests.error_rate = share(requests.failed);
    distribution
        .iter_mut()
        .for_each(|b| b.percent = share(b.count) * 100.0);
    let per_s = |x: f64| {
        if duration_s > 0.0 {
            x / duration_s
        } else {
            0.0
        }
    };
    Summary {
        requests,
        throughput_rps: per_s(requests.total as f64),
        bytes_received: bytes,
        received_kib_per_s: per_s(bytes as f64 / 1024.0),
        latency_ms: LatencySummary::from_histogram(latency),
        latency_ms_ok: LatencySummary::from_histogram(latency_ok),
        distribution,
        status_codes,
        errors,
    }
}

/// The timelines on one axis: shard i's second t is merged second
/// t + offsets[i]. Returns the points and each merged second's histogram.
fn merge_timelines(
    parts: &[&Results],
    decoded: &[Decoded],
    offsets: &[u32],
) -> (Vec<TimelinePoint>, Vec<Histogram<u64>>) {
    let len = parts
        .iter()
        .zip(offsets)
        .map(|(r, o)| r.timeline.len() as u32 + o)
        .max()
        .unwrap_or(0) as usize;
    let mut points: Vec<TimelinePoint> = (0..len)
        .map(|i| TimelinePoint {
            t_s: i as u32 + 1,
            ..TimelinePoint::default()
        })
        .collect();
    let mut seconds: Vec<Histogram<u64>> = (0..len).map(|_| histogram::new()).collect();
    for ((r, d), &offset) in parts.iter().zip(decoded).zip(offsets) {
        for (i, (p, h)) in r.timeline.iter().zip(&d.per_second).enumerate() {
            let at = i + offset as usize;
            add_second(&mut points[at], p);
            histogram::add(&mut seconds[at], h);
        }
    }
    for (m, h) in points.iter_mut().zip(&seconds) {
        if !h.is_empty() {
            let q = |q: f64| Some(histogram::ms(h.value_at_quantile(q)));
            m.p50_ms = q(0.5);
            m.p90_ms = q(0.9);
            m.p95_ms = q(0.95);
            m.p99_ms = q(0.99);
            m.max_ms = Some(histogram::ms(h.max()));
            m.mean_ms = Some(h.mean() / 1000.0);
        }
    }
    (points, seconds)
}

/// One shard's second added into the merged second. Every field named: a
/// field added to the timeline does not compile until it says how shards
/// add up in it. Latency percentiles are set afterwards from the merged
/// second's histogram.
fn add_second(m: &mut TimelinePoint, p: &TimelinePoint) {
    let TimelinePoint {
        t_s: _,
        requests,
        ok,
        failed,
        bytes,
        p50_ms: _,
        p90_ms: _,
        p95_ms: _,
        p99_ms: _,
        max_ms: _,
        mean_ms: _,
        send_lag_p99_ms,
        offered,
        active_users,
        in_flight,
        sockets_open,
        messages_sent,
        messages_received,
        errors,
        per_request,
    } = p;
    m.requests += requests;
    m.ok += ok;
    m.failed += failed;
    m.bytes += bytes;
    m.active_users += active_users;
    m.in_flight += in_flight;
    add_option(&mut m.offered, *offered);
    add_option(&mut m.sockets_open, *sockets_open);
    add_option(&mut m.messages_sent, *messages_sent);
    add_option(&mut m.messages_received, *messages_received);
    add_maps(&mut m.errors, errors);
    m.send_lag_p99_ms = highest(m.send_lag_p99_ms, *send_lag_p99_ms);
    // Each request's second: counts added; its percentiles (no histogram
    // per request and second is kept) the highest of the shards'.
    if m.per_request.len() < per_request.len() {
        m.per_request
            .resize(per_request.len(), RequestPoint::default());
    }
    for (into, from) in m.per_request.iter_mut().zip(per_request) {
        let RequestPoint {
            requests,
            ok,
            failed,
            p50_ms,
            p95_ms,
            p99_ms,
        } = from;
        into.requests += requests;
        into.ok += ok;
        into.failed += failed;
        into.p50_ms = highest(into.p50_ms, *p50_ms);
        into.p95_ms = highest(into.p95_ms, *p95_ms);
        into.p99_ms = highest(into.p99_ms, *p99_ms);
    }
}

fn add_option<T: std::ops::Add<Output = T> + Default + Copy>(
    into: &mut Option<T>,
    from: Option<T>,
) {
    if let Some(n) = from {
        *into = Some(into.unwrap_or_default() + n);
    }
}

fn highest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Lines every shard said kept once; lines only some said prefixed with
/// the shards that said them.
fn per_shard_union(parts: &[&Results], lines: impl Fn(&Results) -> Vec<String>) -> Vec<String> {
    let mut said: Vec<(String, Vec<String>)> = Vec::new();
    for r in parts {
        let label = r.shard.as_ref().map_or_else(String::new, ShardInfo::label);
        for line in lines(r) {
            match said.iter_mut().find(|(l, _)| *l == line) {
                Some((_, by)) => by.push(label.clone()),
                None => said.push((line, vec![label.clone()])),
            }
        }
    }
    said.into_iter()
        .map(|(line, by)| {
            if by.len() == parts.len() {
                line
            } else {
                format!("shard {}: {line}", by.join(", "))
            }
        })
        .collect()
}

fn joined_per_shard(parts: &[&Results], lines: impl Fn(&Results) -> Vec<String>) -> Option<String> {
    let all = per_shard_union(parts, lines);
    (!all.is_empty()).then(|| all.join("; "))
}
