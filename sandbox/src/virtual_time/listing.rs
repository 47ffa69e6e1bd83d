//! Directory entries in name order, under virtual time.
//!
//! A host file system lists a directory in an order of its own: ext4 by a
//! hash seeded per file system, tmpfs, XFS and btrfs roughly by creation.
//! A guest that shows or hashes a listing as it reads it would differ
//! between a developer's machine and CI, which virtual time promises it
//! cannot. So under virtual time the host reads a listing whole, sorts it
//! by name (the names' UTF-8 bytes) and gives it out in that order:
//!
//! - **components**: `read-directory` drains wasmtime-wasi's stream into a
//!   sorted queue the host holds for that stream (`Listings`), and
//!   `read-directory-entry` takes from the queue;
//! - **preview-1 modules**: wasmtime-wasi answers `fd_readdir` from the
//!   whole listing on every call (its cookie is an index into it), so the
//!   shadow does the same: it has wasmtime-wasi's `fd_readdir` write the
//!   whole listing into a host buffer, sorts all but `.` and `..`, numbers
//!   the cookies again and writes the part from the guest's cookie.
//!
//! What the host holds is bounded per Tick by [`MAX_SORTED_LISTINGS`]
//! (each entry's name plus [`ENTRY_BYTES`]); a listing that would pass it
//! fails with `insufficient-memory` (`nomem`), the same on every machine.

use crate::limits::MAX_SORTED_LISTINGS;
use std::collections::{HashMap, VecDeque};
use wasmtime_wasi::p2::bindings::filesystem::types::DirectoryEntry;

/// What one held entry counts beside its name's bytes.
pub const ENTRY_BYTES: usize = 32;

/// Preview 1's `nomem`, for a listing past [`MAX_SORTED_LISTINGS`].
const P1_ERRNO_NOMEM: i32 = 48;
/// Preview 1's `fault`, for a guest buffer outside its memory.
const P1_ERRNO_FAULT: i32 = 21;
/// The fixed part of a preview-1 `dirent`: `d_next` (8 bytes), `d_ino`
/// (8), `d_namlen` (4), `d_type` (1) and padding to 24; the name follows.
const DIRENT_BYTES: usize = 24;
/// The host buffer's first size for a preview-1 listing; it doubles up to
/// [`MAX_SORTED_LISTINGS`] while the listing fills it.
const FIRST_BUFFER: usize = 64 << 10;

/// The sorted listings a component has not finished reading, by the rep
/// of their `directory-entry-stream`, and what they hold in all.
#[derive(Default)]
pub(crate) struct Listings {
    pub(crate) held: HashMap<u32, VecDeque<DirectoryEntry>>,
    pub(crate) bytes: usize,
}

pub(crate) fn cost(e: &DirectoryEntry) -> usize {
    e.name.len() + ENTRY_BYTES
}

impl Listings {
    pub(crate) fn release(&mut self, rep: u32) {
        if let Some(q) = self.held.remove(&rep) {
            self.bytes -= q.iter().map(cost).sum::<usize>();
        }
    }

    /// The next entry of a held listing (`None` at its end), or `None`
    /// when the stream is not one of them.
    pub(crate) fn next(&mut self, rep: u32) -> Option<Option<DirectoryEntry>> {
        let q = self.held.get_mut(&rep)?;
        let e = q.pop_front();
        match &e {
            Some(e) => self.bytes -= cost(e),
            None => {
                self.held.remove(&rep);
            }
        }
        Some(e)
    }
}

/// One preview-1 directory entry, as `fd_readdir` writes it.
struct P1Entry {
    ino: u64,
    kind: u8,
    name: Vec<u8>,
}

/// Preview 1's `fd_readdir` under virtual time: the whole listing from
/// wasmtime-wasi's own, in name order (see the module docs), from
/// `cookie`, into the guest's `buf` of `len` bytes, the bytes written at
/// `bufused`. Returns the errno.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn p1_readdir(
    wasi: &mut wasmtime_wasi::p1::WasiP1Ctx,
    mem: &mut wiggle::GuestMemory<'_>,
    fd: i32,
    buf: i32,
    len: i32,
    cookie: i64,
    bufused: i32,
) -> wasmtime::Result<i32> {
    use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;
    let mut cap = FIRST_BUFFER;
    let whole = loop {
        // Room for the listing, then its length (a u32) at `cap`.
        let mut host = vec![0u8; cap + 4];
        let errno = {
            let mut hm = wiggle::GuestMemory::Unshared(&mut host);
            let end = cap as i32;
            p1::fd_readdir(&mut *wasi, &mut hm, fd, 0, end, 0, end).await?
        };
        if errno != 0 {
            return Ok(errno);
        }
        let used = u32::from_le_bytes(host[cap..cap + 4].try_into()?) as usize;
        if used < cap {
            host.truncate(used);
            break host;
        }
        if cap >= MAX_SORTED_LISTINGS {
            tracing::info!(
                "a preview-1 directory listing passed MAX_SORTED_LISTINGS ({MAX_SORTED_LISTINGS} bytes) under virtual time"
            );
            return Ok(P1_ERRNO_NOMEM);
        }
        cap = (cap * 2).min(MAX_SORTED_LISTINGS);
    };
    let out = p1_from(
        &p1_sorted(&whole),
        u64::try_from(cookie).unwrap_or(u64::MAX),
        len as u32,
    );
    let n = out.len() as u32;
    let written = mem
        .copy_from_slice(&out, wiggle::GuestPtr::new((buf as u32, n)))
        .and_then(|()| mem.write(wiggle::GuestPtr::<u32>::new(bufused as u32), n));
    Ok(if written.is_ok() { 0 } else { P1_ERRNO_FAULT })
}

