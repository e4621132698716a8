//! The `tls` section: the certificates the main listener offers, each loaded and
//! checked at load, so that `check-config` (and a reload, which then keeps the old
//! ones) refuses a certificate that would fail clients:
//!
//! ```yaml
//! tls:
//!   certificates:
//!     - { cert_file: certs/api.pem, key_file: certs/api.key }   # the default
//!     - { cert_file: certs/www.pem, key_file: certs/www.key, hosts: [www.example.com] }
//! ```
//!
//! A `cert_file` holds PEM certificates, the server's first and then its chain; a
//! `key_file` its private key (PKCS#8, PKCS#1 or SEC1 PEM). Refused, with the field at
//! fault: a file that cannot be read or holds no certificate or key, a key of a kind
//! rustls cannot sign with, a key that is not the certificate's, a certificate past its
//! `notAfter`, and a host that is not a DNS name (`*.example.com` is one label of any
//! name) or that the certificate does not name. Paths are relative to the configuration file, and the files are watched
//! with it: a certificate renewed in place is reloaded.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, DnsName, PrivateKeyDer};
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ConfigError;
use super::error::Errors;

/// The section as read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    certificates: Vec<Spanned<RawCertificate>>,
}

/// One certificate and its key, and the hosts it is offered for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCertificate {
    cert_file: Spanned<String>,
    key_file: Spanned<String>,
    #[serde(default)]
    hosts: Vec<Spanned<String>>,
}

/// The certificates the main listener offers, loaded and checked, in file order: each
/// with the hosts it is offered for (none: the default, the first such).
#[derive(Debug, Clone)]
pub(crate) struct TlsConfig {
    pub(crate) certificates: Vec<(Arc<CertifiedKey>, Vec<String>)>,
    /// The certificate and key files, watched for changes with the configuration (a
    /// certificate renewed in place is reloaded).
    pub(crate) files: Vec<PathBuf>,
}

/// One SHA-256 of `files`' names and contents as they are now, to see a change; none
/// if one cannot be read.
pub(crate) fn files_sha256(files: &[PathBuf]) -> Option<String> {
    let mut all = Vec::new();
    for file in files {
        all.extend(file.as_os_str().as_encoded_bytes());
        all.push(0);
        all.extend(super::sha256_hex(&std::fs::read(file).ok()?).bytes());
    }
    Some(super::sha256_hex(&all))
}

/// The `tls` section, its certificates loaded now (see the [module docs](self)).
pub(super) fn tls(
    raw: Option<&Spanned<RawTls>>,
    errors: &Errors<'_>,
) -> Result<Option<TlsConfig>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    if raw.value.certificates.is_empty() {
        return Err(errors.at(
            raw.referenced,
            "tls.certificates",
            "list at least one certificate (cert_file and key_file)",
        ));
    }
    let certificates = raw
        .value
        .certificates
        .iter()
        .enumerate()
        .map(|(i, certificate)| load(&certificate.value, i, errors))
        .collect::<Result<_, _>>()?;
    let files: Vec<PathBuf> = raw
        .value
        .certificates
        .iter()
        .flat_map(|c| [&c.value.cert_file.value, &c.value.key_file.value])
        .map(|name| errors.resolve(name))
        .collect();
    Ok(Some(TlsConfig {
        certificates,
        files,
    }))
}

/// The `i`th certificate, loaded and checked.
fn load(
    raw: &RawCertificate,
    i: usize,
    errors: &Errors<'_>,
) -> Result<(Arc<CertifiedKey>, Vec<String>), ConfigError> {
    let field = |name: &str| format!("tls.certificates[{i}].{name}");
    let (cert, key) = (&raw.cert_file, &raw.key_file);
    let cert_at = |message: String| errors.at(cert.referenced, field("cert_file"), message);
    let key_at = |message: String| errors.at(key.referenced, field("key_file"), message);
    let cert_path = errors.resolve(&cert.value);
    let key_path = errors.resolve(&key.value);
    let chain = CertificateDer::pem_slice_iter(&errors.read(
        cert.referenced,
        &field("cert_file"),
        &cert.value,
    )?)
    .collect::<Result<Vec<_>, _>>()
    .map_err(|e| cert_at(format!("`{}` is not PEM: {e}", cert_path.display())))?;
    let Some(leaf) = chain.first() else {
        return Err(cert_at(format!(
            "no certificate in `{}`: it holds PEM certificates, the server's first, then its chain",
            cert_path.display()
        )));
    };
    if let Some(fault) = out_of_date(leaf, now_unix()) {
        return Err(cert_at(format!(
            "the certificate in `{}` {fault}",
            cert_path.display()
        )));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&errors.read(
        key.referenced,
        &field("key_file"),
        &key.value,
    )?)
    .map_err(|e| {
        key_at(format!(
            "no private key in `{}` (PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY): {e}",
            key_path.display()
        ))
    })?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key_der).map_err(|e| {
        key_at(format!(
            "the key in `{}` cannot sign: {e}",
            key_path.display()
        ))
    })?;
    let certified = CertifiedKey::new(chain, signer);
    certified.keys_match().map_err(|_| {
        key_at(format!(
            "the key in `{}` is not the key of the certificate in `{}`",
            key_path.display(),
            cert_path.display()
        ))
    })?;
    let hosts = raw
        .hosts
        .iter()
        .enumerate()
        .map(|(h, host)| {
            dns_name(&host.value)
                .and_then(|name| covers(&certified.cert[0], &name).map(|()| name))
                .map_err(|message| {
                    errors.at(host.referenced, field(&format!("hosts[{h}]")), message)
                })
        })
        .collect::<Result<_, _>>()?;
    Ok((Arc::new(certified), hosts))
}

