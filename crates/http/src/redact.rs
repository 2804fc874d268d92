//! Credentials never reach a file or a terminal: what headroom writes about
//! a run (the command line in `meta.command`, the URL in titles and
//! summaries) has header values that carry secrets, URL passwords, `token=`
//! query values and the values of token flags (`--dashboard-token`,
//! `--monitor-token`, `--token`) replaced by `***`. The requests themselves
//! still carry them.

/// Headers whose values are credentials, whatever the user says.
pub const SECRET_HEADERS: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];

const HIDDEN: &str = "***";

/// Is `name` a header whose value must not be written? `extra` are the
/// names the user marked secret (`--secret-header`).
pub fn is_secret_header(name: &str, extra: &[String]) -> bool {
    let name = name.trim();
    SECRET_HEADERS.iter().any(|s| s.eq_ignore_ascii_case(name))
        || extra.iter().any(|s| s.trim().eq_ignore_ascii_case(name))
}

/// `scheme://user:password@host/…?token=T` → `scheme://***@host/…?token=***`;
/// any other text unchanged.
pub fn url(text: &str) -> String {
    let Some(scheme_end) = text.find("://") else {
        return text.to_string();
    };
    let rest = &text[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let text = match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}{HIDDEN}{}", &text[..scheme_end + 3], &rest[at..]),
        None => text.to_string(),
    };
    query_tokens(&text)
}

/// A URL's `token=` query values hidden (a dashboard's, a Puma control
/// app's `/stats?token=…`).
fn query_tokens(url: &str) -> String {
    let Some((path, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let hidden: Vec<String> = (query.split('&'))
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("token") => format!("{k}={HIDDEN}"),
            _ => kv.to_string(),
        })
        .collect();
    let fragment = fragment.map(|f| format!("#{f}")).unwrap_or_default();
    format!("{path}?{}{fragment}", hidden.join("&"))
}

/// Flags whose value is a credential: `--token`, `--dashboard-token`,
/// `--monitor-token`, and any later `--…-token`.
fn is_token_flag(flag: &str) -> bool {
    flag.starts_with("--") && (flag == "--token" || flag.ends_with("-token"))
}

/// A `Name: value` header argument with its value hidden when secret.
fn header(text: &str, extra: &[String]) -> String {
    match text.split_once(':') {
        Some((name, _)) if is_secret_header(name, extra) => format!("{name}: {HIDDEN}"),
        _ => text.to_string(),
    }
}

/// The command line as it may be written down: the values of secret
/// headers (`-H`, `--header`, in every spelling clap accepts) and URL
/// passwords hidden.
pub fn command(args: &[String], extra: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let (mut header_next, mut token_next) = (false, false);
    for arg in args {
        let redacted = if std::mem::take(&mut header_next) {
            header(arg, extra)
        } else if std::mem::take(&mut token_next) {
            HIDDEN.to_string()
        } else if is_token_flag(arg) {
            token_next = true;
            arg.clone()
        } else if let Some((flag, _)) = arg.split_once('=').filter(|(f, _)| is_token_flag(f)) {
            format!("{flag}={HIDDEN}")
        } else if arg == "-H" || arg == "--header" {
            header_next = true;
            arg.clone()
        } else if let Some(value) = arg.strip_prefix("--header=") {
            format!("--header={}", header(value, extra))
        } else if let Some(value) = arg.strip_prefix("-H").filter(|v| !v.is_empty()) {
            format!("-H{}", header(value.trim_start_matches('='), extra))
        } else {
            url(arg)
        };
        out.push(redacted);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn secret_headers_and_url_passwords_are_hidden_in_every_spelling() {
        let line = args(&[
            "headroom",
            "run",
            "--url",
            "http://alice:s3cret@127.0.0.1:8080/a?b=c",
            "-H",
            "Authorization: Bearer abc",
            "--header",
            "cookie: session=xyz",
            "-HProxy-Authorization: Basic zz",
            "--header=Set-Cookie: a=b",
            "-H",
            "X-Api-Key: k1",
            "-H",
            "X-Trace: visible",
            "http://127.0.0.1/no-userinfo@here",
            "--dashboard-token",
            "dash1",
            "--monitor-token=mon2",
            "--probe",
            "puma=http://127.0.0.1:9293/stats?token=pum3&x=1",
        ]);
        let out = command(&line, &["x-api-key".to_string()]);
        assert_eq!(
            out,
            args(&[
                "headroom",
                "run",
                "--url",
                "http://***@127.0.0.1:8080/a?b=c",
                "-H",
                "Authorization: ***",
                "--header",
                "cookie: ***",
                "-HProxy-Authorization: ***",
                "--header=Set-Cookie: ***",
                "-H",
                "X-Api-Key: ***",
                "-H",
                "X-Trace: visible",
                "http://127.0.0.1/no-userinfo@here",
                "--dashboard-token",
                "***",
                "--monitor-token=***",
                "--probe",
                "puma=http://127.0.0.1:9293/stats?token=***&x=1",
            ])
        );
        let written = out.join(" ");
        for secret in [
            "s3cret", "abc", "xyz", "zz", "a=b", "k1", "dash1", "mon2", "pum3",
        ] {
            assert!(!written.contains(secret), "{secret} leaked: {written}");
        }
    }
}
