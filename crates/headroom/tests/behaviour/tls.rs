//! HTTPS against Debian's nginx with a self-signed certificate made in the
//! test: verified by default (and refused without the CA), accepted with
//! `ca_file`, an SNI override, or an explicit `insecure = true`. HTTPS
//! runs on the event loop by default and on tasks when asked, alike.

use crate::common::{run, scenario_dir, self_signed, Nginx, Pki};

fn scenario(base: &str, tls: &str) -> String {
    format!(
        r#"
base_url = "{base}"
{tls}
[load]
vus = 4
max_requests = 200
[[request]]
name = "home"
path = "/"
check = [ {{ body_contains = "hello from nginx" }} ]
"#
    )
}

#[test]
fn https_is_verified_against_a_ca_file() {
    let pki = self_signed();
    let nginx = Nginx::start_tls(&pki.cert_pem, &pki.key_pem);
    let base = format!("https://127.0.0.1:{}", nginx.port);

    // Verified with the test's CA.
    let dir = scenario_dir(&[("ca.pem", &pki.cert_pem)]);
    std::fs::write(
        dir.path().join("ok.toml"),
        scenario(&base, "[tls]\nca_file = \"ca.pem\""),
    )
    .unwrap();
    let r = run(&[dir.path().join("ok.toml").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.results()["requests"]["ok"].as_u64(),
        Some(200),
        "{}",
        r.results()["errors"]
    );
    assert_eq!(nginx.requests(), 200);
    assert_eq!(
        r.results()["connections_opened"].as_u64(),
        Some(4),
        "keep-alive over TLS"
    );

    // SNI / name override: connect to 127.0.0.1, verify the name localhost.
    std::fs::write(
        dir.path().join("sni.toml"),
        scenario(
            &base,
            "[tls]\nca_file = \"ca.pem\"\nserver_name = \"localhost\"",
        ),
    )
    .unwrap();
    let r = run(&[dir.path().join("sni.toml").to_str().unwrap()]);
    assert_eq!(r.results()["requests"]["ok"].as_u64(), Some(200));

    // A name the certificate does not carry fails the handshake.
    std::fs::write(
        dir.path().join("wrong.toml"),
        scenario(
            &base,
            "[tls]\nca_file = \"ca.pem\"\nserver_name = \"example.org\"",
        ),
    )
    .unwrap();
    let r = run(&[
        dir.path().join("wrong.toml").to_str().unwrap(),
        "--requests",
        "5",
    ]);
    assert_eq!(r.error("tls_handshake"), 5);
}

#[test]
fn untrusted_certificate_is_refused_by_default() {
    let pki = self_signed();
    let nginx = Nginx::start_tls(&pki.cert_pem, &pki.key_pem);
    let base = format!("https://127.0.0.1:{}", nginx.port);
    let dir = scenario_dir(&[]);
    std::fs::write(dir.path().join("s.toml"), scenario(&base, "")).unwrap();
    let r = run(&[
        dir.path().join("s.toml").to_str().unwrap(),
        "--requests",
        "10",
    ]);
    assert_eq!(r.code, 2, "every connection failed: {}", r.stderr);
    assert_eq!(r.error("tls_handshake"), 10);
    assert_eq!(nginx.requests(), 0);
}

#[test]
fn insecure_skips_verification_when_asked() {
    let pki = self_signed();
    let nginx = Nginx::start_tls(&pki.cert_pem, &pki.key_pem);
    let base = format!("https://127.0.0.1:{}", nginx.port);
    let dir = scenario_dir(&[]);
    std::fs::write(
        dir.path().join("s.toml"),
        scenario(&base, "[tls]\ninsecure = true"),
    )
    .unwrap();
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.results()["requests"]["ok"].as_u64(), Some(200));
    assert_eq!(nginx.requests(), 200);
}

