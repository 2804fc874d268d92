//! Remote monitoring: `headroom monitor --listen ADDR --pid PID` on the
//! server's host samples the tree (and that machine) and serves the
//! samples as JSON at `GET /samples?since_ms=UNIX_MS`, to whoever presents
//! `Authorization: Bearer TOKEN`. A run given `--monitor-url` pulls them
//! once per interval and places them on its own clock by wall-clock time.

use super::sample::Sample;
use super::Sampler;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Samples kept by a remote monitor (an hour at 1 Hz).
const KEEP: usize = 3600;

pub struct MonitorServer {
    pub listen: String,
    pub pid: i32,
    pub token: String,
    pub interval: Duration,
    pub public: bool,
    /// The server's own gauges, read with each sample on this host.
    pub probes: Vec<crate::probes::Probe>,
}

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("cannot listen on {0}: {1}")]
    Listen(String, std::io::Error),
    #[error("refusing to listen on non-loopback address {0}: pass --public to allow it")]
    NotLoopback(String),
    #[error("no process {0} to watch")]
    NoProcess(i32),
    #[error("the remote monitor at {0} refused the token (HTTP 401): check --monitor-token")]
    Unauthorized(String),
    #[error("the remote monitor at {url} did not answer: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("`{0}` is not a monitor URL (expected http://HOST:PORT)")]
    BadUrl(String),
}

/// A monitor bound to its address, not yet serving.
pub struct Listening {
    /// The address bound (the port filled in when 0 was asked for).
    pub local: SocketAddr,
    listener: TcpListener,
    pid: i32,
    token: String,
    interval: Duration,
    probes: Vec<crate::probes::Probe>,
}

/// Checks the process and the address and binds it; [`Listening::serve`]
/// then serves. Two steps, so the caller can say where it listens first.
pub fn bind(config: &MonitorServer) -> Result<Listening, RemoteError> {
    if !std::path::Path::new(&format!("/proc/{}", config.pid)).exists() {
        return Err(RemoteError::NoProcess(config.pid));
    }
    let addr = config
        .listen
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            RemoteError::Listen(
                config.listen.clone(),
                std::io::ErrorKind::InvalidInput.into(),
            )
        })?;
    if !addr.ip().is_loopback() && !config.public {
        return Err(RemoteError::NotLoopback(config.listen.clone()));
    }
    let listener =
        TcpListener::bind(addr).map_err(|e| RemoteError::Listen(config.listen.clone(), e))?;
    let local = listener
        .local_addr()
        .map_err(|e| RemoteError::Listen(config.listen.clone(), e))?;
    Ok(Listening {
        local,
        listener,
        pid: config.pid,
        token: config.token.clone(),
        interval: config.interval,
        probes: config.probes.clone(),
    })
}

impl Listening {
    /// Samples the tree every interval and serves the samples until the
    /// process is stopped.
    pub fn serve(self) {
        let samples: Arc<Mutex<VecDeque<Sample>>> = Arc::default();
        let store = samples.clone();
        let (pid, interval, probes) = (self.pid, self.interval, self.probes);
        std::thread::spawn(move || {
            let mut sampler = Sampler::new(Some(pid), true, false);
            let mut failed = vec![false; probes.len()];
            loop {
                std::thread::sleep(interval);
                let mut s = sampler.sample(0.0);
                for (i, probe) in probes.iter().enumerate() {
                    match probe.read() {
                        Ok(gauges) => {
                            s.probes.insert(probe.kind.name().to_string(), gauges);
                        }
                        // Said once here; the client sees the gap.
                        Err(e) if !failed[i] => {
                            eprintln!("headroom monitor: warning: {e}");
                            failed[i] = true;
                        }
                        Err(_) => {}
                    }
                }
                let mut q = store.lock().expect("samples lock");
                if q.len() == KEEP {
                    q.pop_front();
                }
                q.push_back(s);
            }
        });
        let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for stream in self.listener.incoming().flatten() {
            use std::sync::atomic::Ordering;
            // A client (or a scan) opening connections without end would
            // otherwise get a thread each.
            if open.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
                open.fetch_sub(1, Ordering::SeqCst);
                drop(stream);
                continue;
            }
            let samples = samples.clone();
            let token = self.token.clone();
            let open = open.clone();
            std::thread::spawn(move || {
                answer(stream, &samples, &token);
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }
}

/// Connections `headroom monitor` serves at once; more are closed at once.
const MAX_CLIENTS: usize = 16;

/// Compares without stopping at the first difference, so the time taken
/// says nothing about how much of a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in b.iter().enumerate() {
        diff |= (a.get(i).copied().unwrap_or(0) ^ x) as usize;
    }
    diff == 0
}

