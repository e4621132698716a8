//! The client's IP address, from the peer address or, behind trusted proxies, from the
//! one forwarding header they are configured to write; its key form; and the
//! forwarding headers sent on.
//!
//! Forwarding headers are read right to left: each address was appended by the hop
//! before it, so the first address from the right that is not a trusted proxy is the
//! client. Whatever a client writes at the left of the header is never reached unless
//! every hop after it is trusted, so a client cannot spoof its way to another IP's
//! budget. A peer that is not a trusted proxy is the client, whatever it sends.
//!
//! Only the configured header is read ([`ForwardedHeader`], `X-Forwarded-For` by
//! default): a proxy writes one of them, and a client can write any other, so falling
//! back to another header would let a client choose its address. An address that
//! cannot be read stops the walk at the last good hop.
//!
//! IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`, what a dual-stack socket reports for
//! an IPv4 peer) are the IPv4 address, everywhere: the peer, each hop, and trusted
//! proxy blocks, so that one client never has two keys and `10.0.0.0/8` trusts a
//! dual-stack proxy.

use std::fmt::Write;

use crate::request::push_ip;
use std::net::{IpAddr, Ipv6Addr};

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// The forwarding header trusted proxies write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (nginx, HAProxy, cloud balancers).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    Forwarded,
    /// `X-Real-IP: client`, one address written by the nearest proxy.
    XRealIp,
}

/// The default length of the IPv6 prefix a client is keyed by: a /64 is what one
/// subscriber usually gets, and it is cheap for one to use many of its addresses.
pub const IPV6_PREFIX: u8 = 64;

/// How the client IP is found and keyed (the `client_ip` section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIpConfig {
    /// Proxies whose forwarding header is believed (canonical: IPv4-mapped blocks are
    /// IPv4 blocks).
    pub trusted_proxies: Vec<IpNet>,
    /// The header they write.
    pub header: ForwardedHeader,
    /// IPv6 clients are keyed by this prefix of their address (1 to 128).
    pub ipv6_prefix: u8,
}

impl Default for ClientIpConfig {
    fn default() -> Self {
        Self {
            trusted_proxies: Vec::new(),
            header: ForwardedHeader::XForwardedFor,
            ipv6_prefix: IPV6_PREFIX,
        }
    }
}

/// Where a request came from: the client, and the trusted hops between it and weir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddress {
    /// The client's address.
    pub ip: IpAddr,
    /// The peer: the last hop, which connected to weir.
    pub peer: IpAddr,
    /// Whether the peer is a trusted proxy.
    pub peer_trusted: bool,
    /// Trusted proxies between the client and the peer, nearest the client first.
    pub hops: Vec<IpAddr>,
    /// For [`ForwardedHeader::Forwarded`]: the elements the trusted proxies wrote, from
    /// the client's on, kept to forward their other parameters (`proto`, `host`).
    forwarded_elements: Vec<String>,
}

/// The address an IPv4-mapped IPv6 address stands for; other addresses as they are.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// A block of addresses with IPv4-mapped IPv6 blocks (`::ffff:10.0.0.0/104`) as the
/// IPv4 block they stand for.
pub fn canonical_net(net: IpNet) -> IpNet {
    if let IpNet::V6(v6) = net
        && v6.prefix_len() >= 96
        && let Some(v4) = v6.network().to_ipv4_mapped()
        && let Ok(v4) = Ipv4Net::new(v4, v6.prefix_len() - 96)
    {
        return IpNet::V4(v4);
    }
    net
}

/// The key form of an address: IPv4 as it is (`192.0.2.1`), IPv6 as its network of
/// `ipv6_prefix` bits (`2001:db8:1:2::/64`; `ipv6_prefix` is clamped to 1..=128).
/// IPv4-mapped addresses are keyed as IPv4.
pub fn ip_key(ip: IpAddr, ipv6_prefix: u8) -> String {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => {
            let mut key = String::with_capacity(15);
            push_ip(&mut key, v4.into());
            key
        }
        IpAddr::V6(v6) => {
            let prefix = ipv6_prefix.clamp(1, 128);
            let net = Ipv6Net::new(v6, prefix).map_or(Ipv6Net::from(v6), |n| n.trunc());
            net.to_string()
        }
    }
}

