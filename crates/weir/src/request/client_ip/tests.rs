pub(crate) use super::test_support::{config, headers, ip};
use super::*;

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

/// The forward-auth door's callers are believed, but are no hop of the header they
/// write: a client on a caller's own address cannot skip past the address the proxy
/// appended for it.
#[test]
fn a_caller_is_believed_but_never_skipped_as_a_hop() {
    let door = ClientIpConfig {
        callers: vec!["127.0.0.0/8".parse().unwrap()],
        ..ClientIpConfig::default()
    };
    let peer = ip("127.0.0.1");
    let h = headers(&[("x-forwarded-for", "198.51.100.9, 127.0.0.1")]);
    let read = door.read(peer, &h);
    assert!(read.peer_trusted);
    assert_eq!(read.ip, ip("127.0.0.1"), "the address the proxy appended");
    let h = headers(&[("x-forwarded-for", "198.51.100.9, 203.0.113.5")]);
    assert_eq!(door.read(peer, &h).ip, ip("203.0.113.5"));
    // Past the client_ip section's proxies, as the gateway reads.
    let door = ClientIpConfig {
        trusted_proxies: vec!["10.0.0.0/8".parse().unwrap()],
        ..door
    };
    let h = headers(&[("x-forwarded-for", "6.6.6.6, 203.0.113.5, 10.1.1.1")]);
    assert_eq!(door.read(peer, &h).ip, ip("203.0.113.5"));
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
    assert_eq!(
        ip_key(ip("2001:db8:1:2ff::1"), c.ipv6_prefix),
        "2001:db8:1:200::/56"
    );
    assert_eq!(ClientIpConfig::default().ipv6_prefix, 64);
}

#[test]
fn a_byte_of_junk_before_the_proxys_entry_hides_nothing() {
    // nginx appends the address it saw to the line the client sent.
    let peer = ip("10.0.0.2");
    let mut h = HeaderMap::new();
    h.insert(
        "x-forwarded-for",
        axum::http::HeaderValue::from_bytes(b"\xe9, 203.0.113.9").unwrap(),
    );
    let read = config(ForwardedHeader::XForwardedFor).read(peer, &h);
    assert_eq!(
        read.ip,
        ip("203.0.113.9"),
        "the proxy's entry, not the proxy"
    );
    // Junk as the nearest entry: the last good hop is the trusted proxy itself.
    h.insert(
        "x-forwarded-for",
        axum::http::HeaderValue::from_bytes(b"203.0.113.9, \xe9").unwrap(),
    );
    assert_eq!(
        config(ForwardedHeader::XForwardedFor).read(peer, &h).ip,
        peer
    );
}
