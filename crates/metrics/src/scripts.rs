//! What a run's scenario scripts cost and how they failed, per function
//! (or inline piece): calls, the worker thread's CPU time they took (an
//! HDR histogram in nanoseconds), errors by `file:line: message`, and the
//! failures `after` hooks reported. Added up exactly, as every other count.

use crate::histogram;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::ops::AddAssign;

/// Distinct error or failure messages kept per function; the rest are
/// counted under [`OTHER`] (a script that puts a counter in its message
/// must not grow the results without end).
pub const MAX_MESSAGES: usize = 20;
pub const OTHER: &str = "(other messages)";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScriptStats {
    pub functions: BTreeMap<String, FunctionStats>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FunctionStats {
    pub calls: u64,
    /// Calls that threw or ran past a budget.
    pub errors: u64,
    /// `after` hooks that reported a failure (`ctx.fail`, `return false`).
    pub failures: u64,
    /// CPU time of each call, nanoseconds.
    pub cpu_ns: Histogram<u64>,
    /// Errors by `file:line: message`.
    pub error_messages: BTreeMap<String, u64>,
    /// Failures by message.
    pub failure_messages: BTreeMap<String, u64>,
}

impl Default for FunctionStats {
    fn default() -> Self {
        FunctionStats {
            calls: 0,
            errors: 0,
            failures: 0,
            cpu_ns: histogram::new(),
            error_messages: BTreeMap::new(),
            failure_messages: BTreeMap::new(),
        }
    }
}

/// How one call ended.
pub enum CallEnd<'a> {
    Returned,
    Failed(&'a str),
    Threw(&'a str),
}

impl ScriptStats {
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// One call of `function` that took `cpu_ns`.
    pub fn record(&mut self, function: &str, cpu_ns: u64, end: CallEnd<'_>) {
        let f = match self.functions.get_mut(function) {
            Some(f) => f,
            None => self.functions.entry(function.to_string()).or_default(),
        };
        f.calls += 1;
        histogram::record_us(&mut f.cpu_ns, cpu_ns.max(1));
        match end {
            CallEnd::Returned => {}
            CallEnd::Failed(message) => {
                f.failures += 1;
                count_message(&mut f.failure_messages, message, 1);
            }
            CallEnd::Threw(message) => {
                f.errors += 1;
                count_message(&mut f.error_messages, message, 1);
            }
        }
    }

    /// Every call's errors, all functions together.
    pub fn errors(&self) -> u64 {
        self.functions.values().map(|f| f.errors).sum()
    }
}

fn count_message(into: &mut BTreeMap<String, u64>, message: &str, n: u64) {
    if let Some(c) = into.get_mut(message) {
        *c += n;
    } else if into.len() < MAX_MESSAGES {
        into.insert(message.to_string(), n);
    } else {
        *into.entry(OTHER.to_string()).or_default() += n;
    }
}

impl AddAssign<&ScriptStats> for ScriptStats {
    fn add_assign(&mut self, o: &ScriptStats) {
        for (name, f) in &o.functions {
            *self.functions.entry(name.clone()).or_default() += f;
        }
    }
}

impl AddAssign<&FunctionStats> for FunctionStats {
    fn add_assign(&mut self, o: &FunctionStats) {
        let FunctionStats {
            calls,
            errors,
            failures,
            cpu_ns,
            error_messages,
            failure_messages,
        } = o;
        self.calls += calls;
        self.errors += errors;
        self.failures += failures;
        histogram::add(&mut self.cpu_ns, cpu_ns);
        for (m, n) in error_messages {
            count_message(&mut self.error_messages, m, *n);
        }
        for (m, n) in failure_messages {
            count_message(&mut self.failure_messages, m, *n);
        }
    }
}

/// The exchange form (shards, the wire): the histogram as base64.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FunctionWire {
    pub calls: u64,
    pub errors: u64,
    pub failures: u64,
    pub cpu_ns: String,
    #[serde(default)]
    pub error_messages: BTreeMap<String, u64>,
    #[serde(default)]
    pub failure_messages: BTreeMap<String, u64>,
}

impl ScriptStats {
    pub fn to_wire(&self) -> BTreeMap<String, FunctionWire> {
        self.functions
            .iter()
            .map(|(name, f)| {
                let wire = FunctionWire {
                    calls: f.calls,
                    errors: f.errors,
                    failures: f.failures,
                    cpu_ns: histogram::to_base64(&f.cpu_ns),
                    error_messages: f.error_messages.clone(),
                    failure_messages: f.failure_messages.clone(),
                };
                (name.clone(), wire)
            })
            .collect()
    }

    pub fn from_wire(
        wire: &BTreeMap<String, FunctionWire>,
    ) -> Result<ScriptStats, histogram::DecodeError> {
        let mut functions = BTreeMap::new();
        for (name, w) in wire {
            let f = FunctionStats {
                calls: w.calls,
                errors: w.errors,
                failures: w.failures,
                cpu_ns: histogram::from_base64(&w.cpu_ns)?,
                error_messages: w.error_messages.clone(),
                failure_messages: w.failure_messages.clone(),
            };
            functions.insert(name.clone(), f);
        }
        Ok(ScriptStats { functions })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_add_up_and_messages_stay_bounded() {
        let mut a = ScriptStats::default();
        for i in 0..30 {
            a.record("f", 1_000, CallEnd::Threw(&format!("f.js:{i}: boom")));
        }
        a.record("g", 2_000, CallEnd::Failed("no"));
        let mut b = ScriptStats::from_wire(&a.to_wire()).unwrap();
        assert_eq!(b, a);
        b += &a;
        let f = &b.functions["f"];
        assert_eq!((f.calls, f.errors), (60, 60));
        assert_eq!(f.error_messages.len(), MAX_MESSAGES + 1);
        assert_eq!(f.error_messages.values().sum::<u64>(), 60);
        assert_eq!(b.functions["g"].failure_messages["no"], 2);
        assert_eq!(b.errors(), 60);
    }
}
