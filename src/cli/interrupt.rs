//! SIGINT and SIGTERM during a headless run (and SIGHUP in the live view). A CI job that is
//! cancelled must not leave a report that claims more than was measured, nor nothing at all:
//! the first signal only raises a flag, the run stops at the next step boundary, and the
//! caller writes the steps measured so far with status INTERRUPTED and exits 128 + the signal
//! (130, 143). A second signal exits at once with the same code, for a run stuck in a step.
//!
//! The handlers are signal-hook's (async-signal-safe atomics and `_exit`), not hand-written.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

pub use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Signals caught while it lives (the handlers stay registered until the process ends, which
/// is what a one-shot command wants).
#[derive(Clone)]
pub struct Interrupt {
    caught: Arc<AtomicBool>,
    /// The first signal caught (0 while none).
    which: Arc<AtomicUsize>,
}

impl Interrupt {
    /// Catch `signals`: the first raises the flag, a second exits with 128 + its number.
    pub fn install(signals: &[i32]) -> io::Result<Interrupt> {
        let caught = Arc::new(AtomicBool::new(false));
        let which = Arc::new(AtomicUsize::new(0));
        for &sig in signals {
            // Registered first, so it sees the flag as it was before this signal set it.
            signal_hook::flag::register_conditional_shutdown(sig, exit_code(sig), caught.clone())?;
            // Keeps the first signal's number: a later one finds `which` no longer 0.
            let w = which.clone();
            // SAFETY: the action is a single atomic compare-exchange, async-signal-safe.
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    let _ = w.compare_exchange(0, sig as usize, Ordering::SeqCst, Ordering::SeqCst);
                })?;
            }
            signal_hook::flag::register(sig, caught.clone())?;
        }
        Ok(Interrupt { caught, which })
    }

    /// The first signal caught, if any.
    pub fn signal(&self) -> Option<i32> {
        if !self.caught.load(Ordering::SeqCst) {
            return None;
        }
        match self.which.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s as i32),
        }
    }

    pub fn caught(&self) -> bool {
        self.caught.load(Ordering::SeqCst)
    }
}

/// The shell's exit status for a process ended by `sig`: 128 + its number.
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}

/// `SIGINT`, `SIGTERM`, ... for messages.
pub fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}
