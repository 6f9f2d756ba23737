//! Where a webhook may point: http or https URLs whose host resolves only
//! to public addresses. Checked when a URL is registered and again, after
//! resolving, at every delivery (a name may be re-pointed at an internal
//! address after it was registered: DNS rebinding).
//!
//! `allow_private` (the local stack's `RATEWIRE_WEBHOOK_ALLOW_PRIVATE`)
//! admits loopback and private networks, so a receiver on 127.0.0.1
//! works; link-local (169.254.0.0/16, fe80::/10, where cloud metadata
//! services answer) and the metadata addresses stay refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// The longest URL accepted.
pub const MAX_URL_LEN: usize = 2048;

/// How long resolving a host may take at registration.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    pub allow_private: bool,
}

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Link-local or a cloud metadata address: refused whatever the setting.
    LinkLocal,
    /// Loopback, private, unique-local or shared address space.
    Private,
    /// Unspecified, multicast, broadcast, documentation or reserved.
    NotRoutable,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::LinkLocal => "a link-local or cloud metadata address",
            Refusal::Private => "a loopback or private address",
            Refusal::NotRoutable => "an address that is not publicly routable",
        })
    }
}

/// Cloud metadata services outside link-local: Alibaba Cloud's (in the
/// shared address space) and AWS's IPv6 one (in unique-local space).
const METADATA: [IpAddr; 2] = [
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
];

impl AddressPolicy {
    /// Whether a webhook may be delivered to `ip`.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refusal> {
        let refusal = match classify(ip) {
            None => return Ok(()),
            Some(refusal) => refusal,
        };
        match refusal {
            Refusal::Private if self.allow_private => Ok(()),
            other => Err(other),
        }
    }

    /// `raw` as a webhook URL: its syntax, then every address its host
    /// resolves to (an error names the field's problem in a sentence).
    pub async fn check_url(&self, raw: &str) -> Result<url::Url, String> {
        let url = parse(raw)?;
        let host = url.host_str().unwrap_or_default();
        let addresses = resolve(&url).await?;
        if addresses.is_empty() {
            return Err(format!("{host} has no address"));
        }
        for address in addresses {
            if let Err(refusal) = self.check(address.ip()) {
                return Err(format!(
                    "{host} resolves to {} ({refusal}); webhooks are delivered to public addresses only",
                    address.ip()
                ));
            }
        }
        Ok(url)
    }
}

