//! What a refusal of the gate is as an `errno`.
//!
//! The kinds are the core's ([`vfs::ErrorKind`]); the numbers are what programs in a shell
//! expect for the same situation. Two rules shape it: a name the agent may not see is missing
//! (`ENOENT`, never `EACCES`, so a hidden name and an internal root answer as absent ones), and
//! a change where the rights or a name rule say read-only is `EROFS` (the view asks for the
//! rights before it writes, see `view.rs`, and the core marks such refusals,
//! `Error::is_read_only`: a new file a read-only glob matches), while other refusals of the
//! rights (a delete under `rwnd`, a move that would carry a protected file out) are `EACCES`.

use fuser::Errno;
use vfs::ErrorKind;

/// The `errno` for an error of the core.
pub(crate) fn of(error: &vfs::Error) -> Errno {
    match error.kind() {
        ErrorKind::UnknownRoot | ErrorKind::NotFound => Errno::ENOENT,
        ErrorKind::InvalidPath | ErrorKind::InvalidArgument | ErrorKind::EditMismatch => Errno::EINVAL,
        ErrorKind::AlreadyExists => Errno::EEXIST,
        // A place read-only to the agent (its rights, or a name rule): as a read-only file
        // system answers.
        ErrorKind::PermissionDenied if error.is_read_only() => Errno::EROFS,
        ErrorKind::PermissionDenied | ErrorKind::Escape => Errno::EACCES,
        ErrorKind::NotAFile => Errno::EISDIR,
        ErrorKind::NotADirectory => Errno::ENOTDIR,
        ErrorKind::Unsupported => Errno::EOPNOTSUPP,
        ErrorKind::SymlinkLoop => Errno::ELOOP,
        ErrorKind::Symlink => Errno::EPERM,
        // The file changed since it was opened (by a tool, another process or on the disk):
        // the write is not put over that change.
        ErrorKind::VersionMismatch | ErrorKind::Changed => Errno::ESTALE,
        ErrorKind::TooLarge => Errno::EFBIG,
        ErrorKind::DirectoryNotEmpty => Errno::ENOTEMPTY,
        ErrorKind::TimedOut => Errno::ETIMEDOUT,
        ErrorKind::Cancelled => Errno::EINTR,
        // `Io`, and any kind a later core adds.
        _ => Errno::EIO,
    }
}