/// The client address with the defaults ([`ForwardedHeader::XForwardedFor`]): what
/// `ClientIpConfig { trusted_proxies: trusted.to_vec(), ..Default::default() }` reads.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    read(peer, headers, trusted, ForwardedHeader::XForwardedFor).ip
}

impl ClientIpConfig {
    /// Where a request that came from `peer` came from.
    pub fn read(&self, peer: IpAddr, headers: &HeaderMap) -> ClientAddress {
        read(peer, headers, &self.trusted_proxies, self.header)
    }

    /// The key form of an address ([`ip_key`] with this prefix).
    pub fn key(&self, ip: IpAddr) -> String {
        ip_key(ip, self.ipv6_prefix)
    }
}

fn read(
    peer: IpAddr,
    headers: &HeaderMap,
    trusted: &[IpNet],
    header: ForwardedHeader,
) -> ClientAddress {
    let peer = canonical_ip(peer);
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    let mut address = ClientAddress {
        ip: peer,
        peer,
        peer_trusted: is_trusted(&peer),
        hops: Vec::new(),
        forwarded_elements: Vec::new(),
    };
    if !address.peer_trusted {
        return address;
    }
    // Hops appended by the proxies, nearest last, with the element each came from.
    let hops: Vec<(Option<IpAddr>, &str)> = match header {
        ForwardedHeader::XForwardedFor => list(headers, "x-forwarded-for")
            .map(|s| (parse_ip(s), s))
            .collect(),
        ForwardedHeader::Forwarded => list(headers, "forwarded")
            .map(|element| (forwarded_for(element), element))
            .collect(),
        ForwardedHeader::XRealIp => {
            let lines: Vec<&str> = list(headers, "x-real-ip").collect();
            match lines.as_slice() {
                [one] => vec![(parse_ip(one), *one)],
                // Several addresses where one is written: none is believed.
                _ => vec![(None, "")],
            }
        }
    };
    let mut client_at = None;
    for (i, (hop, _)) in hops.iter().enumerate().rev() {
        match hop {
            Some(ip) => {
                address.ip = canonical_ip(*ip);
                client_at = Some(i);
                if !is_trusted(&address.ip) {
                    break;
                }
            }
            // Garbage where an address should be: stop at the last good hop.
            None => break,
        }
    }
    if let Some(at) = client_at {
        address.hops = hops[at + 1..]
            .iter()
            .filter_map(|(ip, _)| ip.map(canonical_ip))
            .collect();
        if header == ForwardedHeader::Forwarded {
            address.forwarded_elements = hops[at..].iter().map(|(_, e)| (*e).to_owned()).collect();
        }
    }
    address
}

/// The comma-separated items of every line of a header, trimmed, empty ones skipped.
fn list<'a>(headers: &'a HeaderMap, name: &'static str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("\u{0}").split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The `for=` of a `Forwarded` element.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then(|| parse_ip(value.trim().trim_matches('"')))?
    })
}

