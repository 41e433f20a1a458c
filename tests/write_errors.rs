//! Writing the report or trace fails: `/dev/full`, a directory that does not exist, and a full
//! disk (simulated with a file-size limit, RLIMIT_FSIZE, on the child). Each is exit 3 with one
//! line naming the flag and the path, and never leaves a truncated file or a temporary behind:
//! an existing report is kept whole.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::stderr;

fn args(extra: &[&str]) -> Vec<String> {
    let m = common::fixture("conformance/models/conf-qwen2-Q4_K_M.gguf");
    let mut v: Vec<String> = [
        common::HEADLESS_CPU,
        &["--tokens", "2", "--warmup", "0", "--model-path"],
    ]
    .concat()
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(m.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn one_line_exit_3(o: &Output, names: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("cbtop: error: "), "{err}");
    assert!(err.contains(names), "names {names}: {err}");
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cbtop-write-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn entries(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn dev_full_is_exit_3_with_one_line() {
    for flag in ["--output", "--trace"] {
        let o = common::cbtop(
            &args(&[flag, "/dev/full"])
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        one_line_exit_3(&o, &format!("{flag} /dev/full"));
    }
}

#[test]
fn a_missing_directory_is_exit_3_and_creates_nothing() {
    let d = scratch("nodir");
    let target = d.join("no/such/dir/r.json");
    let t = target.display().to_string();
    let o = common::cbtop(
        &args(&["--output", &t])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    one_line_exit_3(&o, &t);
    assert!(entries(&d).is_empty(), "{:?}", entries(&d));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_full_disk_keeps_the_old_report_whole() {
    let d = scratch("full");
    let target = d.join("r.json");
    std::fs::write(&target, "the previous report").unwrap();
    let t = target.display().to_string();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cbtop"));
    cmd.args(args(&["--output", &t]));
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // Files may grow to 1000 bytes (the report is several KB): writes past it fail
            // with EFBIG as on a full disk, instead of raising SIGXFSZ.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: 1000,
                rlim_max: 1000,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().expect("run cbtop");
    one_line_exit_3(&o, &t);
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "the previous report",
        "the old report is untouched"
    );
    assert_eq!(entries(&d), ["r.json"], "no temporary left behind");
    let _ = std::fs::remove_dir_all(&d);
}
