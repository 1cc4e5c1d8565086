//! Room for the tool calls that run at once, shared so that no tenant's load holds another's.
//!
//! Calls run on Tokio's blocking pool, bounded by permits sized to the machine (four per core,
//! between 4 and 64). Two things keep one caller from taking all of them:
//!
//! - **Two lanes.** The long calls (walks, searches and commands: `grep`, `directory_tree`,
//!   `search_files`, `read_multiple_files`, `run_command`) take permits of their own lane; every other call
//!   takes a permit of the other. A session running as many greps as the pool holds never makes
//!   another's one-line read wait for a permit.
//! - **Shares.** A call also takes a permit of its owner's share of its lane (a stdio server,
//!   an MCP session, or a token under the 2026-07-28 protocol) and of its endpoint's (a hosted
//!   crew): at most a quarter of a lane for one owner and half of it for one endpoint when the
//!   daemon serves several, so other owners and crews always find room. The other lane's calls
//!   are short as a rule, but not all of them: a read at an offset scans lines from the start
//!   (of a sparse file of 50 GB, for the whole call), an edit of many replacements in a large
//!   file takes seconds; eight of those from one token held every permit of that lane, and
//!   another crew's one-line read waited 30 s. Permits are taken in that order (owner,
//!   endpoint, lane), so waiting never holds a permit another owner could use.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The tools whose calls walk or search a tree, or run a command, and so may run for seconds
/// (a command for as long as its time limit: in the other lane, enough of them kept every
/// read and write of every tenant waiting until one ended).
const LONG: [&str; 5] = ["grep", "directory_tree", "search_files", "read_multiple_files", "run_command"];

/// The permits of the two lanes.
#[derive(Debug)]
pub(crate) struct Pool {
    cheap: Arc<Semaphore>,
    long: Arc<Semaphore>,
    capacity: usize,
}

/// One owner's (or one endpoint's) share of each lane.
#[derive(Debug, Clone)]
pub(crate) struct Share {
    long: Arc<Semaphore>,
    cheap: Arc<Semaphore>,
}

impl Share {
    fn of(permits: usize) -> Self {
        Self { long: Arc::new(Semaphore::new(permits)), cheap: Arc::new(Semaphore::new(permits)) }
    }
}

/// What a running call holds; dropped when the call ends.
#[derive(Debug)]
pub(crate) struct Permit {
    _held: Vec<OwnedSemaphorePermit>,
}

impl Pool {
    /// A pool sized to this machine: four calls per core in each lane, between 4 and 64. The
    /// cores are the ones this process may run on (its affinity mask: one system call, where
    /// the standard library's count also reads the cgroup's CPU quota from several files,
    /// which was a tenth of the server's start-up).
    pub(crate) fn for_machine() -> Arc<Self> {
        let cores = rustix::thread::sched_getaffinity(None).map_or(1, |set| set.count() as usize).max(1);
        Arc::new(Self::new((cores * 4).clamp(4, 64)))
    }

    pub(crate) fn new(capacity: usize) -> Self {
        Self { cheap: Arc::new(Semaphore::new(capacity)), long: Arc::new(Semaphore::new(capacity)), capacity }
    }

    /// How many calls each lane runs at once.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The whole of each lane: the share of a server with one owner (stdio).
    pub(crate) fn whole(&self) -> Share {
        Share::of(self.capacity)
    }

    /// An owner's share among many (an MCP session, a token): a quarter of each lane.
    pub(crate) fn owner_share(&self) -> Share {
        Share::of((self.capacity / 4).max(1))
    }

    /// An endpoint's share when the daemon serves several: half of each lane.
    pub(crate) fn endpoint_share(&self) -> Share {
        Share::of((self.capacity / 2).max(1))
    }

    /// Waits for room for a call of `tool` by the owner of `shares` (owner first, then its
    /// endpoint); `None` once the pool is closed (the server is stopping).
    pub(crate) async fn enter(&self, tool: &str, shares: &[Share]) -> Option<Permit> {
        let long = LONG.contains(&tool);
        let mut held = Vec::with_capacity(shares.len() + 1);
        for share in shares {
            let permits = if long { &share.long } else { &share.cheap };
            held.push(permits.clone().acquire_owned().await.ok()?);
        }
        let lane = if long { &self.long } else { &self.cheap };
        held.push(lane.clone().acquire_owned().await.ok()?);
        Some(Permit { _held: held })
    }

