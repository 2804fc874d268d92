//! HTTPS against Debian's nginx with a self-signed certificate made in the
//! test: verified by default (and refused without the CA), accepted with
//! `ca_file`, an SNI override, or an explicit `insecure = true`.

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
