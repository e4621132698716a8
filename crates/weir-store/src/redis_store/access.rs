//! How weir gets into Redis: TLS (`rediss://`, on rustls) and credentials.
//!
//! Managed services want both: a certificate checked against the system's roots or a
//! configured CA, perhaps a client certificate (mutual TLS), and a password or an ACL
//! user. The password and the client key are [`Secret`]s, which never print, so no
//! log, error or `Debug` of a configuration shows them. A server that refuses weir
//! (a certificate that does not verify, a password or user it does not accept) is
//! told apart from one that is down (see [`refusal`]): waiting mends an outage, not a
//! refusal, so the service refuses to start on one rather than serve 503s.

use std::fmt;
use std::sync::Arc;

use redis::cluster::ClusterClientBuilder;
use redis::{ClientTlsConfig, IntoConnectionInfo, RedisError, RedisResult, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::server_name::{self, Pinned};

/// A password or a private key: used, compared, never printed (`Debug` says
/// `<redacted>`, and there is no `Display`).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<Arc<str>>) -> Self {
        Self(value.into())
    }

    /// The value itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// How weir is let into Redis: TLS and credentials, beside the URL (which may carry a
/// user and password too; these take precedence).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisAccess {
    /// The ACL user (`AUTH <user> <password>`); none: the URL's, else `default`.
    pub username: Option<String>,
    /// The password, from a file or the environment.
    pub password: Option<Secret>,
    /// TLS beyond what `rediss://` gives by default (the system's roots, no client
    /// certificate).
    pub tls: Option<RedisTls>,
}

impl RedisAccess {
    /// The access to a server that has credentials of its own (a sentinel): this
    /// TLS, with `credentials` instead of the data nodes' (none: the server's URL's).
    pub(super) fn with(&self, credentials: &Credentials) -> RedisAccess {
        RedisAccess {
            username: credentials.username.clone(),
            password: credentials.password.clone(),
            tls: self.tls.clone(),
        }
    }
}

/// An ACL user and its password for servers that have their own, apart from the
/// data nodes': Redis Sentinel's sentinels (`requirepass`, or an ACL user, in
/// `sentinel.conf`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The ACL user (`AUTH <user> <password>`); none: the URL's, else `default`.
    pub username: Option<String>,
    /// The password; none: the URL's, if it has one.
    pub password: Option<Secret>,
}

/// The certificates of a TLS connection to Redis.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct RedisTls {
    /// The CA certificates (PEM) the server's certificate must chain to, instead of
    /// the system's roots.
    pub ca: Option<Vec<u8>>,
    /// weir's own certificate chain and key (PEM), for servers that require mutual
    /// TLS.
    pub client: Option<ClientIdentity>,
    /// The name the server's certificate must hold, when the URL gives an address
    /// (see [`check_server_name`](super::check_server_name)); none: the URL's host.
    pub server_name: Option<String>,
}

impl fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTls")
            .field("ca", &self.ca.as_ref().map(|pem| pem.len()))
            .field("client", &self.client)
            .field("server_name", &self.server_name)
            .finish()
    }
}

/// A client certificate chain and its private key, both PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The certificate chain, weir's own first.
    pub cert: Vec<u8>,
    /// The private key.
    pub key: Secret,
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert", &self.cert.len())
            .field("key", &self.key)
            .finish()
    }
}

/// Checks PEM text holding certificates (a CA file, a client chain): how many there
/// are, or why they cannot be used.
pub fn check_certificates(pem: &[u8]) -> Result<usize, String> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if certificates.is_empty() {
        return Err("holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)".into());
    }
    for certificate in &certificates {
        webpki_parse(certificate)?;
    }
    Ok(certificates.len())
}

/// Checks a client identity: the key is a private key rustls can sign with, and it
/// is the key of the chain's first certificate.
pub fn check_identity(cert: &[u8], key: &Secret) -> Result<(), String> {
    check_certificates(cert)?;
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    let der = PrivateKeyDer::from_pem_slice(key.expose().as_bytes())
        .map_err(|e| format!("no PEM private key: {e}"))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&der)
        .map_err(|e| format!("not a usable private key: {e}"))?;
    rustls::sign::CertifiedKey::new(chain, signer)
        .keys_match()
        .map_err(|e| format!("the key is not the certificate's: {e}"))
}

/// Whether the DER of a certificate parses as an X.509 end-entity or CA certificate.
fn webpki_parse(certificate: &CertificateDer<'_>) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(certificate.clone())
        .map_err(|e| format!("not an X.509 certificate: {e}"))
}

