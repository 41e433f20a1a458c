//! The kernels: CUDA C from `kernels/`, embedded in the binary, compiled once per machine with
//! NVRTC for the device's architecture and cached on disk as PTX under
//! `~/.cache/cbtop/cuda/<fnv64 of source and arch>.ptx` (or `$CBTOP_CACHE_DIR/cuda`), so later
//! runs skip the compile. A corrupt or stale cache entry is recompiled.
//!
//! Measuring aid: `CBTOP_KERNEL_DEFINES` (comma-separated `NAME` or `NAME=VALUE`, value `1`
//! when absent) selects kernel variants for A/B runs on a GPU machine without a rebuild;
//! the defaults are what ships. Each item becomes a `#define NAME VALUE` line before the
//! source, so the cache key (computed from that text) separates the variants. The knobs are
//! documented where the kernels read them: `CBTOP_PREFETCH` (kernels/common.cuh),
//! `ATTF_ORDERED_MAX` and `ATTF_PREFETCH` (kernels/attention_fast.cu), `MVO_F_UNROLL`
//! (kernels/matvec_float.cu), `MVF_UNROLL` (kernels/matvec_fast_float.cu), `MVQ_MIN_BLOCKS`,
//! `MVQ_UNIFORM` and `MVQ_UNROLL` (kernels/matvec_few.cu) and `AGM_WARPS`
//! (kernels/attention_group_mma.cu).

use std::path::PathBuf;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions, Ptx};

/// Every kernel file, in the order they are concatenated (common definitions first).
pub const SOURCES: &[(&str, &str)] = &[
    ("common.cuh", include_str!("../../../kernels/common.cuh")),
    (
        "act_quant.cu",
        include_str!("../../../kernels/act_quant.cu"),
    ),
    (
        "matvec_float.cu",
        include_str!("../../../kernels/matvec_float.cu"),
    ),
    (
        "matvec_legacy.cu",
        include_str!("../../../kernels/matvec_legacy.cu"),
    ),
    (
        "matvec_q2k_q3k.cu",
        include_str!("../../../kernels/matvec_q2k_q3k.cu"),
    ),
    (
        "matvec_q4k.cu",
        include_str!("../../../kernels/matvec_q4k.cu"),
    ),
    (
        "matvec_q6k.cu",
        include_str!("../../../kernels/matvec_q6k.cu"),
    ),
    (
        "matvec_fast_float.cu",
        include_str!("../../../kernels/matvec_fast_float.cu"),
    ),
    (
        "matvec_fast.cu",
        include_str!("../../../kernels/matvec_fast.cu"),
    ),
    (
        "matvec_few.cu",
        include_str!("../../../kernels/matvec_few.cu"),
    ),
    (
        "dequant32.cuh",
        include_str!("../../../kernels/dequant32.cuh"),
    ),
    ("gemm_f16.cu", include_str!("../../../kernels/gemm_f16.cu")),
    ("gemm_q.cu", include_str!("../../../kernels/gemm_q.cu")),
    (
        "gemm_qmma.cu",
        include_str!("../../../kernels/gemm_qmma.cu"),
    ),
    (
        "gemm_wgmma.cu",
        include_str!("../../../kernels/gemm_wgmma.cu"),
    ),
    (
        "attention_prefill.cu",
        include_str!("../../../kernels/attention_prefill.cu"),
    ),
    ("rmsnorm.cu", include_str!("../../../kernels/rmsnorm.cu")),
    ("qk_norm.cu", include_str!("../../../kernels/qk_norm.cu")),
    (
        "post_norm.cu",
        include_str!("../../../kernels/post_norm.cu"),
    ),
    ("rope.cu", include_str!("../../../kernels/rope.cu")),
    (
        "attention.cu",
        include_str!("../../../kernels/attention.cu"),
    ),
    (
        "attention_fast.cu",
        include_str!("../../../kernels/attention_fast.cu"),
    ),
    (
        "attention_group_mma.cu",
        include_str!("../../../kernels/attention_group_mma.cu"),
    ),
    ("swiglu.cu", include_str!("../../../kernels/swiglu.cu")),
    ("geglu.cu", include_str!("../../../kernels/geglu.cu")),
    ("softcap.cu", include_str!("../../../kernels/softcap.cu")),
    ("argmax.cu", include_str!("../../../kernels/argmax.cu")),
    ("peaks.cu", include_str!("../../../kernels/peaks.cu")),
    ("spin.cu", include_str!("../../../kernels/spin.cu")),
];

