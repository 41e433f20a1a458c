//! Colours and emphasis in one place, so NO_COLOR (https://no-color.org) is honoured by every
//! widget: with colour off, styles keep only modifiers (bold, reversed), never a colour.

use ratatui::style::{Color, Modifier, Style};

/// Whether to colour; every widget takes its styles from here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to a non-empty value.
    pub fn from_env() -> Theme {
        Theme::from_no_color(std::env::var_os("NO_COLOR").as_deref())
    }

    /// The rule behind [`Theme::from_env`], testable without touching the environment.
    pub fn from_no_color(no_color: Option<&std::ffi::OsStr>) -> Theme {
        Theme {
            color: no_color.is_none_or(|v| v.is_empty()),
        }
    }

    pub const PLAIN: Theme = Theme { color: false };
    pub const COLOR: Theme = Theme { color: true };

    /// `c` as foreground when colouring, else no style.
    pub fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    pub fn bold(self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }

    pub fn dim(self) -> Style {
        self.fg(Color::DarkGray)
    }

    pub fn title(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    /// The selected row.
    pub fn selected(self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    pub fn good(self) -> Style {
        self.fg(Color::Green)
    }

    pub fn warn(self) -> Style {
        self.fg(Color::Yellow)
    }

    pub fn bad(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    /// A letter grade's colour: A/B green, C yellow, D/F red.
    pub fn grade(self, g: &str) -> Style {
        match g {
            "A" | "B" => self.good(),
            "C" => self.warn(),
            _ => self.bad(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn no_color_rule() {
        assert!(Theme::from_no_color(None).color);
        assert!(Theme::from_no_color(Some(OsStr::new(""))).color);
        assert!(!Theme::from_no_color(Some(OsStr::new("1"))).color);
        assert_eq!(Theme::PLAIN.fg(Color::Red), Style::new());
    }
}
