//! TLS on a listener: the handshake, run by the [`Tls`] transport in the connection's
//! own task under the header timeout (a client that stalls mid-handshake, or sends
//! anything but a ClientHello, is closed and gives its slot back), and the server's
//! settings: TLS 1.2 and 1.3 only, ALPN `h2` then `http/1.1`, and the certificate
//! chosen by the name the client asks for (SNI, [`Certificates`]).
//!
//! The settings are [`Reloadable`]: a reload replaces them for the handshakes that
//! follow, and a connection keeps the certificate it was opened with.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::{Transport, WriteStall};
use crate::reloadable::Reloadable;

/// A request's mark that it came over TLS (the `https` its forwarding headers tell
/// the app), put in its extensions by the listener: never read from what a client
/// wrote (an HTTP/2 client names any `:scheme`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OverTls;

/// The certificates a listener offers, by the host name a client asks for: a name
/// listed exactly, else a wildcard (`*.example.com` for `api.example.com`, one label
/// deep), else the default (the first certificate listed without hosts). A client
/// asking for a name no certificate has, with no default, fails its handshake.
#[derive(Debug, Default)]
pub(crate) struct Certificates {
    by_name: HashMap<String, Arc<CertifiedKey>>,
    default: Option<Arc<CertifiedKey>>,
}

impl Certificates {
    /// The certificates of `list`, each with the hosts it is offered for (none: it is
    /// the default, if it is the first such). A host listed twice goes to the first
    /// certificate listing it. Names are compared in lower case.
    pub(crate) fn new(list: impl IntoIterator<Item = (Arc<CertifiedKey>, Vec<String>)>) -> Self {
        let mut certificates = Self::default();
        for (key, hosts) in list {
            if hosts.is_empty() {
                certificates.default.get_or_insert_with(|| Arc::clone(&key));
            }
            for host in hosts {
                certificates
                    .by_name
                    .entry(host.to_ascii_lowercase())
                    .or_insert_with(|| Arc::clone(&key));
            }
        }
        certificates
    }

    /// The certificate for a client that asked for `name` (`None`: it sent no SNI).
    fn choose(&self, name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let Some(name) = name.map(str::to_ascii_lowercase) else {
            return self.default.clone();
        };
        let name = name.strip_suffix('.').unwrap_or(&name);
        let wildcard = || {
            let (_, parent) = name.split_once('.')?;
            self.by_name.get(&format!("*.{parent}"))
        };
        self.by_name
            .get(name)
            .or_else(wildcard)
            .or(self.default.as_ref())
            .cloned()
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.choose(hello.server_name())
    }
}

/// The TLS settings of a listener offering `certificates`: TLS 1.2 and 1.3 only (on
/// ring's ciphers), ALPN `h2` and `http/1.1`, no client certificates.
pub(crate) fn server_config(certificates: Certificates) -> Result<ServerConfig, rustls::Error> {
    #[expect(
        deprecated,
        reason = "ring has no post-quantum key exchange; aws-lc-rs, which has, needs cmake and nasm to build"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(certificates));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// TLS connections: each handshake under the settings current when it starts, and
/// within `handshake_timeout`.
#[derive(Debug, Clone)]
pub(crate) struct Tls {
    config: Reloadable<ServerConfig>,
    handshake_timeout: Duration,
}

impl Tls {
    /// Handshakes under `config` (as reloads replace it), each within
    /// `handshake_timeout` (the header timeout).
    pub(crate) fn new(config: Reloadable<ServerConfig>, handshake_timeout: Duration) -> Self {
        Self {
            config,
            handshake_timeout,
        }
    }
}

impl Transport for Tls {
    type Io = TlsStream<WriteStall<TcpStream>>;

    fn open(
        &self,
        stream: WriteStall<TcpStream>,
    ) -> impl Future<Output = io::Result<Self::Io>> + Send + 'static {
        let acceptor = TlsAcceptor::from(self.config.current());
        let timeout = self.handshake_timeout;
        async move {
            tokio::time::timeout(timeout, acceptor.accept(stream))
                .await
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no TLS handshake within the header timeout",
                    )
                })?
        }
    }
}

#[cfg(test)]
mod tests {
    use rustls::crypto::ring::sign::any_supported_type;
    use rustls_pki_types::PrivateKeyDer;

    use super::*;

    /// A certificate for `name`, told apart by it.
    fn key(name: &str) -> Arc<CertifiedKey> {
        let made = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
        let der = PrivateKeyDer::try_from(made.signing_key.serialize_der()).unwrap();
        let signer = any_supported_type(&der).unwrap();
        Arc::new(CertifiedKey::new(vec![made.cert.der().clone()], signer))
    }

    fn named(chosen: Option<Arc<CertifiedKey>>) -> Option<Vec<u8>> {
        chosen.map(|key| key.cert[0].to_vec())
    }

    #[test]
    fn the_name_asked_for_chooses_exactly_then_by_wildcard_then_the_default() {
        let (api, www, wild, other) = (
            key("api.example"),
            key("www.example.com"),
            key("*.example.com"),
            key("other.example"),
        );
        let certificates = Certificates::new([
            (Arc::clone(&www), vec!["WWW.example.com".into()]),
            (Arc::clone(&api), vec![]),
            (Arc::clone(&wild), vec!["*.example.com".into()]),
            // Not the default: the first without hosts is.
            (Arc::clone(&other), vec![]),
            // Not chosen for www: the first listing it is.
            (Arc::clone(&other), vec!["www.example.com".into()]),
        ]);
        let chosen = |name| named(certificates.choose(name));
        assert_eq!(
            chosen(Some("www.example.com")),
            named(Some(Arc::clone(&www)))
        );
        assert_eq!(
            chosen(Some("Www.Example.Com.")),
            named(Some(Arc::clone(&www)))
        );
        assert_eq!(
            chosen(Some("a.example.com")),
            named(Some(Arc::clone(&wild)))
        );
        // One label deep only.
        assert_eq!(
            chosen(Some("a.b.example.com")),
            named(Some(Arc::clone(&api)))
        );
        assert_eq!(chosen(Some("example.com")), named(Some(Arc::clone(&api))));
        assert_eq!(chosen(None), named(Some(Arc::clone(&api))));
        // No default: a name no certificate has gets none.
        let certificates = Certificates::new([(www, vec!["www.example.com".into()])]);
        assert!(certificates.choose(Some("api.example")).is_none());
        assert!(certificates.choose(None).is_none());
    }
}