/// The whole translation unit NVRTC compiles. With `CBTOP_KERNEL_DIR` set (kernel work on a
/// machine with a GPU but no Rust toolchain), each file is read from that directory instead
/// of the embedded copy where it exists there; the cache key follows the text either way.
pub fn source() -> String {
    let dir = std::env::var_os("CBTOP_KERNEL_DIR").map(PathBuf::from);
    let mut s = String::new();
    for (name, text) in SOURCES {
        let text = dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join(name)).ok())
            .unwrap_or_else(|| text.to_string());
        s.push_str(&format!("// ---- {name}\n{text}\n"));
    }
    s
}

/// The `#define` lines for a `CBTOP_KERNEL_DEFINES` value: items separated by commas, each
/// `NAME` (defined as `1`) or `NAME=VALUE`, surrounding spaces ignored; a blank `spec`
/// defines nothing. A name is a C identifier of `[A-Za-z0-9_]`; a newline anywhere, or an
/// empty `VALUE` after `=`, is rejected (either would break or escape the `#define` line).
pub fn defines(spec: &str) -> Result<String, String> {
    const VAR: &str = "CBTOP_KERNEL_DEFINES";
    if spec.contains(['\n', '\r']) {
        return Err(format!("{VAR}: a newline is not allowed"));
    }
    let mut out = String::new();
    if spec.trim().is_empty() {
        return Ok(out);
    }
    for item in spec.split(',') {
        let item = item.trim();
        let (name, value) = match item.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim()),
            None => (item, "1"),
        };
        if name.is_empty() {
            return Err(format!("{VAR}: empty name in item {item:?}"));
        }
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            || name.as_bytes()[0].is_ascii_digit()
        {
            return Err(format!(
                "{VAR}: {name:?} is not a macro name (letters, digits and _, not starting \
                 with a digit)"
            ));
        }
        if value.is_empty() {
            return Err(format!(
                "{VAR}: empty value in item {item:?} (write {name} or {name}=VALUE)"
            ));
        }
        out.push_str(&format!("#define {name} {value}\n"));
    }
    Ok(out)
}

/// `defines` of the environment's `CBTOP_KERNEL_DEFINES` (nothing when it is unset).
fn env_defines() -> Result<String, String> {
    match std::env::var_os("CBTOP_KERNEL_DEFINES") {
        None => Ok(String::new()),
        Some(v) => defines(
            v.to_str()
                .ok_or("CBTOP_KERNEL_DEFINES: the value is not valid UTF-8")?,
        ),
    }
}

