//! Delegation token renewal (Spark's `HadoopDelegationTokenManager`, without its
//! failures): when each service's token is fetched again, and when an old one stops
//! being handed out. A state machine without IO, stepped with the current time.
//!
//! - A token is renewed at `ratio` (0.75) of its remaining life, and never later than
//!   its expiry minus `margin`: a token with little life left is renewed at once.
//! - A failed renewal is tried again after `retry_wait`, doubling up to `max_retry_wait`;
//!   every failure is reported. The old token is handed out until it expires, not after.
//! - Tokens carry wall-clock expiries (milliseconds since the epoch); the caller gives
//!   the wall clock with each token it obtained, and the machine keeps monotonic time.

use flint_proto::Token;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// `flint.security.credentials.*`.
#[derive(Debug, Clone, PartialEq)]
pub struct RenewalConfig {
    /// `renewalRatio` (0.75): the share of a token's remaining life after which it is
    /// renewed.
    pub ratio: f64,
    /// `renewalMargin` (10s): a token is renewed at least this long before it expires.
    pub margin: Duration,
    /// `retryWait` (1s): the wait after a failed renewal, doubling with each in a row.
    pub retry_wait: Duration,
    /// The longest wait between tries.
    pub max_retry_wait: Duration,
}

impl Default for RenewalConfig {
    fn default() -> Self {
        RenewalConfig {
            ratio: 0.75,
            margin: Duration::from_secs(10),
            retry_wait: Duration::from_secs(1),
            max_retry_wait: Duration::from_secs(300),
        }
    }
}

#[derive(Debug, Clone)]
struct Service {
    token: Option<Token>,
    /// When the token stops being valid, on the monotonic clock.
    expires: Option<Instant>,
    /// When to fetch next; `None` while a fetch is under way.
    next_fetch: Option<Instant>,
    failures: u32,
}

/// What the machine says happened, for the caller to act on and report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// Fetch a new token for this service now.
    Fetch(String),
    /// This service's token expired before a new one came: it is handed out no more.
    Expired(String),
}

#[derive(Debug)]
pub struct Credentials {
    config: RenewalConfig,
    services: BTreeMap<String, Service>,
}

impl Credentials {
    /// Renews the tokens of these services; none is held yet, so each is due at once.
    pub fn new(
        config: RenewalConfig,
        services: impl IntoIterator<Item = String>,
        now: Instant,
    ) -> Credentials {
        let services = services
            .into_iter()
            .map(|s| (s, Service { token: None, expires: None, next_fetch: Some(now), failures: 0 }))
            .collect();
        Credentials { config, services }
    }

    /// A fetch for `token.service` brought this token; `now_ms` is the wall clock now.
    /// Returns false for a service it does not renew (the token is ignored).
    pub fn obtained(&mut self, now: Instant, now_ms: u64, token: Token) -> bool {
        let config = &self.config;
        let Some(service) = self.services.get_mut(&token.service) else { return false };
        let life = Duration::from_millis(token.expires_at_ms.saturating_sub(now_ms));
        let by_ratio = life.mul_f64(config.ratio.clamp(0.0, 1.0));
        let by_margin = life.saturating_sub(config.margin);
        service.next_fetch = Some(now + by_ratio.min(by_margin));
        service.expires = Some(now + life);
        service.failures = 0;
        service.token = Some(token);
        true
    }

    /// A fetch for `service` failed: tried again after the back-off. Returns the wait.
    pub fn failed(&mut self, now: Instant, service: &str) -> Option<Duration> {
        let config = &self.config;
        let entry = self.services.get_mut(service)?;
        entry.failures += 1;
        let doubling = 2u32.saturating_pow(entry.failures.saturating_sub(1).min(20));
        let wait = config.retry_wait.saturating_mul(doubling).min(config.max_retry_wait);
        entry.next_fetch = Some(now + wait);
        Some(wait)
    }

    /// What is due at `now`: fetches to start (each service's at most once at a time)
    /// and tokens that expired unrenewed (dropped).
    pub fn step(&mut self, now: Instant) -> Vec<Renewal> {
        let mut due = Vec::new();
        for (name, service) in &mut self.services {
            if service.expires.is_some_and(|at| now >= at) {
                service.token = None;
                service.expires = None;
                due.push(Renewal::Expired(name.clone()));
            }
            if service.next_fetch.is_some_and(|at| now >= at) {
                service.next_fetch = None;
                due.push(Renewal::Fetch(name.clone()));
            }
        }
        due
    }

