//! The client's IP address, from the peer address or, behind trusted proxies, from the
//! one forwarding header they are configured to write, and its key form. (What a door
//! passing the request on tells the app about it is `edge/forwarding.rs`.)
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

use std::net::{IpAddr, Ipv6Addr};

use axum::http::HeaderMap;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::push_ip;

/// The forwarding header trusted proxies write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ForwardedHeader {
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
pub(crate) const IPV6_PREFIX: u8 = 64;

/// How the client IP is found and keyed (the `client_ip` section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientIpConfig {
    /// Proxies whose forwarding header is believed (canonical: IPv4-mapped blocks are
    /// IPv4 blocks).
    pub trusted_proxies: Vec<IpNet>,
    /// The header they write.
    pub header: ForwardedHeader,
    /// IPv6 clients are keyed by this prefix of their address (1 to 128).
    pub ipv6_prefix: u8,
    /// Peers whose forwarding header is believed, though they never appear in it as a
    /// hop: the forward-auth door's callers (`auth.trusted_proxies`), which forward a
    /// client's request to weir only in a subrequest. Their header is walked past
    /// `trusted_proxies` alone, so a client whose own address is a caller's cannot
    /// skip past itself to an address it wrote. Empty for every other door.
    pub callers: Vec<IpNet>,
}

impl Default for ClientIpConfig {
    fn default() -> Self {
        Self {
            trusted_proxies: Vec::new(),
            header: ForwardedHeader::XForwardedFor,
            ipv6_prefix: IPV6_PREFIX,
            callers: Vec::new(),
        }
    }
}

/// Where a request came from: the client, and the trusted hops between it and weir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientAddress {
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

impl ClientAddress {
    /// For [`ForwardedHeader::Forwarded`]: the elements the trusted proxies wrote, from
    /// the client's on (empty for the other headers, or an untrusted peer).
    pub(crate) fn forwarded_elements(&self) -> &[String] {
        &self.forwarded_elements
    }
}

/// The address an IPv4-mapped IPv6 address stands for; other addresses as they are.
pub(crate) fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// A block of addresses with IPv4-mapped IPv6 blocks (`::ffff:10.0.0.0/104`) as the
/// IPv4 block they stand for.
pub(crate) fn canonical_net(net: IpNet) -> IpNet {
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
pub(crate) fn ip_key(ip: IpAddr, ipv6_prefix: u8) -> String {
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

/// The client address with the defaults (`X-Forwarded-For`): what
/// `ClientIpConfig { trusted_proxies: trusted.to_vec(), ..Default::default() }` reads.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    read(
        peer,
        headers,
        trusted,
        ForwardedHeader::XForwardedFor,
        false,
    )
    .ip
}

impl ClientIpConfig {
    /// Where a request that came from `peer` came from.
    pub(crate) fn read(&self, peer: IpAddr, headers: &HeaderMap) -> ClientAddress {
        let peer_trusted = self
            .callers
            .iter()
            .any(|net| net.contains(&canonical_ip(peer)));
        read(
            peer,
            headers,
            &self.trusted_proxies,
            self.header,
            peer_trusted,
        )
    }
}

fn read(
    peer: IpAddr,
    headers: &HeaderMap,
    trusted: &[IpNet],
    header: ForwardedHeader,
    caller: bool,
) -> ClientAddress {
    let peer = canonical_ip(peer);
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    let mut address = ClientAddress {
        ip: peer,
        peer,
        peer_trusted: caller || is_trusted(&peer),
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
/// Lines are split as bytes: an item that is not visible ASCII is garbage (`"\0"`) on
/// its own, never the whole line, since a proxy appends the address it saw to the
/// line the client sent (nginx's `$proxy_add_x_forwarded_for`, Envoy, Traefik): one
/// byte of junk from the client must not hide the address after it.
fn list<'a>(headers: &'a HeaderMap, name: &'static str) -> impl Iterator<Item = &'a str> {
    let visible = |item: &[u8]| {
        item.iter()
            .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
    };
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(move |item| {
            if visible(item) {
                std::str::from_utf8(item).unwrap_or("\u{0}")
            } else {
                "\u{0}"
            }
        })
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

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
