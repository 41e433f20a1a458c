//! The UI's state machine: which view is shown, which brick is selected, the sort order, pause,
//! and the status line. Keys go in, `Action`s for the engine or the exporter come out; nothing
//! here touches a terminal, so every key binding is tested directly.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// The screens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Main,
    /// Enter: per-layer bars, histogram, cost model and kernels of the selected brick.
    Drill,
    Histogram,
    Budget,
    Roofline,
    Gpu,
    Assertions,
    /// `n`: the `--batch` sweep.
    Batch,
    /// `w`: the last step's kernels on the GPU clock.
    Timeline,
    Help,
}

impl View {
    pub const ALL: [View; 10] = [
        View::Main,
        View::Drill,
        View::Histogram,
        View::Budget,
        View::Roofline,
        View::Gpu,
        View::Assertions,
        View::Batch,
        View::Timeline,
        View::Help,
    ];

    pub fn name(self) -> &'static str {
        match self {
            View::Main => "main",
            View::Drill => "drill-down",
            View::Histogram => "histogram",
            View::Budget => "budget",
            View::Roofline => "roofline",
            View::Gpu => "gpu",
            View::Assertions => "assertions",
            View::Batch => "batch",
            View::Timeline => "timeline",
            View::Help => "help",
        }
    }
}

/// Brick row order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    Pipeline,
    Time,
    Gap,
    Score,
}

impl Sort {
    pub fn next(self) -> Sort {
        match self {
            Sort::Pipeline => Sort::Time,
            Sort::Time => Sort::Gap,
            Sort::Gap => Sort::Score,
            Sort::Score => Sort::Pipeline,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Sort::Pipeline => "pipeline order",
            Sort::Time => "time",
            Sort::Gap => "gap to budget",
            Sort::Score => "score (worst first)",
        }
    }
}

/// Rows a PgUp/PgDn moves the kernel timeline.
const TIMELINE_PAGE: usize = 20;

/// What a key asks of the world outside the UI state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    Pause(bool),
    Reset,
    Export,
}

#[derive(Clone, Debug, PartialEq)]
pub struct App {
    pub view: View,
    /// Position in the displayed (sorted) brick list.
    pub selected: usize,
    pub sort: Sort,
    pub paused: bool,
    pub status: String,
    /// First row of the kernel timeline on screen (the view clamps it).
    pub timeline_top: usize,
    /// Engines on screen (`--device all`: one per GPU) and the one the views other than the
    /// main view show; `Tab` moves to the next.
    pub panes: usize,
    pub pane: usize,
}

impl Default for App {
    fn default() -> Self {
        App {
            view: View::Main,
            selected: 0,
            sort: Sort::Pipeline,
            paused: false,
            status: String::new(),
            timeline_top: 0,
            panes: 1,
            pane: 0,
        }
    }
}

impl App {
    /// Open `v`, or go back to the main view when it is already open.
    fn toggle(&mut self, v: View) {
        self.view = if self.view == v { View::Main } else { v };
    }

