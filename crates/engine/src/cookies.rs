//! A user's cookies, alike on both paths: the `Cookie` header a request
//! carries, and the cookies a response sets kept in the user's jar — made
//! on the first cookie, capped at [`MAX_COOKIES_PER_USER`], those past
//! the cap counted (`limits_reached.cookie_jar`).
//!
//! Keeping a cookie in `cookie_store` builds a URL (parsing, IDNA), works
//! out its domain and path and reads the clock; matching one does it all
//! again: a fifth of a scripted session's own CPU when each iteration logs
//! in (`perf`, bench/scenario `api`). Most logins set host-only session
//! cookies of path `/` (no `Domain`, `Path=/` or a path whose default is
//! `/`, no expiry, not `Secure`): such a cookie goes to every request to
//! its host for the rest of the run, whatever the path or the time, so
//! while every cookie is one of those the jar keeps them as name and value
//! with the header they make ([`Simple`]). The first cookie that is not —
//! another host's, a narrower path, an expiry, a deletion — moves the
//! jar's cookies into a `cookie_store` for good ([`Store`]).

use crate::connections::Origin;
use crate::metrics::LimitReached;
use crate::plan::limits::MAX_COOKIES_PER_USER;
use crate::plan::RequestSpec;
use crate::shared::Shared;
use cookie_store::{CookieStore, RawCookie};
use std::borrow::Cow;

/// A user's cookies.
pub(crate) enum Jar {
    Simple(Simple),
    Store(Store),
}

/// Host-only session cookies of path `/`, all set by one host.
pub(crate) struct Simple {
    /// The root URL of the host that set them (its host as `url`
    /// canonicalizes it).
    root: url::Url,
    /// Name and value, in the order they were first set.
    cookies: Vec<(String, String)>,
    /// `name=value; …` of them all.
    header: String,
}

/// Cookies of any kind, matched by `cookie_store`.
#[derive(Default)]
pub(crate) struct Store {
    store: CookieStore,
    /// The header every request to origin `.0` gets, `None` when it gets
    /// none — while [`Store::same_for_every_path`] holds; made when the
    /// jar last changed.
    everywhere: Option<(u32, Option<String>)>,
}

impl Jar {
    /// A jar holding the cookies a response from `target` at `origin` set,
    /// and how many the cap dropped.
    fn first(origin: &Origin, target: &str, set_cookies: &[String]) -> (Jar, u64) {
        let mut jar = match origin.root() {
            Some(root) => Jar::Simple(Simple {
                root: root.clone(),
                cookies: Vec::new(),
                header: String::new(),
            }),
            None => Jar::Store(Store::default()),
        };
        let dropped = jar.take(origin, target, set_cookies);
        (jar, dropped)
    }

    /// Keeps the cookies a response from `target` at `origin` set;
    /// returns how many the cap dropped.
    fn take(&mut self, origin: &Origin, target: &str, set_cookies: &[String]) -> u64 {
        let parsed: Vec<RawCookie<'static>> = set_cookies
            .iter()
            .filter_map(|c| RawCookie::parse(c.clone()).ok())
            .collect();
        if let Jar::Simple(simple) = self {
            if parsed.iter().all(|c| simple.takes(origin, target, c)) {
                return simple.keep(parsed);
            }
            *self = Jar::Store(simple.to_store());
        }
        let Jar::Store(store) = self else {
            unreachable!("a simple jar was moved into a store above")
        };
        store.take(origin, target, parsed)
    }
}

impl Simple {
    /// Whether `cookie`, set by a response from `target` at `origin`, is
    /// one this jar keeps: a host-only session cookie of path `/` from its
    /// own host, matched alike by every request to that host.
    fn takes(&self, origin: &Origin, target: &str, cookie: &RawCookie) -> bool {
        let path_is_root = match cookie.path() {
            Some(path) => path == "/",
            // The default path (RFC 6265 5.1.4): `/` when the request's
            // path has no `/` after its first.
            None => target
                .split(['?', '#'])
                .next()
                .is_some_and(|path| path.starts_with('/') && !path[1..].contains('/')),
        };
        let prefixed = ["__Secure-", "__Host-"].iter().any(|p| {
            cookie
                .name()
                .get(..p.len())
                .is_some_and(|n| n.eq_ignore_ascii_case(p))
        });
        path_is_root
            && cookie.domain().is_none()
            && cookie.max_age().is_none()
            && cookie.expires().is_none()
            && cookie.secure() != Some(true)
            && !cookie.name().is_empty()
            && !prefixed
            && self.is_host_of(origin)
    }