/// Installs rustls's crypto provider for the process (redis-rs names none), once;
/// a provider already installed (by the embedding program) is kept.
#[expect(
    deprecated,
    reason = "ring lacks post-quantum key exchange (rustls 0.23.48 deprecates it for that); aws-lc-rs has it but adds a C and CMake build to every weir build. Revisit when Redis servers offer post-quantum groups"
)]
fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Whether `url` reads as the URL of a Redis server (`redis://`, `rediss://`,
/// `redis+unix://`, `unix://`) weir can connect to. The error says why without the URL,
/// which may hold a password (print it through [`redacted`]).
pub fn check_redis_url(url: &str) -> Result<(), String> {
    url.into_connection_info().map(drop).map_err(|error| {
        // The crate's words ("Redis URL did not parse - InvalidClientConfig") say the
        // kind twice; the detail, when it has one, is what helps.
        error
            .detail()
            .map_or_else(|| "it does not parse".to_owned(), str::to_owned)
    })
}

/// `url` with the password of its user information, if any, replaced by
/// `<redacted>`, for printing (borrowed when there is none to hide).
///
/// The user information ends at the authority's last `@`; in a URL that does not
/// parse (a password with an unescaped `/` or `?`, as generated ones have), at the
/// last `@` of all, so such a password is hidden too, with whatever came between.
pub fn redacted(url: &str) -> std::borrow::Cow<'_, str> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let Some(at) = authority.rfind('@').or_else(|| rest.rfind('@')) else {
        return url.into();
    };
    match rest[..at].find(':') {
        Some(colon) if colon + 1 < at => {
            format!("{}:<redacted>{}", &url[..start + colon], &url[start + at..]).into()
        }
        _ => url.into(),
    }
}

/// The client of one server at `url`, with `access`, and the resolver its connections
/// need when `access` names the server apart from the URL (see `server_name`).
pub(super) fn single_client(
    url: &str,
    access: &RedisAccess,
) -> RedisResult<(redis::Client, Option<Pinned>)> {
    install_crypto();
    let (mut info, pinned) = server_name::named(url, access)?;
    let mut settings = info.redis_settings().clone();
    if let Some(username) = &access.username {
        settings = settings.set_username(username);
    }
    if let Some(password) = &access.password {
        settings = settings.set_password(password.expose());
    }
    info = info.set_redis_settings(settings);
    let client = match &access.tls {
        Some(tls) => redis::Client::build_with_tls(info, certificates(tls))?,
        None => redis::Client::open(info)?,
    };
    Ok((client, pinned))
}

/// `builder` with `access`: credentials for every node, TLS certificates when given
/// (the seeds' `rediss://` turns TLS on).
pub(super) fn cluster_access(
    mut builder: ClusterClientBuilder,
    access: &RedisAccess,
) -> ClusterClientBuilder {
    install_crypto();
    if let Some(username) = &access.username {
        builder = builder.username(username);
    }
    if let Some(password) = &access.password {
        builder = builder.password(password.expose());
    }
    if let Some(tls) = &access.tls {
        builder = builder.certs(certificates(tls));
    }
    builder
}

fn certificates(tls: &RedisTls) -> TlsCertificates {
    TlsCertificates {
        client_tls: tls.client.as_ref().map(|client| ClientTlsConfig {
            client_cert: client.cert.clone(),
            client_key: client.key.expose().as_bytes().to_vec(),
        }),
        root_cert: tls.ca.clone(),
    }
}

/// The ACL user weir logs in as on `url`: the configured one, else the URL's, else
/// Redis's `default`.
pub(super) fn user<'a>(access: &'a RedisAccess, url: &str) -> std::borrow::Cow<'a, str> {
    if let Some(user) = &access.username {
        return user.as_str().into();
    }
    url.into_connection_info()
        .ok()
        .and_then(|info| info.redis_settings().username().map(str::to_owned))
        .map_or("default".into(), Into::into)
}

/// Why Redis's answer `said` to a command refuses ACL user `user`, when it does: a
/// password it needs and was not given (`NOAUTH`: weir sends no `AUTH` without one),
/// a command the user may not run (see [`denied_in`]).
pub(super) fn refused_in(said: &str, user: &str) -> Option<String> {
    if said.contains("NOAUTH") {
        Some(format!(
            "ACL user {user} needs a password, and none was given ({said})"
        ))
    } else {
        denied_in(said).map(|what| format!("ACL user {user} may not run {what} ({said})"))
    }
}

