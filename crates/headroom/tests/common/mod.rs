//! Test harness: real servers on loopback, each stopped by its own PID on
//! drop (even when the test fails), and a runner for the `headroom` binary.
#![allow(dead_code)]

pub mod cdp;
pub mod chromium;
pub mod study;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn headroom_bin() -> &'static str {
    env!("CARGO_BIN_EXE_headroom")
}

/// Kills a child process by its PID when dropped: SIGTERM, then SIGKILL.
pub struct ProcessGuard {
    pub child: Child,
}

impl ProcessGuard {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        // Waited for already: its PID may be another process's by now.
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An aborting threshold every run breaches within its first seconds.
pub const ABORT_AT_ONCE: [&str; 6] = [
    "--abort-on",
    "p99<1ms",
    "--abort-delay",
    "1s",
    "--abort-window",
    "1s",
];

/// The built-in target on a free port.
pub struct Target {
    pub guard: ProcessGuard,
    pub base: String,
}

impl Target {
    pub fn start(workers: u32, threads: u32) -> Target {
        Self::start_with(&[
            "--workers",
            &workers.to_string(),
            "--threads",
            &threads.to_string(),
        ])
    }

    pub fn start_with(args: &[&str]) -> Target {
        let mut child = Command::new(headroom_bin())
            .args(["target", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start headroom target");
        let stdout = child.stdout.take().unwrap();
        let guard = ProcessGuard { child };
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let base = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("target did not start: {line:?}"))
            .to_string();
        Target { guard, base }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn stats(&self) -> Value {
        let body = http_get(&self.url("/stats"));
        serde_json::from_str(&body).unwrap()
    }

    pub fn requests(&self) -> u64 {
        self.stats()["requests"].as_u64().unwrap()
    }
}

/// A blocking one-shot GET (for reading a server's own counters). Read to
/// the server's close, bounded: a server that keeps the connection open
/// fails the test instead of hanging it.
pub fn http_get(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut s = TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out)
        .unwrap_or_else(|e| panic!("GET {url}: {e} (no close within 60 s)"));
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunked(body).unwrap_or_else(|| panic!("GET {url}: a malformed chunked body"))
    } else {
        body.to_string()
    }
}

/// A chunked body's data (a Go server chunks what it streams).
fn dechunked(mut body: &str) -> Option<String> {
    let mut data = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(data);
        }
        data.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// The path of a shipped example file.
pub fn example(name: &str) -> String {
    study::examples().join(name).display().to_string()
}

/// Where a `.ci/*.sh` script put a peer: `$VAR`, else
/// `$XDG_CACHE_HOME/headroom/DIR` (`~/.cache` by default).
pub fn peer_home(var: &str, dir: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
        cache.join("headroom").join(dir)
    })
}

pub fn free_port() -> u16 {
    headroom_study::free_port().expect("a free port")
}