    /// When `step` has something to do next.
    pub fn next_wake(&self) -> Option<Instant> {
        self.services.values().flat_map(|s| [s.next_fetch, s.expires]).flatten().min()
    }

    /// The tokens valid now, to hand to executors.
    pub fn tokens(&self) -> Vec<Token> {
        self.services.values().filter_map(|s| s.token.clone()).collect()
    }

    /// Failed fetches in a row for `service`.
    pub fn failures(&self, service: &str) -> u32 {
        self.services.get(service).map_or(0, |s| s.failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn token(secret: &str, expires_at_ms: u64) -> Token {
        Token::new("s3", secret, expires_at_ms)
    }

    fn machine(now: Instant) -> Credentials {
        Credentials::new(RenewalConfig::default(), ["s3".to_owned()], now)
    }

    #[test]
    fn every_service_is_fetched_at_start_and_renewed_at_three_quarters_of_its_life() {
        let t0 = Instant::now();
        let mut c = machine(t0);
        assert_eq!(c.step(t0), [Renewal::Fetch("s3".into())]);
        assert_eq!(c.step(t0), [], "one fetch at a time");
        // An hour of life, obtained at wall time 1,000,000 ms.
        assert!(c.obtained(t0, 1_000_000, token("a", 1_000_000 + 3_600_000)));
        assert_eq!(c.next_wake(), Some(t0 + 2700 * S));
        assert_eq!(c.step(t0 + 2699 * S), []);
        assert_eq!(c.step(t0 + 2700 * S), [Renewal::Fetch("s3".into())]);
        assert_eq!(c.tokens()[0].secret, "a", "the old token is handed out while the new one comes");
    }

    #[test]
    fn a_short_lived_token_is_renewed_no_later_than_the_margin_before_expiry() {
        let t0 = Instant::now();
        let mut c = machine(t0);
        c.step(t0);
        // 20 s of life: 0.75 would be 15 s, but 10 s before expiry is sooner.
        c.obtained(t0, 0, token("a", 20_000));
        assert_eq!(c.next_wake(), Some(t0 + 10 * S));
        // Less life than the margin: renewed at once.
        c.step(t0 + 10 * S);
        c.obtained(t0 + 10 * S, 0, token("b", 5_000));
        assert_eq!(c.step(t0 + 10 * S), [Renewal::Fetch("s3".into())]);
    }

    #[test]
    fn failed_renewals_back_off_and_the_old_token_goes_at_its_expiry() {
        let t0 = Instant::now();
        let mut c = machine(t0);
        c.step(t0);
        c.obtained(t0, 0, token("a", 40_000));
        assert_eq!(c.step(t0 + 30 * S), [Renewal::Fetch("s3".into())]);
        // 1 s, 2 s, 4 s...
        assert_eq!(c.failed(t0 + 30 * S, "s3"), Some(S));
        assert_eq!(c.step(t0 + 31 * S), [Renewal::Fetch("s3".into())]);
        assert_eq!(c.failed(t0 + 31 * S, "s3"), Some(2 * S));
        assert_eq!(c.step(t0 + 32 * S), []);
        assert_eq!(c.step(t0 + 33 * S), [Renewal::Fetch("s3".into())]);
        assert_eq!(c.failed(t0 + 33 * S, "s3"), Some(4 * S));
        assert_eq!(c.failures("s3"), 3);
        assert_eq!(c.tokens().len(), 1, "still valid until 40 s");
        assert_eq!(c.step(t0 + 37 * S), [Renewal::Fetch("s3".into())]);
        c.failed(t0 + 37 * S, "s3");
        assert_eq!(c.step(t0 + 40 * S), [Renewal::Expired("s3".into())]);
        assert!(c.tokens().is_empty(), "an expired token is handed out no more");
        // The back-off is capped.
        for n in 0..30 {
            c.step(t0 + (100 + n * 400) * S);
            c.failed(t0 + (100 + n * 400) * S, "s3");
        }
        assert_eq!(c.failed(t0, "s3"), Some(RenewalConfig::default().max_retry_wait));
        // A success starts over.
        c.obtained(t0 + 20_000 * S, 0, token("z", 0));
        assert_eq!(c.failures("s3"), 0);
    }

    #[test]
    fn a_token_for_a_service_not_renewed_here_is_ignored() {
        let t0 = Instant::now();
        let mut c = machine(t0);
        assert!(!c.obtained(t0, 0, Token::new("hdfs", "x", 1)));
        assert!(c.tokens().is_empty());
        assert_eq!(c.failed(t0, "hdfs"), None);
    }
}
