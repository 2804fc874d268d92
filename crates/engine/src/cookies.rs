//! A user's cookies, alike on both paths: the `Cookie` header a request
//! carries, and the cookies a response sets kept in the user's jar — made
//! on the first cookie, capped at [`MAX_COOKIES_PER_USER`], those past
//! the cap counted (`limits_reached.cookie_jar`).
//!
//! Matching a request against the store builds a URL (parsing, IDNA) and
//! reads the clock: ~1 µs, a third of a scripted request's own CPU. So
//! when the jar changes, it also makes the header that every request to
//! that origin gets while it cannot depend on the path or the time (every
//! cookie a session cookie of path `/`, as most logins set), and requests
//! take that.

use crate::connections::Origin;
use crate::metrics::LimitReached;
use crate::plan::limits::MAX_COOKIES_PER_USER;
use crate::plan::RequestSpec;
use crate::shared::Shared;
use cookie_store::CookieStore;
use std::borrow::Cow;

/// A user's cookies.
#[derive(Default)]
pub(crate) struct Jar {
    store: CookieStore,
    /// The header every request to origin `.0` gets, `None` when it gets
    /// none — while [`Jar::same_for_every_path`] holds; made when the jar
    /// last changed.
    everywhere: Option<(u32, Option<String>)>,
}

impl Jar {
    /// Keeps the cookies a response from `target` at `origin` set;
    /// returns how many the cap dropped.
    fn take(&mut self, origin: &Origin, target: &str, set_cookies: &[String]) -> u64 {
        let Some(url) = origin.url(target) else {
            return 0;
        };
        let dropped = store(&mut self.store, set_cookies, &url);
        self.everywhere = None;
        if self.same_for_every_path() {
            if let Some(root) = origin.url("/") {
                self.everywhere = Some((origin.id, values(&self.store, &root)));
            }
        }
        dropped
    }

    /// No cookie's matching depends on a request's path or on the time:
    /// every one has path `/` and no expiry (ends with the run).
    fn same_for_every_path(&self) -> bool {
        self.store
            .iter_any()
            .all(|c| &*c.path == "/" && !c.is_persistent())
    }
}

/// Keeps the cookies a response to request `index` (for `target` at
/// `origin`) set, in `jar`; counts those the jar's cap dropped.
pub(crate) fn keep(
    shared: &Shared,
    origin: &Origin,
    index: usize,
    target: &str,
    set_cookies: &[String],
    jar: &mut Option<Box<Jar>>,
) {
    let dropped = jar
        .get_or_insert_default()
        .take(origin, target, set_cookies);
    if dropped > 0 {
        shared
            .recorder
            .borrow_mut()
            .limit_reached(index, LimitReached::CookieJar, dropped);
    }
}

/// The `Cookie` header for request `spec` (to `target` at `origin`), when
/// `jar` holds any for it.
pub(crate) fn header<'j>(
    jar: Option<&'j Jar>,
    origin: &Origin,
    spec: &RequestSpec,
    target: &str,
) -> Option<Cow<'j, str>> {
    let jar = jar?;
    if let Some((id, header)) = &jar.everywhere {
        if *id == origin.id {
            return header.as_deref().map(Cow::Borrowed);
        }
    }
    jar.store.iter_unexpired().next()?;
    // The literal part of a static target, the whole of a rendered one.
    let target = if spec.template.is_some() {
        target
    } else {
        spec.target.split("{{").next().unwrap_or("/")
    };
    let url = origin.url(target)?;
    values(&jar.store, &url).map(Cow::Owned)
}

/// The `Cookie` header's value for `url`, if any cookie matches it.
fn values(store: &CookieStore, url: &url::Url) -> Option<String> {
    let mut header = String::new();
    for (name, value) in store.get_request_values(url) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    /// The header a request gets: from the store, matched for its URL.
    fn matched(jar: &Jar, origin: &Origin, target: &str) -> Option<String> {
        values(&jar.store, &origin.url(target).unwrap())
    }

    fn spec(target: &str) -> RequestSpec {
        let plan = Plan::get(&format!("http://127.0.0.1:1{target}")).unwrap();
        plan.requests[0].clone()
    }

    #[test]
    fn the_header_made_once_is_the_one_matching_gives() {
        let origin = Origin::new(
            0,
            "127.0.0.1:1".into(),
            false,
            "127.0.0.1:1".parse().unwrap(),
        );
        let other = Origin::new(
            1,
            "127.0.0.2:1".into(),
            false,
            "127.0.0.2:1".parse().unwrap(),
        );
        let mut jar = Jar::default();
        let header = |jar: &Jar, origin: &Origin, target: &str| {
            header(Some(jar), origin, &spec(target), target).map(Cow::into_owned)
        };
        // Session cookies of path `/` (one by default, from `/login`).
        jar.take(
            &origin,
            "/login?u=1",
            &["sid=1; HttpOnly".into(), "b=2; Path=/".into()],
        );
        assert!(jar.everywhere.is_some());
        for target in ["/", "/item/5", "/account?user=u1", "/a/b/c"] {
            assert_eq!(
                header(&jar, &origin, target),
                matched(&jar, &origin, target)
            );
            let mut got: Vec<String> = header(&jar, &origin, target)
                .unwrap()
                .split("; ")
                .map(str::to_string)
                .collect();
            got.sort();
            assert_eq!(got, ["b=2", "sid=1"]);
        }
        // Another origin is matched, not given this one's header.
        assert_eq!(header(&jar, &other, "/"), None);
        // A cookie of a narrower path: matched per request from then on.
        jar.take(&origin, "/admin/login", &["adm=3; Path=/admin".into()]);
        assert!(jar.everywhere.is_none());
        assert_eq!(
            header(&jar, &origin, "/item"),
            matched(&jar, &origin, "/item")
        );
        assert!(!header(&jar, &origin, "/item").unwrap().contains("adm"));
        assert_eq!(
            header(&jar, &origin, "/admin/x"),
            matched(&jar, &origin, "/admin/x")
        );
        assert!(header(&jar, &origin, "/admin/x").unwrap().contains("adm=3"));
        // A cookie with an expiry: matched per request (it may expire).
        let mut jar = Jar::default();
        jar.take(&origin, "/", &["p=1; Max-Age=3600".into()]);
        assert!(jar.everywhere.is_none());
        assert_eq!(header(&jar, &origin, "/x").as_deref(), Some("p=1"));
    }
}
