//! The built-in sample server (`headroom target`), a real stand-in for a
//! pre-forking, threaded app server (Puma `-w W -t T`).
//!
//! The master binds the port (one socket per worker, SO_REUSEPORT, so the
//! kernel spreads connections evenly), maps shared counters, forks W
//! workers that inherit their sockets, and respawns any that die. Each worker has
//! one IO thread (tokio + hyper, HTTP/1.1 keep-alive) and T app threads; a
//! request holds an app thread while it runs, so a worker serves at most T
//! requests at once and the rest wait, as in the seeds' servers.
//! `--workers 0` serves from the master itself (Puma's single mode).
//!
//! Endpoints: `/hello`, `/fibonacci?n=`, `/sleep?ms=`, `/status?code=`,
//! `/bytes?n=`, `/login?user=`, `/private`, `/echo`, `/health` and `/stats`
//! (the last two are not counted).

pub mod app;
mod counters;

use bytes::Bytes;
use counters::Counters;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct TargetConfig {
    pub listen: String,
    pub workers: u32,
    pub threads: u32,
    pub public: bool,
    pub backlog: u32,
    /// Requests that may wait for an app thread in a worker; more get 503
    /// at once (Passenger's "request queue full"). `None`: unbounded.
    pub queue: Option<u32>,
    /// A line appended to this file per request as it reaches the app: a
    /// count that survives the server being killed and started again.
    pub request_log: Option<std::path::PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("cannot parse listen address `{0}` (expected e.g. 127.0.0.1:8080)")]
    Address(String),
    #[error("refusing to listen on non-loopback address {0}: pass --public to allow it")]
    NotLoopback(SocketAddr),
    #[error("--threads must be at least 1")]
    NoThreads,
    // Not `source`: the message already says it, and error chains would
    // print it twice.
    #[error("cannot listen on {addr}: {cause}")]
    Bind {
        addr: SocketAddr,
        cause: std::io::Error,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn bind_socket(addr: SocketAddr, backlog: u32, reuse_port: bool) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(reuse_port)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog.min(i32::MAX as u32) as i32)?;
    Ok(socket.into())
}

/// The server bound to its port, not yet serving.
pub struct Bound {
    /// The address bound (the port filled in when 0 was asked for).
    pub local: SocketAddr,
    /// Why connections may spread unevenly over the workers, when they may.
    pub warnings: Vec<String>,
    listeners: Vec<TcpListener>,
    counters: &'static Counters,
    config: TargetConfig,
}

/// Checks the configuration and binds one socket per worker. Two steps
/// ([`Bound::serve`] next), so the caller can say where it listens before
/// it blocks.
pub fn bind(config: &TargetConfig) -> Result<Bound, TargetError> {
    if config.threads == 0 {
        return Err(TargetError::NoThreads);
    }
    let addr = config
        .listen
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| TargetError::Address(config.listen.clone()))?;
    if !addr.ip().is_loopback() && !config.public {
        return Err(TargetError::NotLoopback(addr));
    }
    // One listening socket per worker, on the same port (SO_REUSEPORT): the
    // kernel spreads connections over them. A socket shared by all workers
    // does not: the first worker awake drains the whole accept queue, and
    // 16 users connecting at once all landed on one of two workers, which
    // then served at half the speed.
    let reuse_port = config.workers > 1;
    let first = bind_socket(addr, config.backlog, reuse_port)
        .map_err(|cause| TargetError::Bind { addr, cause })?;
    let local = first.local_addr()?;
    let mut listeners = vec![first];
    let mut warnings = Vec::new();
    for _ in 1..config.workers {
        match bind_socket(local, config.backlog, true) {
            Ok(l) => listeners.push(l),
            Err(e) => {
                // E.g. one of this machine's outgoing connections, in
                // TIME_WAIT, holds the port as its local end.
                warnings.push(format!(
                    "cannot open a socket per worker on {local} ({e}); the workers share one, and connections may spread unevenly"
                ));
                listeners.truncate(1);
                break;
            }
        }
    }
    let mut counters = Counters::new_shared(config.workers as usize)?;
    if let Some(path) = &config.request_log {
        counters = counters.logging_to(path)?;
    }
    let counters: &'static Counters = Box::leak(Box::new(counters));
    Ok(Bound {
        local,
        warnings,
        listeners,
        counters,
        config: config.clone(),
    })
}

impl Bound {
    /// Serves until SIGTERM/SIGINT. Blocks; forks when `workers > 0`.
    pub fn serve(mut self) -> Result<(), TargetError> {
        if self.config.workers == 0 {
            serve(
                self.listeners.swap_remove(0),
                self.config.threads,
                self.config.queue,
                self.counters,
                None,
            );
            return Ok(());
        }
        master(&self.listeners, &self.config, self.counters)
    }
}

