//! The gateway's sections: `upstream` (where allowed requests go) and `client_ip` (whom
//! to believe about the client's address).

use std::sync::Arc;
use std::time::Duration;

use axum::http::Uri;
use ipnet::IpNet;
use serde_saphyr::Spanned;

use super::ConfigError;
use super::error::Errors;
use super::file::{ForwardedHeaderName, RawConfig};
use super::shedding::SheddingConfig;
use crate::request::{ClientIpConfig, ForwardedHeader, IPV6_PREFIX, canonical_net};

/// Where allowed requests go.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    /// `http://host:port` or `https://host:port` of the upstream.
    pub base: Uri,
    /// How an `https://` upstream is reached.
    pub tls: Option<UpstreamTls>,
    /// Whether it speaks HTTP/2 (`http2: true`), else HTTP/1.1.
    pub http2: bool,
    /// The longest a connection to the upstream may take to open.
    pub connect_timeout: Duration,
    /// The longest the upstream may take to start answering.
    pub timeout: Duration,
    /// The largest request body read when a rule identifies callers by a body field.
    pub max_body_bytes: usize,
    /// The most body bytes held at once across all requests being read (each counts
    /// for its `Content-Length`, or `max_body_bytes` without one); past it, `503`.
    pub max_buffered_bytes: usize,
    /// The longest a client may take to send such a body (else `408`).
    pub body_timeout: Duration,
    /// An upgraded connection (WebSocket) that carries nothing either way for this
    /// long is closed.
    pub websocket_idle_timeout: Duration,
}

/// How an `https://` upstream is reached: its roots (the system's or `ca_file`'s),
/// TLS 1.2 and 1.3, the ALPN protocol of `http2`; and the name its certificate must
/// have (sent by SNI): the URL's host.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamTls {
    /// The roots, versions and ALPN protocol.
    pub config: Arc<rustls::ClientConfig>,
    /// The upstream's name (a DNS name or an IP address).
    pub name: rustls_pki_types::ServerName<'static>,
}

/// What the gateway needs besides the engine: where to forward, and whom to believe.
#[derive(Debug, Clone)]
pub(crate) struct GatewayConfig {
    /// Where allowed requests go.
    pub upstream: Upstream,
    /// Whom to believe about the client's address, and what to tell the upstream.
    pub(crate) client_ip: ClientIpConfig,
    /// Load shedding by route priority, when configured.
    pub shedding: Option<SheddingConfig>,
}

/// Defaults of the `upstream` section.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest body read by default when a rule keys on a body field.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;
/// The longest a client may take by default to send such a body.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an upgraded connection may carry nothing by default (nginx's
/// `proxy_read_timeout`, which closes idle WebSockets, is 60 s too).
pub(crate) const WEBSOCKET_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The most body bytes held at once across requests by default.
pub(crate) const MAX_BUFFERED_BYTES: usize = 64 << 20;

/// The gateway, when the configuration has an `upstream`; `client_ip` is its section,
/// read already.
pub(super) fn gateway(
    raw: &RawConfig,
    errors: &Errors<'_>,
    client_ip: ClientIpConfig,
) -> Result<Option<GatewayConfig>, ConfigError> {
    let Some(upstream) = &raw.upstream else {
        if let Some(shedding) = &raw.shedding {
            return Err(errors.at(
                shedding.referenced,
                "shedding",
                "shedding protects an upstream: the configuration has none",
            ));
        }
        return Ok(None);
    };
    let upstream = self::upstream(upstream, errors)?;
    let shedding = raw
        .shedding
        .as_ref()
        .map(|section| super::shedding::shedding(section, errors))
        .transpose()?;
    Ok(Some(GatewayConfig {
        upstream,
        client_ip,
        shedding,
    }))
}

/// A list of addresses and CIDR blocks (`trusted_proxies`), canonical (IPv4-mapped
/// blocks are IPv4 blocks); `field` names it in errors.
pub(super) fn networks(
    list: &[Spanned<String>],
    field: &str,
    errors: &Errors<'_>,
) -> Result<Vec<IpNet>, ConfigError> {
    list.iter()
        .enumerate()
        .map(|(i, net)| {
            net.value
                .parse::<IpNet>()
                .or_else(|_| net.value.parse::<std::net::IpAddr>().map(IpNet::from))
                .map(canonical_net)
                .map_err(|_| {
                    errors.at(
                        net.referenced,
                        format!("{field}[{i}]"),
                        format!("`{}` is not an IP address or CIDR block", net.value),
                    )
                })
        })
        .collect()
}

/// The `client_ip` section.
pub(super) fn client_ip(
    raw: Option<&super::file::RawClientIp>,
    errors: &Errors<'_>,
) -> Result<ClientIpConfig, ConfigError> {
    let Some(raw) = raw else {
        return Ok(ClientIpConfig::default());
    };
    let trusted_proxies = networks(&raw.trusted_proxies, "client_ip.trusted_proxies", errors)?;
    let header = match raw.header {
        None | Some(ForwardedHeaderName::XForwardedFor) => ForwardedHeader::XForwardedFor,
        Some(ForwardedHeaderName::Forwarded) => ForwardedHeader::Forwarded,
        Some(ForwardedHeaderName::XRealIp) => ForwardedHeader::XRealIp,
    };
    let ipv6_prefix = match &raw.ipv6_prefix {
        None => IPV6_PREFIX,
        Some(p) => u8::try_from(p.value)
            .ok()
            .filter(|p| (1..=128).contains(p))
            .ok_or_else(|| {
                errors.at(
                    p.referenced,
                    "client_ip.ipv6_prefix",
                    "ipv6_prefix must be a whole number from 1 to 128",
                )
            })?,
    };
    Ok(ClientIpConfig {
        trusted_proxies,
        header,
        ipv6_prefix,
        callers: Vec::new(),
    })
}