fn answer(mut stream: TcpStream, samples: &Mutex<VecDeque<Sample>>, token: &str) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    let (path, auth) = loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                let auth = req
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("authorization"))
                    .map(|h| String::from_utf8_lossy(h.value).into_owned());
                break (req.path.unwrap_or("/").to_string(), auth);
            }
            Ok(httparse::Status::Partial) if buf.len() < 16 * 1024 => continue,
            _ => return,
        }
    };
    let (route, query) = path.split_once('?').unwrap_or((&path, ""));
    let expected = format!("Bearer {token}");
    let authorised = auth.is_some_and(|a| constant_time_eq(a.as_bytes(), expected.as_bytes()));
    let (status, body) = if !authorised {
        (
            "401 Unauthorized",
            "{\"error\":\"missing or wrong bearer token\"}".to_string(),
        )
    } else if route != "/samples" {
        (
            "404 Not Found",
            "{\"error\":\"GET /samples?since_ms=UNIX_MS\"}".to_string(),
        )
    } else {
        let since: u64 = url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "since_ms")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let q = samples.lock().expect("samples lock");
        let newer: Vec<&Sample> = q.iter().filter(|s| s.unix_ms > since).collect();
        (
            "200 OK",
            serde_json::to_string(&newer).unwrap_or_else(|_| "[]".into()),
        )
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A whole exchange with a remote monitor — connect, send, read — ends
/// within this, whatever the other end does: a monitor that stalls or
/// streams without end must never hold up the run, Ctrl-C or the results.
const FETCH_DEADLINE: Duration = Duration::from_secs(2);

/// The largest answer read from a remote monitor (samples since the last
/// pull are a few KiB).
const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// Reads to EOF, but no further than `deadline` and [`MAX_ANSWER`] bytes.
fn read_bounded(s: &mut TcpStream, deadline: Instant) -> Result<Vec<u8>, String> {
    let mut response = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no whole answer within {FETCH_DEADLINE:?}"));
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut chunk) {
            Ok(0) => return Ok(response),
            Ok(n) => response.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(e.to_string()),
        }
        if response.len() > MAX_ANSWER {
            return Err(format!("answer larger than {} MiB", MAX_ANSWER >> 20));
        }
    }
}

/// Where a run pulls its server samples from.
#[derive(Clone, Debug)]
pub struct RemoteSource {
    pub url: String,
    pub token: String,
}

/// One GET /samples; `Err` says why not.
pub fn fetch(source: &RemoteSource, since_ms: u64) -> Result<Vec<Sample>, RemoteError> {
    let rest = source
        .url
        .strip_prefix("http://")
        .ok_or_else(|| RemoteError::BadUrl(source.url.clone()))?;
    let host = rest.split('/').next().unwrap_or(rest);
    let unreachable = |reason: String| RemoteError::Unreachable {
        url: source.url.clone(),
        reason,
    };
    let addr = host
        .to_socket_addrs()
        .map_err(|e| unreachable(e.to_string()))?
        .next()
        .ok_or_else(|| RemoteError::BadUrl(source.url.clone()))?;
    let deadline = Instant::now() + FETCH_DEADLINE;
    let mut s = TcpStream::connect_timeout(&addr, FETCH_DEADLINE)
        .map_err(|e| unreachable(e.to_string()))?;
    let _ = s.set_write_timeout(Some(FETCH_DEADLINE));
    write!(
        s,
        "GET /samples?since_ms={since_ms} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        source.token
    )
    .map_err(|e| unreachable(e.to_string()))?;
    let response = read_bounded(&mut s, deadline).map_err(unreachable)?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| unreachable("no HTTP response".into()))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    match status {
        "200" => serde_json::from_str(body).map_err(|e| unreachable(format!("bad samples: {e}"))),
        "401" => Err(RemoteError::Unauthorized(source.url.clone())),
        other => Err(unreachable(format!("HTTP {other}"))),
    }
}

/// Pulls a remote monitor's samples during a run and lays them on the
/// run's samples by wall-clock time.
pub struct Puller {
    source: RemoteSource,
    last_ms: u64,
    latest: Option<Sample>,
    errors: Vec<String>,
}

impl Puller {
    pub fn new(source: RemoteSource, start_unix_ms: u64) -> Puller {
        Puller {
            source,
            last_ms: start_unix_ms.saturating_sub(2000),
            latest: None,
            errors: Vec::new(),
        }
    }

    /// Puts the newest remote server/machine sample into the local one.
    pub fn fill(&mut self, local: &mut Sample) {
        match fetch(&self.source, self.last_ms) {
            Ok(new) => {
                if let Some(last) = new.into_iter().max_by_key(|s| s.unix_ms) {
                    self.last_ms = last.unix_ms;
                    self.latest = Some(last);
                }
            }
            Err(e) => {
                let e = e.to_string();
                if self.errors.last() != Some(&e) {
                    self.errors.push(e);
                }
            }
        }
        if let Some(remote) = &self.latest {
            local.server = remote.server.clone();
            local.machine = remote.machine.clone();
            local.probes.extend(remote.probes.clone());
            // The sample sits at the run's own time (`t_s`); `unix_ms`
            // keeps when the remote took it.
            local.unix_ms = remote.unix_ms;
        }
    }

    pub fn errors(self) -> Vec<String> {
        self.errors
    }
}

/// A random token for `headroom monitor` when none is given.
pub fn new_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison_checks_every_byte_and_the_length() {
        assert!(constant_time_eq(b"Bearer abc", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer abd", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer ab", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer abcd", b"Bearer abc"));
        assert!(!constant_time_eq(b"", b"Bearer abc"));
    }
}
