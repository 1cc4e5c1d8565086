//! The operator's own host paths: the files and directories a launch names outside every mount
//! (a settings file, a crew file, a token file, the exchange log's and the journal's
//! directories), reached by path with the ambient authority of the process (ADR 0010).
//!
//! Every function here takes an [`AmbientAuthority`], a token that [`ambient_authority`] makes
//! and nothing else can: the binary mints it once, in `main`, and hands it to the launch, so
//! every place that opens a host path on the operator's behalf says so in its signature, and
//! the static check of `vfs-compliance` refuses a mint anywhere else (tests excepted). This is
//! cap-std's `ambient_authority()`, for the few opens that cannot go through a mount's handle
//! because they decide what to mount.
//!
//! What agents reach never passes through here: their paths are resolved beneath a mount's
//! handle (`storage::local`).

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

/// The authority to open host paths by name, as the operator gave them. Zero-sized; made only
/// by [`ambient_authority`], and required by every function that opens a host path for the
/// operator: the launch's mount sources, settings, crew and token files, the exchange log's and
/// the journal's directories.
#[derive(Debug, Clone, Copy)]
pub struct AmbientAuthority(());

/// Mints the [`AmbientAuthority`]. Called once, in the binary's `main` (and by tests); the
/// static check of `vfs-compliance` (rule `ambient-authority`) refuses a call anywhere else.
#[must_use]
pub fn ambient_authority() -> AmbientAuthority {
    AmbientAuthority(())
}

/// What lies at a host path, links followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKind {
    /// A directory.
    Directory,
    /// Anything else: a file, a device, a socket.
    Other,
}

/// Why a host path could not be read, probed or created. Its text is one clause for the
/// operator, put after the path by the caller (`cannot read settings file `x`: no such file`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostPathError {
    /// Nothing at the path, and its directory does not exist either (or is not a directory).
    #[error("no such file or directory")]
    Missing,
    /// The directory exists, the file in it does not.
    #[error("no such file")]
    NoFile,
    /// A directory where a file was wanted.
    #[error("it is a directory, not a file")]
    Directory,
    /// Something other than a directory where a directory was wanted.
    #[error("it is not a directory")]
    NotADirectory,
    /// A device, a FIFO or a socket where a regular file was wanted.
    #[error("it is not a regular file")]
    NotAFile,
    /// A file larger than the caller reads.
    #[error("the file is larger than {limit} bytes")]
    TooLarge {
        /// The most the caller reads.
        limit: u64,
    },
    /// A file with NUL bytes where text was wanted.
    #[error("it looks binary (it contains NUL bytes), not text")]
    Binary,
    /// A file that is not UTF-8 where text was wanted.
    #[error("it is not UTF-8 text")]
    NotText,
    /// A link that leads out of the directory the file was to be read beneath.
    #[error("it is a link that leads out of its directory")]
    Escapes,
    /// A link, where the system cannot tell where a link leads without following it (no
    /// `openat2`, or a filter refuses it): no link is followed there.
    #[error("it is a link, and links are not followed on this system; name the file itself")]
    Link,
    /// No component of a directory to create exists.
    #[error("no part of the path exists")]
    NothingExists,
    /// Another refusal of the operating system.
    #[error("{0}")]
    Io(#[source] io::Error),
}

fn os(errno: Errno) -> HostPathError {
    HostPathError::Io(io::Error::from(errno))
}

/// The canonical form of `path`: absolute, every link followed, no `.` or `..`.
///
/// # Errors
/// Nothing is there, or the system refuses to look.
pub fn canonical(path: &Path, _authority: AmbientAuthority) -> Result<std::path::PathBuf, HostPathError> {
    #[expect(clippy::disallowed_methods, reason = "the operator's own path, resolved with the ambient authority")]
    std::fs::canonicalize(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => HostPathError::Missing,
        _ => HostPathError::Io(error),
    })
}

