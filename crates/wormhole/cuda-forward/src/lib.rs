//! The libcublas and libcurand stand-ins hold no client of their own: each
//! of their functions jumps through a table of the client's
//! implementations, which the libcudart stand-in exports through one
//! private entry (`wormhole_cuda_forward_table`). So a process has one
//! connection, one tenant on the server, one handle table and one
//! allocation tracker, whichever of the three libraries it calls, as the
//! native libraries share one CUDA context.
//!
//! The entry is looked up at the first call rather than bound by the
//! dynamic linker: libcurand.so.10 is the same soname for CUDA 12 and 13
//! and so cannot name one libcudart major, and a framework may load
//! libcudart into a local scope (Python extension modules are). In order:
//! the global scope; each candidate libcudart already loaded
//! (`RTLD_NOLOAD`, which finds local ones too); each candidate loaded now.
//! A library found without the entry (NVIDIA's own) is not used. The
//! table must come from the same description as the caller (its
//! fingerprint) and have its length, or it is refused.

use std::ffi::{c_char, c_void, CString};
use std::sync::OnceLock;

use wormhole_cuda_api::forward::ENTRY;

type Entry = unsafe extern "C" fn(u32, u64, *mut usize) -> *const usize;

fn log(msg: &str) {
    if std::env::var_os("WORMHOLE_LOG").is_some() {
        eprintln!("wormhole-cuda-forward: {msg}");
    }
}

/// A stand-in's way to its table.
pub struct Forward {
    api: u32,
    fingerprint: u64,
    len: usize,
    /// The libcudart sonames to look in, preferred first.
    runtimes: &'static [&'static str],
    table: OnceLock<Option<&'static [usize]>>,
}

fn entry_in(handle: *mut c_void) -> Option<Entry> {
    // SAFETY: `handle` is RTLD_DEFAULT or a live dlopen handle; ENTRY is
    // NUL-terminated.
    let p = unsafe { libc::dlsym(handle, ENTRY.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: a symbol of this name is the forwarding entry, whose C
    // signature is `Entry` (wormhole-cudart's `wormhole_cuda_forward_table`).
    Some(unsafe { std::mem::transmute::<*mut c_void, Entry>(p) })
}

fn open(name: &str, flags: i32) -> Option<Entry> {
    let c = CString::new(name).ok()?;
    // SAFETY: a NUL-terminated name; dlopen has no other precondition.
    let h = unsafe { libc::dlopen(c.as_ptr(), flags) };
    if h.is_null() {
        return None;
    }
    let e = entry_in(h);
    if e.is_none() {
        log(&format!(
            "{name} is not Wormhole's libcudart: not forwarding to it"
        ));
        // SAFETY: `h` came from dlopen above and nothing from it is in use.
        unsafe { libc::dlclose(h) };
    }
    // A library with the entry stays open for the life of the process.
    e
}

impl Forward {
    pub const fn new(
        api: u32,
        fingerprint: u64,
        len: usize,
        runtimes: &'static [&'static str],
    ) -> Forward {
        Forward {
            api,
            fingerprint,
            len,
            runtimes,
            table: OnceLock::new(),
        }
    }

    fn find(&self) -> Option<&'static [usize]> {
        let entry = entry_in(libc::RTLD_DEFAULT)
            .or_else(|| {
                self.runtimes
                    .iter()
                    .find_map(|n| open(n, libc::RTLD_NOW | libc::RTLD_NOLOAD))
            })
            .or_else(|| {
                self.runtimes
                    .iter()
                    .find_map(|n| open(n, libc::RTLD_NOW | libc::RTLD_GLOBAL))
            });
        let Some(entry) = entry else {
            log("no Wormhole libcudart stand-in is loaded or loadable");
            return None;
        };
        let mut len = 0usize;
        // SAFETY: the entry's contract: it writes the length through a
        // valid pointer and returns NULL or a table of that many entries
        // that lives as long as the process.
        let p = unsafe { entry(self.api, self.fingerprint, &mut len) };
        if p.is_null() || len != self.len {
            log(&format!(
                "the libcudart stand-in has no table {} of this description (fingerprint {:#x}): rebuild both from one tree",
                self.api, self.fingerprint
            ));
            return None;
        }
        // SAFETY: the entry returned a non-NULL table of `len` entries
        // that lives as long as the process (its contract with the
        // stand-ins, checked just above for NULL).
        Some(unsafe { std::slice::from_raw_parts(p, len) })
    }

    /// The address of the client's implementation of function `i` (in
    /// description order), or None when there is no client to forward to.
    pub fn entry(&self, i: usize) -> Option<usize> {
        self.table
            .get_or_init(|| self.find())
            .and_then(|t| t.get(i).copied())
    }
}

/// The body every forwarding stand-in shares: its generated forwarders
/// (`OUT_DIR/forward.rs`, whose fallbacks the crate brings into scope), the
/// way to its table (`api`, in the libcudart stand-ins named `runtimes`,
/// preferred first), and the marker that tells a server it is not
/// NVIDIA's library (`stub`: its major).
#[macro_export]
macro_rules! stand_in {
    ($api:expr, $runtimes:expr, $stub:expr) => {
        include!(concat!(env!("OUT_DIR"), "/forward.rs"));

        static FORWARD: $crate::Forward =
            $crate::Forward::new($api, FINGERPRINT, FORWARD_LEN, $runtimes);

        fn table(i: usize) -> Option<usize> {
            FORWARD.entry(i)
        }

        /// Present only in Wormhole's stand-ins, so a server never loads one
        /// as NVIDIA's library.
        #[no_mangle]
        pub static wormhole_cudart_stub: u32 = $stub;
    };
}

/// What the libcublas stand-in answers without a client: what cuBLAS
/// answers without a driver (nothing can be initialised).
pub mod blas {
    use super::*;
    pub fn fallback_status() -> i32 {
        wormhole_cuda_api::blas::CUBLAS_STATUS_NOT_INITIALIZED
    }
    /// cublasGetStatusName/String need no client.
    pub fn fallback_errstr() -> *const c_char {
        c"unrecognized status".as_ptr()
    }
}

/// What the libcurand stand-in answers without a client.
pub mod rand {
    pub fn fallback_status() -> i32 {
        wormhole_cuda_api::rand::CURAND_STATUS_INITIALIZATION_FAILED
    }
}

/// What the libcublasLt stand-in answers without a client: cuBLAS's
/// answer without a driver, and no version.
pub mod lt {
    pub fn fallback_status() -> i32 {
        wormhole_cuda_api::blas::CUBLAS_STATUS_NOT_INITIALIZED
    }
    pub fn fallback_version() -> usize {
        0
    }
}

/// What the libcuda stand-in answers without a client: what a driver that
/// cannot start answers.
pub mod solver {
    pub fn fallback_status() -> i32 {
        wormhole_cuda_api::solver::CUSOLVER_STATUS_NOT_INITIALIZED
    }
}

pub mod driver {
    pub fn fallback_status() -> i32 {
        wormhole_cuda_api::driver::CUDA_ERROR_NOT_INITIALIZED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_runtime_stand_in_there_is_no_table() {
        // No libcudart stand-in is loaded in this test process, and none
        // can be loaded under this name.
        let f = Forward::new(1, 0, 3, &["libwormhole-no-such-runtime.so.1"]);
        assert_eq!(f.entry(0), None);
        assert_eq!(f.entry(99), None);
        assert_eq!(blas::fallback_status(), 1);
        assert_eq!(rand::fallback_status(), 203);
        assert_eq!(driver::fallback_status(), 3);
    }
}
