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

/// The distinct RoPEs of `c`'s layers in the order layers first take them, and the index of
/// each layer's.
fn distinct_ropes(c: &Config) -> (Vec<RopeParams>, Vec<usize>) {
    let mut ropes: Vec<RopeParams> = Vec::new();
    let of_layer = (0..c.n_layers)
        .map(|l| {
            let r = c.layer_rope(l);
            let same = |p: &RopeParams| {
                (p.base.to_bits(), p.freq_scale.to_bits())
                    == (r.base.to_bits(), r.freq_scale.to_bits())
            };
            ropes.iter().position(same).unwrap_or_else(|| {
                ropes.push(r);
                ropes.len() - 1
            })
        })
        .collect();
    (ropes, of_layer)
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
        let (ropes, of_layer) = distinct_ropes(c);
        let tables = ropes
            .iter()
            .map(|r| upload_vec(s, &rope_rows(cap, c.rope_dims, r.base, r.freq_scale)))
            .collect::<Result<_, _>>()?;
        Ok(RopeTables { tables, of_layer })
    }

    /// The table layer `l` rotates with.
    pub(super) fn layer(&self, l: usize) -> &CudaSlice<f32> {
        &self.tables[self.of_layer[l]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::profile::Profile;
    use crate::synth::{self, QuantMix};

    /// The gemma3 conformance shape (tiny-gemma3)'s configuration (seven layers, layer 5 global).
    fn tiny_gemma3() -> Config {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/conformance/shapes/tiny-gemma3.toml"
        );
        let shape = Profile::shape(path).unwrap();
        let bytes = synth::build(&shape, QuantMix::from_name("q8_0").unwrap(), 0);
        Model::from_bytes("tiny-gemma3.gguf", bytes).unwrap().config
    }

    #[test]
    fn gemma3_global_and_sliding_layers_take_their_own_tables() {
        let c = tiny_gemma3();
        let (ropes, of_layer) = distinct_ropes(&c);
        assert_eq!(ropes.len(), 2);
        assert_eq!(of_layer, [0, 0, 0, 0, 0, 1, 0]);
        assert_eq!((ropes[0].base, ropes[0].freq_scale), (10000.0, 1.0));
        assert_eq!((ropes[1].base, ropes[1].freq_scale), (1_000_000.0, 0.125));
    }
}
