//! Version tokens of local files, and the cache that spares re-reading settled ones.
//!
//! A token is an xxh3 hash of the content for files up to [`HASHED_VERSION_BYTES`], else a hash
//! of identity, size and change times. Hashing a file on every `get_file_info` or version guard
//! costs a read; [`VersionCache`] keeps the hash of a file whose state has settled, with the
//! argument for why serving it is safe.

use std::collections::HashMap;
use std::io::{self, Read};

use super::{OpenFile, io_error, stat_of};
use crate::storage::Stat;

/// A version token: a content hash for files up to [`HASHED_VERSION_BYTES`], else a hash of the
/// identity, size and change times. A content hash already computed for this very state of the
/// file comes from `cache` (see [`VersionCache`]).
pub(crate) fn version_of_file(cache: &VersionCache, file: &mut OpenFile, stat: &Stat) -> io::Result<String> {
    use std::io::Seek;
    if stat.size > HASHED_VERSION_BYTES {
        return Ok(metadata_version(stat));
    }
    if let Some(token) = cache.get(stat) {
        return Ok(token);
    }
    // The clock is read before the state the hash is filed under, so a change during the read
    // can never hide under that state (see `VersionCache`).
    let started = std::time::SystemTime::now();
    let stat = rustix::fs::fstat(&file.0).map(|raw| stat_of(&raw)).map_err(io_error)?;
    file.seek(io::SeekFrom::Start(0))?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    // A buffer no larger than the file needs (zeroing 64 KiB for a small file costs more than
    // hashing it).
    let mut buffer =
        vec![0u8; usize::try_from(stat.size.saturating_add(1)).unwrap_or(usize::MAX).clamp(512, 64 * 1024)];
    loop {
        let count = file.read(&mut buffer)?;
        if count == 0 {
            break;
        }
        hasher.update(&buffer[..count]);
    }
    file.seek(io::SeekFrom::Start(0))?;
    let token = format!("{:016x}", hasher.digest());
    if keeps_change_times(file) {
        cache.insert(&stat, started, &token);
    }
    Ok(token)
}

/// True when the file lies on a file system known to set the change time itself on every
/// change (the kernel's own local file systems). FUSE file systems (sshfs reports the
/// modification time as the change time), network file systems and pseudo file systems are
/// not trusted: their files are hashed on every call.
fn keeps_change_times(file: &OpenFile) -> bool {
    const TRUSTED: [u32; 9] = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // xfs
        0x9123_683E, // btrfs
        0x0102_1994, // tmpfs
        0xF2F5_2010, // f2fs
        0x2FC1_2FC1, // zfs
        0xCA45_1A4E, // bcachefs
        0x8584_58F6, // ramfs
        0x794C_7630, // overlayfs (changes land on its upper, local file system)
    ];
    rustix::fs::fstatfs(&file.0).is_ok_and(|statfs| {
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "magic numbers are 32-bit")]
        let magic = statfs.f_type as u32;
        TRUSTED.contains(&magic)
    })
}

fn metadata_version(stat: &Stat) -> String {
    let (device, inode) = stat.identity.unwrap_or_default();
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for value in [
        device,
        inode,
        stat.size,
        stat.modified.0.cast_unsigned(),
        u64::from(stat.modified.1),
        stat.changed.0.cast_unsigned(),
        u64::from(stat.changed.1),
    ] {
        hasher.update(&value.to_le_bytes());
    }
    format!("m{:016x}", hasher.digest())
}

