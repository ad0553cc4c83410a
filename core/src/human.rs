//! Sizes and durations for people: `1.5 GiB`, `3 min 5 s`, and the one-line
//! catch-up estimate that `walrelay status` prints and the lag monitor logs.
//!
//! Owns only rendering. It must never be parsed back (metrics carry the raw
//! numbers) and knows nothing of where the numbers come from.

/// One progress line for a backlog: bytes behind, the rate, and the time
/// left at that rate, e.g. `catching up: 1.2 GiB behind at 35.0 MiB/s, about
/// 35 s left`.
pub fn catch_up_line(behind_bytes: u64, rate_bytes_per_s: f64) -> String {
    if behind_bytes == 0 {
        return "caught up".to_owned();
    }
    let behind = human_bytes(behind_bytes);
    if !(rate_bytes_per_s.is_finite() && rate_bytes_per_s > 0.0) {
        return format!("catching up: {behind} behind, not advancing");
    }
    let rate = human_bytes(rate_bytes_per_s as u64);
    let left = behind_bytes as f64 / rate_bytes_per_s;
    format!(
        "catching up: {behind} behind at {rate}/s, about {} left",
        human_duration(left)
    )
}

/// Seconds as `42 s`, `3 min 5 s` or `2 h 10 min`.
pub fn human_duration(secs: f64) -> String {
    let secs = if secs.is_finite() {
        secs.max(0.0).round() as u64
    } else {
        u64::MAX
    };
    if secs < 60 {
        format!("{secs} s")
    } else if secs < 3600 {
        format!("{} min {} s", secs / 60, secs % 60)
    } else if secs < 100 * 3600 {
        format!("{} h {} min", secs / 3600, secs % 3600 / 60)
    } else {
        format!("{} days", secs / 86_400)
    }
}

/// Bytes as a short human-readable size (`1.5 GiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catch_up() {
        assert_eq!(catch_up_line(0, 10.0), "caught up");
        assert_eq!(
            catch_up_line(3 << 30, 0.0),
            "catching up: 3.0 GiB behind, not advancing"
        );
        assert_eq!(
            catch_up_line(1 << 30, (1 << 20) as f64),
            "catching up: 1.0 GiB behind at 1.0 MiB/s, about 17 min 4 s left"
        );
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
