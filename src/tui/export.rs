//! The `e` key: the current snapshot (brick rows, throughput, peaks, generated text) as a JSON
//! file in the current directory, named by the time so repeated exports never overwrite.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::snapshot::Snapshot;

/// Version of the exported layout.
pub const EXPORT_VERSION: u32 = 1;

#[derive(Serialize)]
struct Export<'a> {
    cbtop_snapshot_version: u32,
    cbtop_version: &'static str,
    timestamp_unix: u64,
    snapshot: &'a Snapshot,
}

/// Write `snap` to `dir/cbtop-snapshot-<unix>.json` (a `-N` suffix if that exists).
pub fn write(snap: &Snapshot, dir: &Path, unix: u64) -> std::io::Result<PathBuf> {
    let doc = Export {
        cbtop_snapshot_version: EXPORT_VERSION,
        cbtop_version: env!("CARGO_PKG_VERSION"),
        timestamp_unix: unix,
        snapshot: snap,
    };
    let json = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
    let mut path = dir.join(format!("cbtop-snapshot-{unix}.json"));
    let mut n = 1;
    while path.exists() {
        path = dir.join(format!("cbtop-snapshot-{unix}-{n}.json"));
        n += 1;
    }
    std::fs::write(&path, json)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::snapshot::BrickView;

    #[test]
    fn writes_rows_and_never_overwrites() {
        let dir = crate::scratch::dir("export");
        let snap = Snapshot {
            bricks: vec![BrickView {
                id: "qkv".into(),
                mean_us: 12.5,
                ..BrickView::default()
            }],
            ..Snapshot::default()
        };
        let a = write(&snap, &dir, 7).unwrap();
        let b = write(&snap, &dir, 7).unwrap();
        assert_ne!(a, b);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
        assert_eq!(v["snapshot"]["bricks"][0]["id"], "qkv");
        assert_eq!(v["snapshot"]["bricks"][0]["mean_us"], 12.5);
        assert_eq!(v["cbtop_snapshot_version"], 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
