//! cbtop-widgets: reusable ratatui widgets for cbtop, rendering plain data only (numbers,
//! strings, slices). They know nothing of engines, bricks or telemetry sources, so the live
//! view, tests and any other front end can draw the same pictures from hand-made data.

pub mod bars;
pub mod brick_table;
pub mod gauge;
pub mod histogram;
pub mod layer_bars;
pub mod sparkline_panel;
pub mod theme;

pub use bars::{budget_bar, hbar, BudgetBar};
pub use brick_table::{BrickLine, BrickTable};
pub use gauge::LabeledGauge;
pub use histogram::{regroup, LatencyHistogram};
pub use layer_bars::LayerBars;
pub use sparkline_panel::SparklinePanel;
pub use theme::Theme;