/// A self-signed certificate marked CA:TRUE (as `openssl req -x509` makes
/// by default), used as the server's certificate.
fn self_signed_ca() -> Pki {
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Pki {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

#[test]
fn a_self_signed_ca_certificate_given_as_ca_file_is_trusted() {
    let pki = self_signed_ca();
    let nginx = Nginx::start_tls(&pki.cert_pem, &pki.key_pem);
    let dir = scenario_dir(&[("ca.pem", &pki.cert_pem)]);
    let url = format!("https://127.0.0.1:{}/", nginx.port);
    let r = run(&[
        "--url",
        &url,
        "--requests",
        "20",
        "--ca-file",
        dir.path().join("ca.pem").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.results()["requests"]["ok"].as_u64(),
        Some(20),
        "{}",
        r.results()["errors"]
    );
    // Pinned, but still for its own names only.
    let r = run(&[
        "--url",
        &url,
        "--requests",
        "3",
        "--ca-file",
        dir.path().join("ca.pem").to_str().unwrap(),
    ]);
    assert_eq!(r.results()["requests"]["ok"].as_u64(), Some(3));
    let other = self_signed_ca();
    let dir2 = scenario_dir(&[("other.pem", &other.cert_pem)]);
    let r = run(&[
        "--url",
        &url,
        "--requests",
        "3",
        "--ca-file",
        dir2.path().join("other.pem").to_str().unwrap(),
    ]);
    assert_eq!(
        r.error("tls_handshake"),
        3,
        "another certificate is not trusted"
    );
}

#[test]
fn insecure_flag_skips_verification_and_says_so() {
    let pki = self_signed();
    let nginx = Nginx::start_tls(&pki.cert_pem, &pki.key_pem);
    let url = format!("https://127.0.0.1:{}/", nginx.port);
    for flag in ["-k", "--insecure"] {
        let r = run(&["--url", &url, "--requests", "10", flag]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.results()["requests"]["ok"].as_u64(), Some(10));
        assert!(
            r.stderr
                .contains("warning: TLS certificate verification is off"),
            "{}",
            r.stderr
        );
        assert!(r.results()["warnings"]
            .to_string()
            .contains("TLS certificate verification is off"));
    }
}

/// nginx over TLS answering a login (a JSON token and a session cookie),
/// a private page that wants both back and matching, a 200,000-byte file
/// (many TLS records), and uploads of up to 10 MB.
fn nginx_with_a_session(pki: &Pki) -> Nginx {
    Nginx::start_tls_with(&pki.cert_pem, &pki.key_pem, |dir| {
        std::fs::write(dir.join("big.txt"), "x".repeat(200_000)).unwrap();
        format!(
            r#"client_max_body_size 10m;
    location = /upload {{ return 200 "taken\n"; }}
    location = /login {{
      default_type application/json;
      add_header Set-Cookie "session=s-$arg_user; Path=/";
      return 200 '{{"user":"$arg_user","token":"tok-$arg_user"}}';
    }}
    location = /private {{
      default_type application/json;
      set $pair "$cookie_session/$http_authorization";
      if ($pair !~ "^s-([a-z]+)/Bearer tok-\1$") {{ return 403 "mismatch: $pair\n"; }}
      return 200 '{{"user":"$arg_user"}}';
    }}
    location = /big.txt {{ root {}; }}"#,
            dir.display()
        )
    })
}

/// A session over HTTPS (feeder, JSON check and extraction, a cookie, a
/// header, a body in many records), a new connection per request, and
/// open-model arrivals: the event loop (by default) and tasks count them
/// alike, and as nginx does.
#[test]
fn https_runs_alike_on_both_engines() {
    let pki = self_signed();
    let nginx = nginx_with_a_session(&pki);
    let base = format!("https://127.0.0.1:{}", nginx.port);
    let dir = scenario_dir(&[
        ("ca.pem", &pki.cert_pem),
        ("users.csv", "user\nann\nbob\ncat\n"),
    ]);
    let session = format!(
        r#"
base_url = "{base}"
[tls]
ca_file = "ca.pem"
[load]
vus = 4
iterations = 25
[http]
cookies = true
[[feeder]]
name = "users"
file = "users.csv"
order = "circular"
[[request]]
name = "login"
method = "POST"
path = "/login?user={{{{user}}}}"
check = [
  {{ body_contains = "tok-{{{{user}}}}" }},
  {{ json_path = "$.user", equals = "{{{{user}}}}" }},
]
extract = [{{ name = "token", json_path = "$.token" }}]
[[request]]
name = "private"
path = "/private?user={{{{user}}}}"
headers = {{ Authorization = "Bearer {{{{token}}}}" }}
check = [{{ json_path = "$.user", equals = "{{{{user}}}}" }}]
[[request]]
name = "big"
path = "/big.txt"
check = [{{ body_regex = "^x{{200000}}$" }}]
[[session]]
name = "flow"
steps = [
  {{ request = "login" }},
  {{ repeat = 3, steps = [{{ request = "private" }}] }},
  {{ request = "big" }},
]
"#
    );
    std::fs::write(dir.path().join("session.toml"), session).unwrap();
    let file = dir.path().join("session.toml");
    let ca = dir.path().join("ca.pem");
    std::fs::write(dir.path().join("big.bin"), vec![b'x'; 3 << 20]).unwrap();
    let upload = format!(
        "base_url = \"{base}\"\n[tls]\nca_file = \"ca.pem\"\n[[request]]\nname = \"upload\"\nmethod = \"POST\"\npath = \"/upload\"\nbody_file = \"big.bin\"\ncheck = [{{ body_contains = \"taken\" }}]\n"
    );
    std::fs::write(dir.path().join("upload.toml"), upload).unwrap();
    let url = format!("{base}/");
    for engine in ["auto", "tasks"] {
        let expected = if engine == "auto" {
            "event_loop"
        } else {
            "tasks"
        };
        // Each run: on the engine asked for, `n` requests OK, as many as
        // nginx logged.
        let counted = |args: &[&str], n: u64| -> serde_json::Value {
            let before = nginx.requests();
            let r = run(&[args, &["--engine", engine]].concat());
            assert_eq!(r.code, 0, "{engine}: {}", r.stderr);
            let res = r.results();
            assert_eq!(res["meta"]["generator_engine"], expected);
            assert_eq!(r.total(), n, "{engine}: {}", res["errors"]);
            assert_eq!(
                res["requests"]["ok"].as_u64(),
                Some(n),
                "{engine}: {}",
                res["errors"]
            );
            assert_eq!(nginx.requests_reaching(before + n) - before, n, "{engine}");
            res.clone()
        };
        // The session: 4 users × 25 iterations × 5 requests, on one
        // kept-alive connection per user.
        let res = counted(&[file.to_str().unwrap()], 500);
        assert_eq!(res["requests"]["attempts"].as_u64(), Some(500), "{engine}");
        assert_eq!(res["connections_opened"].as_u64(), Some(4), "{engine}");

        // A new connection (and handshake) per request.
        let ca = ca.to_str().unwrap();
        let args = ["--url", &url, "--ca-file", ca, "--vus", "4"];
        let res = counted(
            &[&args[..], &["--requests", "200", "--no-keepalive"]].concat(),
            200,
        );
        assert_eq!(res["connections_opened"].as_u64(), Some(200), "{engine}");

        // Uploads of 3 MB: more than the socket takes at once.
        let upload = dir.path().join("upload.toml");
        let upload = [upload.to_str().unwrap(), "--vus", "2", "--requests", "10"];
        let res = counted(&upload, 10);
        assert_eq!(res["status_codes"]["200"].as_u64(), Some(10), "{engine}");

        // Open-model arrivals, each sent once.
        counted(
            &[
                "--url",
                &url,
                "--ca-file",
                ca,
                "--rate",
                "300",
                "--duration",
                "1s",
            ],
            300,
        );
    }
}

/// nginx closing TLS connections — idle past its keep-alive timeout
/// (close_notify, then FIN, while the user thinks), and after 50 requests
/// (`Connection: close`) — is followed alike on both engines: the next
/// request opens another, counted, and nothing fails.
#[test]
fn tls_connections_the_server_closes_are_replaced_alike_on_both_engines() {
    let pki = self_signed();
    let nginx = Nginx::start_tls_with(&pki.cert_pem, &pki.key_pem, |_| {
        "keepalive_timeout 200ms; keepalive_requests 50;".to_string()
    });
    let dir = scenario_dir(&[("ca.pem", &pki.cert_pem)]);
    let thinking = format!(
        "base_url = \"https://127.0.0.1:{}\"\n[tls]\nca_file = \"ca.pem\"\n[load]\nvus = 2\niterations = 4\nthink_time = \"600ms\"\n[[request]]\nname = \"home\"\npath = \"/\"\n",
        nginx.port
    );
    std::fs::write(dir.path().join("thinking.toml"), thinking).unwrap();
    let ca = dir.path().join("ca.pem");
    for engine in ["auto", "tasks"] {
        let before = nginx.requests();
        let r = run(&[
            dir.path().join("thinking.toml").to_str().unwrap(),
            "--engine",
            engine,
        ]);
        assert_eq!(r.code, 0, "{engine}: {}", r.stderr);
        let res = r.results();
        assert_eq!(
            res["requests"]["ok"].as_u64(),
            Some(8),
            "{engine}: {}",
            res["errors"]
        );
        assert_eq!(nginx.requests() - before, 8, "{engine}");
        let connections = &res["connections"];
        assert_eq!(
            connections["opened"].as_u64(),
            Some(8),
            "{engine}: {connections}"
        );
        assert_eq!(
            connections["reconnects_idle_closed"].as_u64(),
            Some(6),
            "{engine}: {connections}"
        );
        assert_eq!(connections["closed_unrequested_bytes"].as_u64(), Some(0));

        let before = nginx.requests();
        let r = run(&[
            "--url",
            &format!("https://127.0.0.1:{}/", nginx.port),
            "--ca-file",
            ca.to_str().unwrap(),
            // One user: its 300 requests on 6 connections of 50.
            "--vus",
            "1",
            "--requests",
            "300",
            "--engine",
            engine,
        ]);
        assert_eq!(r.code, 0, "{engine}: {}", r.stderr);
        let res = r.results();
        assert_eq!(
            res["requests"]["ok"].as_u64(),
            Some(300),
            "{engine}: {}",
            res["errors"]
        );
        assert_eq!(res["requests"]["attempts"].as_u64(), Some(300), "{engine}");
        assert_eq!(nginx.requests() - before, 300, "{engine}");
        assert_eq!(res["connections_opened"].as_u64(), Some(6), "{engine}");
    }
}
