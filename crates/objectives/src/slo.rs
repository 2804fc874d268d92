//! Objectives on a run's figures — `p90<500ms, errors<5%, achieved>95%` —
//! parsed once here, checked against a run's record by `headroom-records`. Capacity
//! search uses them as the service-level objective a step must meet;
//! `run --threshold` uses the same language for pass/fail in CI.
//!
//! | metric | unit | figure |
//! |---|---|---|
//! | `p50` `p75` `p90` `p95` `p99` `p999` `mean` `max` | ms, s, us | `latency_ms` (all requests, from the intended send time) |
//! | `errors` | % | `requests.error_rate` |
//! | `achieved` | % | OK responses per second of the planned load ÷ the offered rate (open model) |
//! | `throughput` (`rps`) | req/s | `throughput_rps`: every completed request, OK or failed, per second |
//!
//! Each figure has one formula ([`Metric::value`]), which thresholds on a
//! record and abort rules on a window both use.
//!
//! A bound may name one request of the scenario, as k6 thresholds name a
//! tag: `p95{login}<500ms` holds that request's figures (its row of
//! `per_request`) to the bound. `achieved` is for the whole run only.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    P50,
    P75,
    P90,
    P95,
    P99,
    P999,
    Mean,
    Max,
    Errors,
    Achieved,
    Throughput,
}

impl Metric {
    /// Every metric, in the order the guide lists them.
    pub const ALL: [Metric; 11] = [
        Metric::P50,
        Metric::P75,
        Metric::P90,
        Metric::P95,
        Metric::P99,
        Metric::P999,
        Metric::Mean,
        Metric::Max,
        Metric::Errors,
        Metric::Achieved,
        Metric::Throughput,
    ];

    fn parse(s: &str) -> Option<Metric> {
        Some(match s {
            "p50" | "median" => Metric::P50,
            "p75" => Metric::P75,
            "p90" => Metric::P90,
            "p95" => Metric::P95,
            "p99" => Metric::P99,
            "p999" | "p99.9" => Metric::P999,
            "mean" | "avg" => Metric::Mean,
            "max" => Metric::Max,
            "errors" | "error_rate" => Metric::Errors,
            "achieved" => Metric::Achieved,
            "throughput" | "rps" => Metric::Throughput,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P75 => "p75",
            Metric::P90 => "p90",
            Metric::P95 => "p95",
            Metric::P99 => "p99",
            Metric::P999 => "p999",
            Metric::Mean => "mean",
            Metric::Max => "max",
            Metric::Errors => "errors",
            Metric::Achieved => "achieved",
            Metric::Throughput => "throughput",
        }
    }

    pub fn is_latency(self) -> bool {
        !matches!(self, Metric::Errors | Metric::Achieved | Metric::Throughput)
    }

    /// The unit bounds and figures of this metric are held in.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Errors | Metric::Achieved => "%",
            Metric::Throughput => "req/s",
            _ => "ms",
        }
    }
}

/// What a latency metric reads from a latency distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LatencyFigure {
    /// The value at this quantile (0.9 for `p90`).
    Quantile(f64),
    Mean,
    Max,
}

/// The counts a run, one request's rows or an abort rule's window
/// observed: what every metric but latency is computed from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observed {
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    /// The span the requests completed in: the run's `duration_s`, or the
    /// window's seconds.
    pub span_s: f64,
    /// The span the offered load was spread over (the schedule's length in
    /// a record, the window in an abort rule), and the rate offered over
    /// it; `None` without an open-model offer.
    pub offered: Option<(f64, f64)>,
}

impl Metric {
    /// The latency figure this metric reads, if it is a latency metric.
    pub fn latency_figure(self) -> Option<LatencyFigure> {
        Some(match self {
            Metric::P50 => LatencyFigure::Quantile(0.5),
            Metric::P75 => LatencyFigure::Quantile(0.75),
            Metric::P90 => LatencyFigure::Quantile(0.9),
            Metric::P95 => LatencyFigure::Quantile(0.95),
            Metric::P99 => LatencyFigure::Quantile(0.99),
            Metric::P999 => LatencyFigure::Quantile(0.999),
            Metric::Mean => LatencyFigure::Mean,
            Metric::Max => LatencyFigure::Max,
            Metric::Errors | Metric::Achieved | Metric::Throughput => return None,
        })
    }