/// The port a test server writes to `port_file` once it listens (they
/// bind a free one and say which), within 20 s; `what` names it in the
/// failure.
pub fn port_from_file(port_file: &Path, what: &str) -> u16 {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read_to_string(port_file) {
            return text.trim().parse().unwrap();
        }
        assert!(std::time::Instant::now() < deadline, "{what} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `headroom import KIND FILE --out FILE.toml` (the module of carried
/// scripts beside it): the scenario's path and the command's output.
pub fn import_to_scenario(kind: &str, file: &Path) -> (PathBuf, std::process::Output) {
    let scenario = file.with_extension("toml");
    let o = Command::new(headroom_bin())
        .args(["import", kind])
        .arg(file)
        .arg("--out")
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (scenario, o)
}

pub fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "port {port} never opened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A certificate and key (PEM) for `localhost` and 127.0.0.1, made in the
/// test.
pub struct Pki {
    pub cert_pem: String,
    pub key_pem: String,
}

pub fn self_signed() -> Pki {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    Pki {
        cert_pem: cert.cert.pem(),
        key_pem: cert.signing_key.serialize_pem(),
    }
}

/// Debian's nginx on a free loopback port, with its own config and an
/// access log to count what it received.
pub struct Nginx {
    pub guard: ProcessGuard,
    pub dir: tempfile::TempDir,
    pub port: u16,
}
// (field order matters: the guard stops nginx before its folder is removed)

impl Nginx {
    pub fn start() -> Nginx {
        Self::start_with("", "")
    }

    /// nginx serving TLS on its port with this certificate and key (PEM).
    pub fn start_tls(cert_pem: &str, key_pem: &str) -> Nginx {
        Self::start_tls_with(cert_pem, key_pem, |_| String::new())
    }

    /// The same, with `server_extra(folder)` inside its `server {}`.
    pub fn start_tls_with(
        cert_pem: &str,
        key_pem: &str,
        server_extra: impl FnOnce(&Path) -> String,
    ) -> Nginx {
        Self::start_in(tempfile::tempdir().unwrap(), " ssl", |dir| {
            let cert = dir.join("cert.pem");
            let key = dir.join("key.pem");
            std::fs::write(&cert, cert_pem).unwrap();
            std::fs::write(&key, key_pem).unwrap();
            format!(
                "ssl_certificate {}; ssl_certificate_key {};\n    {}",
                cert.display(),
                key.display(),
                server_extra(dir)
            )
        })
    }

    /// `listen_flags` go after the listen address; `server_extra` into the
    /// server block.
    pub fn start_with(listen_flags: &str, server_extra: &str) -> Nginx {
        Self::start_in(tempfile::tempdir().unwrap(), listen_flags, |_| {
            server_extra.to_string()
        })
    }

    fn start_in(
        dir: tempfile::TempDir,
        listen_flags: &str,
        server_extra: impl FnOnce(&Path) -> String,
    ) -> Nginx {
        let server_extra = server_extra(dir.path());
        Self::start_http(dir, |d, port| {
            let d = d.display();
            format!(
                "access_log {d}/access.log;
  server {{
    listen 127.0.0.1:{port}{listen_flags} backlog=4096;
    {server_extra}
    location / {{ return 200 \"hello from nginx\\n\"; }}
  }}"
            )
        })
    }

    /// A router: one `server` per host name in `hosts` (each answering 200
    /// with its own name), a default server answering 404, and an access
    /// log of `$host $connection $status $request_uri` per request.
    pub fn start_router(hosts: &[String]) -> Nginx {
        Self::start_http(tempfile::tempdir().unwrap(), |d, port| {
            let d = d.display();
            let names = hosts.join(" ");
            format!(
                "server_names_hash_max_size 65536;
  server_names_hash_bucket_size 128;
  log_format hosts '$host $connection $status $request_uri';
  access_log {d}/access.log hosts;
  server {{
    listen 127.0.0.1:{port} default_server backlog=4096;
    location / {{ return 404 \"no such app: $host\\n\"; }}
  }}
  server {{
    listen 127.0.0.1:{port};
    server_name {names};
    location / {{ return 200 \"app $host\\n\"; }}
  }}"
            )
        })
    }

    /// The access log's lines, split on spaces.
    pub fn log_fields(&self) -> Vec<Vec<String>> {
        let log = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        log.lines()
            .map(|l| l.split(' ').map(str::to_string).collect())
            .collect()
    }

    /// nginx with `http_body` (given the folder and port) inside `http {}`.
    pub fn start_http(
        dir: tempfile::TempDir,
        http_body: impl FnOnce(&Path, u16) -> String,
    ) -> Nginx {
        let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("nginx is required for these tests: apt-get install -y nginx-light");
        let port = free_port();
        let http_body = http_body(dir.path(), port);
        let d = dir.path().display();
        let user = if unsafe { libc::geteuid() } == 0 {
            "user root;"
        } else {
            ""
        };
        let conf = format!(
            "{user}
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 8192; }}
http {{
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  keepalive_requests 100000;
  {http_body}
}}
"
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let child = Command::new(nginx)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let guard = ProcessGuard { child };
        wait_for_port(port);
        Nginx { guard, dir, port }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }

    /// Request targets nginx logged, in order ("/path?query").
    pub fn paths(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        log.lines()
            .filter_map(|l| l.split('"').nth(1))
            .filter_map(|req| req.split(' ').nth(1))
            .map(str::to_string)
            .collect()
    }

    /// Requests nginx logged (one access-log line each).
    pub fn requests(&self) -> u64 {
        let log = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        log.lines().count() as u64
    }

    /// Requests nginx logged, once `want` are or 5 s have passed. nginx
    /// logs a request when it ends: one it answered before reading its
    /// whole body ends after the rest is read and dropped, when the client
    /// may already have its answer.
    pub fn requests_reaching(&self, want: u64) -> u64 {
        let give_up = Instant::now() + Duration::from_secs(5);
        loop {
            let logged = self.requests();
            if logged >= want || Instant::now() > give_up {
                return logged;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A hand-written server on a free port: `handle` gets each accepted
/// connection on its own thread. Counts requests the handler reports.
pub struct RawServer {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl RawServer {
    pub fn start<F>(handle: F) -> RawServer
    where
        F: Fn(TcpStream, &AtomicU64) + Send + Sync + 'static,
    {
        Self::start_with_backlog(None, handle)
    }

    pub fn start_with_backlog<F>(backlog: Option<i32>, handle: F) -> RawServer
    where
        F: Fn(TcpStream, &AtomicU64) + Send + Sync + 'static,
    {
        let listener = match backlog {
            None => TcpListener::bind("127.0.0.1:0").unwrap(),
            Some(n) => {
                let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .unwrap();
                s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
                    .unwrap();
                s.listen(n).unwrap();
                s.into()
            }
        };
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handle = Arc::new(handle);
        let (r, st) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (h, r) = (handle.clone(), r.clone());
                std::thread::spawn(move || h(stream, &r));
            }
        });
        RawServer {
            addr,
            requests,
            stop,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// A server answering `response` to every request (keep-alive), and the
/// request heads it received, in order.
pub fn recording_heads(response: &'static [u8]) -> (RawServer, Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let server = {
        let seen = seen.clone();
        RawServer::start(move |mut s, count| {
            while let Some(head) = read_request_head(&mut s) {
                count.fetch_add(1, Ordering::SeqCst);
                seen.lock().unwrap().push(head);
                if s.write_all(response).is_err() {
                    return;
                }
            }
        })
    };
    (server, seen)
}

/// The pids of `parent`'s children (from /proc), in order.
pub fn children(parent: i32) -> Vec<i32> {
    let parent_of = |pid: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // pid (comm) state ppid …: the comm may hold spaces, not ')'.
        let after = &stat[stat.rfind(')')? + 2..];
        after.split_whitespace().nth(1)?.parse::<i32>().ok()
    };
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| parent_of(pid) == Some(parent))
        .collect();
    pids.sort();
    pids
}

/// Serves every request with `response` (keep-alive), and closes the
/// connection after each when `close` is set.
pub fn answering(response: &'static [u8], close: bool) -> RawServer {
    RawServer::start(move |mut s, count| {
        while read_request(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
            if s.write_all(response).is_err() || close {
                return;
            }
        }
    })
}

/// Reads one request per connection and answers nothing, holding the
/// connection open for `hold`.
pub fn never_answering(hold: Duration) -> RawServer {
    RawServer::start(move |mut s, count| {
        if read_request(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(hold);
        }
    })
}

/// A listening socket that never accepts: with a tiny backlog, the kernel
/// drops further SYNs (connect timeouts, listen-queue overflows).
pub fn unaccepted_listener(backlog: i32) -> (socket2::Socket, SocketAddr) {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    s.listen(backlog).unwrap();
    let addr = s.local_addr().unwrap().as_socket().unwrap();
    (s, addr)
}

/// Reads one request head (up to the blank line) and returns it.
/// One request's head and nothing of its body, a byte at a time (a
/// server that never reads an upload); false when the client closed first.
pub fn read_head_only(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(0) | Err(_) => return false,
            Ok(_) => head.push(byte[0]),
        }
    }
    true
}

pub fn read_request_head(stream: &mut TcpStream) -> Option<String> {
    read_head_and_body(stream).map(|(head, _)| head)
}

/// One request's head and its body (by Content-Length).
pub fn read_head_and_body(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(0) | Err(_) => return None,
            Ok(_) => buf.push(byte[0]),
        }
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).ok()?;
    Some((head, body))
}

/// Writes a scenario file (and any data files) into a fresh folder.
pub fn scenario_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// Reads one request head (up to the blank line); false on EOF/error.
pub fn read_request(stream: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1024];
    loop {
        match stream.read(&mut byte) {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                buf.extend_from_slice(&byte[..n]);
                if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    return true;
                }
            }
        }
    }
}

/// A finished `headroom` invocation.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub results: Option<Value>,
    pub elapsed: Duration,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    pub fn results(&self) -> &Value {
        self.results.as_ref().unwrap_or_else(|| {
            panic!(
                "no results file; exit {}\nstdout:\n{}\nstderr:\n{}",
                self.code, self.stdout, self.stderr
            )
        })
    }

    /// The results file (kept while the `Run` lives).
    pub fn results_path(&self) -> &Path {
        &self.out
    }

    pub fn total(&self) -> u64 {
        self.results()["requests"]["total"].as_u64().unwrap()
    }

    pub fn error(&self, class: &str) -> u64 {
        self.results()["errors"][class].as_u64().unwrap_or(0)
    }
}

/// Runs `headroom run ARGS --out <tmp>` and collects everything.
pub fn run(args: &[&str]) -> Run {
    run_with(args, |_| {})
}

pub fn run_with(args: &[&str], customise: impl FnOnce(&mut Command)) -> Run {
    invoke("run", args, customise)
}

/// Runs `headroom capacity ARGS --out <tmp>`; `results` is cap.json.
pub fn capacity(args: &[&str]) -> Run {
    invoke("capacity", args, |_| {})
}

/// Runs `headroom SUBCOMMAND ARGS --out <tmp>` and reads the file back.
pub fn invoke(sub: &str, args: &[&str], customise: impl FnOnce(&mut Command)) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let out: PathBuf = dir.path().join("results.json");
    let mut cmd = Command::new(headroom_bin());
    cmd.arg(sub).args(args).arg("--out").arg(&out);
    customise(&mut cmd);
    let start = Instant::now();
    let output = cmd.output().expect("run headroom");
    let results = std::fs::read_to_string(&out)
        .ok()
        .map(|s| serde_json::from_str(&s).expect("results.json is valid JSON"));
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into(),
        stderr: String::from_utf8_lossy(&output.stderr).into(),
        results,
        elapsed: start.elapsed(),
        out,
        _dir: dir,
    }
}

