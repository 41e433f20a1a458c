//! The engine's measuring-aid switches that take a count from the environment
//! (docs/environment.md): one parser, so each refuses a bad value the same way, by name.

/// `var`'s value as a count of at least `min` (None: unset); anything else is an error naming
/// the variable, its value and `expected`.
pub(super) fn env_count(var: &str, min: usize, expected: &str) -> Result<Option<usize>, String> {
    match std::env::var(var) {
        Err(_) => Ok(None),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n >= min => Ok(Some(n)),
            _ => Err(format!("{var}={v:?}: expected {expected}")),
        },
    }
}

/// A kernel family's switch and batch range from the environment: None where `{switch}=0`
/// turns it off, else `{switch}_FROM` and `{switch}_UNTIL` (each a batch size of 2 or more)
/// or `defaults`; a value that is not such a number is refused by name.
pub(super) fn env_range(
    switch: &str,
    defaults: (usize, usize),
) -> Result<Option<(usize, usize)>, String> {
    if std::env::var(switch).is_ok_and(|v| v.trim() == "0") {
        return Ok(None);
    }
    let expected = "a batch size of 2 or more";
    let from = env_count(&format!("{switch}_FROM"), 2, expected)?;
    let until = env_count(&format!("{switch}_UNTIL"), 2, expected)?;
    Ok(Some((
        from.unwrap_or(defaults.0),
        until.unwrap_or(defaults.1),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_is_none_and_a_bad_value_is_refused_by_name() {
        assert_eq!(env_count("CBTOP_ENV_COUNT_TEST_UNSET", 2, "x"), Ok(None));
        // Variables no other code reads.
        std::env::set_var("CBTOP_ENV_COUNT_TEST_A", " 70 ");
        std::env::set_var("CBTOP_ENV_COUNT_TEST_B", "1");
        std::env::set_var("CBTOP_ENV_COUNT_TEST_C", "many");
        assert_eq!(env_count("CBTOP_ENV_COUNT_TEST_A", 64, "x"), Ok(Some(70)));
        assert_eq!(
            env_count("CBTOP_ENV_COUNT_TEST_B", 2, "a batch size of 2 or more"),
            Err("CBTOP_ENV_COUNT_TEST_B=\"1\": expected a batch size of 2 or more".into())
        );
        assert_eq!(
            env_count("CBTOP_ENV_COUNT_TEST_C", 0, "a number of positions"),
            Err("CBTOP_ENV_COUNT_TEST_C=\"many\": expected a number of positions".into())
        );
    }
}