fn upstream(raw: &super::file::RawUpstream, errors: &Errors<'_>) -> Result<Upstream, ConfigError> {
    let url = &raw.url;
    let base: Uri = url
        .value
        .parse()
        .ok()
        .filter(|u: &Uri| {
            matches!(u.scheme_str(), Some("http" | "https"))
                && u.authority().is_some()
                && u.port_u16() != Some(0)
                && matches!(u.path(), "" | "/")
        })
        .ok_or_else(|| {
            errors.at(
                url.referenced,
                "upstream.url",
                format!(
                    "`{}` is not an upstream URL: use http://host:port or https://host:port",
                    url.value
                ),
            )
        })?;
    let tls = match (base.scheme_str(), &raw.ca_file) {
        (Some("https"), ca_file) => {
            let host = base.host().unwrap_or_default();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let name = rustls_pki_types::ServerName::try_from(host.to_owned()).map_err(|_| {
                errors.at(
                    url.referenced,
                    "upstream.url",
                    format!("`{host}` is not a name a TLS certificate can have"),
                )
            })?;
            let config = super::upstream_tls::client(ca_file.as_ref(), raw.http2, errors)?;
            Some(UpstreamTls { config, name })
        }
        (_, Some(ca_file)) => {
            return Err(errors.at(
                ca_file.referenced,
                "upstream.ca_file",
                "ca_file verifies an https:// upstream; this one is http://",
            ));
        }
        (_, None) => None,
    };
    let timeout =
        |value: &Option<Spanned<super::Period>>, field: &str, default: Duration| match value {
            Some(t) if t.value.0.is_zero() || t.value.0 > Duration::from_secs(3600) => Err(errors
                .at(
                    t.referenced,
                    format!("upstream.{field}"),
                    format!("{field} must be between 1ms and 1h"),
                )),
            Some(t) => Ok(t.value.0),
            None => Ok(default),
        };
    let max_body_bytes = match &raw.max_body_bytes {
        Some(n) if n.value == 0 || n.value > 16 * 1024 * 1024 => {
            return Err(errors.at(
                n.referenced,
                "upstream.max_body_bytes",
                "max_body_bytes must be a whole number from 1 to 16777216",
            ));
        }
        Some(n) => n.value,
        None => MAX_BODY_BYTES,
    };
    let max_buffered_bytes = match &raw.max_buffered_bytes {
        Some(n) if n.value < max_body_bytes || n.value > 4 << 30 => {
            return Err(errors.at(
                n.referenced,
                "upstream.max_buffered_bytes",
                format!("max_buffered_bytes must be between max_body_bytes ({max_body_bytes}) and 4294967296"),
            ));
        }
        Some(n) => n.value,
        None => MAX_BUFFERED_BYTES.max(max_body_bytes),
    };
    Ok(Upstream {
        base,
        tls,
        http2: raw.http2,
        connect_timeout: timeout(&raw.connect_timeout, "connect_timeout", CONNECT_TIMEOUT)?,
        timeout: timeout(&raw.timeout, "timeout", UPSTREAM_TIMEOUT)?,
        body_timeout: timeout(&raw.body_timeout, "body_timeout", BODY_TIMEOUT)?,
        websocket_idle_timeout: timeout(
            &raw.websocket_idle_timeout,
            "websocket_idle_timeout",
            WEBSOCKET_IDLE_TIMEOUT,
        )?,
        max_body_bytes,
        max_buffered_bytes,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn section(yaml: &str) -> Result<ClientIpConfig, String> {
        let raw: super::super::file::RawClientIp =
            serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
        let errors = Errors {
            file: Path::new("weir.yaml"),
        };
        client_ip(Some(&raw), &errors).map_err(|e| e.to_string())
    }

    #[test]
    fn the_client_ip_section_has_defaults_and_bounds() {
        assert_eq!(
            client_ip(
                None,
                &Errors {
                    file: Path::new("weir.yaml")
                }
            )
            .unwrap(),
            ClientIpConfig::default()
        );
        let c = section(
            "trusted_proxies: [\"::ffff:10.0.0.0/104\", 127.0.0.1, \"::ffff:192.0.2.1\"]\n",
        )
        .unwrap();
        let nets: Vec<String> = c.trusted_proxies.iter().map(ToString::to_string).collect();
        assert_eq!(nets, ["10.0.0.0/8", "127.0.0.1/32", "192.0.2.1/32"]);
        assert_eq!(c.header, ForwardedHeader::XForwardedFor);
        assert_eq!(c.ipv6_prefix, 64);
        for (name, header) in [
            ("x-forwarded-for", ForwardedHeader::XForwardedFor),
            ("forwarded", ForwardedHeader::Forwarded),
            ("x-real-ip", ForwardedHeader::XRealIp),
        ] {
            assert_eq!(
                section(&format!("header: {name}\n")).unwrap().header,
                header
            );
        }
        assert!(section("header: true-client-ip\n").is_err());
        assert_eq!(section("ipv6_prefix: 48\n").unwrap().ipv6_prefix, 48);
        assert_eq!(section("ipv6_prefix: 128\n").unwrap().ipv6_prefix, 128);
        for bad in ["0", "129", "100000"] {
            assert_eq!(
                section(&format!("ipv6_prefix: {bad}\n")),
                Err(
                    "weir.yaml:1:14: client_ip.ipv6_prefix: ipv6_prefix must be a whole number from 1 to 128"
                        .into()
                ),
                "{bad}"
            );
        }
    }
}