/// FNV-1a, 64 bit: a cache key that stays the same across Rust versions.
pub fn fnv64(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("CBTOP_CACHE_DIR") {
        return Some(PathBuf::from(d).join("cuda"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/cbtop/cuda"))
}

/// NVRTC wants a `&'static str` architecture name; the few real ones are listed.
fn static_arch(arch: &str) -> Option<&'static str> {
    const KNOWN: &[&str] = &[
        "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80",
        "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_101", "sm_103", "sm_120",
        "sm_121",
    ];
    KNOWN.iter().copied().find(|a| *a == arch)
}

/// The target NVRTC compiles for: a Hopper device's own (`sm_90a`), whose warpgroup
/// instructions (kernels/gemm_wgmma.cu) the portable `sm_90` lacks; else the device's.
fn target(arch: &str) -> &str {
    if arch == "sm_90" {
        "sm_90a"
    } else {
        arch
    }
}

/// What the compile options below change, for the cache key.
const OPTIONS: &str = "--std=c++17 --generate-line-info fmad=false";

/// Where a module came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Compiled,
    Cached,
}

/// Compile (or fetch from the cache) and load the kernels for `arch` (e.g. `sm_90`).
pub fn load(ctx: &Arc<CudaContext>, arch: &str) -> Result<(Arc<CudaModule>, Origin), String> {
    let arch = target(arch);
    // The defines go in front of the text the key is computed from, so each variant has its
    // own cache entry and never loads another's PTX.
    let src = env_defines()? + &source();
    let key = fnv64(&[src.as_bytes(), arch.as_bytes(), OPTIONS.as_bytes()]);
    let path = cache_dir().map(|d| d.join(format!("{key:016x}.ptx")));
    if let Some(p) = &path {
        if let Ok(text) = std::fs::read_to_string(p) {
            if let Ok(m) = ctx.load_module(Ptx::from_src(text)) {
                return Ok((m, Origin::Cached));
            }
        }
    }
    let opts = CompileOptions {
        arch: static_arch(arch),
        options: vec!["--std=c++17".into(), "--generate-line-info".into()],
        // Multiplies and adds fuse only where the kernels say fmaf: the CPU's rounding.
        fmad: Some(false),
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(&src, opts).map_err(|e| {
        format!(
            "NVRTC failed to compile the kernels for {arch}: {}",
            first_error(&e)
        )
    })?;
    if let Some(p) = &path {
        // The cache is an optimisation: failing to write it is not an error.
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(p, ptx.to_src());
    }
    let m = ctx
        .load_module(ptx)
        .map_err(|e| format!("loading the compiled kernels: {:?}", e.0))?;
    Ok((m, Origin::Compiled))
}

/// The first `error` line of NVRTC's log (the whole log is many lines).
fn first_error(e: &CompileError) -> String {
    match e {
        CompileError::CompileError { log, .. } => {
            let log = log.to_string_lossy();
            log.lines()
                .find(|l| l.contains("error"))
                .unwrap_or("compilation failed")
                .trim()
                .to_string()
        }
        other => format!("{other:?}"),
    }
}

/// Look up one kernel by name.
pub fn function(m: &Arc<CudaModule>, name: &str) -> Result<CudaFunction, String> {
    m.load_function(name)
        .map_err(|e| format!("kernel {name} missing from the module: {:?}", e.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_file_is_embedded_once() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cu") || n.ends_with(".cuh"))
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = SOURCES.iter().map(|(n, _)| n.to_string()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
    }

    #[test]
    fn cache_key_depends_on_source_and_arch() {
        let a = fnv64(&[b"x", b"sm_90"]);
        assert_ne!(a, fnv64(&[b"x", b"sm_89"]));
        assert_ne!(a, fnv64(&[b"y", b"sm_90"]));
        assert_eq!(a, fnv64(&[b"x", b"sm_90"]));
        assert!(static_arch("sm_90").is_some());
        assert_eq!(static_arch(target("sm_90")), Some("sm_90a"));
        assert_eq!(target("sm_89"), "sm_89");
    }

    #[test]
    fn kernel_defines_parse() {
        assert_eq!(defines(""), Ok(String::new()));
        assert_eq!(defines("  "), Ok(String::new()));
        assert_eq!(
            defines("CBTOP_PREFETCH, CBTOP_PREFETCH=2,X_1 = 0x10"),
            Ok(
                "#define CBTOP_PREFETCH 1\n#define CBTOP_PREFETCH 2\n#define X_1 0x10\n"
                    .to_string()
            )
        );
        for bad in [
            "A,,B",
            "A,",
            "=1",
            "A-B",
            "A B",
            "1A",
            "A=",
            "A\nB",
            "A=1\n#include x",
            "A=\r",
        ] {
            let e = defines(bad).unwrap_err();
            assert!(e.contains("CBTOP_KERNEL_DEFINES"), "{bad:?}: {e}");
        }
    }
}
