//! The key/value cache: per layer, per position, the rotated keys and the values, stored as
//! f16 like llama.cpp's default cache so attention sees the same rounding.

use half::f16;
use half::slice::HalfFloatSliceExt;

/// K and V for every layer, `capacity` positions each, `kv_dim` values per position.
pub struct KvCache {
    k: Vec<Vec<f16>>,
    v: Vec<Vec<f16>>,
    kv_dim: usize,
    capacity: usize,
    len: usize,
}

impl KvCache {
    pub fn new(n_layers: usize, kv_dim: usize, capacity: usize) -> KvCache {
        KvCache {
            k: (0..n_layers)
                .map(|_| vec![f16::ZERO; kv_dim * capacity])
                .collect(),
            v: (0..n_layers)
                .map(|_| vec![f16::ZERO; kv_dim * capacity])
                .collect(),
            kv_dim,
            capacity,
            len: 0,
        }
    }

    /// Positions filled so far (the next token's position).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Forget every position.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Mark `n` more positions as filled (after every layer stored them).
    pub fn advance(&mut self, n: usize) {
        self.len += n;
        debug_assert!(self.len <= self.capacity);
    }

    /// Store key and value rows for `pos` in `layer`.
    pub fn store(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let range = pos * self.kv_dim..(pos + 1) * self.kv_dim;
        // The slice conversion: F16C eight at a time where the CPU has it, the same
        // round-to-nearest-even as `f16::from_f32`, which checks the CPU's features per value.
        self.k[layer][range.clone()].convert_from_f32_slice(&k[..self.kv_dim]);
        self.v[layer][range].convert_from_f32_slice(&v[..self.kv_dim]);
    }

    /// Keys of `layer`, positions `0..n`, row-major `[pos][kv_dim]`.
    pub fn keys(&self, layer: usize, n: usize) -> &[f16] {
        &self.k[layer][..n * self.kv_dim]
    }

    /// Values of `layer`, positions `0..n`, row-major `[pos][kv_dim]`.
    pub fn values(&self, layer: usize, n: usize) -> &[f16] {
        &self.v[layer][..n * self.kv_dim]
    }

    /// Bytes held by the cache.
    pub fn bytes(&self) -> usize {
        2 * self.k.len() * self.kv_dim * self.capacity * 2
    }
}
