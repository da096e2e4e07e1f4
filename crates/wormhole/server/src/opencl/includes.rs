//! Header directories a client sends before a build whose options name
//! them (`-I DIR`; the client's `includes.rs`): kept in this tenant's own
//! temporary directory, one directory per content, and put in the options
//! the compiler gets in place of the client's. The application is told its
//! own options back (`CL_PROGRAM_BUILD_OPTIONS`).
//!
//! Everything here is the client's and is checked as such: names must be
//! relative paths of plain components, and the bytes a tenant keeps are
//! bounded.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::hash::{Hash, Hasher};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use wormhole_opencl_api::{CL_INVALID_VALUE, CL_OUT_OF_HOST_MEMORY, CL_SUCCESS};
use wormhole_wire::{Decoder, Encoder};

use super::tenant::{bad, Tenant};

/// Most bytes of headers one tenant keeps, all directories together.
const MAX_KEPT: u64 = 64 << 20;
/// Most files in one directory, and bytes in one name.
const MAX_FILES: u32 = 4096;
const MAX_NAME: usize = 1024;

/// This tenant's header directories: the client's spelling -> ours.
#[derive(Default)]
pub struct IncludeDirs {
    dirs: HashMap<Vec<u8>, PathBuf>,
    kept: u64,
}

/// Where this tenant keeps them (made on first use), for the exit to
/// remove where the tenant has no private /tmp.
static BASE: OnceLock<PathBuf> = OnceLock::new();

fn base() -> &'static Path {
    BASE.get_or_init(|| {
        std::env::temp_dir().join(format!(
            "wormhole-includes-{}",
            wormhole_confine::host_pid()
        ))
    })
}

/// Removes what this tenant kept (called on its way out).
pub fn remove_kept() {
    if let Some(b) = BASE.get() {
        let _ = std::fs::remove_dir_all(b);
    }
}

/// A name the client sent, as a path under a kept directory: plain
/// components only.
fn relative(name: &[u8]) -> Option<PathBuf> {
    if name.is_empty() || name.len() > MAX_NAME || name.contains(&0) {
        return None;
    }
    let p = Path::new(std::str::from_utf8(name).ok()?);
    p.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| p.to_path_buf())
}

static KEEP_NOTHING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Checks what clients send but writes nothing: for the fuzzer, whose
/// tenants would otherwise leave a directory per input.
pub fn keep_nothing() {
    KEEP_NOTHING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// `whIncludeDir(dir, files...)`: keeps the files, and maps `dir` (as the
/// client's options spell it) to where they are.
#[allow(non_snake_case)]
pub fn d_whIncludeDir(t: &mut Tenant, d: &mut Decoder<'_>, e: &mut Encoder) -> Result<i32, i32> {
    let dir = d.bytes().map_err(bad)?.to_vec();
    let n = d.u32().map_err(bad)?;
    if n > MAX_FILES || dir.is_empty() || dir.len() > MAX_NAME || dir.contains(&0) {
        return Err(CL_INVALID_VALUE);
    }
    let mut files = Vec::with_capacity(n as usize);
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    let mut bytes = 0u64;
    for _ in 0..n {
        let name = d.bytes().map_err(bad)?;
        let body = d.bytes().map_err(bad)?;
        let rel = relative(name).ok_or(CL_INVALID_VALUE)?;
        name.hash(&mut hash);
        body.hash(&mut hash);
        bytes += body.len() as u64;
        files.push((rel, body));
    }
    d.finish().map_err(bad)?;
    e.u8(1);
    let kept = base().join(format!("{:016x}", hash.finish()));
    if !kept.exists() && !KEEP_NOTHING.load(std::sync::atomic::Ordering::Relaxed) {
        if t.includes.kept + bytes > MAX_KEPT {
            return Ok(CL_OUT_OF_HOST_MEMORY);
        }
        write_all(&kept, &files).map_err(|err| {
            log::info!("keeping {}'s headers: {err}", String::from_utf8_lossy(&dir));
            CL_OUT_OF_HOST_MEMORY
        })?;
        t.includes.kept += bytes;
    }
    t.includes.dirs.insert(dir, kept);
    Ok(CL_SUCCESS)
}

/// Writes the files into a fresh directory, renamed into place whole, so
/// that a directory that exists is complete.
fn write_all(kept: &Path, files: &[(PathBuf, &[u8])]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(base())?;
    let partial = kept.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    for (rel, body) in files {
        let path = partial.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, body)?;
    }
    std::fs::create_dir_all(&partial)?;
    std::fs::rename(&partial, kept)
}

/// The options with every `-I DIR` the client sent files for pointing at
/// our copy; `None` when nothing changes.
pub fn rewrite(t: &Tenant, options: &CStr) -> Option<CString> {
    if t.includes.dirs.is_empty() {
        return None;
    }
    let text = options.to_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(text.len());
    let mut changed = false;
    let mut after_flag = false;
    for (i, word) in text
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .enumerate()
    {
        if i > 0 {
            out.push(b' ');
        }
        let (flag, dir): (&[u8], &[u8]) = if after_flag {
            (b"", word)
        } else if let Some(rest) = word.strip_prefix(b"-I").filter(|r| !r.is_empty()) {
            (b"-I", rest)
        } else {
            (b"", b"")
        };
        after_flag = word == b"-I";
        match t.includes.dirs.get(dir).filter(|_| !dir.is_empty()) {
            Some(ours) => {
                out.extend_from_slice(flag);
                out.extend_from_slice(ours.as_os_str().as_encoded_bytes());
                changed = true;
            }
            None => out.extend_from_slice(word),
        }
    }
    changed.then(|| CString::new(out).ok()).flatten()
}

/// Reported options with our copies' paths back in the client's spelling.
pub fn restore(t: &Tenant, reported: &[u8]) -> Vec<u8> {
    let mut out = reported.to_vec();
    for (theirs, ours) in &t.includes.dirs {
        let ours = ours.as_os_str().as_encoded_bytes();
        let mut i = 0;
        while let Some(at) = out[i..].windows(ours.len()).position(|w| w == ours) {
            let at = i + at;
            out.splice(at..at + ours.len(), theirs.iter().copied());
            i = at + theirs.len();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_relative_paths() {
        assert!(relative(b"a.h").is_some());
        assert!(relative(b"sub/b.h").is_some());
        for bad in [
            &b"../x.h"[..],
            b"/etc/passwd",
            b"a/../../b",
            b"",
            b"a\0b",
            b"./a",
        ] {
            assert!(
                relative(bad).is_none(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