/// What lies at `path` (links followed), or [`HostPathError::Missing`].
///
/// # Errors
/// Nothing is there, or the system refuses to look.
pub fn probe(path: &Path, _authority: AmbientAuthority) -> Result<HostKind, HostPathError> {
    match rustix::fs::stat(path) {
        Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Directory => Ok(HostKind::Directory),
        Ok(_) => Ok(HostKind::Other),
        Err(Errno::NOENT | Errno::NOTDIR) => Err(HostPathError::Missing),
        Err(errno) => Err(os(errno)),
    }
}

/// Reads the text file at `path` (links followed), refusing more than `limit` bytes, a
/// directory, a special file (opened without blocking), NUL bytes and anything not UTF-8.
///
/// # Errors
/// The file is missing, too large, not a regular file, not text, or the system refuses it.
pub fn read_text_file(path: &Path, limit: u64, authority: AmbientAuthority) -> Result<String, HostPathError> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd: OwnedFd = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => {
            let directory = path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
            return Err(match probe(directory, authority) {
                Ok(HostKind::Directory) => HostPathError::NoFile,
                _ => HostPathError::Missing,
            });
        }
        Err(Errno::NOTDIR) => return Err(HostPathError::Missing),
        Err(errno) => return Err(os(errno)),
    };
    read_open(&fd, limit)
}

/// Reads the text file `name` beneath the directory `directory` as a mount of that directory
/// would show it: links followed only while they stay beneath it (`openat2` with
/// `RESOLVE_BENEATH`; where the kernel lacks it, no link at all). A crew's definition is read so,
/// exactly where its agents see it at `/crew`.
///
/// # Errors
/// As [`read_text_file`], and [`HostPathError::Escapes`] for a link out of the directory.
pub fn read_text_file_beneath(
    directory: &Path,
    name: &str,
    limit: u64,
    _authority: AmbientAuthority,
) -> Result<String, HostPathError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let handle = match rustix::fs::open(directory, flags, Mode::empty()) {
        Ok(handle) => handle,
        Err(Errno::NOENT) => return Err(HostPathError::Missing),
        Err(Errno::NOTDIR) => return Err(HostPathError::NotADirectory),
        Err(errno) => return Err(os(errno)),
    };
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    match open_beneath(&handle, name, flags) {
        Ok(fd) => read_open(&fd, limit),
        Err((Errno::NOENT, _)) => Err(HostPathError::NoFile),
        Err((Errno::LOOP, Beneath::NoFollow)) => Err(HostPathError::Link),
        Err((Errno::XDEV | Errno::LOOP, _)) => Err(HostPathError::Escapes),
        Err((errno, _)) => Err(os(errno)),
    }
}

/// How [`open_beneath`] opened, or failed to: following links that stay beneath the
/// directory, or following none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Beneath {
    Resolved,
    NoFollow,
}

/// Opens `name` beneath `directory`, following only links that stay beneath it. Where
/// `openat2` is missing or refused for this call (an old kernel, a seccomp filter or an LSM
/// answering `EPERM`, `EACCES` or `EINVAL`, as the local store also meets them), no link is
/// followed at all.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn open_beneath(directory: &OwnedFd, name: &str, flags: OFlags) -> Result<OwnedFd, (Errno, Beneath)> {
    let resolve = rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(directory, name, flags, Mode::empty(), resolve) {
        Err(Errno::NOSYS | Errno::PERM | Errno::ACCESS | Errno::INVAL) => {
            rustix::fs::openat(directory, name, flags | OFlags::NOFOLLOW, Mode::empty())
                .map_err(|errno| (errno, Beneath::NoFollow))
        }
        other => other.map_err(|errno| (errno, Beneath::Resolved)),
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn open_beneath(directory: &OwnedFd, name: &str, flags: OFlags) -> Result<OwnedFd, (Errno, Beneath)> {
    rustix::fs::openat(directory, name, flags | OFlags::NOFOLLOW, Mode::empty())
        .map_err(|errno| (errno, Beneath::NoFollow))
}

/// The text of an opened file: a regular file of at most `limit` bytes, without NUL, UTF-8.
fn read_open(fd: &OwnedFd, limit: u64) -> Result<String, HostPathError> {
    let stat = rustix::fs::fstat(fd).map_err(os)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(HostPathError::Directory),
        _ => return Err(HostPathError::NotAFile),
    }
    let mut bytes = Vec::new();
    let mut chunk = [0_u8; 8192];
    loop {
        let read = match rustix::io::read(fd, &mut chunk) {
            Ok(0) => break,
            Ok(read) => read,
            Err(Errno::INTR) => continue,
            Err(errno) => return Err(os(errno)),
        };
        bytes.extend_from_slice(&chunk[..read]);
        if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
            return Err(HostPathError::TooLarge { limit });
        }
    }
    if bytes.contains(&0) {
        return Err(HostPathError::Binary);
    }
    String::from_utf8(bytes).map_err(|_| HostPathError::NotText)
}