/// Content-hash versions already computed, filed under the state of the file they were
/// computed for: (device, inode) and (size, modification time, change time).
///
/// Why a hit is safe. The kernel sets a file's change time (`ctime`) to the current time on
/// every change of content or metadata, and no call sets it to anything else. A hash is filed
/// only when the file's `ctime` lies at least [`SETTLED`] before the clock reading taken ahead
/// of the read that produced the hash. Any later change, including one during that read, sets
/// `ctime` to a time after that reading (less at most one clock tick and one timestamp
/// granule, which [`SETTLED`] covers), so it can never show the filed `ctime` again; a new file
/// that reuses the inode number is created after the reading too. So a file showing exactly
/// the filed state still holds the hashed content, as git's index trusts unchanged `stat`
/// data for files older than the index. What this trusts: a clock that does not jump back
/// by more than [`SETTLED`], and filesystems that keep `ctime` (network filesystems with a
/// skewed server clock weaken it, as they do for git, and so do writes through a shared memory
/// map, whose times the kernel updates late), so only files on the kernel's local file
/// systems are filed at all (see `keeps_change_times`).
///
/// One gap remains in that argument: a `write` stamps the times when it starts and then
/// copies its data, so a single write stalled for seconds (throttled write-back, a slow source
/// buffer) could be hashed half done under a state that no longer changes when the write
/// ends. A hash is therefore served only once it is confirmed: the same state hashed to the
/// same token again, at least [`SETTLED`] after the first time. A stalled write would have to
/// stay stalled at the same byte across both. Files changed within [`SETTLED`] are hashed
/// every time. At most [`VERSION_CACHE_ENTRIES`] states are kept; a full cache starts over.
#[derive(Debug, Default)]
pub(crate) struct VersionCache {
    entries: std::sync::Mutex<HashMap<(u64, u64), CachedVersion>>,
}

#[derive(Debug)]
struct CachedVersion {
    size: u64,
    modified: (i64, u32),
    changed: (i64, u32),
    token: String,
    /// When the first hash of this state started.
    first_hashed: std::time::SystemTime,
    /// Hashed again to the same token at least [`SETTLED`] later: served from now on.
    confirmed: bool,
}

impl CachedVersion {
    fn same_state(&self, stat: &Stat) -> bool {
        self.size == stat.size && self.modified == stat.modified && self.changed == stat.changed
    }
}

/// How long before the hash's clock reading a file's last change must lie for the hash to be
/// filed: more than a clock tick plus the coarsest timestamp granule in use (FAT's 2 s).
const SETTLED: std::time::Duration = std::time::Duration::from_secs(3);

/// The most file states a [`VersionCache`] keeps (about 100 bytes each).
pub(crate) const VERSION_CACHE_ENTRIES: usize = 8192;

impl VersionCache {
    fn get(&self, stat: &Stat) -> Option<String> {
        let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let cached = entries.get(&stat.identity?)?;
        (cached.confirmed && cached.same_state(stat)).then(|| cached.token.clone())
    }

    fn insert(&self, stat: &Stat, started: std::time::SystemTime, token: &str) {
        let Some(settled) = started.checked_sub(SETTLED) else { return };
        let Ok(settled) = settled.duration_since(std::time::UNIX_EPOCH) else { return };
        let changed = i128::from(stat.changed.0) * 1_000_000_000 + i128::from(stat.changed.1);
        if changed >= i128::try_from(settled.as_nanos()).unwrap_or(i128::MAX) {
            return;
        }
        let Some(identity) = stat.identity else { return };
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(cached) = entries.get_mut(&identity)
            && cached.same_state(stat)
            && cached.token == token
        {
            let apart = started.duration_since(cached.first_hashed).is_ok_and(|apart| apart >= SETTLED);
            cached.confirmed |= apart;
            return;
        }
        if entries.len() >= VERSION_CACHE_ENTRIES {
            entries.clear();
        }
        let cached = CachedVersion {
            size: stat.size,
            modified: stat.modified,
            changed: stat.changed,
            token: token.to_owned(),
            first_hashed: started,
            confirmed: false,
        };
        entries.insert(identity, cached);
    }
}

/// Files up to this size get a content-hash version; larger ones a metadata version.
pub(crate) const HASHED_VERSION_BYTES: u64 = 32 * 1024 * 1024;

/// The version of bytes about to be written (same token as [`version_of_file`] gives).
pub(crate) fn version_of_bytes(bytes: &[u8]) -> Option<String> {
    (bytes.len() as u64 <= HASHED_VERSION_BYTES).then(|| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes)))
}

