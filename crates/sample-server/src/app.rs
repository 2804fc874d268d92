//! The sample application: endpoints modelled on the seeds' Rails apps.
//! Each runs on one of the worker's app threads, so a worker with T threads
//! serves at most T requests at once, like Puma's thread pool.

use num_bigint::BigUint;
use std::time::Duration;

pub const MAX_FIBONACCI: u64 = 1_000_000;
pub const MAX_SLEEP_MS: u64 = 600_000;
pub const MAX_BYTES: u64 = 256 * 1024 * 1024;

/// A request the app understands, parsed from path and query.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    Hello,
    /// Iterative Fibonacci of n with big integers: CPU-bound.
    Fibonacci(u64),
    /// A blocking wait that stands for a database call: IO-bound.
    Sleep(u64),
    Status(u16),
    Bytes(u64),
    /// Issues a token (JSON) and a session cookie for `user`.
    Login(String),
    /// 200 with the user's name if `Authorization: Bearer tok-<user>`
    /// was sent, else 401.
    Private(Option<String>),
    /// Echoes the request line and headers back as text.
    Echo(String),
}

pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub set_cookie: Option<String>,
}

impl Reply {
    fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into().into_bytes(),
            set_cookie: None,
        }
    }
}

fn number(query: &str, key: &str, default: u64, max: u64) -> Result<u64, String> {
    match url::form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == key) {
        None => Ok(default),
        Some((_, v)) => match v.parse::<u64>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(format!(
                "{key} must be an integer from 0 to {max}, got `{v}`"
            )),
        },
    }
}

/// Routes a path. `Err` is a 400/404 reply, made without an app thread.
pub fn route(path: &str, query: &str) -> Result<Route, Reply> {
    let bad = |e: String| Reply::text(400, e + "\n");
    match path {
        "/" | "/hello" => Ok(Route::Hello),
        "/fibonacci" => number(query, "n", 1000, MAX_FIBONACCI)
            .map(Route::Fibonacci)
            .map_err(bad),
        "/sleep" => number(query, "ms", 50, MAX_SLEEP_MS)
            .map(Route::Sleep)
            .map_err(bad),
        "/status" => match number(query, "code", 200, 599) {
            Ok(code) if code >= 200 => Ok(Route::Status(code as u16)),
            Ok(code) => Err(bad(format!("code must be 200..599, got {code}"))),
            Err(e) => Err(bad(e)),
        },
        "/bytes" => number(query, "n", 1024, MAX_BYTES)
            .map(Route::Bytes)
            .map_err(bad),
        "/login" => {
            let user = url::form_urlencoded::parse(query.as_bytes())
                .find(|(k, _)| k == "user")
                .map_or_else(|| "guest".to_string(), |(_, v)| v.into_owned());
            if user.is_empty()
                || !user
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(bad(format!(
                    "user must be letters, digits, - or _, got `{user}`"
                )));
            }
            Ok(Route::Login(user))
        }
        _ => Err(Reply::text(404, format!("no route for {path}\n"))),
    }
}

pub fn fibonacci(n: u64) -> BigUint {
    let (mut a, mut b) = (BigUint::from(0u32), BigUint::from(1u32));
    for _ in 0..n {
        let next = &a + &b;
        a = std::mem::replace(&mut b, next);
    }
    a
}

/// Does the work of a route (on an app thread: it may block).
pub fn respond(route: Route) -> Reply {
    match route {
        Route::Hello => Reply::text(200, "Hello, world!\n"),
        Route::Fibonacci(n) => Reply::text(200, format!("{}\n", fibonacci(n))),
        Route::Sleep(ms) => {
            std::thread::sleep(Duration::from_millis(ms));
            Reply::text(200, format!("slept {ms} ms\n"))
        }
        Route::Status(code) => Reply::text(code, format!("status {code}\n")),
        Route::Bytes(n) => Reply {
            status: 200,
            content_type: "application/octet-stream",
            body: vec![b'x'; n as usize],
            set_cookie: None,
        },
        Route::Login(user) => Reply {
            status: 200,
            content_type: "application/json",
            body: format!("{{\"user\":\"{user}\",\"token\":\"tok-{user}\"}}\n").into_bytes(),
            set_cookie: Some(format!("session=sess-{user}; Path=/; HttpOnly")),
        },
        Route::Private(auth) => match auth.as_deref().and_then(|a| a.strip_prefix("Bearer tok-")) {
            Some(user) if !user.is_empty() => Reply {
                status: 200,
                content_type: "application/json",
                body: format!("{{\"user\":\"{user}\"}}\n").into_bytes(),
                set_cookie: None,
            },
            _ => Reply::text(401, "missing or wrong Authorization: Bearer token\n"),
        },
        Route::Echo(text) => Reply::text(200, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fibonacci_is_exact() {
        assert_eq!(fibonacci(0).to_string(), "0");
        assert_eq!(fibonacci(10).to_string(), "55");
        assert_eq!(fibonacci(100).to_string(), "354224848179261915075");
        assert_eq!(fibonacci(1000).to_string().len(), 209);
    }

    #[test]
    fn routes() {
        assert_eq!(route("/fibonacci", "n=30").ok(), Some(Route::Fibonacci(30)));
        assert_eq!(route("/sleep", "").ok(), Some(Route::Sleep(50)));
        assert_eq!(route("/status", "code=503").ok(), Some(Route::Status(503)));
        assert_eq!(route("/bytes", "n=10").ok(), Some(Route::Bytes(10)));
        assert_eq!(route("/nope", "").err().map(|r| r.status), Some(404));
        assert_eq!(route("/sleep", "ms=abc").err().map(|r| r.status), Some(400));
        assert_eq!(
            route("/status", "code=99").err().map(|r| r.status),
            Some(400)
        );
        assert_eq!(respond(Route::Bytes(10)).body.len(), 10);
        assert_eq!(respond(Route::Status(503)).status, 503);
    }
}