/// The entries of a whole `fd_readdir` answer, `.` and `..` first as
/// wasmtime-wasi puts them, the rest by name.
fn p1_sorted(whole: &[u8]) -> Vec<P1Entry> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at + DIRENT_BYTES <= whole.len() {
        let h = &whole[at..at + DIRENT_BYTES];
        let ino = u64::from_le_bytes(h[8..16].try_into().unwrap_or_default());
        let namlen = u32::from_le_bytes(h[16..20].try_into().unwrap_or_default()) as usize;
        let start = at + DIRENT_BYTES;
        let Some(name) = whole.get(start..start + namlen) else {
            break;
        };
        entries.push(P1Entry {
            ino,
            kind: h[20],
            name: name.to_vec(),
        });
        at = start + namlen;
    }
    let head = entries.len().min(2);
    entries[head..].sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

/// What `fd_readdir` writes for `entries` from `cookie` into a buffer of
/// `len` bytes: each entry's cookie (`d_next`) is its index plus one, and
/// the last entry is cut where the buffer ends, as wasmtime-wasi does (a
/// full buffer tells the guest to read on).
fn p1_from(entries: &[P1Entry], cookie: u64, len: u32) -> Vec<u8> {
    let len = len as usize;
    let mut out = Vec::new();
    let skip = usize::try_from(cookie).unwrap_or(usize::MAX);
    for (i, e) in entries.iter().enumerate().skip(skip) {
        let mut dirent = [0u8; DIRENT_BYTES];
        dirent[0..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
        dirent[8..16].copy_from_slice(&e.ino.to_le_bytes());
        dirent[16..20].copy_from_slice(&(e.name.len() as u32).to_le_bytes());
        dirent[20] = e.kind;
        for bytes in [&dirent[..], &e.name[..]] {
            let room = len - out.len();
            out.extend_from_slice(&bytes[..bytes.len().min(room)]);
            if out.len() == len {
                return out;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> P1Entry {
        P1Entry {
            ino: name.len() as u64,
            kind: 4,
            name: name.as_bytes().to_vec(),
        }
    }

    fn names(bytes: &[u8]) -> Vec<String> {
        p1_sorted(bytes)
            .into_iter()
            .map(|e| String::from_utf8(e.name).unwrap())
            .collect()
    }

    #[test]
    fn a_preview1_listing_keeps_dot_entries_first_and_sorts_the_rest() {
        let host = [".", "..", "m", "c", "x", "a"].map(entry);
        let whole = p1_from(&host, 0, u32::MAX);
        assert_eq!(names(&whole), [".", "..", "a", "c", "m", "x"]);
        // Cookies are the sorted positions: reading on from cookie 3
        // starts at the fourth entry, "c".
        let sorted = p1_sorted(&whole);
        let rest = p1_from(&sorted, 3, u32::MAX);
        assert_eq!(u64::from_le_bytes(rest[0..8].try_into().unwrap()), 4);
        assert_eq!(&rest[DIRENT_BYTES..DIRENT_BYTES + 1], b"c");
    }

    #[test]
    fn a_preview1_listing_is_cut_where_the_buffer_ends() {
        let sorted = [".", "..", "abc"].map(entry);
        let all = p1_from(&sorted, 0, u32::MAX);
        assert_eq!(all.len(), 3 * DIRENT_BYTES + 1 + 2 + 3);
        for len in [0, 1, DIRENT_BYTES + 1, all.len() - 1] {
            let cut = p1_from(&sorted, 0, len as u32);
            assert_eq!(cut, all[..len], "{len} bytes");
        }
        assert!(p1_from(&sorted, 9, 100).is_empty(), "past the end");
    }
}
