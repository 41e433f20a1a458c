//! RoPE's cos/sin tables on the device: the CPU engine's own values for every position below
//! the capacity, one table per distinct RoPE of the model's layers.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::weights::upload_vec;
use crate::engine::cpu::ops::rope_table_scaled;
use crate::engine::error::EngineError;
use crate::model::config::RopeParams;
use crate::model::Config;

/// The RoPE table kernels/rope.cu reads, for positions `0..positions`: per position the CPU
/// engine's `n_rot / 2` (cos, sin) pairs, flattened.
pub(super) fn rope_rows(positions: usize, n_rot: usize, base: f32, freq_scale: f32) -> Vec<f32> {
    (0..positions)
        .flat_map(|pos| rope_table_scaled(pos, n_rot, base, freq_scale))
        .flat_map(|(cos, sin)| [cos, sin])
        .collect()
}

/// The RoPE tables on the device (`rope_rows` for every position below the capacity): one per
/// distinct RoPE of the model's layers (gemma3's sliding layers rotate with another base than
/// its global ones), and which one each layer takes.
pub(super) struct RopeTables {
    tables: Vec<CudaSlice<f32>>,
    of_layer: Vec<usize>,
}

impl RopeTables {
    /// The tables of `c`'s layers for `cap` positions.
    pub(super) fn upload(
        s: &Arc<CudaStream>,
        c: &Config,
        cap: usize,
    ) -> Result<RopeTables, EngineError> {
        let mut seen: Vec<(u32, u32)> = Vec::new();
        let mut tables = Vec::new();
        let mut of_layer = Vec::with_capacity(c.n_layers);
        for l in 0..c.n_layers {
            let RopeParams { base, freq_scale } = c.layer_rope(l);
            let key = (base.to_bits(), freq_scale.to_bits());
            let i = match seen.iter().position(|k| *k == key) {
                Some(i) => i,
                None => {
                    let rows = rope_rows(cap, c.rope_dims, base, freq_scale);
                    tables.push(upload_vec(s, &rows)?);
                    seen.push(key);
                    seen.len() - 1
                }
            };
            of_layer.push(i);
        }
        Ok(RopeTables { tables, of_layer })
    }

    /// The table layer `l` rotates with.
    pub(super) fn layer(&self, l: usize) -> &CudaSlice<f32> {
        &self.tables[self.of_layer[l]]
    }
}
