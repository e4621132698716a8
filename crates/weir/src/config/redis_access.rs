//! `store:`'s way into Redis: `username`, `password_file` / `password_env`, the
//! sentinels' own `sentinel_username`, `sentinel_password_file` /
//! `sentinel_password_env`, and the `tls` block's certificates, read and checked at
//! load (so `check-config` names a file that does not parse, and a reload reads the
//! files again).
//!
//! A password comes from a file or the environment, never the configuration, and is
//! held as a [`Secret`] from the moment it is read: no error or warning here quotes
//! it (one written in a URL still works, with a warning).

use rustls_pki_types::pem::PemObject;
use serde_saphyr::{Location, Spanned};
use weir_store::{ClientIdentity, Credentials, RedisAccess, RedisTls, Secret};

use super::ConfigError;
use super::error::Errors;
use super::file::RawTls;

/// The names of the data nodes' credential fields: user, password file, password
/// variable.
pub(super) const DATA_FIELDS: [&str; 3] = ["username", "password_file", "password_env"];

/// The names of the sentinels' credential fields (`type: redis_sentinel` only).
pub(super) const SENTINEL_FIELDS: [&str; 3] = [
    "sentinel_username",
    "sentinel_password_file",
    "sentinel_password_env",
];

/// An ACL user and where its password is, as written, under the field names
/// `names` ([`DATA_FIELDS`] or [`SENTINEL_FIELDS`]).
pub(super) struct RawCredentials {
    pub(super) names: [&'static str; 3],
    pub(super) username: Option<Spanned<String>>,
    pub(super) password_file: Option<Spanned<String>>,
    pub(super) password_env: Option<Spanned<String>>,
}

impl RawCredentials {
    /// The first field set, for a store type that takes none of them.
    pub(super) fn first_set(&self) -> Option<(&'static str, Location)> {
        [&self.username, &self.password_file, &self.password_env]
            .into_iter()
            .zip(self.names)
            .find_map(|(value, field)| Some((field, value.as_ref()?.referenced)))
    }
}

/// The data nodes' credential and TLS fields of the `store` section, as written.
pub(super) struct RawAccess {
    pub(super) credentials: RawCredentials,
    pub(super) tls: Option<Spanned<RawTls>>,
}

impl RawAccess {
    /// The first field set, for a store type that takes none of them.
    pub(super) fn first_set(&self) -> Option<(&'static str, Location)> {
        self.credentials
            .first_set()
            .or_else(|| Some(("tls", self.tls.as_ref()?.referenced)))
    }
}

/// Validates the fields for the URLs `urls` (the one of `type: redis`, the seeds of a
/// cluster, the sentinels): reads the password and the certificate files. Warnings (a
/// password in a URL) go to `warnings`.
pub(super) fn access(
    raw: RawAccess,
    urls: &[&str],
    url_field: &str,
    errors: &Errors<'_>,
    warnings: &mut Vec<String>,
) -> Result<RedisAccess, ConfigError> {
    let tls_urls = urls.iter().filter(|u| u.starts_with("rediss://")).count();
    if tls_urls != 0 && tls_urls != urls.len() {
        return Err(errors.at(
            Location::UNKNOWN,
            format!("store.{url_field}"),
            "mixes `rediss://` and other URLs: every node of a store is reached alike",
        ));
    }
    if urls.iter().any(|url| url_has_password(url)) {
        // A sentinel's URL holds the sentinel's password, not the data nodes'.
        let [_, file, env] = if url_field == "sentinels" {
            SENTINEL_FIELDS
        } else {
            DATA_FIELDS
        };
        warnings.push(format!(
            "store.{url_field}: the URL holds a password; it works, but anyone who can read the configuration can read it: use `{file}` or `{env}`"
        ));
    }
    let Credentials { username, password } = credentials(raw.credentials, errors)?;
    let tls = match raw.tls {
        Some(tls) if tls_urls == 0 => {
            return Err(errors.at(
                tls.referenced,
                "store.tls",
                format!(
                    "`tls` needs `rediss://` URLs, but store.{url_field} uses another scheme: write rediss:// (a `tls` block never falls back to cleartext)"
                ),
            ));
        }
        Some(tls) => Some(certificates(tls.value, url_field, errors)?),
        None => None,
    };
    Ok(RedisAccess {
        username,
        password,
        tls,
    })
}

/// Validates an ACL user and its password (read from its file or variable): one
/// source of the password, not both; a user only with a password.
pub(super) fn credentials(
    raw: RawCredentials,
    errors: &Errors<'_>,
) -> Result<Credentials, ConfigError> {
    let [user_field, file_field, env_field] = raw.names;
    let password = match (raw.password_file, raw.password_env) {
        (Some(_), Some(env)) => {
            return Err(errors.at(
                env.referenced,
                format!("store.{env_field}"),
                format!("give the password by `{file_field}` or by `{env_field}`, not both"),
            ));
        }
        (Some(file), None) => Some(password_from_file(&file, file_field, errors)?),
        (None, Some(env)) => Some(password_from_env(&env, env_field, errors)?),
        (None, None) => None,
    };
    let username = match raw.username {
        Some(name) if name.value.is_empty() || name.value.contains(char::is_whitespace) => {
            return Err(errors.at(
                name.referenced,
                format!("store.{user_field}"),
                format!("{user_field} must be a non-empty ACL user name without spaces"),
            ));
        }
        Some(name) if password.is_none() => {
            return Err(errors.at(
                name.referenced,
                format!("store.{user_field}"),
                format!("an ACL user needs its password: set `{file_field}` or `{env_field}`"),
            ));
        }
        Some(name) => Some(name.value),
        None => None,
    };
    Ok(Credentials { username, password })
}

/// Whether `url` has a password in its user information (`redis://:pw@host`,
/// `redis://user:pw@host`). (A URL whose password has an unescaped `/` or `?` does
/// not parse, and is refused, its password hidden, before any warning.)
fn url_has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority.rsplit_once('@').is_some_and(|(userinfo, _)| {
        userinfo
            .split_once(':')
            .is_some_and(|(_, pw)| !pw.is_empty())
    })
}