    /// This metric's figure, in its unit: the one formula that thresholds
    /// on a record (`headroom-records`) and abort rules on a window
    /// (`headroom-measure`) both use, so the two never disagree. `latency`
    /// reads a latency figure from whatever distribution the caller holds
    /// (`None` when nothing completed). `None` when the metric has no
    /// figure here (no request, or `achieved` without an offer).
    pub fn value(
        self,
        o: &Observed,
        latency: impl FnOnce(LatencyFigure) -> Option<f64>,
    ) -> Option<f64> {
        let per_s = |n: u64, span_s: f64| (span_s > 0.0).then(|| n as f64 / span_s);
        match self {
            Metric::Errors => (o.requests > 0).then(|| o.failed as f64 / o.requests as f64 * 100.0),
            // All completed requests per second, as `throughput_rps` (and
            // JMeter's throughput): failures fast are caught by `errors`.
            Metric::Throughput => per_s(o.requests, o.span_s),
            // OK responses per second of the offer's span ÷ the rate offered.
            Metric::Achieved => {
                let (span_s, rate) = o.offered.filter(|(s, r)| *s > 0.0 && *r > 0.0)?;
                Some(per_s(o.ok, span_s)? / rate * 100.0)
            }
            _ => latency(self.latency_figure()?),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Op {
    #[serde(rename = "<")]
    Less,
    #[serde(rename = "<=")]
    AtMost,
    #[serde(rename = ">")]
    Greater,
    #[serde(rename = ">=")]
    AtLeast,
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::Less => "<",
            Op::AtMost => "<=",
            Op::Greater => ">",
            Op::AtLeast => ">=",
        }
    }

    pub fn holds(self, actual: f64, limit: f64) -> bool {
        match self {
            Op::Less => actual < limit,
            Op::AtMost => actual <= limit,
            Op::Greater => actual > limit,
            Op::AtLeast => actual >= limit,
        }
    }
}

/// One bound, e.g. `p90<500ms`; `limit` is in the metric's unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bound {
    pub metric: Metric,
    pub op: Op,
    pub limit: f64,
    /// The one request whose figures are bounded (`p95{login}<500ms`);
    /// the whole run when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = self.metric.unit();
        let space = if unit == "req/s" { " " } else { "" };
        let scope = self
            .request
            .as_ref()
            .map_or(String::new(), |r| format!("{{{r}}}"));
        write!(
            f,
            "{}{scope}{}{}{space}{unit}",
            self.metric.name(),
            self.op.symbol(),
            trim(self.limit)
        )
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A bound checked against a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BoundCheck {
    /// The bound as written back, e.g. "p90<500ms" or "p95{login}<500ms".
    pub bound: String,
    pub metric: Metric,
    /// The request the bound is about; the whole run when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The run's figure in the metric's unit; `None` when the run has no
    /// such figure (e.g. `achieved` in a closed run), which passes.
    pub actual: Option<f64>,
    pub limit: f64,
    pub unit: String,
    pub passed: bool,
}

impl BoundCheck {
    /// "p90 512.3 ms ≥ 500 ms"-style text for the terminal.
    pub fn describe(&self) -> String {
        match self.actual {
            Some(a) => format!(
                "{}{} {} {} (bound {})",
                self.metric.name(),
                self.request
                    .as_ref()
                    .map_or(String::new(), |r| format!(" of {r}")),
                trim(a),
                self.unit,
                self.bound
            ),
            None => format!("{}: not measured in this run", self.bound),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("objective `{text}`: {message}")]
pub struct SloError {
    /// The part of the expression that is wrong.
    pub text: String,
    pub message: String,
}

/// A set of bounds that must all hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Slo {
    pub bounds: Vec<Bound>,
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.bounds.iter().map(Bound::to_string).collect();
        write!(f, "{}", parts.join(", "))
    }
}

const METRICS: &str = "p50, p75, p90, p95, p99, p999, mean, max, errors, achieved, throughput";

fn parse_bound(part: &str) -> Result<Bound, SloError> {
    let err = |message: String| SloError {
        text: part.to_string(),
        message,
    };
    // `{request}` is cut out first: a request's name may hold spaces.
    let (request, rest) = match (part.find('{'), part.find('}')) {
        (None, None) => (None, part.to_string()),
        (Some(open), Some(close)) if open < close => {
            let name = part[open + 1..close].trim();
            if name.is_empty() {
                return Err(err(
                    "`{}` names no request: write e.g. p95{login}<500ms".into()
                ));
            }
            let rest = format!("{}{}", &part[..open], &part[close + 1..]);
            (Some(name.to_string()), rest)
        }
        _ => {
            return Err(err(
                "unbalanced braces: name a request as p95{login}<500ms".into()
            ))
        }
    };
    let compact: String = rest.chars().filter(|c| !c.is_whitespace()).collect();
    let at = compact
        .find(['<', '>'])
        .ok_or_else(|| err("expected METRIC<VALUE or METRIC>VALUE, e.g. p90<500ms".into()))?;
    let (name, rest) = compact.split_at(at);
    let (op, value) = match rest.as_bytes() {
        [b'<', b'=', ..] => (Op::AtMost, &rest[2..]),
        [b'>', b'=', ..] => (Op::AtLeast, &rest[2..]),
        [b'<', ..] => (Op::Less, &rest[1..]),
        _ => (Op::Greater, &rest[1..]),
    };
    let lower = name.to_ascii_lowercase();
    let metric = Metric::parse(&lower)
        .ok_or_else(|| err(format!("unknown metric `{name}`; use one of {METRICS}")))?;
    if metric == Metric::Achieved && request.is_some() {
        return Err(err(
            "`achieved` is for the whole run (the offered rate is not split by request)".into(),
        ));
    }
    let limit = if metric.is_latency() {
        latency_ms(value).ok_or_else(|| {
            err(format!(
                "`{value}` is not a time: give a unit, e.g. 500ms, 1.5s, 800us"
            ))
        })?
    } else if metric == Metric::Throughput {
        value
            .trim_end_matches("req/s")
            .trim_end_matches("rps")
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| err(format!("`{value}` is not a rate, e.g. 100 or 100req/s")))?
    } else {
        value
            .strip_suffix('%')
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| (0.0..=100.0).contains(v))
            .ok_or_else(|| {
                err(format!(
                    "`{value}` is not a percentage: write it with %, e.g. 5% or 0.1%"
                ))
            })?
    };
    if limit > MAX_LIMIT {
        return Err(err(format!(
            "`{value}` is beyond any run (at most {MAX_LIMIT:e} in its unit)"
        )));
    }
    Ok(Bound {
        metric,
        op,
        // Kept to a millionth of its unit, which is how it prints: an
        // objective reads back the same as it is shown.
        limit: (limit * 1e6).round() / 1e6,
        request,
    })
}