    /// True while any call holds a permit.
    pub(crate) fn busy(&self) -> bool {
        self.cheap.available_permits() < self.capacity || self.long.available_permits() < self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_calls_of_one_owner_leave_room_for_others_and_for_cheap_calls() {
        let pool = Pool::new(8);
        let crew = pool.endpoint_share();
        let mine = [pool.owner_share(), crew.clone()];
        let theirs = [pool.owner_share(), crew.clone()];
        let other = [pool.owner_share(), crew];
        let wait = std::time::Duration::from_millis(50);
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(pool.enter("grep", &mine).await.unwrap());
        }
        // A third grep of the same owner waits; another owner's does not, nor a cheap call.
        assert!(
            tokio::time::timeout(wait, pool.enter("grep", &mine)).await.is_err(),
            "one owner took more than its share"
        );
        held.push(pool.enter("grep", &theirs).await.unwrap());
        held.push(pool.enter("read_text_file", &mine).await.unwrap());
        // The endpoint's share (half of 8) is full now for long calls of any of its owners.
        held.push(pool.enter("search_files", &theirs).await.unwrap());
        assert!(
            tokio::time::timeout(wait, pool.enter("grep", &other)).await.is_err(),
            "one endpoint took more than its share"
        );
        assert!(pool.busy());
        drop(held);
        assert!(!pool.busy());
        assert!(pool.enter("grep", &mine).await.is_some());
    }

    #[tokio::test]
    async fn commands_take_the_long_lane_and_leave_the_reads_theirs() {
        let pool = Pool::new(8);
        let mine = [pool.owner_share()];
        let wait = std::time::Duration::from_millis(50);
        let held = [pool.enter("run_command", &mine).await.unwrap(), pool.enter("run_command", &mine).await.unwrap()];
        // A third command of the owner waits for its share; its reads do not, its share of the
        // other lane being free.
        assert!(tokio::time::timeout(wait, pool.enter("run_command", &mine)).await.is_err());
        let mut reads = Vec::new();
        for _ in 0..2 {
            reads.push(tokio::time::timeout(wait, pool.enter("read_text_file", &mine)).await.unwrap().unwrap());
        }
        drop(held);
    }

    /// The other lane is shared as the long one is: an owner whose reads run long (a read at
    /// an offset of a huge sparse file) holds at most a quarter of it, an endpoint half, and
    /// another crew's read finds room; a server with one owner has the whole lane.
    #[tokio::test]
    async fn cheap_calls_of_one_owner_leave_room_for_other_owners_and_crews() {
        let pool = Pool::new(8);
        let (crew, other_crew) = (pool.endpoint_share(), pool.endpoint_share());
        let sessions: Vec<[Share; 2]> = (0..3).map(|_| [pool.owner_share(), crew.clone()]).collect();
        let theirs = [pool.owner_share(), other_crew];
        let wait = std::time::Duration::from_millis(50);
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(pool.enter("read_text_file", &sessions[0]).await.unwrap());
        }
        assert!(
            tokio::time::timeout(wait, pool.enter("edit_file", &sessions[0])).await.is_err(),
            "one owner took more than its share"
        );
        for _ in 0..2 {
            held.push(pool.enter("read_text_file", &sessions[1]).await.unwrap());
        }
        assert!(
            tokio::time::timeout(wait, pool.enter("read_text_file", &sessions[2])).await.is_err(),
            "one crew took more than its share"
        );
        for _ in 0..2 {
            held.push(tokio::time::timeout(wait, pool.enter("read_text_file", &theirs)).await.unwrap().unwrap());
        }
        held.clear();
        // One owner alone (a stdio server) has the whole lane.
        let alone = [pool.whole()];
        for _ in 0..8 {
            held.push(tokio::time::timeout(wait, pool.enter("read_text_file", &alone)).await.unwrap().unwrap());
        }
    }
}
