//! Telling clients apart for limits, and remembering who failed to
//! authenticate, in bounded memory whatever an attacker sends.
//!
//! - A client is its address (the socket peer, or what trusted proxies
//!   say), except that IPv6 clients are grouped by network prefix (/64 by
//!   default): one subscriber line gets a /64, and counting each of its
//!   2^64 addresses apart would give one client unlimited fresh buckets.
//! - [`AttemptLimit`] counts attempts (failed authentications, credential
//!   lookups) per client in a fixed window; past its limit the client is
//!   refused before its credential is looked up at all, so a flood of
//!   made-up credentials costs no database work. The memory is a bounded cache (moka): at capacity the least
//!   useful entries go, never the process.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// Who the client of a request is: the socket peer, or what trusted
/// proxies say, grouped for counting.
#[derive(clap::Args, Debug, Clone)]
pub struct ClientAddresses {
    /// Proxies (IPs or CIDRs, comma separated) whose X-Forwarded-For is
    /// believed, read from the right (an entry that is not a plain address
    /// ends the walk); with none, the client is always the socket peer.
    #[arg(long, env = "RATEWIRE_TRUSTED_PROXIES", value_delimiter = ',', num_args = 0.., value_parser = parse_proxy)]
    pub trusted_proxies: Vec<IpNet>,
    /// IPv6 clients are counted per network of this prefix length (64: one
    /// subscriber's /64 is one client). IPv4 clients are counted per address.
    #[arg(long, env = "RATEWIRE_IPV6_PREFIX_LEN", default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..=128))]
    pub ipv6_prefix_len: u8,
}

impl Default for ClientAddresses {
    /// No trusted proxy; IPv6 per /64.
    fn default() -> Self {
        Self {
            trusted_proxies: Vec::new(),
            ipv6_prefix_len: 64,
        }
    }
}

/// A trusted proxy: one address or a network.
fn parse_proxy(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{s:?} is not an IP address or CIDR network"))
}