fn password_from_file(
    file: &Spanned<String>,
    field: &str,
    errors: &Errors<'_>,
) -> Result<Secret, ConfigError> {
    let field = format!("store.{field}");
    let bytes = errors.read(file.referenced, &field, &file.value)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        errors.at(
            file.referenced,
            &field,
            "the password file is not UTF-8 text",
        )
    })?;
    // One line, as secret stores mount it; the line's end is not the password's.
    let password = text.strip_suffix('\n').unwrap_or(&text);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        return Err(errors.at(
            file.referenced,
            field,
            format!("`{}` is empty", errors.resolve(&file.value).display()),
        ));
    }
    if password.contains(['\r', '\n']) {
        return Err(errors.at(
            file.referenced,
            field,
            format!(
                "`{}` holds more than one line: a password is one line (a single line end after it is allowed)",
                errors.resolve(&file.value).display()
            ),
        ));
    }
    Ok(Secret::new(password))
}

fn password_from_env(
    env: &Spanned<String>,
    field: &str,
    errors: &Errors<'_>,
) -> Result<Secret, ConfigError> {
    let field = format!("store.{field}");
    match std::env::var(&env.value) {
        Ok(password) if password.contains(['\r', '\n']) => Err(errors.at(
            env.referenced,
            field,
            format!(
                "the environment variable `{}` holds a line end: a password is one line (was it made from a file ending in a newline?)",
                env.value
            ),
        )),
        Ok(password) if !password.is_empty() => Ok(Secret::new(password)),
        Ok(_) => Err(errors.at(
            env.referenced,
            field,
            format!("the environment variable `{}` is empty", env.value),
        )),
        Err(_) => Err(errors.at(
            env.referenced,
            field,
            format!(
                "the environment variable `{}` is not set (or not UTF-8)",
                env.value
            ),
        )),
    }
}

