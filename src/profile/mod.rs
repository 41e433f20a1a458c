//! Profiles (profiles/*.toml): model shapes for `synth` and per-brick budgets.
