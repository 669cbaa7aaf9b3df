//! [`Password`]: a catalog password that never prints itself.

/// The catalog user's password. Its `Debug` and `Display` print
/// `<redacted>`, so a password inside options, errors or log fields shows
/// nowhere; only [`Password::expose`] hands out the text, and the HTTP
/// transport calls it once, to give the client its credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

/// What a [`Password`] prints instead of itself.
pub const REDACTED: &str = "<redacted>";

impl Password {
    /// Wraps `text`. A trailing newline (a password file written by `echo`)
    /// is kept: stripping it is the reader's decision (see the CLI), since a
    /// password may end in whitespace.
    #[must_use]
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The password's text, for the one place that sends it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl std::fmt::Display for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl From<String> for Password {
    fn from(text: String) -> Self {
        Self(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_prints_redacted_everywhere() {
        let password = Password::new("hunter2-s3cr3t");
        for shown in [
            format!("{password}"),
            format!("{password:?}"),
            format!("{:?}", Some(password.clone())),
            format!("{password:#?}"),
        ] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains(REDACTED), "{shown}");
        }
        assert_eq!(password.expose(), "hunter2-s3cr3t");
    }
}
