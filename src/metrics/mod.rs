//! Prometheus / OpenMetrics export: what a run measured, as metric families a fleet's
//! Prometheus scrapes (`--metrics-listen ADDR`) or a pushgateway or textfile collector reads
//! (`--format openmetrics`). `frame` is the plain data (filled from the profiler's statistics,
//! the live view's snapshot or a finished report), `openmetrics` writes it as text, `server`
//! serves the latest frame over HTTP.

pub mod frame;
pub mod openmetrics;
pub mod server;

pub use frame::{Frame, Labels};
pub use server::{MetricsServer, Shared};
