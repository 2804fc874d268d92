//! The resolved run plan: everything the engine needs, complete and checked.
//! The CLI (and later scenario files) build a `Plan`; the engine never sees
//! flags or files.

use crate::engine::schedule::Schedule;
use crate::http::Endpoint;
use crate::metrics::ErrorClass;
use std::time::Duration;

/// Default request timeout, as in Gatling.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight requests may finish after the load ends, before they
/// are cut off and counted as `aborted`.
pub const DEFAULT_GRACEFUL_STOP: Duration = Duration::from_secs(10);
/// After Ctrl-C, in-flight requests get this long before being cut off.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(1);
/// Open model: connections grow on demand up to this many (all workers
/// together) unless `--connections` says otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

#[derive(Clone, Debug)]
pub struct Plan {
    pub endpoint: Endpoint,
    /// For display: the URL or base URL the user gave.
    pub label: String,
    pub requests: Vec<RequestSpec>,
    pub load: Load,
    pub keep_alive: bool,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub graceful_stop: Duration,
    /// Generator worker threads (one tokio runtime each).
    pub threads: usize,
    /// Stop after this many requests in all.
    pub max_requests: Option<u64>,
}

impl Plan {
    /// When the load itself ends (not counting the graceful stop); `None`
    /// when the run is bounded by requests or iterations only.
    pub fn load_duration(&self) -> Option<Duration> {
        match &self.load {
            Load::Closed(c) => c.duration,
            Load::Open(o) => Some(o.schedule.duration()),
        }
    }

    /// Threads actually worth starting: no more than there are users.
    pub fn effective_threads(&self) -> usize {
        let most = match &self.load {
            Load::Closed(c) => c.vus as usize,
            Load::Open(_) => usize::MAX,
        };
        self.threads.clamp(1, most.max(1))
    }
}

#[derive(Clone, Debug)]
pub enum Load {
    Closed(ClosedLoad),
    Open(OpenLoad),
}

/// N virtual users, each with its own connection, looping request → response.
#[derive(Clone, Debug)]
pub struct ClosedLoad {
    pub vus: u32,
    /// Users start evenly over this time.
    pub ramp_up: Duration,
    pub duration: Option<Duration>,
    /// Requests per user.
    pub iterations: Option<u64>,
    pub think_time: Duration,
}

/// Requests sent at scheduled times whatever the server does.
#[derive(Clone, Debug)]
pub struct OpenLoad {
    pub schedule: Schedule,
    /// Most connections (= requests in flight) at once, all workers together.
    pub max_connections: usize,
}

#[derive(Clone, Debug)]
pub struct RequestSpec {
    pub name: String,
    pub method: String,
    /// Path and query sent on the request line.
    pub target: String,
    pub weight: u32,
    pub expect: Expect,
    /// The request as sent on the wire, encoded once.
    pub encoded: Vec<u8>,
}

impl RequestSpec {
    pub fn is_head(&self) -> bool {
        self.method.eq_ignore_ascii_case("HEAD")
    }
}

/// Which statuses count as OK. Without a list, anything below 400 is OK
/// (redirects are answers, as in JMeter and Gatling).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    pub statuses: Option<Vec<u16>>,
}

impl Expect {
    /// `None` when the status is OK, else why it is a failure.
    pub fn check(&self, status: u16) -> Option<ErrorClass> {
        let ok = match &self.statuses {
            Some(list) => list.contains(&status),
            None => status < 400,
        };
        if ok {
            None
        } else if (400..500).contains(&status) {
            Some(ErrorClass::Http4xx)
        } else if (500..600).contains(&status) {
            Some(ErrorClass::Http5xx)
        } else {
            Some(ErrorClass::UnexpectedStatus)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations() {
        let default = Expect::default();
        assert_eq!(default.check(200), None);
        assert_eq!(default.check(302), None);
        assert_eq!(default.check(404), Some(ErrorClass::Http4xx));
        assert_eq!(default.check(503), Some(ErrorClass::Http5xx));
        let only_404 = Expect {
            statuses: Some(vec![404]),
        };
        assert_eq!(only_404.check(404), None);
        assert_eq!(only_404.check(200), Some(ErrorClass::UnexpectedStatus));
        assert_eq!(only_404.check(500), Some(ErrorClass::Http5xx));
    }
}
