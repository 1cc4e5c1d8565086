//! UTC time stamps for the exchange log, without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

/// (year, month, day, hour, minute, second, millisecond) in UTC for `time`.
fn civil(time: SystemTime) -> (i64, i64, i64, i64, i64, i64, u32) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    // Days to a civil date, after Howard Hinnant's public-domain algorithm.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day, second_of_day / 3600, second_of_day % 3600 / 60, second_of_day % 60, since.subsec_millis())
}

/// `2026-11-30T02:13:39.123Z`.
pub(crate) fn rfc3339_millis(time: SystemTime) -> String {
    let (year, month, day, hour, minute, second, millis) = civil(time);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

/// `20261130T021339Z`, for file names.
pub(crate) fn compact_stamp(time: SystemTime) -> String {
    let (year, month, day, hour, minute, second, _) = civil(time);
    format!("{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}Z")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn formats_utc() {
        let time = UNIX_EPOCH + Duration::from_millis(1_796_004_819_042);
        assert_eq!(rfc3339_millis(time), "2026-11-30T02:13:39.042Z");
        assert_eq!(compact_stamp(time), "20261130T021339Z");
        assert_eq!(rfc3339_millis(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00.000Z");
    }
}
