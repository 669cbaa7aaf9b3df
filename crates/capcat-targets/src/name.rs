//! The rule every front end applies to the names a user gives (tenant,
//! experiment, run, tensor names).

/// Why `value` cannot be what the user meant, or `None` when it can be:
/// empty (every capture needs a tenant, and an empty one is a variable that
/// was not set), or holding a control character (a pasted newline or
/// escape, which would also corrupt every line that prints it).
#[must_use]
pub fn name_refusal(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        Some("must not be empty")
    } else if value.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::name_refusal;

    #[test]
    fn empty_names_and_control_characters_are_refused_and_others_pass() {
        assert_eq!(name_refusal(""), Some("must not be empty"));
        assert_eq!(
            name_refusal("a\nb"),
            Some("must not contain control characters")
        );
        assert_eq!(
            name_refusal("\u{1b}[31m"),
            Some("must not contain control characters")
        );
        assert_eq!(name_refusal("acme/run-1 ü"), None);
    }
}
