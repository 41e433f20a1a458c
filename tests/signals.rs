//! SIGINT and SIGTERM during `cbtop --headless`: the real binary on the embedded default (CPU,
//! one thread, thousands of steps asked for), signalled mid-run. It must stop at a step
//! boundary, write the report of the steps measured so far with status INTERRUPTED, no gate
//! evaluated and the measured count next to the requested one, and exit 130 / 143. A second
//! signal exits at once, leaving either no report or a whole one.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const TOKENS: u64 = 3000;

struct Run {
    child: Child,
    dir: PathBuf,
}

impl Run {
    fn start(tag: &str) -> Run {
        let dir = std::env::temp_dir().join(format!("cbtop-sig-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let tokens = TOKENS.to_string();
        let child = Command::new(env!("CARGO_BIN_EXE_cbtop"))
            .args(common::HEADLESS_CPU)
            .args(["--warmup", "0", "--prefill", "4", "--tokens", &tokens])
            // A gate that would fail: an interrupted run must not evaluate it.
            .args(["--min-tok-s", "1e12", "--output"])
            .arg(dir.join("r.json"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn cbtop");
        Run { child, dir }
    }

    fn signal(&self, sig: i32) {
        let pid = self.child.id() as libc::pid_t;
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
    }

    /// Exit code and stderr, within a minute.
    fn wait(mut self) -> (Option<i32>, String, PathBuf) {
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(60) {
                let _ = self.child.kill();
                panic!("cbtop did not stop within a minute of the signal");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        use std::io::Read;
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status.code(), err, self.dir)
    }
}

/// Long enough after the start that decoding is under way (the embedded default builds in
/// about a second; a step takes tens of milliseconds), far shorter than the whole run.
const MEASURING: Duration = Duration::from_secs(5);

fn interrupted(sig: i32, code: i32, name: &str) {
    let run = Run::start(name);
    std::thread::sleep(MEASURING);
    run.signal(sig);
    let (got, err, dir) = run.wait();
    assert_eq!(got, Some(code), "exit code after {name}; stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line on stderr: {err}");
    assert!(
        err.contains(&format!("interrupted by {name}")),
        "stderr: {err}"
    );
    let text = std::fs::read_to_string(dir.join("r.json")).expect("the report was written");
    let r: Value = serde_json::from_str(&text).expect("a whole JSON report");
    let schema = common::cbtop(&["schema"]);
    let schema: Value = serde_json::from_slice(&schema.stdout).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&r).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "report does not match schema: {errors:?}"
    );
    assert_eq!(r["status"], "INTERRUPTED");
    assert_eq!(r["gates"], serde_json::json!([]), "no gate evaluated");
    assert_eq!(r["config"]["tokens"], TOKENS, "the requested count");
    let measured = r["config"]["measured_tokens"].as_u64().unwrap();
    assert!(
        measured > 0 && measured < TOKENS,
        "measured {measured} of {TOKENS} steps"
    );
    for b in r["bricks"].as_array().unwrap() {
        assert_eq!(
            b["count"], measured,
            "brick {} counts the measured steps",
            b["id"]
        );
    }
    assert!(err.contains(&format!("{measured} of {TOKENS}")), "{err}");
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(leftovers.len(), 1, "only the report: {leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigint_writes_the_measured_steps_and_exits_130() {
    interrupted(libc::SIGINT, 130, "SIGINT");
}

#[test]
fn sigterm_writes_the_measured_steps_and_exits_143() {
    interrupted(libc::SIGTERM, 143, "SIGTERM");
}

#[test]
fn a_second_signal_exits_at_once() {
    let run = Run::start("twice");
    std::thread::sleep(MEASURING);
    run.signal(libc::SIGTERM);
    run.signal(libc::SIGTERM);
    let (got, err, dir) = run.wait();
    assert_eq!(got, Some(143), "stderr: {err}");
    // Whichever came first, the report or the exit: never a half-written file.
    if let Ok(text) = std::fs::read_to_string(dir.join("r.json")) {
        let r: Value = serde_json::from_str(&text).expect("a whole JSON report");
        assert_eq!(r["status"], "INTERRUPTED");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
