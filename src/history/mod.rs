//! Run history: `--db FILE` appends each headless report to a SQLite database (`db`), `cbtop
//! history FILE` plots tok/s and each brick's time over the runs (`plot`), and `cbtop compare
//! --db FILE` judges the newest run against the runs before it with a rank test that knows
//! the noise (`stats` for the test, `judge` for the verdict per brick).

pub mod db;
pub mod judge;
pub mod plot;
pub mod stats;

pub use db::{Db, DbError, RunRow};