/// Creates the directory `path` and its missing parents (links followed in the part that
/// exists), like `mkdir -p`; a directory already there is left as it is. Returns the
/// directories it made, parents first (for [`remove_made_directories`], should what they
/// were made for be refused).
///
/// # Errors
/// A part of the path that exists is not a directory, no part exists, or the system refuses.
pub fn create_directories(path: &Path, authority: AmbientAuthority) -> Result<Vec<PathBuf>, HostPathError> {
    // A parent found there may be removed before its child is made (another launch, refused,
    // removing the directories it made: `remove_made_directories`): looked for again.
    let mut made = Vec::new();
    for _ in 0..3 {
        match create_missing(path, authority, &mut made) {
            // A parent gone between the look and the `mkdir`.
            Err(HostPathError::Missing) => {}
            done => return done.map(|()| made),
        }
    }
    create_missing(path, authority, &mut made).map(|()| made)
}

/// One pass of [`create_directories`], adding each directory it makes to `made`.
fn create_missing(path: &Path, authority: AmbientAuthority, made: &mut Vec<PathBuf>) -> Result<(), HostPathError> {
    let mut missing = Vec::new();
    let mut ancestor = path;
    loop {
        match probe(ancestor, authority) {
            Ok(HostKind::Directory) => break,
            Ok(HostKind::Other) => return Err(HostPathError::NotADirectory),
            Err(HostPathError::Missing) => {
                let (Some(parent), Some(_)) = (ancestor.parent(), ancestor.file_name()) else {
                    return Err(HostPathError::NothingExists);
                };
                missing.push(ancestor);
                ancestor = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
            }
            Err(other) => return Err(other),
        }
    }
    for directory in missing.into_iter().rev() {
        match rustix::fs::mkdir(directory, Mode::from_raw_mode(0o777)) {
            Ok(()) => made.push(directory.to_path_buf()),
            // Made meanwhile by someone else: a directory is what was asked for.
            Err(Errno::EXIST) if probe(directory, authority).ok() == Some(HostKind::Directory) => {}
            Err(Errno::EXIST) => return Err(HostPathError::NotADirectory),
            Err(Errno::NOENT) => return Err(HostPathError::Missing),
            Err(errno) => return Err(os(errno)),
        }
    }
    Ok(())
}

/// Removes the directories [`create_directories`] made (`made`, parents first), deepest
/// first, each only while it is empty: a refused launch leaves nothing of its own behind,
/// and nothing anyone put there since is touched. Best effort: what cannot be removed stays.
pub fn remove_made_directories(made: &[PathBuf], authority: AmbientAuthority) {
    let _ = authority;
    for directory in made.iter().rev() {
        let _ = rustix::fs::unlinkat(rustix::fs::CWD, directory, rustix::fs::AtFlags::REMOVEDIR);
    }
}

#[cfg(test)]
#[expect(clippy::disallowed_methods, reason = "fixture: the tests build files on disk")]
mod tests {
    use super::*;

    #[test]
    fn the_authority_is_zero_sized() {
        assert_eq!(std::mem::size_of::<AmbientAuthority>(), 0);
    }

