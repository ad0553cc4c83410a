//! `rate_limit`: the toolkit's token bucket in front of every request
//! (Go's `rate.NewLimiter(rate.Every(interval), burst)`): full at start,
//! one token back every `interval`, at most `burst` held; a request that
//! finds no token is answered 429.
//!
//! Owns the bucket; it never sleeps or queues a request.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A token bucket.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    /// Time for one token to come back.
    interval: Duration,
    /// Most tokens held.
    burst: f64,
    /// Tokens now, and when that was.
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    /// A full bucket of `burst` tokens, one back every `interval` (> 0).
    pub(crate) fn new(interval: Duration, burst: u32) -> RateLimiter {
        RateLimiter {
            interval,
            burst: f64::from(burst),
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    /// Takes a token at `now`, if there is one.
    pub(crate) fn allow_at(&self, now: Instant) -> bool {
        let Ok(mut state) = self.state.lock() else {
            return true;
        };
        let (tokens, since) = *state;
        let back = now.saturating_duration_since(since).as_secs_f64() / self.interval.as_secs_f64();
        let tokens = (tokens + back).min(self.burst);
        if tokens >= 1.0 {
            *state = (tokens - 1.0, now);
            true
        } else {
            *state = (tokens, now);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_per_interval() {
        let t0 = Instant::now();
        let r = RateLimiter::new(Duration::from_secs(1), 2);
        assert!(r.allow_at(t0));
        assert!(r.allow_at(t0));
        assert!(!r.allow_at(t0));
        assert!(!r.allow_at(t0 + Duration::from_millis(500)));
        assert!(r.allow_at(t0 + Duration::from_millis(1000)));
        assert!(!r.allow_at(t0 + Duration::from_millis(1100)));
        // Never more than the burst, however long the wait.
        let later = t0 + Duration::from_secs(100);
        assert!(r.allow_at(later));
        assert!(r.allow_at(later));
        assert!(!r.allow_at(later));
        let none = RateLimiter::new(Duration::from_secs(1), 0);
        assert!(!none.allow_at(t0 + Duration::from_secs(5)));
    }
}