    /// Apply a key; `rows` is the number of brick rows on display (for selection bounds).
    pub fn on_key(&mut self, key: KeyEvent, rows: usize) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if self.view == View::Timeline {
            // The arrows scroll the timeline here, not the brick selection.
            let t = &mut self.timeline_top;
            match key.code {
                KeyCode::Up | KeyCode::Char('k') => *t = t.saturating_sub(1),
                KeyCode::Down | KeyCode::Char('j') => *t = t.saturating_add(1),
                KeyCode::PageUp => *t = t.saturating_sub(TIMELINE_PAGE),
                KeyCode::PageDown => *t = t.saturating_add(TIMELINE_PAGE),
                KeyCode::Home => *t = 0,
                KeyCode::End => *t = usize::MAX / 2,
                _ => {}
            }
        }
        match key.code {
            KeyCode::Up
            | KeyCode::Down
            | KeyCode::Char('k')
            | KeyCode::Char('j')
            | KeyCode::Home
            | KeyCode::End
                if self.view == View::Timeline => {}
            KeyCode::Char('c') if ctrl => return Action::Quit,
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Esc => {
                if self.view == View::Main {
                    return Action::Quit;
                }
                self.view = View::Main;
            }
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                self.selected = (self.selected + 1).min(rows.saturating_sub(1));
            }
            KeyCode::Home => self.selected = 0,
            KeyCode::End => self.selected = rows.saturating_sub(1),
            KeyCode::Enter => self.toggle(View::Drill),
            KeyCode::Char('h') => self.toggle(View::Histogram),
            KeyCode::Char('b') => self.toggle(View::Budget),
            KeyCode::Char('m') => self.toggle(View::Roofline),
            KeyCode::Char('g') => self.toggle(View::Gpu),
            KeyCode::Char('a') => self.toggle(View::Assertions),
            KeyCode::Char('n') => self.toggle(View::Batch),
            KeyCode::Char('w') => self.toggle(View::Timeline),
            KeyCode::Char('?') => self.toggle(View::Help),
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                self.status = format!("sorted by {}", self.sort.name());
            }
            KeyCode::Char('p') => {
                self.paused = !self.paused;
                self.status = if self.paused { "paused" } else { "resumed" }.to_string();
                return Action::Pause(self.paused);
            }
            KeyCode::Char('r') => {
                self.status = "statistics reset".to_string();
                return Action::Reset;
            }
            KeyCode::Char('e') => return Action::Export,
            KeyCode::Tab if self.panes > 1 => self.pane = (self.pane + 1) % self.panes,
            _ => {}
        }
        Action::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn ch(c: char) -> KeyEvent {
        key(KeyCode::Char(c))
    }

    /// `Tab` walks the engines of `--device all` and wraps; with one engine it does nothing.
    #[test]
    fn tab_moves_to_the_next_gpu() {
        let mut a = App::default();
        a.on_key(key(KeyCode::Tab), 5);
        assert_eq!(a.pane, 0);
        a.panes = 2;
        a.on_key(key(KeyCode::Tab), 5);
        assert_eq!(a.pane, 1);
        a.on_key(key(KeyCode::Tab), 5);
        assert_eq!(a.pane, 0);
    }

    #[test]
    fn view_keys_toggle_and_esc_goes_back() {
        let mut a = App::default();
        for (k, v) in [
            (key(KeyCode::Enter), View::Drill),
            (ch('h'), View::Histogram),
            (ch('b'), View::Budget),
            (ch('m'), View::Roofline),
            (ch('g'), View::Gpu),
            (ch('a'), View::Assertions),
            (ch('n'), View::Batch),
            (ch('w'), View::Timeline),
            (ch('?'), View::Help),
        ] {
            assert_eq!(a.on_key(k, 5), Action::None);
            assert_eq!(a.view, v);
            a.on_key(k, 5);
            assert_eq!(a.view, View::Main, "{v:?} toggles back");
            a.on_key(k, 5);
            assert_eq!(a.on_key(key(KeyCode::Esc), 5), Action::None);
            assert_eq!(a.view, View::Main, "Esc leaves {v:?}");
        }
        assert_eq!(a.on_key(key(KeyCode::Esc), 5), Action::Quit);
    }

    #[test]
    fn the_timeline_scrolls_without_moving_the_selection() {
        let mut a = App::default();
        a.on_key(ch('w'), 5);
        for _ in 0..3 {
            a.on_key(ch('j'), 5);
        }
        a.on_key(key(KeyCode::PageDown), 5);
        a.on_key(key(KeyCode::Up), 5);
        assert_eq!((a.timeline_top, a.selected), (2 + TIMELINE_PAGE, 0));
        a.on_key(key(KeyCode::Home), 5);
        assert_eq!(a.timeline_top, 0);
        a.on_key(key(KeyCode::PageUp), 5);
        assert_eq!(a.timeline_top, 0);
        // Back on the main view the arrows select bricks again.
        a.on_key(ch('w'), 5);
        a.on_key(ch('j'), 5);
        assert_eq!((a.timeline_top, a.selected), (0, 1));
    }

    #[test]
    fn quit_keys() {
        let mut a = App::default();
        assert_eq!(a.on_key(ch('q'), 0), Action::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(a.on_key(ctrl_c, 0), Action::Quit);
        // a plain 'c' is not a quit
        assert_eq!(a.on_key(ch('c'), 0), Action::None);
    }

    #[test]
    fn selection_is_bounded() {
        let mut a = App::default();
        a.on_key(key(KeyCode::Up), 3);
        assert_eq!(a.selected, 0);
        for _ in 0..5 {
            a.on_key(ch('j'), 3);
        }
        assert_eq!(a.selected, 2);
        a.on_key(ch('k'), 3);
        assert_eq!(a.selected, 1);
        a.on_key(key(KeyCode::End), 3);
        assert_eq!(a.selected, 2);
    }

    #[test]
    fn pause_reset_sort_export() {
        let mut a = App::default();
        assert_eq!(a.on_key(ch('p'), 1), Action::Pause(true));
        assert!(a.paused && a.status == "paused");
        assert_eq!(a.on_key(ch('p'), 1), Action::Pause(false));
        assert_eq!(a.on_key(ch('r'), 1), Action::Reset);
        assert_eq!(a.on_key(ch('e'), 1), Action::Export);
        let sorts: Vec<Sort> = (0..4)
            .map(|_| {
                a.on_key(ch('s'), 1);
                a.sort
            })
            .collect();
        assert_eq!(sorts, [Sort::Time, Sort::Gap, Sort::Score, Sort::Pipeline]);
    }

    #[test]
    fn key_release_is_ignored() {
        let mut a = App::default();
        let mut k = ch('q');
        k.kind = KeyEventKind::Release;
        assert_eq!(a.on_key(k, 0), Action::None);
    }
}