    #[test]
    fn a_text_file_is_read_and_every_refusal_has_its_own_variant() {
        let dir = tempfile::tempdir().unwrap();
        let authority = ambient_authority();
        let at = |name: &str| dir.path().join(name);
        std::fs::write(at("ok.json"), "{}").unwrap();
        std::fs::write(at("big"), "12345").unwrap();
        std::fs::write(at("nul"), "a\0b").unwrap();
        std::fs::write(at("latin"), [0xe9_u8]).unwrap();
        assert_eq!(read_text_file(&at("ok.json"), 2, authority).unwrap(), "{}");
        let refusal = |path: &Path, limit| read_text_file(path, limit, authority).unwrap_err().to_string();
        assert_eq!(refusal(&at("big"), 4), "the file is larger than 4 bytes");
        assert_eq!(refusal(&at("nul"), 10), "it looks binary (it contains NUL bytes), not text");
        assert_eq!(refusal(&at("latin"), 10), "it is not UTF-8 text");
        assert_eq!(refusal(&at("absent"), 10), "no such file");
        assert_eq!(refusal(&at("absent/x"), 10), "no such file or directory");
        assert_eq!(refusal(&at("ok.json/x"), 10), "no such file or directory");
        assert_eq!(refusal(dir.path(), 10), "it is a directory, not a file");
        assert_eq!(refusal(Path::new("/dev/null"), 10), "it is not a regular file");
    }

    #[test]
    fn a_file_beneath_a_directory_follows_only_links_that_stay_beneath_it() {
        let dir = tempfile::tempdir().unwrap();
        let authority = ambient_authority();
        let crew = dir.path().join("crew");
        std::fs::create_dir_all(crew.join("out")).unwrap();
        std::fs::write(crew.join("out/real.yaml"), "name: a\n").unwrap();
        std::fs::write(dir.path().join("outside.yaml"), "name: b\n").unwrap();
        std::os::unix::fs::symlink("out/real.yaml", crew.join("inside.yaml")).unwrap();
        std::os::unix::fs::symlink("../outside.yaml", crew.join("up.yaml")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.yaml"), crew.join("absolute.yaml")).unwrap();
        let read = |name: &str| read_text_file_beneath(&crew, name, 100, authority).map_err(|error| error.to_string());
        assert_eq!(read("inside.yaml"), Ok("name: a\n".to_owned()));
        assert_eq!(read("up.yaml"), Err("it is a link that leads out of its directory".to_owned()));
        assert_eq!(read("absolute.yaml"), Err("it is a link that leads out of its directory".to_owned()));
        assert_eq!(read("crew.yaml"), Err("no such file".to_owned()));
        assert_eq!(read("out"), Err("it is a directory, not a file".to_owned()));
        let missing = read_text_file_beneath(&dir.path().join("none"), "crew.yaml", 100, authority).unwrap_err();
        assert_eq!(missing.to_string(), "no such file or directory");
    }

    #[test]
    fn directories_are_made_beneath_the_nearest_existing_one() {
        let dir = tempfile::tempdir().unwrap();
        let authority = ambient_authority();
        let deep = dir.path().join("a/b/c");
        let made = create_directories(&deep, authority).unwrap();
        assert_eq!(made, [dir.path().join("a"), dir.path().join("a/b"), deep.clone()]);
        assert_eq!(probe(&deep, authority).unwrap(), HostKind::Directory);
        assert_eq!(create_directories(&deep, authority).unwrap(), Vec::<PathBuf>::new());
        // Removed deepest first, each only while empty.
        std::fs::write(dir.path().join("a/kept.txt"), "").unwrap();
        remove_made_directories(&made, authority);
        assert!(!dir.path().join("a/b").exists());
        assert!(dir.path().join("a/kept.txt").exists());
        std::fs::write(dir.path().join("file"), "").unwrap();
        let refusal = create_directories(&dir.path().join("file/x"), authority).unwrap_err();
        assert_eq!(refusal.to_string(), "it is not a directory");
        assert!(matches!(probe(&dir.path().join("none"), authority), Err(HostPathError::Missing)));
        assert_eq!(probe(&dir.path().join("file"), authority).unwrap(), HostKind::Other);
    }
}
