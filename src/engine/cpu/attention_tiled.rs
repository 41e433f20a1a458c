//! The tiled attention path's rows and its scalar reference, shared by the dispatching
//! `attention` and the AVX2 kernel in `attention_x86`.

use crate::quant::float::dot_lanes;

/// One (query, head) pair's K and V rows for the tiled path: row `j` of K is
/// `k[j * stride + at..][..head_dim]`, likewise V, for `j < n`.
#[derive(Clone, Copy)]
pub struct TiledRows<'a> {
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub stride: usize,
    pub at: usize,
    pub n: usize,
}

/// The tiled path for one (query, head) one value at a time, the reference
/// (`attention_x86::tiled_head` is the same bits eight at a time): llama.cpp's f32 online
/// softmax over the rows, writing the unnormalised weighted sum of V into `o`; returns the
/// softmax denominator.
pub fn tiled_head_scalar(q: &[f32], rows: TiledRows, scale: f32, o: &mut [f32]) -> f32 {
    let hd = o.len();
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    o.fill(0.0);
    for j in 0..rows.n {
        let k = &rows.k[j * rows.stride + rows.at..][..hd];
        let s = dot_lanes(k.iter().copied(), q) * scale;
        if s > max {
            let ms = (max - s).exp();
            o.iter_mut().for_each(|a| *a *= ms);
            sum *= ms;
            max = s;
        }
        let vs = (s - max).exp();
        let v = &rows.v[j * rows.stride + rows.at..][..hd];
        for (a, v) in o.iter_mut().zip(v) {
            *a += v * vs;
        }
        sum += vs;
    }
    sum
}