#[cfg(test)]
#[expect(clippy::disallowed_methods, clippy::disallowed_types, reason = "fixture: the tests make files on disk")]
mod tests {
    use std::fs::File;

    use super::*;

    fn open_with_stat(path: &std::path::Path) -> (OpenFile, Stat) {
        let file = File::open(path).unwrap();
        let stat = stat_of(&rustix::fs::fstat(&file).unwrap());
        (OpenFile(file), stat)
    }

    /// A file changed just now is hashed every time: its hash is not filed.
    #[test]
    fn a_recently_changed_file_is_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fresh.txt");
        std::fs::write(&path, "fresh\n").unwrap();
        let cache = VersionCache::default();
        let (mut file, stat) = open_with_stat(&path);
        let token = version_of_file(&cache, &mut file, &stat).unwrap();
        assert_eq!(Some(token), version_of_bytes(b"fresh\n"));
        assert_eq!(cache.get(&stat), None);
    }

    /// A settled state is served from the cache until size, modification or change time
    /// differ; then the file is hashed again.
    #[test]
    fn a_settled_state_is_served_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.txt");
        std::fs::write(&path, "old\n").unwrap();
        let cache = VersionCache::default();
        let (mut file, stat) = open_with_stat(&path);
        // As if the hash had been taken ten seconds from now: the change lies well before it.
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
        cache.insert(&stat, later, "filed");
        // A first hash is a candidate only; the same token again 3 s on confirms it.
        assert_eq!(cache.get(&stat), None);
        cache.insert(&stat, later + std::time::Duration::from_secs(1), "filed");
        assert_eq!(cache.get(&stat), None, "confirmed too soon");
        cache.insert(&stat, later + SETTLED, "filed");
        assert_eq!(version_of_file(&cache, &mut file, &stat).unwrap(), "filed");
        for changed in [
            Stat { size: stat.size + 1, ..stat },
            Stat { modified: (stat.modified.0 + 1, stat.modified.1), ..stat },
            Stat { changed: (stat.changed.0, stat.changed.1 ^ 1), ..stat },
            Stat { identity: stat.identity.map(|(device, inode)| (device, inode + 1)), ..stat },
        ] {
            assert_eq!(cache.get(&changed), None, "{changed:?}");
        }
        std::fs::write(&path, "new content\n").unwrap();
        let (mut file, stat) = open_with_stat(&path);
        assert_eq!(Some(version_of_file(&cache, &mut file, &stat).unwrap()), version_of_bytes(b"new content\n"));
    }

    /// A write stalled midway: the same state hashed to another token later (the write went
    /// on without touching the times) is never served, and the newer hash starts over.
    #[test]
    fn a_state_that_hashes_differently_is_not_confirmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stalled.txt");
        std::fs::write(&path, "half").unwrap();
        let (_, stat) = open_with_stat(&path);
        let cache = VersionCache::default();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
        cache.insert(&stat, later, "half written");
        cache.insert(&stat, later + SETTLED, "whole");
        assert_eq!(cache.get(&stat), None);
        cache.insert(&stat, later + SETTLED * 2, "whole");
        assert_eq!(cache.get(&stat).as_deref(), Some("whole"));
    }

    /// Only file systems that keep change times themselves are trusted.
    #[test]
    fn local_file_systems_keep_change_times() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x").unwrap();
        let (file, _) = open_with_stat(&path);
        // The temporary directory of the machines this runs on is ext4 or tmpfs.
        assert!(keeps_change_times(&file));
        let (proc_file, _) = open_with_stat(std::path::Path::new("/proc/self/status"));
        assert!(!keeps_change_times(&proc_file), "procfs changes content without change times");
    }

    #[test]
    fn the_cache_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x").unwrap();
        let (_, stat) = open_with_stat(&path);
        let cache = VersionCache::default();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
        for inode in 0..=VERSION_CACHE_ENTRIES as u64 {
            cache.insert(&Stat { identity: Some((0, inode)), ..stat }, later, "t");
        }
        let kept = cache.entries.lock().unwrap().len();
        assert_eq!(kept, 1, "a full cache starts over");
    }
}
