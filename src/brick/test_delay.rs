//! `CBTOP_TEST_SLOW_BRICK=ID:MICROSECONDS`: a test hook that makes one brick slower on
//! purpose, by spinning that long after each of its calls timed through a `Recorder` (the CPU
//! engine's bricks), so the history tests can check that `compare --db` names a brick that
//! really got slower. Read once; unset (always, outside those tests) it costs one load of a
//! cached value per brick call.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::id::{Brick, BrickId};

/// The environment variable.
pub const VAR: &str = "CBTOP_TEST_SLOW_BRICK";

/// `ID:MICROSECONDS` to the brick and its delay; anything else is no delay.
pub fn parse(v: &str) -> Option<(BrickId, Duration)> {
    let (id, us) = v.split_once(':')?;
    let us: u64 = us.trim().parse().ok()?;
    Some((BrickId::from_name(id.trim())?, Duration::from_micros(us)))
}

fn slow() -> Option<(BrickId, Duration)> {
    static SLOW: OnceLock<Option<(BrickId, Duration)>> = OnceLock::new();
    *SLOW.get_or_init(|| std::env::var(VAR).ok().as_deref().and_then(parse))
}

/// Spin for the delay when `brick` is the one `CBTOP_TEST_SLOW_BRICK` names.
#[inline(always)]
pub fn after(brick: Brick) {
    if let Some((id, d)) = slow() {
        if brick == Brick::One(id) {
            let t0 = Instant::now();
            while t0.elapsed() < d {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_id_and_microseconds_only() {
        assert_eq!(
            parse("ffn_down:250"),
            Some((BrickId::FfnDown, Duration::from_micros(250)))
        );
        assert_eq!(parse("ffn_down"), None);
        assert_eq!(parse("nope:5"), None);
        assert_eq!(parse("qkv:-1"), None);
    }
}