/// Forks and supervises the workers (no threads exist yet: fork is safe).
/// Worker i serves `listeners[i]`; the master keeps them all open, so a
/// respawned worker takes over its predecessor's socket and queue.
fn master(
    listeners: &[TcpListener],
    config: &TargetConfig,
    counters: &'static Counters,
) -> Result<(), TargetError> {
    use signal_hook::consts::{SIGCHLD, SIGINT, SIGTERM};
    let spawn = |worker: usize| -> std::io::Result<libc::pid_t> {
        // SAFETY: the master is single-threaded here (signal-hook's
        // iterator does not start a thread), so the child may run Rust code.
        match unsafe { libc::fork() } {
            -1 => Err(std::io::Error::last_os_error()),
            0 => {
                unsafe {
                    // Die with the master, and take default signal actions.
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGCHLD] {
                        libc::signal(sig, libc::SIG_DFL);
                    }
                }
                serve(
                    listeners[worker % listeners.len()]
                        .try_clone()
                        .expect("dup listener"),
                    config.threads,
                    config.queue,
                    counters,
                    Some(worker),
                );
                std::process::exit(0);
            }
            pid => Ok(pid),
        }
    };
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGCHLD])?;
    let mut children: Vec<libc::pid_t> = (0..config.workers as usize)
        .map(spawn)
        .collect::<Result<_, _>>()?;
    'supervise: for signal in signals.forever() {
        match signal {
            SIGCHLD => loop {
                let mut status = 0;
                // SAFETY: reaps any exited child without blocking.
                let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                if pid <= 0 {
                    break;
                }
                if let Some(worker) = children.iter().position(|c| *c == pid) {
                    // A worker died: replace it, as Puma and Unicorn do.
                    children[worker] = spawn(worker)?;
                }
            },
            _ => break 'supervise,
        }
    }
    for &pid in &children {
        // SAFETY: signalling our own children.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    for &pid in &children {
        loop {
            let mut status = 0;
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r != 0 {
                break;
            }
            if std::time::Instant::now() > deadline {
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Ok(())
}

/// One worker: an IO thread and `threads` app threads.
/// Requests holding or waiting for an app thread in this worker process.
static APP_DEMAND: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts a request's claim on an app thread while it lives.
struct AppClaim;

impl AppClaim {
    /// `None` when `limit` requests already hold or wait for a thread.
    fn take(limit: Option<usize>) -> Option<AppClaim> {
        use std::sync::atomic::Ordering;
        let before = APP_DEMAND.fetch_add(1, Ordering::SeqCst);
        if limit.is_some_and(|l| before >= l) {
            APP_DEMAND.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(AppClaim)
    }
}

impl Drop for AppClaim {
    fn drop(&mut self) {
        APP_DEMAND.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Serves on `listener` until killed; `worker` is this worker's index
/// (`None`: the master serves alone).
fn serve(
    listener: TcpListener,
    threads: u32,
    queue: Option<u32>,
    counters: &'static Counters,
    worker: Option<usize>,
) {
    let limit = queue.map(|q| (threads + q) as usize);
    if let Some(w) = worker {
        counters.worker_started(w);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(threads as usize)
        .build()
        .expect("a tokio runtime can be built");
    runtime.block_on(async move {
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // EMFILE and friends: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let _ = stream.set_nodelay(true);
            let open = worker.map(|w| counters.connection_opened(w));
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| handle(req, limit, counters));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
                drop(open);
            });
        }
    });
}

fn reply(r: app::Reply) -> Response<Full<Bytes>> {
    let mut b = Response::builder()
        .status(r.status)
        .header("content-type", r.content_type);
    if let Some(cookie) = r.set_cookie {
        b = b.header("set-cookie", cookie);
    }
    b.body(Full::new(Bytes::from(r.body)))
        .expect("valid response")
}

fn echo(req: &Request<Incoming>) -> String {
    let mut text = format!("{} {} {:?}\n", req.method(), req.uri(), req.version());
    for (k, v) in req.headers() {
        text.push_str(&format!("{k}: {}\n", String::from_utf8_lossy(v.as_bytes())));
    }
    text
}

async fn handle(
    req: Request<Incoming>,
    limit: Option<usize>,
    counters: &'static Counters,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path();
    let query = req.uri().query().unwrap_or("");
    match path {
        "/health" => {
            return Ok(reply(app::Reply {
                status: 200,
                content_type: "text/plain",
                body: b"ok\n".to_vec(),
                set_cookie: None,
            }))
        }
        "/stats" => {
            return Ok(reply(app::Reply {
                status: 200,
                content_type: "application/json",
                body: counters.json().into_bytes(),
                set_cookie: None,
            }))
        }
        _ => {}
    }
    let _in_flight = counters.begin();
    let route = match path {
        "/private" => Ok(app::Route::Private(
            req.headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        )),
        "/echo" => Ok(app::Route::Echo(echo(&req))),
        _ => app::route(path, query),
    };
    let route = match route {
        Ok(route) => route,
        Err(r) => return Ok(reply(r)),
    };
    let Some(_claim) = AppClaim::take(limit) else {
        return Ok(reply(app::Reply {
            status: 503,
            content_type: "text/plain",
            body: b"request queue full\n".to_vec(),
            set_cookie: None,
        }));
    };
    // Holding an app thread for the whole request is the point: it is what
    // makes the worker × thread grid behave like a real app server.
    let r = tokio::task::spawn_blocking(move || app::respond(route))
        .await
        .unwrap_or_else(|_| app::Reply {
            status: 500,
            content_type: "text/plain",
            body: b"app thread panicked\n".to_vec(),
            set_cookie: None,
        });
    Ok(reply(r))
}
