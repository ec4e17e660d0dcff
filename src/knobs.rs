//! Duration knobs read from the environment: an operator's or a test's override of a timeout
//! or interval, in milliseconds, clamped to the bounds its constant documents. Owns only the
//! reading; each knob's name, default and bounds stay beside the code it tunes.

use std::ops::RangeInclusive;
use std::time::Duration;

/// `default`, or the milliseconds in the environment variable `name` clamped to `range_ms`. A
/// value that is not a whole number of milliseconds is ignored.
pub fn millis_or(name: &str, range_ms: RangeInclusive<u64>, default: Duration) -> Duration {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(default, |ms| {
            Duration::from_millis(ms.clamp(*range_ms.start(), *range_ms.end()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_knob_is_clamped_to_its_range_and_ignored_when_not_a_number() {
        let name = "BROWSER_PILOT_TEST_KNOB_MS";
        let default = Duration::from_secs(10);
        // SAFETY: no other test reads or writes this variable.
        unsafe { std::env::set_var(name, " 250 ") };
        assert_eq!(
            millis_or(name, 100..=1_000, default),
            Duration::from_millis(250)
        );
        unsafe { std::env::set_var(name, "5") };
        assert_eq!(
            millis_or(name, 100..=1_000, default),
            Duration::from_millis(100)
        );
        unsafe { std::env::set_var(name, "99999") };
        assert_eq!(
            millis_or(name, 100..=1_000, default),
            Duration::from_secs(1)
        );
        unsafe { std::env::set_var(name, "soon") };
        assert_eq!(millis_or(name, 100..=1_000, default), default);
        unsafe { std::env::remove_var(name) };
        assert_eq!(millis_or(name, 100..=1_000, default), default);
    }
}
