//! UTC time stamps for the exchange log, without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

/// Whole seconds and milliseconds since the epoch (0 for a clock before 1970).
fn split(time: SystemTime) -> (i64, u32) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    (i64::try_from(since.as_secs()).unwrap_or(i64::MAX), since.subsec_millis())
}

/// `2026-11-30T02:13:39.123Z`: the core's RFC 3339 form with milliseconds.
pub(crate) fn rfc3339_millis(time: SystemTime) -> String {
    let (seconds, millis) = split(time);
    let whole = vfs::rfc3339(seconds);
    format!("{}.{millis:03}Z", whole.trim_end_matches('Z'))
}

/// `20261130T021339Z`, for file names.
pub(crate) fn compact_stamp(time: SystemTime) -> String {
    vfs::rfc3339(split(time).0).replace(['-', ':'], "")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    #[expect(clippy::duration_suboptimal_units, reason = "Unix timestamps read in seconds, as they are published")]
    fn formats_utc() {
        let time = UNIX_EPOCH + Duration::from_millis(1_796_004_819_042);
        assert_eq!(rfc3339_millis(time), "2026-11-30T02:13:39.042Z");
        assert_eq!(compact_stamp(time), "20261130T021339Z");
        assert_eq!(rfc3339_millis(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00.000Z");
    }
}
