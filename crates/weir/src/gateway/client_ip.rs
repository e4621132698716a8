//! The client's IP address, from the peer address or, behind trusted proxies, from
//! `X-Forwarded-For` / `Forwarded`.
//!
//! Forwarding headers are read right to left: each address was appended by the hop
//! before it, so the first address from the right that is not a trusted proxy is the
//! client. Whatever a client writes at the left of the header is never reached unless
//! every hop after it is trusted, so a client cannot spoof its way to another IP's
//! budget. A peer that is not a trusted proxy is the client, whatever it sends.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// Finds the client address of a request that came from `peer`.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    // Hops appended by the proxies, nearest last: X-Forwarded-For, else Forwarded.
    let mut hops = forwarded_for(headers);
    if hops.is_empty() {
        hops = forwarded(headers);
    }
    let mut client = peer;
    for hop in hops.into_iter().rev() {
        match hop {
            Some(ip) => {
                client = ip;
                if !is_trusted(&ip) {
                    break;
                }
            }
            // Garbage where an address should be: stop at the last good hop.
            None => break,
        }
    }
    client
}

fn forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("").split(','))
        .map(|s| parse_ip(s.trim()))
        .collect()
}

fn forwarded(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all("forwarded")
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("").split(','))
        .filter_map(|element| {
            element.split(';').find_map(|pair| {
                let (name, value) = pair.trim().split_once('=')?;
                name.eq_ignore_ascii_case("for")
                    .then(|| parse_ip(value.trim_matches('"')))
            })
        })
        .collect()
}

/// An address as proxies write it: `1.2.3.4`, `1.2.3.4:5678`, `[::1]`, `[::1]:5678`.
fn parse_ip(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse() {
        return Some(ip);
    }
    if let Some(rest) = text.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    text.rsplit_once(':').and_then(|(ip, _)| ip.parse().ok())
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

    fn trusted() -> Vec<IpNet> {
        vec![
            "10.0.0.0/8".parse().unwrap(),
            "127.0.0.1/32".parse().unwrap(),
        ]
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_claims() {
        let peer: IpAddr = "203.0.113.9".parse().unwrap();
        let h = headers(&[("x-forwarded-for", "1.1.1.1")]);
        assert_eq!(client_ip(peer, &h, &trusted()), peer);
    }

    #[test]
    fn headers_are_read_right_to_left_past_trusted_proxies() {
        let peer: IpAddr = "10.0.0.2".parse().unwrap();
        // The client wrote "6.6.6.6" itself; the first proxy appended the real address.
        let h = headers(&[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.0.0.1")]);
        assert_eq!(
            client_ip(peer, &h, &trusted()),
            "198.51.100.7".parse::<IpAddr>().unwrap()
        );
        let h = headers(&[(
            "forwarded",
            "for=6.6.6.6, for=\"[2001:db8::1]:4711\";proto=https",
        )]);
        assert_eq!(
            client_ip(peer, &h, &trusted()),
            "2001:db8::1".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn garbage_stops_the_walk_at_the_last_good_hop() {
        let peer: IpAddr = "10.0.0.2".parse().unwrap();
        let h = headers(&[("x-forwarded-for", "198.51.100.7, not-an-ip")]);
        assert_eq!(client_ip(peer, &h, &trusted()), peer);
        let h = headers(&[]);
        assert_eq!(client_ip(peer, &h, &trusted()), peer);
    }
}
