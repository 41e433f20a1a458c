//! Owning the terminal: raw mode, the alternate screen and a hidden cursor while the live view
//! runs, and all three undone by a guard's `Drop` and by a panic hook (installed before the
//! terminal is touched, chained to the previous hook), so a panic, an error or Ctrl-C never
//! leaves the user's shell in raw mode.
//!
//! Signals (`SignalWatch`): SIGINT and SIGTERM (a `kill`; Ctrl-C in raw mode is a key) ask the
//! UI loop to end, which restores the terminal and stops the engine on its way out. The loop
//! cannot always hear it: once the terminal hangs up, crossterm's tty read spins without
//! returning. So a watcher thread also restores the terminal itself and exits with 128 + the
//! signal when the loop has not ended within `SIGNAL_GRACE`, at a second signal, or at once
//! on SIGHUP (the terminal is gone; nothing is left to wait for).

use std::io::{self, Stdout, Write};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use crossterm::cursor::{Hide, Show};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How long the UI loop has to end by itself after SIGINT/SIGTERM.
pub const SIGNAL_GRACE: Duration = Duration::from_secs(2);

/// Whether the terminal is currently taken over (so restoring twice is harmless).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Leave the alternate screen, show the cursor, turn raw mode off. Idempotent.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let mut out = io::stdout();
        let _ = execute!(out, LeaveAlternateScreen, Show);
        let _ = out.flush();
    }
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// The terminal while the live view owns it; dropping it restores the terminal.
pub struct TerminalGuard {
    /// Dropped by hand (see `Drop`): ratatui's own drop prints with `eprintln!` when it cannot
    /// show the cursor, and that panics once the terminal (our stderr) has hung up.
    pub terminal: ManuallyDrop<Terminal<CrosstermBackend<Stdout>>>,
}

impl TerminalGuard {
    pub fn enter() -> io::Result<TerminalGuard> {
        install_panic_hook();
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = io::stdout();
        if let Err(e) = execute!(out, EnterAlternateScreen, Hide) {
            restore();
            return Err(e);
        }
        match Terminal::new(CrosstermBackend::new(out)) {
            Ok(terminal) => Ok(TerminalGuard {
                terminal: ManuallyDrop::new(terminal),
            }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        // With the cursor shown, ratatui's drop has nothing to say; if the terminal is gone
        // it cannot be shown, and the terminal is leaked instead (the process is ending).
        if self.terminal.show_cursor().is_ok() {
            // SAFETY: dropped once, here, and never used again.
            unsafe { ManuallyDrop::drop(&mut self.terminal) };
        }
        restore();
    }
}

/// The signals that end the live view (see the module docs).
pub struct SignalWatch {
    /// The first signal caught, 0 while none.
    first: Arc<AtomicI32>,
}

impl SignalWatch {
    /// Catch SIGINT, SIGTERM and SIGHUP from now on.
    pub fn start() -> io::Result<SignalWatch> {
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let first = Arc::new(AtomicI32::new(0));
        let seen = first.clone();
        std::thread::Builder::new()
            .name("cbtop-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let again = seen
                        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
                        .is_err();
                    if again || sig == SIGHUP {
                        restore();
                        std::process::exit(128 + sig);
                    }
                    std::thread::spawn(move || {
                        std::thread::sleep(SIGNAL_GRACE);
                        restore();
                        std::process::exit(128 + sig);
                    });
                }
            })?;
        Ok(SignalWatch { first })
    }

    /// The first signal caught within `timeout` from now (at once if one already was).
    /// SIGHUP never returns here: the watcher exits the process on it.
    pub fn wait_caught(&self, timeout: Duration) -> Option<i32> {
        let t0 = std::time::Instant::now();
        loop {
            if let Some(s) = self.caught() {
                return Some(s);
            }
            if t0.elapsed() >= timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The first signal caught, if any.
    pub fn caught(&self) -> Option<i32> {
        match self.first.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}
