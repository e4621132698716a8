//! Certificates for TLS tests, made fresh by each test (rcgen): a CA, a server
//! certificate for `127.0.0.1` and `localhost` signed by it, a client certificate for
//! mutual TLS, and the bad ones a client must refuse (another name, expired, signed by
//! another CA). Written as PEM files in a temporary directory.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, date_time_ymd,
};
use tempfile::TempDir;

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// A test's certificates, in its own temporary directory.
pub struct TestCerts {
    dir: TempDir,
    /// The CA every good certificate chains to (`ca.pem`).
    pub ca: PathBuf,
    /// The server's: `127.0.0.1`, `localhost`, signed by the CA.
    pub server: CertFiles,
    /// weir's, for mutual TLS, signed by the CA.
    pub client: CertFiles,
    /// A server certificate signed by the CA for `redis.elsewhere.test` only.
    pub other_name: CertFiles,
    /// A server certificate for `127.0.0.1` signed by the CA that expired in 2020.
    pub expired: CertFiles,
    /// A server certificate for `127.0.0.1` signed by a CA nobody trusts.
    pub unknown_ca: CertFiles,
}

impl TestCerts {
    /// Makes them all.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let ca_key = KeyPair::generate().expect("a key");
        let ca = ca_params("weir test CA");
        let ca_cert = ca.self_signed(&ca_key).expect("the CA");
        let ca_path = write(dir.path(), "ca.pem", &ca_cert.pem());
        let issuer = Issuer::new(ca, ca_key);
        let loopback = ["127.0.0.1", "localhost"];
        let server = leaf(dir.path(), "server", &loopback, false, &issuer, None);
        let client = leaf(dir.path(), "client", &["weir"], true, &issuer, None);
        let other_name = leaf(
            dir.path(),
            "other-name",
            &["redis.elsewhere.test"],
            false,
            &issuer,
            None,
        );
        let expired = leaf(
            dir.path(),
            "expired",
            &loopback,
            false,
            &issuer,
            Some((2019, 2020)),
        );
        let stranger_key = KeyPair::generate().expect("a key");
        let stranger = Issuer::new(ca_params("a CA nobody trusts"), stranger_key);
        let unknown_ca = leaf(dir.path(), "unknown-ca", &loopback, false, &stranger, None);
        Self {
            dir,
            ca: ca_path,
            server,
            client,
            other_name,
            expired,
            unknown_ca,
        }
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Default for TestCerts {
    fn default() -> Self {
        Self::new()
    }
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

/// A certificate for `names` (a client's, else a server's) signed by `issuer`, valid between the given years (by
/// default, from 2020 for a century).
fn leaf(
    dir: &Path,
    stem: &str,
    names: &[&str],
    client: bool,
    issuer: &Issuer<'_, KeyPair>,
    years: Option<(i32, i32)>,
) -> CertFiles {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = CertificateParams::new(names.clone()).expect("certificate parameters");
    params
        .distinguished_name
        .push(DnType::CommonName, &names[0]);
    // A server's serves clients and, on a cluster's TLS bus, is its client to the
    // other nodes.
    params.extended_key_usages = if client {
        vec![ExtendedKeyUsagePurpose::ClientAuth]
    } else {
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ]
    };
    let (from, to) = years.unwrap_or((2020, 2120));
    params.not_before = date_time_ymd(from, 1, 1);
    params.not_after = date_time_ymd(to, 1, 1);
    let key = KeyPair::generate().expect("a key");
    let cert = params
        .signed_by(&key, issuer)
        .expect("a signed certificate");
    CertFiles {
        cert: write(dir, &format!("{stem}.pem"), &cert.pem()),
        key: write(dir, &format!("{stem}.key"), &key.serialize_pem()),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a certificate file");
    path
}
