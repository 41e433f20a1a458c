//! What every view renders from: the snapshot, the telemetry, the app state and the theme, so
//! views are pure functions of plain data.

use crate::tui::app::App;
use crate::tui::snapshot::{Snapshot, TelemetryView};
use cbtop_widgets::Theme;

/// Everything a frame is drawn from.
pub struct Ui<'a> {
    pub snap: &'a Snapshot,
    pub tele: &'a TelemetryView,
    pub app: &'a App,
    pub theme: Theme,
}
