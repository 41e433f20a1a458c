//! Budget profiles (`--profile FILE`, TOML): any text parses to a profile that passed its
//! checks, or an error naming the profile; never a panic.
#![no_main]

use cbtop::profile::Profile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Profile::parse("fuzz.toml", text) {
        Ok(p) => {
            if let Some(t) = p.budget.target_efficiency {
                assert!(t > 0.0 && t <= 1.0, "{t}");
            }
            for us in p.budget.bricks_us.values() {
                assert!(us.is_finite() && *us > 0.0);
            }
            if let Some(s) = &p.shape {
                assert!(s.n_heads > 0 && s.n_layers > 0);
                let _ = s.head_dim();
            }
        }
        Err(e) => assert!(e.to_string().contains("fuzz.toml"), "{e}"),
    }
});
