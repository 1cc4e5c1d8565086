//! The one error type of the crate: why a check could not run at all.
//!
//! A check that runs reports what it finds as findings; this type is for the other outcome, when
//! there is nothing to judge (a directory cannot be read, `cargo metadata` fails or answers
//! something unreadable). The checks are developer tooling, so the messages name the files they
//! could not read; the remedy, when there is one, is a separate [`CheckError::hint`], printed as
//! its own `hint:` line.

use std::fmt;
use std::path::PathBuf;

/// A check could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// A file or directory of the workspace could not be read.
    Read {
        /// What could not be read.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `cargo` could not be started.
    CargoNotRun {
        /// Why.
        source: std::io::Error,
    },
    /// `cargo metadata` ran and failed.
    CargoFailed {
        /// The manifest it was asked about, relative to the checked directory.
        manifest: String,
        /// Cargo's own explanation (its standard error, trimmed).
        stderr: String,
    },
    /// `cargo metadata` answered something this check cannot read.
    Metadata {
        /// The manifest it was asked about, relative to the checked directory.
        manifest: String,
        /// What is missing or malformed.
        problem: String,
    },
}

impl CheckError {
    /// How to get past the error, when there is a known way.
    #[must_use]
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::CargoFailed { manifest, .. } => Some(format!(
                "the check runs offline (`--locked --offline`): fetch the locked dependencies once with `cargo fetch --locked --manifest-path {manifest}`, or bring the lock file up to date"
            )),
            Self::CargoNotRun { .. } => {
                Some("run the check through `cargo run -p vfs-compliance`, or put `cargo` on `PATH`".to_owned())
            }
            Self::Read { .. } | Self::Metadata { .. } => None,
        }
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read { path, source } => write!(formatter, "cannot read `{}`: {source}", path.display()),
            Self::CargoNotRun { source } => write!(formatter, "cannot run `cargo metadata`: {source}"),
            Self::CargoFailed { manifest, stderr } => {
                write!(formatter, "`cargo metadata` failed for `{manifest}`: {stderr}")
            }
            Self::Metadata { manifest, problem } => {
                write!(formatter, "cannot read what `cargo metadata` said about `{manifest}`: {problem}")
            }
        }
    }
}

impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Read { source, .. } | Self::CargoNotRun { source } => Some(source),
            Self::CargoFailed { .. } | Self::Metadata { .. } => None,
        }
    }
}
