//! The profiler: drives the engine through a measured run (`session`, `run`), judges the
//! statistics (`analysis`), and describes the machine (`hardware`). Headless reports and the
//! live view are both built from what this module produces.

pub mod analysis;
pub mod batch;
pub mod hardware;
pub mod kernels;
pub mod model_source;
pub mod run;
pub mod session;