/// Whether Redis's answer `said` is an ACL denial, and of what: a command weir sends
/// (`NOPERM`, which names it), or one inside weir's Lua (which Redis does not name).
fn denied_in(said: &str) -> Option<&'static str> {
    if said.contains("can't run this command") {
        Some(
            "a command weir's Lua runs (it needs GET, SET, GETRANGE, SETRANGE, DEL, PEXPIRE, PTTL, HGET, HGETALL, HSET, HDEL, INCR, TIME and INFO; bans and concurrency rules also ZADD, ZCARD, ZRANGE, ZREVRANGE, ZREMRANGEBYSCORE, ZSCORE and ZREM)",
        )
    } else if said.contains("NOPERM") || said.contains("no permissions") {
        Some("a command weir needs")
    } else {
        None
    }
}

/// Why Redis refused weir, when it did: a server certificate that does not verify, a
/// client certificate the server does not accept, a password or `user` it rejects (a
/// wrong one, none where one is needed), a command the ACL user may not run. None for
/// anything else (an outage, a timeout).
pub(super) fn refusal(error: &RedisError, user: &str) -> Option<String> {
    let text = error.to_string();
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = source {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(format!("TLS: {tls}"));
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(tls) = io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>())
        {
            return Some(format!("TLS: {tls}"));
        }
        source = e.source();
    }
    // The cluster client reports its seeds' failures as text.
    let said = |needle: &str| text.contains(needle);
    if said("invalid peer certificate") || said("received fatal alert") {
        Some(format!("TLS: {text}"))
    } else if said("WRONGPASS") || matches!(error.kind(), redis::ErrorKind::AuthenticationFailed) {
        Some(format!(
            "the password of ACL user {user} was not accepted ({text})"
        ))
    } else {
        refused_in(&text, user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints() {
        let secret = Secret::new("hunter2");
        let access = RedisAccess {
            username: Some("weir".into()),
            password: Some(secret.clone()),
            tls: Some(RedisTls {
                ca: None,
                client: Some(ClientIdentity {
                    cert: Vec::new(),
                    key: Secret::new("-----BEGIN PRIVATE KEY-----hunter2"),
                }),
                server_name: None,
            }),
        };
        let printed = format!("{access:?} {access:#?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
        assert_eq!(secret.expose(), "hunter2");
    }

    #[test]
    fn a_password_in_a_url_never_prints() {
        assert_eq!(
            redacted("rediss://weir:hunter2@h:1/0"),
            "rediss://weir:<redacted>@h:1/0"
        );
        assert_eq!(redacted("redis://:hunter2@h:1"), "redis://:<redacted>@h:1");
        assert_eq!(redacted("redis://weir@h:1"), "redis://weir@h:1");
        // A password with an unescaped `/` or `?` ends at the last `@` of all; an `@`
        // in a query, which no password needs, is over-redacted with it.
        assert_eq!(redacted("redis://:ab/cd@h:1"), "redis://:<redacted>@h:1");
        assert_eq!(redacted("redis://:ab?cd@h:1"), "redis://:<redacted>@h:1");
        assert_eq!(
            redacted("rediss://u:p/q?r@h:1/0"),
            "rediss://u:<redacted>@h:1/0"
        );
        assert_eq!(redacted("redis://u:12/x@h:1"), "redis://u:<redacted>@h:1");
        assert_eq!(redacted("redis://h:1/?a=b@c"), "redis://h:<redacted>@c");
        assert_eq!(redacted("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(redacted("redis://weir:@h:1"), "redis://weir:@h:1");
        let target = super::super::RedisTarget::Cluster(vec!["redis://:hunter2@h:1".into()]);
        assert!(!format!("{target:?}").contains("hunter2"));
        let target = super::super::RedisTarget::Sentinel {
            sentinels: vec!["redis://:hunter2@h:26379".into()],
            master: "m".into(),
            credentials: Credentials {
                username: Some("watcher".into()),
                password: Some(Secret::new("hunter2")),
            },
        };
        let printed = format!("{target:?} {target:#?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("watcher"), "{printed}");
    }

    #[test]
    fn text_that_is_no_certificate_says_so() {
        assert!(
            check_certificates(b"hello")
                .unwrap_err()
                .contains("no PEM certificate")
        );
        let bad = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(check_certificates(bad).is_err());
    }
}
