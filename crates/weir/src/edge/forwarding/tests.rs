use super::*;
use crate::request::client_ip_test_support::{config, headers, ip};

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
    write_forwarding(&c.read(peer, &h), &mut h, c.header, false);
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
    write_forwarding(&c.read(v6, &h), &mut h, c.header, false);
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
    write_forwarding(&c.read(peer, &h), &mut h, c.header, false);
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
    write_forwarding(&c.read(peer, &h), &mut h, c.header, false);
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
    write_forwarding(&c.read(peer, &h), &mut h, c.header, false);
    assert_eq!(h["x-forwarded-for"], "198.51.100.7, 10.0.0.2");
    assert_eq!(h["x-real-ip"], "198.51.100.7");
    assert_eq!(h["x-forwarded-proto"], "http");

    // A trusted peer that forwards nothing is the client.
    let mut h = HeaderMap::new();
    let c = config(ForwardedHeader::XForwardedFor);
    write_forwarding(&c.read(peer, &h), &mut h, c.header, false);
    assert_eq!(h["x-forwarded-for"], "10.0.0.2");
    assert_eq!(h["forwarded"], "for=10.0.0.2;proto=http");
}

#[test]
fn underscore_spellings_of_forwarding_headers_never_reach_the_app() {
    let peer = ip("203.0.113.9");
    let mut h = headers(&[
        ("x_forwarded_for", "6.6.6.6"),
        ("x_real_ip", "6.6.6.6"),
        ("x_forwarded_host", "evil.example"),
        ("x_api_key", "kept: not a forwarding header"),
    ]);
    let c = config(ForwardedHeader::XForwardedFor);
    write_forwarding(&c.read(peer, &h), &mut h, c.header, false);
    for gone in ["x_forwarded_for", "x_real_ip", "x_forwarded_host"] {
        assert!(!h.contains_key(gone), "{gone}");
    }
    assert_eq!(h["x-forwarded-for"], "203.0.113.9");
    assert!(h.contains_key("x_api_key"));
}
