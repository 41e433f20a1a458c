//! The `row_loops!` macro: a task's rows in one `target_feature` function around a kernel.

/// Row-loop wrappers around an x86 kernel, so a whole task's rows run inside one
/// `target_feature` function (the kernel inlined, its constants loaded once, no feature check
/// or type dispatch per row): `$one(rows, row_bytes, act, out)` sets `out[r]` to the kernel's
/// dot of row `r`; `$four(rows, row_bytes, [acts; 4], [outs; 4])` sets `outs[t][r]` with the
/// four-row kernel.
#[cfg(target_arch = "x86_64")]
macro_rules! row_loops {
    ($one:ident = $kernel:ident, $blk:ty) => {
        /// `out[r] = kernel(row r, a)` for every row of `rows`.
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C (`x86::available()`).
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $one(rows: &[u8], row_bytes: usize, a: &[$blk], out: &mut [f32]) {
            for (r, o) in rows.chunks_exact(row_bytes).zip(out) {
                *o = $kernel(r, a);
            }
        }
    };
    ($four:ident = $kernel:ident x4, $blk:ty) => {
        /// `out[t][r] = kernel(row r, a[t])` for every row of `rows` and the four tokens.
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C (`x86::available()`).
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $four(rows: &[u8], row_bytes: usize, a: [&[$blk]; 4], out: [&mut [f32]; 4]) {
            let [o0, o1, o2, o3] = out;
            for (r, row) in rows.chunks_exact(row_bytes).enumerate() {
                let v = $kernel(row, a);
                (o0[r], o1[r], o2[r], o3[r]) = (v[0], v[1], v[2], v[3]);
            }
        }
    };
}