    /// Keeps `cookies` (each one [`Simple::takes`]): a name it has is
    /// updated, a new one past the cap dropped. Returns how many were.
    fn keep(&mut self, cookies: Vec<RawCookie<'static>>) -> u64 {
        let mut dropped = 0;
        for cookie in cookies {
            let (name, value) = cookie.name_value();
            let held = self.cookies.len();
            match self.cookies.iter_mut().find(|(n, _)| n == name) {
                Some((_, v)) => value.clone_into(v),
                None if held >= MAX_COOKIES_PER_USER => dropped += 1,
                None => self.cookies.push((name.to_string(), value.to_string())),
            }
        }
        self.header.clear();
        for (name, value) in &self.cookies {
            if !self.header.is_empty() {
                self.header.push_str("; ");
            }
            for part in [name, "=", value] {
                self.header.push_str(part);
            }
        }
        dropped
    }

    /// The same cookies in a `cookie_store`, as if its host had set them
    /// there.
    fn to_store(&self) -> Store {
        let mut store = CookieStore::default();
        for (name, value) in &self.cookies {
            let cookie = RawCookie::build((name.clone(), value.clone())).path("/");
            // Cannot fail: a host-only cookie from its own host's root.
            let _ = store.insert_raw(&cookie.build(), &self.root);
        }
        Store {
            store,
            everywhere: None,
        }
    }

    /// The `Cookie` header for a request to `origin`.
    fn header(&self, origin: &Origin) -> Option<&str> {
        (self.is_host_of(origin) && !self.header.is_empty()).then_some(self.header.as_str())
    }

    /// Whether `origin` is on the host that set these cookies (any port:
    /// cookies are matched by host).
    fn is_host_of(&self, origin: &Origin) -> bool {
        origin.root().and_then(|r| r.host_str()) == self.root.host_str()
    }
}