impl ClientAddresses {
    /// The client a request counts for, from its socket peer and headers:
    /// [`Self::address`], grouped by [`Self::group`].
    pub fn client(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Option<IpAddr> {
        self.address(peer, headers).map(|ip| self.group(ip))
    }

    /// The client's address: the socket peer, unless the peer is a trusted
    /// proxy. Then X-Forwarded-For is walked from the right (each proxy
    /// appends the address it saw), past trusted proxies, to the first
    /// address that is not one. An entry that is not a plain address ends
    /// the walk (anything left of it was written by the client and proves
    /// nothing): the client is then the last good address, a trusted proxy
    /// or the peer.
    pub fn address(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Option<IpAddr> {
        let peer = peer?;
        let is_trusted = |ip: &IpAddr| self.trusted_proxies.iter().any(|net| net.contains(ip));
        if !is_trusted(&peer) {
            return Some(peer);
        }
        let values: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .map(|v| v.to_str().unwrap_or(""))
            .collect();
        let mut client = peer;
        for entry in values.iter().rev().flat_map(|v| v.rsplit(',')) {
            match entry.trim().parse::<IpAddr>() {
                Ok(ip) => {
                    client = ip;
                    if !is_trusted(&ip) {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        Some(client)
    }

    /// The address that stands for `ip`'s group: itself for IPv4 (and
    /// IPv4-mapped IPv6), its network for IPv6.
    pub fn group(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(_) => ip,
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let bits = u128::from(v6);
                    let mask = u128::MAX
                        .checked_shl(128 - u32::from(self.ipv6_prefix_len))
                        .unwrap_or(0);
                    IpAddr::V6(Ipv6Addr::from(bits & mask))
                }
            },
        }
    }
}

/// One client's failures in the current window.
struct Failures {
    since: Instant,
    count: AtomicU32,
}

/// Attempts per client (as [`ClientAddresses::client`] names it), `limit`
/// per `window`: failed authentications, or credential lookups that may
/// fail.
#[derive(Clone)]
pub struct AttemptLimit {
    limit: u32,
    window: Duration,
    seen: moka::sync::Cache<IpAddr, Arc<Failures>>,
}

/// How many clients [`AttemptLimit`] remembers at most.
const REMEMBERED_CLIENTS: u64 = 100_000;

impl AttemptLimit {
    pub fn new(limit: u32, window: Duration) -> Self {
        Self {
            limit,
            window,
            // An entry lives one window from the first failure, so the
            // window resets by itself.
            seen: moka::sync::Cache::builder()
                .max_capacity(REMEMBERED_CLIENTS)
                .time_to_live(window)
                .build(),
        }
    }

    /// Seconds until `client` may try again, when it has used up its
    /// failures for this window.
    pub fn blocked(&self, client: IpAddr) -> Option<u64> {
        let failures = self.seen.get(&client)?;
        if failures.count.load(Ordering::Relaxed) < self.limit {
            return None;
        }
        let left = self.window.saturating_sub(failures.since.elapsed());
        Some(left.as_secs().max(1))
    }

    /// Takes one of `client`'s attempts in this window if any is left: the
    /// check and the count in one step, so callers racing each other never
    /// take more than the limit between them.
    pub fn try_take(&self, client: IpAddr) -> bool {
        self.seen
            .get_with(client, || {
                Arc::new(Failures {
                    since: Instant::now(),
                    count: AtomicU32::new(0),
                })
            })
            .count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .is_ok()
    }

    /// Counts an attempt of `client`.
    pub fn count(&self, client: IpAddr) {
        self.seen
            .get_with(client, || {
                Arc::new(Failures {
                    since: Instant::now(),
                    count: AtomicU32::new(0),
                })
            })
            .count
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// A bounded, expiring set of credentials (by hash) known to be invalid,
/// so a repeated bad credential is refused without a database lookup.
#[derive(Clone)]
pub struct KnownInvalid(moka::sync::Cache<String, ()>);

impl KnownInvalid {
    /// Remembers at most `capacity` hashes, each for `ttl` (a credential
    /// created meanwhile works once its entry expires).
    pub fn new(capacity: u64, ttl: Duration) -> Self {
        Self(
            moka::sync::Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
        )
    }

    pub fn contains(&self, hash: &str) -> bool {
        self.0.contains_key(hash)
    }

    pub fn insert(&self, hash: String) {
        self.0.insert(hash, ());
    }

    pub fn forget(&self, hash: &str) {
        self.0.invalidate(hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(xff: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_str(xff).unwrap());
        h
    }

    fn behind(proxies: &str) -> ClientAddresses {
        ClientAddresses {
            trusted_proxies: proxies
                .split(',')
                .map(|p| parse_proxy(p).unwrap())
                .collect(),
            ..ClientAddresses::default()
        }
    }

    #[test]
    fn forwarded_for_is_read_only_from_trusted_proxies() {
        let proxy: IpAddr = "10.0.0.5".parse().unwrap();
        let client: IpAddr = "203.0.113.9".parse().unwrap();
        let addresses = behind("10.0.0.0/8");
        // Untrusted peer: its header is ignored.
        assert_eq!(
            addresses.address(Some(client), &headers("1.2.3.4")),
            Some(client)
        );
        // Trusted peer: the right-most untrusted hop is the client.
        assert_eq!(
            addresses.address(Some(proxy), &headers("1.2.3.4, 203.0.113.9, 10.0.0.7")),
            Some(client)
        );
        // Trusted peer without a header: the peer itself.
        assert_eq!(
            addresses.address(Some(proxy), &HeaderMap::new()),
            Some(proxy)
        );
        // Nobody trusted: never the header.
        assert_eq!(
            ClientAddresses::default().address(Some(proxy), &headers("1.2.3.4")),
            Some(proxy)
        );
    }

    #[test]
    fn a_malformed_forwarded_entry_ends_the_walk() {
        let proxy: IpAddr = "10.0.0.5".parse().unwrap();
        let addresses = behind("10.0.0.0/8");
        // The attacker writes a left-hand address and a malformed one; the
        // walk stops at the malformed entry and never reaches the
        // attacker's choice.
        assert_eq!(
            addresses.address(Some(proxy), &headers("198.51.100.77, 203.0.113.9:4711")),
            Some(proxy)
        );
        assert_eq!(
            addresses.address(
                Some(proxy),
                &headers("198.51.100.77, 203.0.113.9:4711, 10.0.0.7")
            ),
            Some("10.0.0.7".parse().unwrap())
        );
        // Several headers are one list, in order.
        let mut two = headers("198.51.100.77");
        two.append("x-forwarded-for", HeaderValue::from_static("192.0.2.44"));
        assert_eq!(
            addresses.address(Some(proxy), &two),
            Some("192.0.2.44".parse().unwrap())
        );
    }

    #[test]
    fn ipv6_clients_are_grouped_by_prefix_and_ipv4_by_address() {
        let grouping = ClientAddresses::default();
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:ffff:ffff:ffff".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(grouping.group(a), grouping.group(b));
        assert_ne!(grouping.group(a), grouping.group(other));
        assert_eq!(grouping.group(a).to_string(), "2001:db8:1:2::");
        let v4: IpAddr = "203.0.113.9".parse().unwrap();
        assert_eq!(grouping.group(v4), v4);
        let mapped: IpAddr = "::ffff:203.0.113.9".parse().unwrap();
        assert_eq!(grouping.group(mapped), v4);
        let whole = ClientAddresses {
            ipv6_prefix_len: 128,
            ..ClientAddresses::default()
        };
        assert_eq!(whole.group(a), a);
    }

    #[test]
    fn a_client_is_blocked_after_its_failures_until_the_window_ends() {
        let failed = AttemptLimit::new(3, Duration::from_secs(60));
        let client: IpAddr = "2001:db8::".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(failed.blocked(client), None);
            failed.count(client);
        }
        let wait = failed.blocked(client).expect("three failures");
        assert!((1..=60).contains(&wait), "{wait}");
        assert_eq!(failed.blocked("203.0.113.1".parse().unwrap()), None);
    }

    #[test]
    fn racing_callers_never_take_more_than_the_limit() {
        let lookups = AttemptLimit::new(10, Duration::from_secs(60));
        let client: IpAddr = "198.51.100.4".parse().unwrap();
        let taken: usize = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| (0..100).filter(|_| lookups.try_take(client)).count()))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(taken, 10);
        assert!(lookups.blocked(client).is_some());
    }

    #[test]
    fn a_window_ends_by_itself() {
        let failed = AttemptLimit::new(1, Duration::from_millis(50));
        let ip: IpAddr = "203.0.113.7".parse().unwrap();
        failed.count(ip);
        assert!(failed.blocked(ip).is_some());
        std::thread::sleep(Duration::from_millis(120));
        assert_eq!(failed.blocked(ip), None);
    }
}
