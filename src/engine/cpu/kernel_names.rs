//! The CPU's side of the drill-down below a brick: each brick's kernels named as the forward
//! pass chose them (a product's path and instruction set from `matmul`, an element-wise op's
//! own name), each with the tensor it read, interned in a catalogue. A recording step names
//! every kernel it runs, so the lookups are cached by what a name depends on and a name is
//! built once.

use std::collections::HashMap;

use super::matmul::{last_chosen, Chosen};
use crate::brick::{BrickId, Catalogue, KernelInfo, KernelSpan, Recorder};
use crate::model::weights::{tensor_label, Mat};

/// What a kernel's catalogue entry depends on: its name (a product's choice, or an op's fixed
/// name) and the file offset of the tensor it read.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Product(Chosen, usize),
    Op(&'static str, Option<usize>),
}

/// The kernels named so far and the lookups that found them.
#[derive(Default)]
pub struct KernelNames {
    catalogue: Catalogue,
    ids: HashMap<Key, u32>,
    chosen: Vec<Chosen>,
}

impl KernelNames {
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    fn id(&mut self, key: Key, info: impl FnOnce() -> KernelInfo) -> u32 {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.catalogue.intern(info());
        self.ids.insert(key, id);
        id
    }

    /// The products `brick` just ran in `layer` (the calling thread's last `matmuls` call),
    /// one per matrix of `reads`, in order.
    pub fn products(
        &mut self,
        rec: &mut Recorder,
        brick: BrickId,
        layer: Option<usize>,
        reads: &[&Mat],
    ) {
        if !rec.enabled() {
            return;
        }
        let mut chosen = std::mem::take(&mut self.chosen);
        last_chosen(&mut chosen);
        for (c, m) in chosen.iter().zip(reads) {
            let kernel = self.id(Key::Product(*c, m.offset()), || KernelInfo {
                name: c.name(),
                reads: Some(tensor_label(&m.name, m.ty)),
                launch: None,
                resources: None,
            });
            push(rec, brick, layer, kernel);
        }
        self.chosen = chosen;
    }

    /// An op `brick` just ran in `layer`, named `name`, reading `reads` where it reads a
    /// tensor.
    pub fn op(
        &mut self,
        rec: &mut Recorder,
        brick: BrickId,
        layer: Option<usize>,
        name: &'static str,
        reads: Option<&Mat>,
    ) {
        if !rec.enabled() {
            return;
        }
        let kernel = self.id(Key::Op(name, reads.map(Mat::offset)), || KernelInfo {
            name: name.to_string(),
            reads: reads.map(|m| tensor_label(&m.name, m.ty)),
            launch: None,
            resources: None,
        });
        push(rec, brick, layer, kernel);
    }
}

fn push(rec: &mut Recorder, brick: BrickId, layer: Option<usize>, kernel: u32) {
    rec.push_kernel(KernelSpan {
        brick: brick.into(),
        layer: layer.map(|l| l as u32),
        kernel,
        timed: None,
    });
}