impl Store {
    /// Keeps `cookies`, set by a response from `target` at `origin`;
    /// returns how many the cap dropped.
    fn take(&mut self, origin: &Origin, target: &str, cookies: Vec<RawCookie<'static>>) -> u64 {
        let Some(url) = origin.url(target) else {
            return 0;
        };
        let dropped = store(&mut self.store, cookies, &url);
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

    /// The `Cookie` header for request `spec` (to `target` at `origin`).
    fn header(&self, origin: &Origin, spec: &RequestSpec, target: &str) -> Option<Cow<'_, str>> {
        if let Some((id, header)) = &self.everywhere {
            if *id == origin.id {
                return header.as_deref().map(Cow::Borrowed);
            }
        }
        self.store.iter_unexpired().next()?;
        // The literal part of a static target, the whole of a rendered one.
        let target = if spec.template.is_some() {
            target
        } else {
            spec.target.split("{{").next().unwrap_or("/")
        };
        let url = origin.url(target)?;
        values(&self.store, &url).map(Cow::Owned)
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
    let dropped = match jar {
        Some(jar) => jar.take(origin, target, set_cookies),
        None => {
            let (made, dropped) = Jar::first(origin, target, set_cookies);
            *jar = Some(Box::new(made));
            dropped
        }
    };
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
    match jar? {
        Jar::Simple(simple) => simple.header(origin).map(Cow::Borrowed),
        Jar::Store(store) => store.header(origin, spec, target),
    }
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
fn store(jar: &mut CookieStore, cookies: Vec<RawCookie<'static>>, url: &url::Url) -> u64 {
    let mut held = jar.iter_any().count();
    let mut dropped = 0;
    let cookies: Vec<_> = cookies
        .into_iter()
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

    fn spec(target: &str) -> RequestSpec {
        let plan = Plan::get(&format!("http://127.0.0.1:1{target}")).unwrap();
        plan.requests[0].clone()
    }

    fn origin(id: u32, host_port: &str) -> Origin {
        let addr = "127.0.0.1:1".parse().unwrap();
        Origin::new(id, host_port.into(), false, addr)
    }

    /// A user's jar beside a plain `cookie_store` given the same cookies:
    /// every request must get the same cookies from both.
    struct Beside {
        jar: Option<Box<Jar>>,
        reference: CookieStore,
    }

    impl Beside {
        fn new() -> Beside {
            Beside {
                jar: None,
                reference: CookieStore::default(),
            }
        }

        fn set(&mut self, origin: &Origin, target: &str, set_cookies: &[&str]) -> u64 {
            let set: Vec<String> = set_cookies.iter().map(|c| c.to_string()).collect();
            let parsed = set.iter().filter_map(|c| RawCookie::parse(c.clone()).ok());
            let url = origin.url(target).unwrap();
            self.reference
                .store_response_cookies(parsed.collect::<Vec<_>>().into_iter(), &url);
            match &mut self.jar {
                Some(jar) => jar.take(origin, target, &set),
                None => {
                    let (jar, dropped) = Jar::first(origin, target, &set);
                    self.jar = Some(Box::new(jar));
                    dropped
                }
            }
        }

        /// The cookies a request gets, sorted; checked against the
        /// reference's.
        fn sent(&self, origin: &Origin, target: &str) -> Vec<String> {
            let sorted = |header: Option<String>| {
                let mut got: Vec<String> = header
                    .iter()
                    .flat_map(|h| h.split("; ").map(str::to_string).collect::<Vec<_>>())
                    .collect();
                got.sort();
                got
            };
            let ours = sorted(
                header(self.jar.as_deref(), origin, &spec(target), target).map(Cow::into_owned),
            );
            let url = origin.url(target).unwrap();
            assert_eq!(
                ours,
                sorted(values(&self.reference, &url)),
                "to {} {target}",
                origin.host_header
            );
            ours
        }

        fn is_simple(&self) -> bool {
            matches!(self.jar.as_deref(), Some(Jar::Simple(_)))
        }
    }

    #[test]
    fn session_cookies_of_path_root_are_kept_simply_and_sent_as_a_store_would() {
        let a = origin(0, "127.0.0.1:1");
        let a_other_port = origin(1, "127.0.0.1:2");
        let b = origin(2, "127.0.0.2:1");
        let mut jar = Beside::new();
        assert_eq!(jar.sent(&a, "/"), Vec::<String>::new());
        // A login's cookies: path `/` by default (from `/login`) or given.
        jar.set(&a, "/login?u=1", &["sid=1; HttpOnly", "b=2; Path=/"]);
        assert!(jar.is_simple());
        for target in ["/", "/item/5", "/account?user=u1", "/a/b/c"] {
            assert_eq!(jar.sent(&a, target), ["b=2", "sid=1"]);
        }
        // Cookies are the host's, whatever the port; not another host's.
        assert_eq!(jar.sent(&a_other_port, "/x"), ["b=2", "sid=1"]);
        assert_eq!(jar.sent(&b, "/"), Vec::<String>::new());
        // The next login updates one, adds another.
        jar.set(&a, "/login?u=2", &["sid=2; Path=/; SameSite=Lax", "c=3"]);
        assert!(jar.is_simple());
        assert_eq!(jar.sent(&a, "/item/1"), ["b=2", "c=3", "sid=2"]);
    }

    #[test]
    fn any_other_cookie_moves_the_jar_into_a_store_and_nothing_is_lost() {
        let a = origin(0, "127.0.0.1:1");
        let b = origin(1, "127.0.0.2:1");
        // Each of these, after a simple cookie, moves the jar.
        let others: [(&Origin, &str, &str); 7] = [
            (&a, "/admin/login", "adm=3"),
            (&a, "/", "adm=3; Path=/admin"),
            (&a, "/", "p=1; Max-Age=3600"),
            (&a, "/", "p=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT"),
            (&a, "/", "p=1; Domain=127.0.0.1"),
            (&a, "/", "p=1; Secure"),
            (&b, "/", "p=1"),
        ];
        for (origin, target, cookie) in others {
            let mut jar = Beside::new();
            jar.set(&a, "/login", &["sid=1"]);
            assert!(jar.is_simple());
            jar.set(origin, target, &[cookie]);
            assert!(!jar.is_simple(), "{cookie} from {target}");
            for to in [&a, &b] {
                for path in ["/", "/admin/x", "/item"] {
                    let sent = jar.sent(to, path);
                    assert_eq!(sent.contains(&"sid=1".to_string()), to.id == a.id);
                }
            }
        }
        // A deletion of a simple cookie removes it.
        let mut jar = Beside::new();
        jar.set(&a, "/login", &["sid=1", "keep=1"]);
        jar.set(&a, "/logout", &["sid=; Max-Age=0"]);
        assert_eq!(jar.sent(&a, "/"), ["keep=1"]);
        // A jar whose first cookie is not simple is a store from the start.
        let mut jar = Beside::new();
        jar.set(&a, "/", &["p=1; Path=/p"]);
        assert!(!jar.is_simple());
        assert_eq!(jar.sent(&a, "/p/1"), ["p=1"]);
        assert_eq!(jar.sent(&a, "/q"), Vec::<String>::new());
    }

    #[test]
    fn the_cap_drops_new_names_alike_in_both_kinds_of_jar() {
        let a = origin(0, "127.0.0.1:1");
        let names: Vec<String> = (0..MAX_COOKIES_PER_USER + 2)
            .map(|i| format!("c{i}=v"))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut simple = Jar::first(&a, "/", &[]).0;
        let owned: Vec<String> = names.iter().map(|c| c.to_string()).collect();
        assert_eq!(simple.take(&a, "/", &owned), 2);
        assert!(matches!(simple, Jar::Simple(_)));
        // Updating a name it holds is not dropped.
        assert_eq!(simple.take(&a, "/", &["c0=w".to_string()]), 0);
        let Jar::Simple(s) = &simple else {
            unreachable!()
        };
        assert_eq!(s.cookies.len(), MAX_COOKIES_PER_USER);
        assert!(s.header.starts_with("c0=w; c1=v"));
        let mut store = Jar::Store(Store::default());
        assert_eq!(store.take(&a, "/", &owned), 2);
    }
}