/// An address as proxies write it: `1.2.3.4`, `1.2.3.4:5678`, `[::1]`, `[::1]:5678`.
fn parse_ip(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse() {
        return Some(ip);
    }
    if let Some(rest) = text.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        return ip.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    let (ip, port) = text.rsplit_once(':')?;
    if !is_port(port) {
        return None;
    }
    ip.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
static FORWARDED: HeaderName = HeaderName::from_static("forwarded");
/// Headers only a trusted proxy may set; dropped when the peer is not one.
static PROXY_ONLY: [HeaderName; 3] = [
    HeaderName::from_static("x-forwarded-host"),
    HeaderName::from_static("x-forwarded-port"),
    HeaderName::from_static("x-forwarded-prefix"),
];

impl ClientAddress {
    /// Replaces the forwarding headers of a request about to be forwarded with what weir
    /// decided: the app reads the client weir keyed, whichever header it reads.
    ///
    /// - `X-Forwarded-For`: the client, the trusted hops, the peer (`client, hop...,
    ///   peer`); from an untrusted peer just the peer. Entries left of the client (which
    ///   anyone could have written) are dropped, and so are the lines the peer sent.
    /// - `Forwarded`: the same chain, each hop `for=...`, this hop ending in
    ///   `;proto=http`; when trusted proxies write `Forwarded`, their elements are kept
    ///   as written from the client's on (their `proto`, `host`...), this hop appended.
    /// - `X-Real-IP`: the client.
    /// - `X-Forwarded-Proto`: a trusted peer's single `http` or `https` is kept, else
    ///   `http` (weir listens on plain HTTP).
    /// - `X-Forwarded-Host`, `-Port`, `-Prefix`: kept from a trusted peer, dropped from
    ///   any other.
    pub fn write_forwarding(&self, headers: &mut HeaderMap, header: ForwardedHeader) {
        // The chain, client first: one pass per header, written into one string each
        // (this runs for every forwarded request).
        let client = (self.ip != self.peer || !self.hops.is_empty()).then_some(self.ip);
        let chain = || client.into_iter().chain(self.hops.iter().copied());

        let mut xff = String::with_capacity(48);
        for ip in chain() {
            push_ip(&mut xff, ip);
            xff.push_str(", ");
        }
        push_ip(&mut xff, self.peer);
        insert(headers, &X_FORWARDED_FOR, xff);

        let mut forwarded = String::with_capacity(64);
        if self.peer_trusted
            && header == ForwardedHeader::Forwarded
            && !self.forwarded_elements.is_empty()
        {
            for element in &self.forwarded_elements {
                forwarded.push_str(element);
                forwarded.push_str(", ");
            }
        } else {
            for ip in chain() {
                write_forwarded_node(&mut forwarded, ip);
                forwarded.push_str(", ");
            }
        }
        write_forwarded_node(&mut forwarded, self.peer);
        forwarded.push_str(";proto=http");
        insert(headers, &FORWARDED, forwarded);
        let mut real = String::with_capacity(40);
        push_ip(&mut real, self.ip);
        insert(headers, &X_REAL_IP, real);

        let proto = if self.peer_trusted {
            let mut lines = headers.get_all(&X_FORWARDED_PROTO).iter();
            match (lines.next(), lines.next()) {
                (Some(v), None) if v == "https" || v == "http" => v.clone(),
                _ => HeaderValue::from_static("http"),
            }
        } else {
            HeaderValue::from_static("http")
        };
        headers.insert(X_FORWARDED_PROTO.clone(), proto);
        if !self.peer_trusted {
            for name in &PROXY_ONLY {
                headers.remove(name);
            }
        }
    }
}

/// Appends a `Forwarded` node for `ip`: `for=192.0.2.1`, or `for="[2001:db8::1]"`.
fn write_forwarded_node(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(_) => {
            out.push_str("for=");
            push_ip(out, ip);
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "for=\"[{v6}]\"");
        }
    }
}