/// The URL's syntax: http or https, a host, no credentials, at most
/// [`MAX_URL_LEN`] characters.
pub fn parse(raw: &str) -> Result<url::Url, String> {
    if raw.len() > MAX_URL_LEN {
        return Err(format!("must be at most {MAX_URL_LEN} characters"));
    }
    let url = url::Url::parse(raw).map_err(|e| format!("is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must be an http or https URL".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials (sign with the webhook's secret instead)".into());
    }
    if url.fragment().is_some() {
        return Err("must not have a fragment".into());
    }
    Ok(url)
}

/// Every address of the URL's host (an IP literal is its own).
pub async fn resolve(url: &url::Url) -> Result<Vec<SocketAddr>, String> {
    let port = url.port_or_known_default().unwrap_or(443);
    match url.host() {
        Some(url::Host::Ipv4(ip)) => Ok(vec![SocketAddr::new(IpAddr::V4(ip), port)]),
        Some(url::Host::Ipv6(ip)) => Ok(vec![SocketAddr::new(IpAddr::V6(ip), port)]),
        Some(url::Host::Domain(name)) => {
            let lookup = tokio::net::lookup_host((name, port));
            match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
                Ok(Ok(addresses)) => Ok(addresses.collect()),
                Ok(Err(e)) => Err(format!("{name} does not resolve: {e}")),
                Err(_) => Err(format!("{name} did not resolve within {RESOLVE_TIMEOUT:?}")),
            }
        }
        None => Err("must name a host".into()),
    }
}

/// Which refusal `ip` falls under, if any.
fn classify(ip: IpAddr) -> Option<Refusal> {
    if METADATA.contains(&ip) {
        return Some(Refusal::LinkLocal);
    }
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => {
            // IPv4 addresses written as IPv6 (mapped, or NAT64's well-known
            // prefix) are judged as what they reach.
            if let Some(v4) = v6.to_ipv4_mapped() {
                return classify(IpAddr::V4(v4));
            }
            let s = v6.segments();
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                let [a, b] = s[6].to_be_bytes();
                let [c, d] = s[7].to_be_bytes();
                return classify(IpAddr::V4(Ipv4Addr::new(a, b, c, d)));
            }
            classify_v6(v6)
        }
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Refusal> {
    let [a, b, c, _] = ip.octets();
    if ip.is_link_local() {
        return Some(Refusal::LinkLocal);
    }
    if ip.is_loopback()
        || ip.is_private()
        // Shared address space (carrier-grade NAT), 100.64.0.0/10.
        || (a == 100 && (64..128).contains(&b))
    {
        return Some(Refusal::Private);
    }
    let not_routable = ip.is_unspecified()
        || a == 0
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        // IETF protocol assignments, benchmarking, reserved (240/4).
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240;
    not_routable.then_some(Refusal::NotRoutable)
}

fn classify_v6(ip: Ipv6Addr) -> Option<Refusal> {
    let first = ip.segments()[0];
    if (first & 0xffc0) == 0xfe80 {
        return Some(Refusal::LinkLocal);
    }
    if ip.is_loopback()
        // Unique local, fc00::/7; deprecated site-local, fec0::/10.
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfec0
    {
        return Some(Refusal::Private);
    }
    let not_routable = ip.is_unspecified()
        || ip.is_multicast()
        // Documentation, 2001:db8::/32; discard-only, 100::/64; the
        // deprecated IPv4-compatible ::/96.
        || (first == 0x2001 && ip.segments()[1] == 0x0db8)
        || (first == 0x0100 && ip.segments()[1..4] == [0, 0, 0])
        || ip.segments()[..6] == [0, 0, 0, 0, 0, 0];
    not_routable.then_some(Refusal::NotRoutable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const STRICT: AddressPolicy = AddressPolicy {
        allow_private: false,
    };
    const LOCAL: AddressPolicy = AddressPolicy {
        allow_private: true,
    };

    #[test]
    fn public_addresses_pass() {
        for a in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700:4700::1111",
            "100.128.0.1",
        ] {
            assert_eq!(STRICT.check(ip(a)), Ok(()), "{a}");
        }
    }

    #[test]
    fn internal_addresses_are_refused() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert_eq!(STRICT.check(ip(a)), Err(Refusal::Private), "{a}");
            assert_eq!(LOCAL.check(ip(a)), Ok(()), "{a} with private allowed");
        }
    }

    #[test]
    fn link_local_and_metadata_are_refused_even_when_private_is_allowed() {
        for a in [
            "169.254.169.254",
            "169.254.0.1",
            "fe80::1",
            "::ffff:169.254.169.254",
            "100.100.100.200",
            "fd00:ec2::254",
        ] {
            assert_eq!(STRICT.check(ip(a)), Err(Refusal::LinkLocal), "{a}");
            assert_eq!(LOCAL.check(ip(a)), Err(Refusal::LinkLocal), "{a}");
        }
    }

    #[test]
    fn unroutable_addresses_are_refused_always() {
        for a in [
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "240.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "::",
            "ff02::1",
            "2001:db8::1",
            "::7f00:1",
        ] {
            assert_eq!(LOCAL.check(ip(a)), Err(Refusal::NotRoutable), "{a}");
        }
    }

    #[test]
    fn urls_must_be_http_with_a_host_and_no_credentials() {
        assert!(parse("https://hooks.example.com/in").is_ok());
        assert!(parse("http://127.0.0.1:9000/x?y=1").is_ok());
        for bad in [
            "ftp://example.com/",
            "file:///etc/passwd",
            "https://user:pw@example.com/",
            "not a url",
            "http://",
            "https://example.com/#frag",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert!(parse(&long).unwrap_err().contains("2048"));
    }

    #[tokio::test]
    async fn a_url_is_judged_by_every_address_it_resolves_to() {
        let refused = STRICT.check_url("http://127.0.0.1:9/x").await.unwrap_err();
        assert!(refused.contains("loopback"), "{refused}");
        assert!(LOCAL.check_url("http://127.0.0.1:9/x").await.is_ok());
        let metadata = LOCAL
            .check_url("http://169.254.169.254/latest/meta-data/")
            .await
            .unwrap_err();
        assert!(metadata.contains("link-local"), "{metadata}");
        let localhost = STRICT.check_url("http://localhost:9/").await.unwrap_err();
        assert!(localhost.contains("loopback"), "{localhost}");
        assert!(LOCAL.check_url("http://[fe80::1]/").await.is_err());
    }
}
