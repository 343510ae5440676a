//! Typed errors of the link model: invalid configurations and unparsable CLI strings.

/// What went wrong when building a link or parsing one of its parameters.
///
/// Every message names the offending field or input and says what is accepted instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinkError {
    /// A `LinkConfig` field holds a value the model cannot use.
    #[error("invalid link config: `{field}` {problem}")]
    InvalidConfig {
        /// Name of the offending field (as in the config file / serde key).
        field: &'static str,
        /// What is wrong and what is accepted.
        problem: String,
    },
    /// A command-line or config-file string could not be parsed.
    #[error("cannot parse {what} {input:?}: {problem}")]
    Parse {
        /// What was being parsed: "rate", "duration", "outage".
        what: &'static str,
        /// The input as given.
        input: String,
        /// What is wrong and which forms are accepted.
        problem: String,
    },
    /// A path was built with no hop.
    #[error("a path needs at least one link; got an empty list of hop configs")]
    EmptyPath,
}

impl LinkError {
    pub(crate) fn config(field: &'static str, problem: impl Into<String>) -> Self {
        LinkError::InvalidConfig {
            field,
            problem: problem.into(),
        }
    }

    pub(crate) fn parse(what: &'static str, input: &str, problem: impl Into<String>) -> Self {
        LinkError::Parse {
            what,
            input: input.to_owned(),
            problem: problem.into(),
        }
    }
}
