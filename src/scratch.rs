//! Unit tests' scratch directories (test builds only): the unit tests that write files each
//! take a directory of their own under the system's temp directory, named for the test's tag
//! and this process, so parallel tests and concurrent runs never share one.

use std::path::PathBuf;

/// `<temp>/cbtop-<tag>-<pid>`, created if missing.
pub fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cbtop-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
