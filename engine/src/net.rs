//! Which addresses an outbound request may reach: the rules of the one SSRF guard (issue 15,
//! decision D-042). Every URL disparo fetches or posts to on a client's behalf (outbound
//! webhooks, media by URL, alternative providers) is checked against an [`OutboundPolicy`]:
//! literal hosts before the request, resolved names at connect time.
//!
//! Pure: the resolution itself happens in `actors::outbound`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether an IPv4 address is on the public internet: not `0.0.0.0/8`, `10.0.0.0/8`,
/// `100.64.0.0/10` (shared CGNAT), `127.0.0.0/8`, `169.254.0.0/16`, `172.16.0.0/12`,
/// `192.0.0.0/24`, `192.0.2.0/24`, `192.88.99.0/24` (6to4 relay), `192.168.0.0/16`,
/// `198.18.0.0/15` (benchmarking), `198.51.100.0/24`, `203.0.113.0/24`, `224.0.0.0/4`
/// (multicast) or `240.0.0.0/4` (reserved, broadcast included). Source: IANA special-purpose
/// address registry.
pub fn is_public_v4(v4: Ipv4Addr) -> bool {
    let [a, b, c, _] = v4.octets();
    !(a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 192 && b == 88 && c == 99)
        || (a == 192 && b == 168)
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224)
}

/// The IPv4 address an IPv6 address carries, when it is one of the forms that reach an IPv4
/// host: mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96` and 6to4
/// `2002:aabb:ccdd::/48`.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..5] == [0, 0, 0, 0, 0] && (s[5] == 0xffff || s[5] == 0) {
        return Some(tail);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

/// Whether an IPv6 address is on the public internet: not unspecified, loopback, multicast,
/// unique local (`fc00::/7`), link-local (`fe80::/10`), site-local (`fec0::/10`), discard
/// (`100::/64`), documentation (`2001:db8::/32`), Teredo (`2001::/32`, its IPv4 client is
/// hidden), ORCHID (`2001:10::/28`, `2001:20::/28`), local-use NAT64 (`64:ff9b:1::/48`); and
/// for the forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4), only when that
/// address is public.
pub fn is_public_v6(v6: Ipv6Addr) -> bool {
    if v6.is_unspecified() || v6.is_loopback() || v6.is_multicast() {
        return false;
    }
    if let Some(v4) = embedded_v4(v6) {
        return is_public_v4(v4);
    }
    let s = v6.segments();
    !((s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        || s[..4] == [0x100, 0, 0, 0]
        || (s[0] == 0x2001 && s[1] == 0xdb8)
        || (s[0] == 0x2001 && s[1] == 0)
        || (s[0] == 0x2001 && (s[1] & 0xfff0) == 0x10)
        || (s[0] == 0x2001 && (s[1] & 0xfff0) == 0x20)
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1))
}

/// Whether an address is on the public internet ([`is_public_v4`], [`is_public_v6`]).
pub fn is_public_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

/// A CIDR block (`10.1.0.0/16`, `fd00::/8`, or one address), for
/// `DISPARO_ALLOWED_SUBNETS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    base: IpAddr,
    prefix: u8,
}

impl Subnet {
    /// Parses `addr/prefix` or a bare address (a /32 or /128). Errors: a text that is not an
    /// address, or a prefix longer than the address.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let base: IpAddr = addr
            .parse()
            .map_err(|_| format!("`{s}` não é um endereço IP ou bloco CIDR"))?;
        let max = if base.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("prefixo inválido em `{s}`"))?,
            None => max,
        };
        Ok(Self { base, prefix })
    }

    /// Whether `ip` is inside the block (an IPv4-mapped IPv6 address counts as its IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.base, ip) {
            (IpAddr::V4(b), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - self.prefix as u32).unwrap_or(0);
                (u32::from(b) & mask) == (u32::from(a) & mask)
            }
            (IpAddr::V6(b), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - self.prefix as u32).unwrap_or(0);
                (u128::from(b) & mask) == (u128::from(a) & mask)
            }
            _ => false,
        }
    }
}

/// Where outbound requests may go: public addresses always; private, loopback and reserved
/// ones only when `allow_private` (`DISPARO_ALLOW_PRIVATE_URLS`) or inside one of
/// `allowed_subnets` (`DISPARO_ALLOWED_SUBNETS`, as Svix's `whitelist_subnets`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// Every address is allowed (tests, private deployments).
    pub allow_private: bool,
    /// Non-public blocks allowed anyway.
    pub allowed_subnets: Vec<Subnet>,
}