/// Tests that measure time share the machine by weight. One that loads it
/// — a high rate, a CPU-bound child, the demo, a figure compared with
/// another run's — runs alone (`serial()`): on a two-core machine its load
/// is another's noise. One that loads it lightly — a few dozen requests per
/// second against a server that sleeps — may run beside other light ones
/// (`light()`), never beside one that runs alone.
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

pub fn serial() -> std::sync::RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(|e| e.into_inner())
}

pub fn light() -> std::sync::RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|e| e.into_inner())
}

/// `return Err(message)` unless `cond`: a try that missed.
#[allow(unused_macros)]
macro_rules! ensure {
    ($cond:expr, $($message:tt)+) => {
        let accepted: bool = $cond;
        if !accepted {
            return Err(format!($($message)+));
        }
    };
}
#[allow(unused_imports)]
pub(crate) use ensure;

/// The machine's CPU counters: (steal, total) in ticks, from /proc/stat.
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal guest guest_nice;
    // guest time is already inside user and nice.
    let total = fields.iter().take(8).sum();
    Some((*fields.get(7)?, total))
}

/// Runs a timing measurement until it is accepted, at most three times;
/// panics with every try's reason if none is.
///
/// The test machines are virtual: the hypervisor steals 8–32 % of the CPU at
/// times and stops the whole machine for tens of milliseconds, so a bound
/// tight enough to catch a real timing bug is sometimes missed by an
/// honest generator. Noise comes and goes; a real bug misses every time.
/// Each missed try is printed with the CPU time stolen meanwhile.
pub fn in_three_tries(what: &str, mut attempt: impl FnMut() -> Result<(), String>) {
    let mut missed = Vec::new();
    for t in 1..=3 {
        let before = cpu_ticks();
        let outcome = attempt();
        let Err(why) = outcome else {
            return;
        };
        let stolen = match (before, cpu_ticks()) {
            (Some((s0, t0)), Some((s1, t1))) if t1 > t0 => {
                format!(
                    "{:.1} % of the CPU stolen",
                    (s1 - s0) as f64 * 100.0 / (t1 - t0) as f64
                )
            }
            _ => "steal unknown".to_string(),
        };
        eprintln!("{what}: try {t} missed ({stolen}):\n{why}");
        missed.push(format!("try {t} ({stolen}): {why}"));
    }
    panic!(
        "{what}: all three tries missed:\n{}",
        missed.join("\n---\n")
    );
}
