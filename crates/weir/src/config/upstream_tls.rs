//! How the gateway verifies an `https://` upstream: against the system's roots (the
//! PEM bundle and directory OpenSSL reads, `SSL_CERT_FILE` and `SSL_CERT_DIR` if set),
//! or only against the certificates of `upstream.ca_file`; TLS 1.2 and 1.3, the
//! upstream's name sent by SNI and checked against its certificate, ALPN `h2` with
//! `http2: true`, else `http/1.1`. Loaded at load, so that `check-config` refuses a
//! `ca_file` that cannot be read or holds no certificate.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_saphyr::Spanned;

use super::ConfigError;
use super::error::Errors;

/// The TLS client settings of an `https://` upstream.
pub(super) fn client(
    ca_file: Option<&Spanned<String>>,
    http2: bool,
    errors: &Errors<'_>,
) -> Result<Arc<rustls::ClientConfig>, ConfigError> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(file) => {
            let at = |message: String| errors.at(file.referenced, "upstream.ca_file", message);
            let path = errors.resolve(&file.value);
            let bytes = errors.read(file.referenced, "upstream.ca_file", &file.value)?;
            let certificates = CertificateDer::pem_slice_iter(&bytes)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| at(format!("`{}` is not PEM: {e}", path.display())))?;
            if certificates.is_empty() {
                return Err(at(format!("no certificate in `{}`", path.display())));
            }
            for certificate in certificates {
                roots.add(certificate).map_err(|e| {
                    at(format!(
                        "a certificate in `{}` is not a CA certificate rustls can use: {e}",
                        path.display()
                    ))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(ConfigError::new(
                    errors.file,
                    "an https:// upstream is verified against the system's root certificates, and none were found: install them (Debian: ca-certificates) or give `ca_file`",
                )
                .field("upstream.url"));
            }
        }
    }
    #[expect(
        deprecated,
        reason = "ring has no post-quantum key exchange; aws-lc-rs, which has, needs cmake and nasm to build"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| ConfigError::new(errors.file, e.to_string()).field("upstream.url"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // `http2: true` speaks HTTP/2 only; otherwise the upstream chooses by ALPN (h2 when
    // it offers it), as browsers and curl let a server choose.
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec()]
    } else {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}