/// Why a URL may not be requested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlRefusal {
    /// Not an absolute `http` or `https` URL with a host (or it carries a user and password).
    Invalid(&'static str),
    /// The host is (or names) an address the policy does not allow.
    PrivateAddress(String),
}

impl UrlRefusal {
    /// The stable error code of the refusal: `invalid_url` or `private_url` (422).
    pub fn code(&self) -> &'static str {
        match self {
            UrlRefusal::Invalid(_) => "invalid_url",
            UrlRefusal::PrivateAddress(_) => "private_url",
        }
    }
}

impl OutboundPolicy {
    /// Whether a request may connect to `ip`.
    pub fn permits(&self, ip: IpAddr) -> bool {
        self.allow_private
            || is_public_ip(ip)
            || self.allowed_subnets.iter().any(|s| s.contains(ip))
    }

    /// Checks a URL's host before any request: `host` as the URL parser gives it (IPv6 in
    /// brackets). A literal address must be permitted; `localhost`, `*.localhost` and
    /// `localhost.` stand for the loopback address (RFC 6761 §6.3); any other name is checked
    /// when it is resolved, at connect time.
    pub fn check_host(&self, host: &str) -> Result<(), UrlRefusal> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let name = bare.trim_end_matches('.').to_ascii_lowercase();
        let literal: Option<IpAddr> = if name == "localhost" || name.ends_with(".localhost") {
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        } else {
            bare.parse().ok()
        };
        match literal {
            Some(ip) if !self.permits(ip) => Err(UrlRefusal::PrivateAddress(host.to_string())),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn private_reserved_and_tunnelled_addresses_are_not_public() {
        for s in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.5.4",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "100.127.255.255",
            "198.18.0.1",
            "198.19.255.255",
            "240.0.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.0.8",
            "192.88.99.1",
            "::",
            "::1",
            "fd00::1",
            "fe80::1",
            "fec0::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:a00:1::",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:db8::1",
            "100::1",
            "ff02::1",
        ] {
            assert!(!is_public_ip(ip(s)), "{s} must not be public");
        }
        for s in [
            "8.8.8.8",
            "157.240.1.1",
            "100.128.0.1",
            "198.20.0.1",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public_ip(ip(s)), "{s} is public");
        }
    }

    #[test]
    fn subnets_parse_and_contain() {
        let s = Subnet::parse("10.1.0.0/16").unwrap();
        assert!(s.contains(ip("10.1.200.3")));
        assert!(s.contains(ip("::ffff:10.1.0.9")));
        assert!(!s.contains(ip("10.2.0.1")));
        let one = Subnet::parse("127.0.0.1").unwrap();
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        let v6 = Subnet::parse("fd00::/8").unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        assert!(Subnet::parse("0.0.0.0/0").unwrap().contains(ip("1.2.3.4")));
        assert!(Subnet::parse("10.0.0.0/33").is_err());
        assert!(Subnet::parse("example.com").is_err());
    }

    #[test]
    fn the_policy_checks_literal_hosts_and_loopback_names() {
        let strict = OutboundPolicy::default();
        for host in [
            "localhost",
            "LOCALHOST.",
            "api.localhost",
            "127.0.0.1",
            "[::1]",
            "[::ffff:a9fe:a9fe]",
            "10.0.0.7",
        ] {
            assert!(
                matches!(strict.check_host(host), Err(UrlRefusal::PrivateAddress(_))),
                "{host}"
            );
        }
        assert!(strict.check_host("hooks.example.com").is_ok());
        assert!(strict.check_host("8.8.8.8").is_ok());
        let lab = OutboundPolicy {
            allow_private: false,
            allowed_subnets: vec![Subnet::parse("127.0.0.0/8").unwrap()],
        };
        assert!(lab.check_host("127.0.0.1").is_ok());
        assert!(lab.check_host("localhost").is_ok());
        assert!(lab.check_host("10.0.0.7").is_err());
        let open = OutboundPolicy {
            allow_private: true,
            ..OutboundPolicy::default()
        };
        assert!(open.check_host("10.0.0.7").is_ok());
    }
}
