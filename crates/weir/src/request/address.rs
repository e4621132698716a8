//! Addresses as text.

use std::fmt::Write;
use std::net::IpAddr;

/// Appends `ip` as text, as `Display` writes it: IPv4 digit by digit, because this runs
/// several times for every request and `Display` goes through the formatting machinery
/// (about 1,300 instructions an address); IPv6 by `Display`.
pub(crate) fn push_ip(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            let mut digits = itoa::Buffer::new();
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(digits.format(octet));
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Written exactly as `Display` writes it.
        #[test]
        fn as_display_writes_it(v4 in any::<u32>(), v6 in any::<u128>()) {
            for ip in [IpAddr::V4(Ipv4Addr::from(v4)), IpAddr::V6(Ipv6Addr::from(v6))] {
                let mut text = String::new();
                push_ip(&mut text, ip);
                prop_assert_eq!(text, ip.to_string());
            }
        }
    }
}