/// The `tls` block's files, read and parsed.
fn certificates(
    raw: RawTls,
    url_field: &str,
    errors: &Errors<'_>,
) -> Result<RedisTls, ConfigError> {
    let server_name = match raw.server_name {
        Some(name) if url_field == "nodes" => {
            return Err(errors.at(
                name.referenced,
                "store.tls.server_name",
                format!(
                    "redis_cluster cannot take a server name: {}",
                    weir_store::REDIS_CLUSTER_SERVER_NAME
                ),
            ));
        }
        Some(name) => {
            weir_store::check_server_name(&name.value)
                .map_err(|reason| errors.at(name.referenced, "store.tls.server_name", reason))?;
            Some(name.value)
        }
        None => None,
    };
    let ca = match raw.ca_file {
        Some(file) => {
            let pem = errors.read(file.referenced, "store.tls.ca_file", &file.value)?;
            weir_store::check_certificates(&pem).map_err(|reason| {
                errors.at(
                    file.referenced,
                    "store.tls.ca_file",
                    unusable(&file, errors, &reason),
                )
            })?;
            Some(pem)
        }
        None => None,
    };
    let client = match (raw.cert_file, raw.key_file) {
        (Some(cert), Some(key)) => {
            let cert_pem = errors.read(cert.referenced, "store.tls.cert_file", &cert.value)?;
            weir_store::check_certificates(&cert_pem).map_err(|reason| {
                errors.at(
                    cert.referenced,
                    "store.tls.cert_file",
                    unusable(&cert, errors, &reason),
                )
            })?;
            // A server requiring weir's certificate refuses one out of date: told now,
            // not as a failed handshake at each connection.
            let leaf = rustls_pki_types::CertificateDer::pem_slice_iter(&cert_pem)
                .next()
                .and_then(Result::ok);
            if let Some(fault) =
                leaf.and_then(|leaf| super::tls::out_of_date(&leaf, super::tls::now_unix()))
            {
                return Err(errors.at(
                    cert.referenced,
                    "store.tls.cert_file",
                    unusable(&cert, errors, &format!("the certificate {fault}")),
                ));
            }
            let key_pem = errors.read(key.referenced, "store.tls.key_file", &key.value)?;
            let key_pem = String::from_utf8(key_pem).map_err(|_| {
                errors.at(
                    key.referenced,
                    "store.tls.key_file",
                    unusable(&key, errors, "not PEM text"),
                )
            })?;
            let key_secret = Secret::new(key_pem);
            weir_store::check_identity(&cert_pem, &key_secret).map_err(|reason| {
                errors.at(
                    key.referenced,
                    "store.tls.key_file",
                    unusable(&key, errors, &reason),
                )
            })?;
            Some(ClientIdentity {
                cert: cert_pem,
                key: key_secret,
            })
        }
        (Some(cert), None) => {
            return Err(errors.at(
                cert.referenced,
                "store.tls.key_file",
                "a client certificate (`cert_file`) needs its key: set `key_file`",
            ));
        }
        (None, Some(key)) => {
            return Err(errors.at(
                key.referenced,
                "store.tls.cert_file",
                "a client key (`key_file`) needs its certificate: set `cert_file`",
            ));
        }
        (None, None) => None,
    };
    Ok(RedisTls {
        ca,
        client,
        server_name,
    })
}

fn unusable(file: &Spanned<String>, errors: &Errors<'_>, reason: &str) -> String {
    format!(
        "`{}` cannot be used: {reason}",
        errors.resolve(&file.value).display()
    )
}

#[cfg(test)]
mod tests {
    use super::url_has_password;

    #[test]
    fn a_password_in_a_url_is_seen() {
        assert!(url_has_password("redis://:pw@h:1"));
        assert!(url_has_password("rediss://weir:pw@h:1/0"));
        assert!(!url_has_password("rediss://weir@h:1"));
        assert!(!url_has_password("redis://h:1"));
        assert!(!url_has_password("redis://h:1/0?x=a@b"));
    }
}
