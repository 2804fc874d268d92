//! TLS for `https://` targets, via rustls. Certificates are verified
//! against the system's roots by default; a scenario may add a CA file
//! (a self-signed test server), override the SNI name, or — explicitly —
//! skip verification.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM file with extra trusted CA certificates.
    pub ca_file: Option<PathBuf>,
    /// Name sent in SNI and verified against the certificate (default: the
    /// URL's host).
    pub server_name: Option<String>,
    /// Accept any certificate. Off unless a scenario says so.
    pub insecure: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read CA file {path}: {reason}")]
    CaFile { path: PathBuf, reason: String },
    #[error("`{0}` is not a valid TLS server name")]
    ServerName(String),
    #[error("no trusted CA certificates: the system store is empty and no ca_file was given")]
    NoRoots,
}

/// What a connection needs to start TLS: the config and the SNI name.
#[derive(Clone)]
pub struct TlsClient {
    pub connector: tokio_rustls::TlsConnector,
    pub server_name: ServerName<'static>,
    /// Certificates are not verified (`--insecure`, `[tls] insecure`).
    pub insecure: bool,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TlsClient({:?})", self.server_name)
    }
}

impl TlsClient {
    pub fn new(host: &str, options: &TlsOptions) -> Result<TlsClient, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions");
        let trust = if options.insecure {
            Trust::AnyCertificate
        } else {
            let mut roots = RootCertStore::empty();
            let native = rustls_native_certs::load_native_certs();
            for cert in native.certs {
                let _ = roots.add(cert);
            }
            let extra = match &options.ca_file {
                Some(path) => read_ca_file(path)?,
                None => Vec::new(),
            };
            for cert in &extra {
                // A self-signed server certificate may not parse as a trust
                // anchor; it is still trusted as pinned (below).
                let _ = roots.add(cert.clone());
            }
            if roots.is_empty() && extra.is_empty() {
                return Err(TlsError::NoRoots);
            }
            Trust::ChainedOrPinned {
                webpki: (!roots.is_empty()).then(|| {
                    rustls::client::WebPkiServerVerifier::builder_with_provider(
                        Arc::new(roots),
                        provider.clone(),
                    )
                    .build()
                    .expect("a verifier over a non-empty root store")
                }),
                pinned: extra,
            }
        };
        let mut config = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier { trust, provider }))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = options.server_name.as_deref().unwrap_or(host);
        let name = name.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(name.to_string())
            .map_err(|_| TlsError::ServerName(name.to_string()))?;
        Ok(TlsClient {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
            insecure: options.insecure,
        })
    }
}

impl TlsClient {
    /// A session for a socket driven by hand (the event loop's): the same
    /// configuration, its session cache shared with every connection.
    pub fn session(&self) -> Result<rustls::ClientConnection, rustls::Error> {
        rustls::ClientConnection::new(self.connector.config().clone(), self.server_name.clone())
    }

    /// The same trust, offering `version`'s protocols in ALPN.
    pub fn with_version(&self, version: crate::HttpVersion) -> TlsClient {
        let mut config = ClientConfig::clone(self.connector.config());
        config.alpn_protocols = version.alpn();
        TlsClient {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name: self.server_name.clone(),
            insecure: self.insecure,
        }
    }

    /// The same, resuming sessions with early data (0-RTT over QUIC): the
    /// session tickets are kept in memory, shared by every connection made
    /// with this configuration.
    pub fn with_early_data(&self) -> TlsClient {
        let mut config = ClientConfig::clone(self.connector.config());
        config.enable_early_data = true;
        TlsClient {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name: self.server_name.clone(),
            insecure: self.insecure,
        }
    }

    /// The same trust for another host (a full URL on another origin): the
    /// SNI name is that host's.
    pub fn for_host(&self, host: &str) -> Result<TlsClient, TlsError> {
        let name = host.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(name.to_string())
            .map_err(|_| TlsError::ServerName(name.to_string()))?;
        Ok(TlsClient {
            connector: self.connector.clone(),
            server_name,
            insecure: self.insecure,
        })
    }
}

fn read_ca_file(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| TlsError::CaFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::CaFile {
            path: path.to_path_buf(),
            reason: "no PEM certificate in it".into(),
        });
    }
    Ok(certs)
}

/// Which server certificates are trusted.
#[derive(Debug)]
enum Trust {
    /// `insecure`: any certificate (the handshake's signatures are still
    /// checked, so it is well-formed).
    AnyCertificate,
    /// The usual chain verification against the system's roots and the CA
    /// file; failing that, a server certificate that *is* one of the CA
    /// file's certificates, byte for byte, is trusted when it names the
    /// server. That is how a test server's self-signed certificate is
    /// trusted — also one marked CA:TRUE, which chain verification refuses
    /// as an end entity (curl and OpenSSL accept it the same way).
    ChainedOrPinned {
        webpki: Option<Arc<rustls::client::WebPkiServerVerifier>>,
        pinned: Vec<CertificateDer<'static>>,
    },
}

#[derive(Debug)]
struct Verifier {
    trust: Trust,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Trust::ChainedOrPinned { webpki, pinned } = &self.trust else {
            return Ok(ServerCertVerified::assertion());
        };
        let chained = match webpki {
            Some(v) => v.verify_server_cert(end_entity, intermediates, server_name, ocsp, now),
            None => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            )),
        };
        match chained {
            Ok(verified) => Ok(verified),
            Err(e) if pinned.iter().any(|p| p.as_ref() == end_entity.as_ref()) => {
                let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&parsed, server_name).map_err(|_| e)?;
                Ok(ServerCertVerified::assertion())
            }
            Err(e) => Err(e),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
