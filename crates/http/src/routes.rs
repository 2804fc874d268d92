//! Where a URL's host connects: curl's `--connect-to` and `--resolve`
//! overrides first, then the system resolver. The request keeps its URL
//! and `Host` header; only the address it connects to changes — how one
//! router address serves thousands of host names in a test.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// `HOST1:PORT1:HOST2:PORT2` (curl's `--connect-to`): requests for
/// HOST1:PORT1 connect to HOST2:PORT2 instead. An empty HOST1 or PORT1
/// matches any; an empty HOST2 or PORT2 keeps the request's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectTo {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub to_host: Option<String>,
    pub to_port: Option<u16>,
}

/// `HOST:PORT:ADDR[,ADDR…]` (curl's `--resolve`): HOST on PORT resolves to
/// ADDR, without asking the system. HOST `*` matches any host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolve {
    pub host: String,
    pub port: u16,
    pub addrs: Vec<IpAddr>,
}

/// Every override of a run, in the order given (the first match wins).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes {
    pub connect_to: Vec<ConnectTo>,
    pub resolve: Vec<Resolve>,
}

/// Splits on `:` outside `[...]` (IPv6 literals), as curl does.
fn fields(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ':' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn unbracket(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

fn port(text: &str, what: &str) -> Result<Option<u16>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .map(Some)
        .ok_or_else(|| format!("{what} `{text}` is not a port (1-65535)"))
}

fn host(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| unbracket(text).to_ascii_lowercase())
}

impl ConnectTo {
    pub fn parse(text: &str) -> Result<ConnectTo, String> {
        let f = fields(text);
        let [h1, p1, h2, p2] = f[..] else {
            return Err(format!(
                "`{text}` is not HOST1:PORT1:HOST2:PORT2 (curl's --connect-to; \
                 e.g. `::127.0.0.1:8080` sends every host to 127.0.0.1:8080)"
            ));
        };
        Ok(ConnectTo {
            host: host(h1),
            port: port(p1, "PORT1")?,
            to_host: host(h2),
            to_port: port(p2, "PORT2")?,
        })
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        self.host.as_deref().is_none_or(|h| h == host) && self.port.is_none_or(|p| p == port)
    }
}

impl Resolve {
    pub fn parse(text: &str) -> Result<Resolve, String> {
        let f = fields(text);
        let [h, p, addrs] = f[..] else {
            return Err(format!(
                "`{text}` is not HOST:PORT:ADDRESS (curl's --resolve; e.g. `app.test:80:127.0.0.1`)"
            ));
        };
        let host = host(h).ok_or_else(|| format!("`{text}`: HOST is empty (use * for any)"))?;
        let port = port(p, "PORT")?.ok_or_else(|| format!("`{text}`: PORT is empty"))?;
        let addrs = addrs
            .split(',')
            .map(|a| {
                unbracket(a.trim())
                    .parse::<IpAddr>()
                    .map_err(|_| format!("`{a}` is not an IP address"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Resolve { host, port, addrs })
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        (self.host == "*" || self.host == host) && self.port == port
    }
}

impl Routes {
    pub fn is_empty(&self) -> bool {
        self.connect_to.is_empty() && self.resolve.is_empty()
    }

    /// The host and port a request for `host:port` connects to.
    pub fn target(&self, host: &str, port: u16) -> (String, u16) {
        let host = unbracket(host).to_ascii_lowercase();
        match self.connect_to.iter().find(|c| c.matches(&host, port)) {
            Some(c) => (c.to_host.clone().unwrap_or(host), c.to_port.unwrap_or(port)),
            None => (host, port),
        }
    }

    /// The address for `host:port` when an override or an IP literal
    /// decides it; `None` when the system resolver must be asked (for
    /// [`Routes::target`]'s host and port).
    pub fn fixed(&self, host: &str, port: u16) -> Option<SocketAddr> {
        let (host, port) = self.target(host, port);
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(SocketAddr::new(ip, port));
        }
        self.resolve
            .iter()
            .find(|r| r.matches(&host, port))
            .and_then(|r| r.addrs.first())
            .map(|ip| SocketAddr::new(*ip, port))
    }

    /// The address for `host:port`, asking the system resolver (blocking)
    /// when no override decides it.
    pub fn address(&self, host: &str, port: u16) -> Result<SocketAddr, String> {
        if let Some(addr) = self.fixed(host, port) {
            return Ok(addr);
        }
        let (host, port) = self.target(host, port);
        (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or_else(|| "no address".to_string())
    }
}

/// An absolute `http://` or `https://` URL split into its origin
/// (`scheme://authority`) and its target (path and query, `/` when empty);
/// `None` for anything else (a path).
pub fn split_absolute(url: &str) -> Option<(&str, &str)> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let scheme = url.len() - rest.len();
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (origin, target) = url.split_at(scheme + end);
    Some((origin, if target.is_empty() { "/" } else { target }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_urls_split_into_origin_and_target() {
        assert_eq!(
            split_absolute("http://a.test:8080/x?y=1"),
            Some(("http://a.test:8080", "/x?y=1"))
        );
        assert_eq!(
            split_absolute("https://a.test"),
            Some(("https://a.test", "/"))
        );
        assert_eq!(
            split_absolute("http://a.test?q"),
            Some(("http://a.test", "?q"))
        );
        assert_eq!(split_absolute("/path"), None);
    }

    #[test]
    fn connect_to_follows_curl() {
        let any = ConnectTo::parse("::127.0.0.1:18888").unwrap();
        assert_eq!(any.host, None);
        assert_eq!(any.port, None);
        let routes = Routes {
            connect_to: vec![
                ConnectTo::parse("app1.example.test:80:[::1]:").unwrap(),
                any,
            ],
            resolve: vec![],
        };
        assert_eq!(
            routes.fixed("App1.example.test", 80),
            Some("[::1]:80".parse().unwrap())
        );
        assert_eq!(
            routes.fixed("app2.example.test", 443),
            Some("127.0.0.1:18888".parse().unwrap())
        );
        assert!(ConnectTo::parse("a:80:b").is_err());
        assert!(ConnectTo::parse("a:x:b:80").is_err());
    }

    #[test]
    fn resolve_follows_curl_and_connect_to_goes_first() {
        let r = Resolve::parse("app.test:80:127.0.0.2,127.0.0.3").unwrap();
        assert_eq!(r.addrs.len(), 2);
        let routes = Routes {
            connect_to: vec![ConnectTo::parse("other.test:80:app.test:").unwrap()],
            resolve: vec![r, Resolve::parse("*:8080:[::1]").unwrap()],
        };
        assert_eq!(
            routes.fixed("app.test", 80),
            Some("127.0.0.2:80".parse().unwrap())
        );
        assert_eq!(
            routes.fixed("other.test", 80),
            Some("127.0.0.2:80".parse().unwrap())
        );
        assert_eq!(
            routes.fixed("anything", 8080),
            Some("[::1]:8080".parse().unwrap())
        );
        assert_eq!(routes.fixed("unknown.test", 80), None);
        assert!(Resolve::parse("app.test:80:not-an-ip").is_err());
        assert!(Resolve::parse("app.test::127.0.0.1").is_err());
    }
}