/// The largest limit a bound may have (ms, %, req/s): a million seconds is
/// beyond any request, and below it a millionth of the unit is exact.
const MAX_LIMIT: f64 = 1e9;

/// A time with its unit, in milliseconds.
fn latency_ms(value: &str) -> Option<f64> {
    let split = value.find(|c: char| c.is_ascii_alphabetic() || c == 'µ')?;
    let (number, unit) = value.split_at(split);
    let n: f64 = number
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let scale = match unit {
        "us" | "µs" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" | "min" => 60_000.0,
        _ => return None,
    };
    Some(n * scale)
}

impl Slo {
    /// Parses `p90<500ms, errors<5%` (commas or `and` between bounds).
    pub fn parse(text: &str) -> Result<Slo, SloError> {
        let normalised = text.replace(" and ", ",");
        let bounds = normalised
            .split([',', ';'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(parse_bound)
            .collect::<Result<Vec<_>, _>>()?;
        if bounds.is_empty() {
            return Err(SloError {
                text: text.to_string(),
                message: "no bound given, e.g. p90<500ms,errors<5%".into(),
            });
        }
        Ok(Slo { bounds })
    }

    pub fn has(&self, metric: Metric) -> bool {
        self.bounds
            .iter()
            .any(|b| b.metric == metric && b.request.is_none())
    }

    /// Every bound that names a request names one of `names` (the
    /// scenario's requests) — checked before any load is sent.
    pub fn check_requests<'a>(
        &self,
        names: impl Iterator<Item = &'a str> + Clone,
    ) -> Result<(), SloError> {
        for b in &self.bounds {
            let Some(request) = &b.request else { continue };
            if !names.clone().any(|n| n == request) {
                let known: Vec<&str> = names.clone().collect();
                return Err(SloError {
                    text: b.to_string(),
                    message: format!(
                        "no request named `{request}` in the scenario (its requests: {})",
                        known.join(", ")
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bounds_with_units() {
        let slo = Slo::parse("p90<500ms, errors<5%,achieved>=95%, p99 < 1.5s, rps>100").unwrap();
        assert_eq!(
            slo.bounds,
            vec![
                Bound {
                    metric: Metric::P90,
                    op: Op::Less,
                    limit: 500.0,
                    request: None,
                },
                Bound {
                    metric: Metric::Errors,
                    op: Op::Less,
                    limit: 5.0,
                    request: None,
                },
                Bound {
                    metric: Metric::Achieved,
                    op: Op::AtLeast,
                    limit: 95.0,
                    request: None,
                },
                Bound {
                    metric: Metric::P99,
                    op: Op::Less,
                    limit: 1500.0,
                    request: None,
                },
                Bound {
                    metric: Metric::Throughput,
                    op: Op::Greater,
                    limit: 100.0,
                    request: None,
                },
            ]
        );
        assert_eq!(
            slo.to_string(),
            "p90<500ms, errors<5%, achieved>=95%, p99<1500ms, throughput>100 req/s"
        );
        assert_eq!(Slo::parse("p95<800us").unwrap().bounds[0].limit, 0.8);
        assert_eq!(Slo::parse("p90<1s and errors<1%").unwrap().bounds.len(), 2);
    }

    #[test]
    fn a_bound_may_name_one_request() {
        let slo = Slo::parse("p95{log in}<500ms, errors{home}<1%, p99<2s").unwrap();
        assert_eq!(slo.bounds[0].request.as_deref(), Some("log in"));
        assert_eq!(slo.bounds[0].limit, 500.0);
        assert_eq!(slo.bounds[1].request.as_deref(), Some("home"));
        assert_eq!(slo.bounds[2].request, None);
        assert_eq!(
            slo.to_string(),
            "p95{log in}<500ms, errors{home}<1%, p99<2000ms"
        );
        assert_eq!(Slo::parse(&slo.to_string()).unwrap(), slo);
        let names = ["home", "log in"];
        assert!(slo.check_requests(names.iter().copied()).is_ok());
        let e = slo.check_requests(["home"].iter().copied()).unwrap_err();
        assert_eq!(e.text, "p95{log in}<500ms");
        assert!(e.message.contains("no request named `log in`"), "{e}");
        assert!(e.message.contains("its requests: home"), "{e}");
        assert!(Slo::parse("p95{}<5ms")
            .unwrap_err()
            .message
            .contains("names no request"));
        assert!(Slo::parse("p95{login<5ms")
            .unwrap_err()
            .message
            .contains("unbalanced"));
        assert!(Slo::parse("achieved{login}>90%").is_err());
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = Slo::parse("p90<500").unwrap_err();
        assert_eq!(e.text, "p90<500");
        assert!(e.message.contains("give a unit"), "{e}");
        let e = Slo::parse("p91<5ms").unwrap_err();
        assert!(e.message.contains("unknown metric `p91`"), "{e}");
        let e = Slo::parse("errors<5").unwrap_err();
        assert!(e.message.contains("percentage"), "{e}");
        let e = Slo::parse("p90=5ms").unwrap_err();
        assert!(e.message.contains("METRIC<VALUE"), "{e}");
        assert!(Slo::parse(" , ").is_err());
        assert!(Slo::parse("errors<101%").is_err());
    }

    #[test]
    fn an_objective_prints_back_to_itself() {
        // Found by the fuzzer: more decimals than were printed.
        for text in [
            "p90<500933.3333333333333333376766666ms",
            "p99<1.1s",
            "p50<800us",
            "errors<0.1234567%",
        ] {
            let slo = Slo::parse(text).unwrap();
            assert_eq!(Slo::parse(&slo.to_string()).unwrap(), slo, "{text} → {slo}");
        }
        assert_eq!(Slo::parse("p99<1.1s").unwrap().to_string(), "p99<1100ms");
        assert!(Slo::parse("p90<1e300ms").is_err());
    }
}
