//! Writing the files a command produces (`--output`, `--trace`) so that a failure never leaves
//! a truncated file behind that a later step could take for a report: a regular file is
//! written to a temporary file in the same directory, synced, then renamed over the target; a
//! device or pipe (`/dev/stdout`, `/dev/full`, a FIFO) is written in place, since there is no
//! file to replace. Any failure is exit 3 with one line naming the flag and the path.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::error::CliError;

/// Write what `write` produces to `path`, as described above. `flag` names it in errors.
pub fn write_file(
    flag: &str,
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), CliError> {
    let fail = |e: io::Error| CliError::runtime(format!("{flag} {}: {e}", path.display()));
    match fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            if m.is_dir() {
                return Err(CliError::runtime(format!(
                    "{flag} {}: is a directory",
                    path.display()
                )));
            }
            let f = OpenOptions::new().write(true).open(path).map_err(fail)?;
            let mut w = BufWriter::new(f);
            write(&mut w).and_then(|_| w.flush()).map_err(fail)
        }
        existing => {
            // Through a symbolic link: replace the file it points to, not the link.
            let target = match &existing {
                Ok(_) => fs::canonicalize(path).map_err(fail)?,
                Err(_) => path.to_path_buf(),
            };
            let tmp = temp_path(&target);
            let result =
                write_temp(&tmp, existing.ok(), write).and_then(|_| fs::rename(&tmp, &target));
            if result.is_err() {
                let _ = fs::remove_file(&tmp);
            }
            result.map_err(fail)
        }
    }
}

/// `.NAME.PID.tmp` beside `target`.
fn temp_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let tmp = format!(".{name}.{}.tmp", std::process::id());
    match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.join(tmp),
        _ => PathBuf::from(tmp),
    }
}

fn write_temp(
    tmp: &Path,
    replaces: Option<fs::Metadata>,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let f = OpenOptions::new().write(true).create_new(true).open(tmp)?;
    if let Some(m) = replaces {
        f.set_permissions(m.permissions())?;
    }
    let mut w = BufWriter::new(f);
    write(&mut w)?;
    let f: File = w.into_inner().map_err(|e| e.into_error())?;
    // On a full disk some file systems report the failure only when the data is flushed.
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_a_file_whole_and_leaves_no_temporary() {
        let dir = crate::scratch::dir("output");
        let p = dir.join("r.json");
        fs::write(&p, "old").unwrap();
        write_file("--output", &p, |w| w.write_all(b"new")).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        let e = write_file("--output", &p, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(e.code, super::super::error::exit::RUNTIME);
        assert!(e.message.contains("r.json") && e.message.contains("disk full"));
        assert_eq!(
            fs::read_to_string(&p).unwrap(),
            "new",
            "old file kept whole"
        );
        let names: Vec<_> = fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no temporary left: {names:?}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
