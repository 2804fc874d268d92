//! A user's cookies, alike on both paths: the `Cookie` header a request
//! carries, and the cookies a response sets kept in the user's jar — made
//! on the first cookie, capped at [`MAX_COOKIES_PER_USER`], those past
//! the cap counted (`limits_reached.cookie_jar`).

use crate::connections::Origin;
use crate::metrics::LimitReached;
use crate::plan::limits::MAX_COOKIES_PER_USER;
use crate::plan::RequestSpec;
use crate::shared::Shared;
use cookie_store::CookieStore;

/// Keeps the cookies a response to request `index` (for `target` at
/// `origin`) set, in `jar`; counts those the jar's cap dropped.
pub(crate) fn keep(
    shared: &Shared,
    origin: &Origin,
    index: usize,
    target: &str,
    set_cookies: &[String],
    jar: &mut Option<Box<CookieStore>>,
) {
    let Some(url) = origin.url(target) else {
        return;
    };
    let dropped = store(jar.get_or_insert_default(), set_cookies, &url);
    if dropped > 0 {
        shared
            .recorder
            .borrow_mut()
            .limit_reached(index, LimitReached::CookieJar, dropped);
    }
}

/// The `Cookie` header for request `spec` (to `target` at `origin`), when
/// `jar` holds any for it.
pub(crate) fn header(
    jar: Option<&CookieStore>,
    origin: &Origin,
    spec: &RequestSpec,
    target: &str,
) -> Option<String> {
    let jar = jar?;
    jar.iter_unexpired().next()?;
    // The literal part of a static target, the whole of a rendered one.
    let target = if spec.template.is_some() {
        target
    } else {
        spec.target.split("{{").next().unwrap_or("/")
    };
    let url = origin.url(target)?;
    let mut header = String::new();
    for (name, value) in jar.get_request_values(&url) {
        if !header.is_empty() {
            header.push_str("; ");
        }
        for part in [name, "=", value] {
            header.push_str(part);
        }
    }
    (!header.is_empty()).then_some(header)
}

/// Stores a response's cookies, up to [`MAX_COOKIES_PER_USER`] in the jar:
/// a cookie of a name the jar has is updated, a new one past the cap is
/// dropped. Returns how many were dropped.
fn store(jar: &mut CookieStore, set_cookies: &[String], url: &url::Url) -> u64 {
    let mut held = jar.iter_any().count();
    let mut dropped = 0;
    let cookies: Vec<_> = set_cookies
        .iter()
        .filter_map(|c| cookie_store::RawCookie::parse(c.clone()).ok())
        .filter(|c| {
            if jar.iter_any().any(|have| have.name() == c.name()) {
                return true;
            }
            if held >= MAX_COOKIES_PER_USER {
                dropped += 1;
                return false;
            }
            held += 1;
            true
        })
        .collect();
    jar.store_response_cookies(cookies.into_iter(), url);
    dropped
}
