//! Bricks: the logical steps of a decode, their ids, the recorder the engine hands timed spans
//! to, statistics, the cost model, budgets and scores.