fn insert(headers: &mut HeaderMap, name: &HeaderName, value: String) {
    // Addresses, `for=`, `;`, `,`, quotes and spaces: always a valid header value.
    if let Ok(value) = HeaderValue::try_from(value) {
        headers.insert(name.clone(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn config(header: ForwardedHeader) -> ClientIpConfig {
        ClientIpConfig {
            trusted_proxies: vec![
                "10.0.0.0/8".parse().unwrap(),
                "127.0.0.1/32".parse().unwrap(),
                "2001:db8:ffff::/48".parse().unwrap(),
            ],
            header,
            ipv6_prefix: 64,
        }
    }

    fn trusted() -> Vec<IpNet> {
        config(ForwardedHeader::XForwardedFor).trusted_proxies
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_claims() {
        let peer = ip("203.0.113.9");
        for header in [
            ForwardedHeader::XForwardedFor,
            ForwardedHeader::Forwarded,
            ForwardedHeader::XRealIp,
        ] {
            let h = headers(&[
                ("x-forwarded-for", "1.1.1.1"),
                ("forwarded", "for=1.1.1.1"),
                ("x-real-ip", "1.1.1.1"),
            ]);
            let read = config(header).read(peer, &h);
            assert_eq!(read.ip, peer);
            assert!(!read.peer_trusted);
            assert!(read.hops.is_empty());
        }
    }

    #[test]
    fn headers_are_read_right_to_left_past_trusted_proxies() {
        let peer = ip("10.0.0.2");
        // The client wrote "6.6.6.6" itself; the first proxy appended the real address.
        let h = headers(&[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.0.0.1")]);
        let read = config(ForwardedHeader::XForwardedFor).read(peer, &h);
        assert_eq!(read.ip, ip("198.51.100.7"));
        assert_eq!(read.hops, [ip("10.0.0.1")]);
        assert_eq!(client_ip(peer, &h, &trusted()), ip("198.51.100.7"));
        // Several lines are one list, in order.
        let h = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "198.51.100.7:4711"),
            ("x-forwarded-for", "10.0.0.1"),
        ]);
        assert_eq!(client_ip(peer, &h, &trusted()), ip("198.51.100.7"));
        let h = headers(&[(
            "forwarded",
            "for=6.6.6.6, for=\"[2001:db8::1]:4711\";proto=https, for=10.0.0.1",
        )]);
        let read = config(ForwardedHeader::Forwarded).read(peer, &h);
        assert_eq!(read.ip, ip("2001:db8::1"));
        assert_eq!(read.hops, [ip("10.0.0.1")]);
        let h = headers(&[("x-real-ip", "198.51.100.7")]);
        assert_eq!(
            config(ForwardedHeader::XRealIp).read(peer, &h).ip,
            ip("198.51.100.7")
        );
        // Every hop trusted: the leftmost one is the client.
        let h = headers(&[("x-forwarded-for", "10.1.1.1, 10.0.0.1")]);
        assert_eq!(client_ip(peer, &h, &trusted()), ip("10.1.1.1"));
    }

    #[test]
    fn only_the_configured_header_is_read() {
        let peer = ip("10.0.0.2");
        let h = headers(&[("forwarded", "for=198.51.100.7")]);
        assert_eq!(client_ip(peer, &h, &trusted()), peer);
        assert_eq!(config(ForwardedHeader::XRealIp).read(peer, &h).ip, peer);
        let h = headers(&[("x-forwarded-for", "198.51.100.7")]);
        assert_eq!(config(ForwardedHeader::Forwarded).read(peer, &h).ip, peer);
        assert_eq!(config(ForwardedHeader::XRealIp).read(peer, &h).ip, peer);
    }

    #[test]
    fn garbage_stops_the_walk_at_the_last_good_hop() {
        let peer = ip("10.0.0.2");
        let cases = [
            (
                "x-forwarded-for",
                "198.51.100.7, not-an-ip",
                ForwardedHeader::XForwardedFor,
                "10.0.0.2",
            ),
            (
                "x-forwarded-for",
                "198.51.100.7, unknown, 10.0.0.1",
                ForwardedHeader::XForwardedFor,
                "10.0.0.1",
            ),
            (
                "x-forwarded-for",
                "198.51.100.7:99999999",
                ForwardedHeader::XForwardedFor,
                "10.0.0.2",
            ),
            (
                "x-forwarded-for",
                "1.2.3.4:",
                ForwardedHeader::XForwardedFor,
                "10.0.0.2",
            ),
            (
                "x-forwarded-for",
                "[::1",
                ForwardedHeader::XForwardedFor,
                "10.0.0.2",
            ),
            (
                "x-forwarded-for",
                "[::1]x",
                ForwardedHeader::XForwardedFor,
                "10.0.0.2",
            ),
            (
                "forwarded",
                "for=198.51.100.7, for=_hidden",
                ForwardedHeader::Forwarded,
                "10.0.0.2",
            ),
            (
                "forwarded",
                "for=unknown",
                ForwardedHeader::Forwarded,
                "10.0.0.2",
            ),
            (
                "forwarded",
                "proto=https",
                ForwardedHeader::Forwarded,
                "10.0.0.2",
            ),
            (
                "x-real-ip",
                "198.51.100.7, 198.51.100.8",
                ForwardedHeader::XRealIp,
                "10.0.0.2",
            ),
            ("x-real-ip", "nope", ForwardedHeader::XRealIp, "10.0.0.2"),
        ];
        for (name, value, header, want) in cases {
            let h = headers(&[(name, value)]);
            assert_eq!(config(header).read(peer, &h).ip, ip(want), "{value}");
        }
        assert_eq!(client_ip(peer, &HeaderMap::new(), &trusted()), peer);
    }

    #[test]
    fn ipv4_mapped_addresses_are_ipv4_everywhere() {
        assert_eq!(canonical_ip(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
        assert_eq!(canonical_ip(ip("::FFFF:c000:0201")), ip("192.0.2.1"));
        assert_eq!(canonical_ip(ip("192.0.2.1")), ip("192.0.2.1"));
        assert_eq!(canonical_ip(ip("::1")), ip("::1"));
        // IPv4-compatible (deprecated) and NAT64 addresses are not IPv4 here.
        assert_eq!(canonical_ip(ip("::192.0.2.1")), ip("::192.0.2.1"));
        assert_eq!(
            canonical_ip(ip("64:ff9b::192.0.2.1")),
            ip("64:ff9b::192.0.2.1")
        );
        // The peer, before it is matched against trusted proxies.
        let h = headers(&[("x-forwarded-for", "::ffff:198.51.100.7")]);
        let read = config(ForwardedHeader::XForwardedFor).read(ip("::ffff:10.0.0.2"), &h);
        assert_eq!(read.peer, ip("10.0.0.2"));
        assert!(read.peer_trusted);
        assert_eq!(read.ip, ip("198.51.100.7"));
        // An untrusted mapped peer.
        assert_eq!(
            client_ip(ip("::ffff:203.0.113.9"), &HeaderMap::new(), &trusted()),
            ip("203.0.113.9")
        );
        // Trusted blocks.
        assert_eq!(
            canonical_net("::ffff:10.0.0.0/104".parse().unwrap()),
            "10.0.0.0/8".parse::<IpNet>().unwrap()
        );
        assert_eq!(
            canonical_net("::ffff:0:0/96".parse().unwrap()),
            "0.0.0.0/0".parse::<IpNet>().unwrap()
        );
        assert_eq!(
            canonical_net("2001:db8::/32".parse().unwrap()),
            "2001:db8::/32".parse::<IpNet>().unwrap()
        );
        assert_eq!(
            canonical_net("::/0".parse().unwrap()),
            "::/0".parse::<IpNet>().unwrap()
        );
    }

    #[test]
    fn keys_are_ipv4_addresses_or_ipv6_networks() {
        let cases = [
            ("192.0.2.1", 64, "192.0.2.1"),
            ("::ffff:192.0.2.1", 64, "192.0.2.1"),
            ("2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"),
            ("2001:db8:1:2:ffff::1", 64, "2001:db8:1:2::/64"),
            ("2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48"),
            ("2001:db8:1:2:3:4:5:6", 56, "2001:db8:1::/56"),
            ("2001:db8:1:2ff:3:4:5:6", 56, "2001:db8:1:200::/56"),
            ("2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6/128"),
            ("2001:db8:1:2:3:4:5:6", 200, "2001:db8:1:2:3:4:5:6/128"),
            ("2001:db8:1:2:3:4:5:6", 0, "::/1"),
            ("::1", 64, "::/64"),
        ];
        for (addr, prefix, want) in cases {
            assert_eq!(ip_key(ip(addr), prefix), want, "{addr}/{prefix}");
        }
        let c = ClientIpConfig {
            ipv6_prefix: 56,
            ..ClientIpConfig::default()
        };
        assert_eq!(c.key(ip("2001:db8:1:2ff::1")), "2001:db8:1:200::/56");
        assert_eq!(ClientIpConfig::default().ipv6_prefix, 64);
    }

    #[test]
    fn forwarding_from_an_untrusted_peer_replaces_what_it_sent() {
        let peer = ip("203.0.113.9");
        let mut h = headers(&[
            ("x-forwarded-for", "1.1.1.1"),
            ("x-forwarded-for", "2.2.2.2"),
            ("forwarded", "for=1.1.1.1;proto=https"),
            ("x-real-ip", "1.1.1.1"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "evil.example"),
            ("x-forwarded-port", "443"),
            ("x-forwarded-prefix", "/admin"),
            ("accept", "*/*"),
        ]);
        let c = config(ForwardedHeader::XForwardedFor);
        c.read(peer, &h).write_forwarding(&mut h, c.header);
        let want = headers(&[
            ("x-forwarded-for", "203.0.113.9"),
            ("forwarded", "for=203.0.113.9;proto=http"),
            ("x-real-ip", "203.0.113.9"),
            ("x-forwarded-proto", "http"),
            ("accept", "*/*"),
        ]);
        assert_eq!(h, want);

        let mut h = HeaderMap::new();
        let v6 = ip("2001:db8::7");
        c.read(v6, &h).write_forwarding(&mut h, c.header);
        assert_eq!(h["x-forwarded-for"], "2001:db8::7");
        assert_eq!(h["forwarded"], "for=\"[2001:db8::7]\";proto=http");
        assert_eq!(h["x-real-ip"], "2001:db8::7");
    }

    #[test]
    fn forwarding_from_trusted_proxies_keeps_the_chain_from_the_client_on() {
        let peer = ip("10.0.0.2");
        let mut h = headers(&[
            ("x-forwarded-for", "6.6.6.6, 198.51.100.7:1234, 10.0.0.1"),
            ("forwarded", "for=9.9.9.9"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "api.example.com"),
        ]);
        let c = config(ForwardedHeader::XForwardedFor);
        c.read(peer, &h).write_forwarding(&mut h, c.header);
        let want = headers(&[
            ("x-forwarded-for", "198.51.100.7, 10.0.0.1, 10.0.0.2"),
            (
                "forwarded",
                "for=198.51.100.7, for=10.0.0.1, for=10.0.0.2;proto=http",
            ),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "api.example.com"),
            ("x-real-ip", "198.51.100.7"),
        ]);
        assert_eq!(h, want);

        // Proxies writing Forwarded: their elements are kept as written.
        let mut h = headers(&[(
            "forwarded",
            "for=6.6.6.6;proto=http, for=\"[2001:db8::1]:4711\";proto=https;host=api.example.com, for=10.0.0.1",
        )]);
        let c = config(ForwardedHeader::Forwarded);
        c.read(peer, &h).write_forwarding(&mut h, c.header);
        assert_eq!(
            h["forwarded"],
            "for=\"[2001:db8::1]:4711\";proto=https;host=api.example.com, for=10.0.0.1, for=10.0.0.2;proto=http"
        );
        assert_eq!(h["x-forwarded-for"], "2001:db8::1, 10.0.0.1, 10.0.0.2");
        assert_eq!(h["x-real-ip"], "2001:db8::1");
        assert_eq!(h["x-forwarded-proto"], "http");

        // X-Real-IP from the proxy: the chain is the client and the proxy.
        let mut h = headers(&[
            ("x-real-ip", "198.51.100.7"),
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-proto", "ftp"),
        ]);
        let c = config(ForwardedHeader::XRealIp);
        c.read(peer, &h).write_forwarding(&mut h, c.header);
        assert_eq!(h["x-forwarded-for"], "198.51.100.7, 10.0.0.2");
        assert_eq!(h["x-real-ip"], "198.51.100.7");
        assert_eq!(h["x-forwarded-proto"], "http");

        // A trusted peer that forwards nothing is the client.
        let mut h = HeaderMap::new();
        let c = config(ForwardedHeader::XForwardedFor);
        c.read(peer, &h).write_forwarding(&mut h, c.header);
        assert_eq!(h["x-forwarded-for"], "10.0.0.2");
        assert_eq!(h["forwarded"], "for=10.0.0.2;proto=http");
    }
}
