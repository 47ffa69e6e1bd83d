//! The TLS client configuration tickbox connects with: the webpki roots
//! (Mozilla's) plus the CAs a person gave, on ring, offering HTTP/1.1.
//!
//! Both the sandbox's outgoing `wasi:http` (the `http_ca` grant) and the
//! registry client (its CA file) build it here, so a server a person's CA
//! vouches for is trusted the same way by both, and a change of roots or
//! protocol versions reaches both.

use rustls::pki_types::CertificateDer;
use std::sync::Arc;

/// Why a TLS client configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A certificate given as a CA cannot be one.
    #[error("a certificate is not a usable CA: {0}")]
    Ca(rustls::Error),
    /// The crypto provider refused the default protocol versions.
    #[error("TLS setup: {0}")]
    Setup(rustls::Error),
}

/// The client configuration trusting the webpki roots and `extra` CAs.
pub fn client_config(
    extra: Vec<CertificateDer<'static>>,
) -> Result<rustls::ClientConfig, TlsError> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for cert in extra {
        roots.add(cert).map_err(TlsError::Ca)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Setup)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // Both clients speak HTTP/1.1 only; saying so lets a server that
    // negotiates by ALPN not pick h2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roots_are_trusted_and_a_bad_ca_is_named() {
        let config = client_config(Vec::new()).unwrap();
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
        let not_a_cert = CertificateDer::from(vec![0x30, 0x00]);
        let e = client_config(vec![not_a_cert]).unwrap_err();
        assert!(matches!(e, TlsError::Ca(_)), "{e:?}");
        assert!(e
            .to_string()
            .starts_with("a certificate is not a usable CA: "));
    }
}
