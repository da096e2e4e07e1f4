//! Opening NVIDIA's libraries at run time, once each and all the same way:
//! the runtime (libcudart) and the libraries beside it (cuBLAS, cuBLASLt,
//! cuRAND, cuSOLVER). So the server builds and runs where they are
//! missing; a library that is missing, or is one of Wormhole's own
//! stand-ins, is never used, and its calls answer as without a driver.

use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The sonames a library is looked for under, preferred first.
pub enum Sonames {
    /// CUDA 12's and CUDA 13's, the loaded runtime's major's first
    /// (libcublas.so.13 beside libcudart.so.13).
    ByRuntimeMajor(&'static str, &'static str),
    /// These, in order.
    Fixed(&'static [&'static str]),
    /// What the function says when the library is first needed (the
    /// runtime: the configured path, or its sonames).
    Computed(fn() -> Vec<String>),
}

impl Sonames {
    fn in_order(&self) -> Vec<String> {
        match *self {
            Sonames::ByRuntimeMajor(of12, of13) if super::runtime_major() == 12 => {
                vec![of12.into(), of13.into()]
            }
            Sonames::ByRuntimeMajor(of12, of13) => vec![of13.into(), of12.into()],
            Sonames::Fixed(names) => names.iter().map(|n| n.to_string()).collect(),
            Sonames::Computed(names) => names(),
        }
    }
}

/// The symbols of one opened library.
pub struct Symbols {
    /// A dlopen handle, never closed.
    handle: *mut c_void,
}

impl Symbols {
    /// The address of `name` in the library (NULL: it has none).
    pub fn address(&self, name: &str) -> *mut c_void {
        match CString::new(name) {
            // SAFETY: `handle` is a live dlopen handle (never closed) and
            // `c` a NUL-terminated name.
            Ok(c) => unsafe { libc::dlsym(self.handle, c.as_ptr()) },
            Err(_) => std::ptr::null_mut(),
        }
    }

    /// `name` as a function of type `F` (an `unsafe extern "C" fn` pointer
    /// type), if the library has it.
    ///
    /// # Safety
    /// `F` is the function pointer type of `name`'s C signature in this
    /// library.
    pub unsafe fn function<F: Copy>(&self, name: &str) -> Option<F> {
        const { assert!(size_of::<F>() == size_of::<*mut c_void>()) };
        let p = self.address(name);
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` is the non-NULL address of `name`, and `F` a function
        // pointer type of the same size (asserted above) with its C
        // signature, by this function's contract.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }
}

/// A library opened at its first use, and what was loaded from it
/// (`T::default()`, all entry points absent, when it could not be).
pub struct Loader<T: 'static> {
    sonames: Sonames,
    /// Whether `forbid_libraries` keeps it closed (all but the runtime).
    forbiddable: bool,
    load: fn(&Symbols) -> T,
    loaded: OnceLock<(T, bool)>,
}

impl<T: Default + Send + Sync> Loader<T> {
    /// A library beside the runtime: its entry points are looked up with
    /// `load` from the first of `sonames` that opens.
    pub const fn new(sonames: Sonames, load: fn(&Symbols) -> T) -> Self {
        Loader {
            sonames,
            forbiddable: true,
            load,
            loaded: OnceLock::new(),
        }
    }

    /// The runtime, which tests and the fuzzer may still load (it is
    /// missing where they run, and holds no tenant handle).
    pub const fn runtime(sonames: Sonames, load: fn(&Symbols) -> T) -> Self {
        Loader {
            sonames,
            forbiddable: false,
            load,
            loaded: OnceLock::new(),
        }
    }

    /// What was loaded, opening the library at the first call.
    pub fn get(&self) -> &T {
        &self.entry().0
    }

    /// Whether the library was found.
    pub fn found(&self) -> bool {
        self.entry().1
    }

    fn entry(&self) -> &(T, bool) {
        self.loaded.get_or_init(|| {
            if self.forbiddable && FORBIDDEN.load(Ordering::Relaxed) {
                return (T::default(), false);
            }
            let names = self.sonames.in_order();
            let Some((name, handle)) = names.iter().find_map(|n| open(n).map(|h| (n, h))) else {
                log::info!("none of {names:?} could be loaded: answering as without a driver");
                return (T::default(), false);
            };
            log::info!("{name} loaded");
            ((self.load)(&Symbols { handle }), true)
        })
    }
}

static FORBIDDEN: AtomicBool = AtomicBool::new(false);

/// Never opens cuBLAS, cuBLASLt, cuRAND or cuSOLVER in this process: for
/// tests and the fuzzer, whose tenants hold stand-in handles that must
/// never reach a real library. Call before the first request.
pub fn forbid_libraries() {
    FORBIDDEN.store(true, Ordering::Relaxed);
}

/// Opens `name` unless it is one of Wormhole's stand-ins (which export
/// `wormhole_cudart_stub`): a server must never forward to itself.
fn open(name: &str) -> Option<*mut c_void> {
    let c = CString::new(name).ok()?;
    // SAFETY: a NUL-terminated path; dlopen has no other precondition.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return None;
    }
    let marker = c"wormhole_cudart_stub";
    // SAFETY: `handle` is the live handle dlopen just returned; the name is
    // NUL-terminated.
    if !unsafe { libc::dlsym(handle, marker.as_ptr()) }.is_null() {
        log::warn!("{name} is a Wormhole stand-in, not NVIDIA's library: not loading it");
        // SAFETY: `handle` came from dlopen above and nothing from it is in
        // use.
        unsafe { libc::dlclose(handle) };
        return None;
    }
    Some(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Loaded {
        strlen: Option<unsafe extern "C" fn(*const std::ffi::c_char) -> usize>,
    }

    fn load(symbols: &Symbols) -> Loaded {
        Loaded {
            // SAFETY: libc declares strlen(const char *) -> size_t, which
            // the field's type matches.
            strlen: unsafe { symbols.function("strlen") },
        }
    }

    /// A real library, opened once and its function found and called; a
    /// missing one gives the defaults.
    #[test]
    fn libraries_open_once_or_answer_as_missing() {
        static LIBC: Loader<Loaded> = Loader::runtime(Sonames::Fixed(&["libc.so.6"]), load);
        let strlen = LIBC.get().strlen.expect("libc has strlen");
        // SAFETY: a NUL-terminated string.
        assert_eq!(unsafe { strlen(c"four".as_ptr()) }, 4);
        assert!(LIBC.found());
        assert!(std::ptr::eq(LIBC.get(), LIBC.get()), "loaded once");

        static MISSING: Loader<Loaded> =
            Loader::runtime(Sonames::Fixed(&["libwormhole-no-such-library.so.1"]), load);
        assert!(!MISSING.found());
        assert!(MISSING.get().strlen.is_none());
    }
}
