//! cbtop-widgets: reusable ratatui widgets for cbtop, rendering plain data only.
