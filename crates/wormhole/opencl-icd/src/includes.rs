//! Header directories named in build options (`-I DIR`), sent to the
//! server with the build.
//!
//! The compiler runs in the tenant, which does not see the application's
//! files: over TCP it is on another host, and locally a confined tenant
//! has a root of its own. So before a build or compilation whose options
//! name include directories, each directory's files (bounded) go to the
//! tenant (`whIncludeDir`), which keeps them in its own temporary
//! directory and gives the compiler that directory in place of the
//! application's (pyopencl's headers, a program's own).

use std::ffi::{c_char, CStr};
use std::path::{Path, PathBuf};

use wormhole_opencl_api::func;

use crate::connection::Call;

/// Most files sent for one directory, its deepest level, and its bytes.
const MAX_FILES: usize = 2048;
const MAX_DEPTH: usize = 6;
const MAX_BYTES: u64 = 16 << 20;

/// The include directories `options` names, as written there.
pub fn include_dirs(options: &str) -> Vec<String> {
    let mut dirs = Vec::new();
    let mut words = options.split_ascii_whitespace();
    while let Some(w) = words.next() {
        let Some(rest) = w.strip_prefix("-I") else {
            continue;
        };
        let dir = if rest.is_empty() {
            words.next()
        } else {
            Some(rest)
        };
        if let Some(d) = dir.filter(|d| !d.is_empty()) {
            if !dirs.iter().any(|x| x == d) {
                dirs.push(d.to_string());
            }
        }
    }
    dirs
}

/// The regular files under `dir` (following links, as the compiler would),
/// as paths relative to it; `None` past the bounds.
fn files_under(dir: &Path) -> Option<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut total = 0u64;
    let mut stack = vec![(PathBuf::new(), 0usize)];
    while let Some((rel, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&rel)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let path = rel.join(name);
            let Ok(meta) = std::fs::metadata(dir.join(&path)) else {
                continue;
            };
            if meta.is_dir() {
                if depth + 1 < MAX_DEPTH {
                    stack.push((path, depth + 1));
                }
            } else if meta.is_file() {
                total += meta.len();
                if out.len() == MAX_FILES || total > MAX_BYTES {
                    return None;
                }
                let bytes = std::fs::read(dir.join(&path)).ok()?;
                out.push((path.to_str()?.to_string(), bytes));
            }
        }
    }
    Some(out)
}

/// Sends the files of every include directory `options` names. Nothing
/// that goes wrong here fails the build itself: a directory that cannot be
/// sent is left to the compiler, which says what it misses in its log.
///
/// # Safety
/// `options` is NULL or a C string.
pub unsafe fn send(options: *const c_char) {
    if options.is_null() {
        return;
    }
    // SAFETY: `options` is non-NULL (checked above) and NUL-terminated by the build's contract on
    // its options string (this fn's).
    let Ok(text) = unsafe { CStr::from_ptr(options) }.to_str() else {
        return;
    };
    for dir in include_dirs(text) {
        let path = match std::path::absolute(&dir) {
            Ok(p) if p.is_dir() => p,
            _ => continue,
        };
        let Some(files) = files_under(&path) else {
            crate::connection::log(&format!(
                "{dir}: more than {MAX_FILES} files or {MAX_BYTES} bytes; not sent with the build"
            ));
            continue;
        };
        let Ok(mut c) = Call::begin(func::whIncludeDir) else {
            return;
        };
        c.enc.bytes(dir.as_bytes());
        c.enc.u32(files.len() as u32);
        for (name, bytes) in &files {
            c.enc.bytes(name.as_bytes());
            c.enc.bytes(bytes);
        }
        match c.finish() {
            Ok(r) if r.status() == wormhole_opencl_api::CL_SUCCESS => {}
            Ok(r) => {
                crate::connection::log(&format!("{dir}: the server refused it ({})", r.status()))
            }
            Err(e) => crate::connection::log(&format!("{dir}: not sent ({e})")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_directories_are_found_in_either_spelling() {
        assert_eq!(
            include_dirs("-DX=1 -I/a/b -I  rel -Werror -I/a/b -Ic"),
            vec!["/a/b", "rel", "c"]
        );
        assert!(include_dirs("-DI=1 -cl-fast-relaxed-math").is_empty());
        assert!(include_dirs("-I").is_empty());
    }

    #[test]
    fn a_directory_is_read_whole_within_its_bounds() {
        let dir = std::env::temp_dir().join(format!("wh-includes-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("dirs");
        std::fs::write(dir.join("a.h"), b"#define A 1\n").expect("a.h");
        std::fs::write(dir.join("sub/b.h"), b"#define B 2\n").expect("b.h");
        let mut files = files_under(&dir).expect("files");
        files.sort();
        assert_eq!(
            files,
            vec![
                ("a.h".to_string(), b"#define A 1\n".to_vec()),
                ("sub/b.h".to_string(), b"#define B 2\n".to_vec()),
            ]
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