/// `host` in lower case, if it is a DNS name, or one label of wildcard before one.
fn dns_name(host: &str) -> Result<String, String> {
    let name = host.strip_prefix("*.").unwrap_or(host);
    let valid = name.parse::<std::net::IpAddr>().is_err() && DnsName::try_from(name).is_ok();
    if !valid {
        return Err(format!(
            "`{host}` is not a host name (a DNS name such as www.example.com, or *.example.com)"
        ));
    }
    Ok(host.to_ascii_lowercase())
}

/// Whether the certificate `leaf` names `host` (a wildcard host, any one label under
/// it), as a client checks it: a certificate offered for a host it does not name
/// fails every client.
fn covers(leaf: &CertificateDer<'_>, host: &str) -> Result<(), String> {
    let probe = match host.strip_prefix("*.") {
        Some(parent) => format!("weir-probe.{parent}"),
        None => host.to_owned(),
    };
    let (Ok(certificate), Ok(name)) = (
        webpki::EndEntityCert::try_from(leaf),
        rustls_pki_types::ServerName::try_from(probe.as_str()),
    ) else {
        return Err(format!(
            "the certificate cannot be read to check that it names `{host}`"
        ));
    };
    certificate
        .verify_is_valid_for_subject_name(&name)
        .map_err(|_| {
            format!("the certificate does not name `{host}` (its subject alternative names)")
        })
}

/// Seconds since the Unix epoch now.
pub(super) fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
        })
}

/// Why the certificate `der` is not valid at `now` (seconds since the Unix epoch):
/// `expired on ...` or `is not valid before ...`; `None` when it is valid, or when its
/// validity cannot be read (rustls reads the certificate when it is offered: a
/// malformed one fails there).
pub(super) fn out_of_date(der: &CertificateDer<'_>, now: i64) -> Option<String> {
    use simple_asn1::ASN1Block::{GeneralizedTime, Sequence, UTCTime};
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { ..., validity SEQUENCE {
    // notBefore Time, notAfter Time }, ... }, ... }: validity is the one sequence of
    // two times.
    let blocks = simple_asn1::from_der(der).ok()?;
    let Some(Sequence(_, certificate)) = blocks.first() else {
        return None;
    };
    let Some(Sequence(_, tbs)) = certificate.first() else {
        return None;
    };
    let (not_before, not_after) = tbs.iter().find_map(|block| match block {
        Sequence(_, times) => match times.as_slice() {
            [
                UTCTime(_, from) | GeneralizedTime(_, from),
                UTCTime(_, to) | GeneralizedTime(_, to),
            ] => Some((from.assume_utc(), to.assume_utc())),
            _ => None,
        },
        _ => None,
    })?;
    let written = |t: time::OffsetDateTime| format!("{} {} UTC", t.date(), t.time());
    if not_after.unix_timestamp() < now {
        Some(format!("expired on {}", written(not_after)))
    } else if not_before.unix_timestamp() > now {
        Some(format!("is not valid before {}", written(not_before)))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(not_before: (i32, u8, u8), not_after: (i32, u8, u8)) -> CertificateDer<'static> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["a.example".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn validity_is_read_from_the_certificate() {
        let expired = certificate((2001, 1, 1), (2020, 6, 30));
        assert_eq!(
            out_of_date(&expired, now_unix()),
            Some("expired on 2020-06-30 0:00:00.0 UTC".into())
        );
        let valid = certificate((2001, 1, 1), (2099, 1, 1));
        assert_eq!(out_of_date(&valid, now_unix()), None);
        // At a time before its end, the expired one is valid.
        assert_eq!(out_of_date(&expired, 1_500_000_000), None);
        let early = certificate((2090, 1, 1), (2099, 1, 1));
        assert_eq!(
            out_of_date(&early, now_unix()),
            Some("is not valid before 2090-01-01 0:00:00.0 UTC".into())
        );
        assert_eq!(
            out_of_date(&CertificateDer::from(vec![1, 2, 3]), now_unix()),
            None
        );
    }

    #[test]
    fn hosts_are_dns_names_or_one_wildcard_label() {
        assert_eq!(dns_name("WWW.Example.com"), Ok("www.example.com".into()));
        assert_eq!(dns_name("*.example.com"), Ok("*.example.com".into()));
        for bad in [
            "10.0.0.1",
            "*.*.example.com",
            "a b",
            "",
            "exa_mple..com",
            "a.*.com",
        ] {
            assert!(dns_name(bad).is_err(), "{bad}");
        }
    }
}
