//! The CUDA backend: decoders generated from `cuda.api` plus the
//! hand-written ones it names (memory, copies, kernels).
//!
//! The real runtime (libcudart) is opened at run time, so the server builds
//! and runs on machines without CUDA. Where it is missing (or is one of
//! Wormhole's own stand-ins) every forwarded call answers what the native
//! runtime answers on a machine without the NVIDIA driver:
//! cudaErrorInsufficientDriver. Where it is present but finds no driver or
//! no device, its own answers (cudaErrorInsufficientDriver,
//! cudaErrorNoDevice) are forwarded unchanged.
//!
//! Raw pointers that functions here take are device addresses and CUDA
//! handles from a tenant's tables, which we pass to the runtime and never
//! dereference, hence the allowance below.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

/// What each library backend (cuBLAS, cuBLASLt, cuRAND, cuSOLVER) sets up
/// the same way, declared in one place per backend:
/// - its generated decoders and table (`generated:` the file under
///   OUT_DIR; `checks as NAME` where the description calls the backend's
///   checks by the library's name), allowed the lints generated code trips;
/// - `library:` the `Loader` static opening it, with `fn table()`; what
///   else the backend loads beside the table (`loads: TYPE = FN`) is the
///   loaded value's `extra`;
/// - `statuses:` what a call answers without the library (`NO_LIBRARY`)
///   and for a malformed request (`bad`).
///
/// A macro because `include!` wants a literal path.
macro_rules! library_backend {
    (
        generated: $file:literal $(, checks as $name:ident)?;
        library: $lib:ident = $sonames:expr;
        $(statuses: $none:expr, $malformed:expr;)?
    ) => {
        library_backend! {
            generated: $file $(, checks as $name)?;
            library: $lib = $sonames;
            loads: () = |_| ();
            $(statuses: $none, $malformed;)?
        }
    };
    (
        generated: $file:literal $(, checks as $name:ident)?;
        library: $lib:ident = $sonames:expr;
        loads: $extra:ty = $load_extra:expr;
        $(statuses: $none:expr, $malformed:expr;)?
    ) => {
        #[allow(
            clippy::needless_return,
            clippy::match_single_binding,
            clippy::missing_safety_doc,
            clippy::type_complexity,
            unused_imports
        )]
        mod generated {
            $(use super::checks as $name;)?
            use super::*;
            include!(concat!(env!("OUT_DIR"), "/", $file));
        }
        pub use generated::{dispatch, ffi};

        /// The library's generated table, and what else the backend
        /// loads from it.
        #[derive(Default)]
        struct Loaded {
            table: ffi::Table,
            // Unread where the backend loads only its table (`()`).
            #[allow(dead_code)]
            extra: $extra,
        }

        static $lib: super::loader::Loader<Loaded> =
            super::loader::Loader::new($sonames, |symbols| Loaded {
                // SAFETY: the `Loader` opens only this backend's library
                // (its sonames above), whose functions have the signatures
                // its `.api` description gives (from NVIDIA's headers),
                // which is what the table was generated from; a missing
                // symbol is left absent.
                table: unsafe { ffi::Table::load(&|name| symbols.address(name)) },
                extra: ($load_extra)(symbols),
            });

        fn table() -> &'static ffi::Table {
            &$lib.get().table
        }

        $(
            /// What a call answers without the library.
            pub const NO_LIBRARY: i32 = $none;

            /// A malformed request.
            pub fn bad(_: wormhole_wire::WireError) -> i32 {
                $malformed
            }
        )?
    };
}

pub mod blas;
pub mod libs;
pub mod loader;
pub mod lt;
pub mod overrides;
pub mod rand;
pub mod solver;
pub mod tenant;
#[cfg(test)]
mod testing;
pub mod vmm;

use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::OnceLock;

use wormhole_cuda_api::{cudaErrorInsufficientDriver, func, Kind, Library};
use wormhole_cuda_api::{cudaErrorInvalidValue, cudaErrorNotSupported, cudaSuccess};
use wormhole_wire::{Decoder, Encoder};

use loader::{Loader, Sonames, Symbols};
pub use tenant::CudaTenant;
use tenant::{bad, cstr, opt_cstr, opt_mut_ptr, CudaTenant as Tenant};

/// What a forwarded call answers when the runtime (or the entry point) is
/// missing: the native answer without a driver.
pub const NO_LIBRARY: i32 = cudaErrorInsufficientDriver;

/// `dim3`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

/// `__fatBinC_Wrapper_t`, built by the server around a client's fat binary.
#[repr(C)]
pub struct Wrapper {
    pub magic: u32,
    pub version: u32,
    pub data: *const u8,
    pub filename_or_fatbins: *mut c_void,
}

#[allow(
    clippy::needless_return,
    clippy::match_single_binding,
    clippy::missing_safety_doc,
    unused_imports
)]
mod generated {
    use super::*;
    include!(concat!(env!("OUT_DIR"), "/cuda_server_gen.rs"));
}
pub use generated::ffi;

/// The extents `cuda.api`'s `check=`s name, for device pointers whose
/// extent is more than one size argument.
pub mod checks {
    use super::*;

    /// `height` rows of `width` bytes, `pitch` apart, from `p`: all the
    /// tenant's. An empty block touches nothing. (A pitch below the width
    /// is the runtime's to refuse: the extent still bounds what it could
    /// touch.)
    pub fn rect(
        t: &Tenant,
        p: *mut c_void,
        pitch: usize,
        width: usize,
        height: usize,
    ) -> Result<(), i32> {
        if width == 0 || height == 0 {
            return Ok(());
        }
        let bytes = (pitch as u64)
            .checked_mul(height as u64 - 1)
            .and_then(|b| b.checked_add(width as u64))
            .ok_or(cudaErrorInvalidValue)?;
        t.devptr(p as usize as u64, bytes).map(|_| ())
    }
}

/// Decodes, validates and runs one CUDA request (runtime, cuBLAS,
/// cuRAND or cuSOLVER, by its id's range); `Err` carries the status of a request
/// refused before reaching the library.
pub fn dispatch(
    t: &mut CudaTenant,
    func: u32,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    if !t.device_sized {
        // A quota sized by "the device" was sized by OpenCL's devices (CPU
        // ones, on a GPU machine): CUDA's device counts once CUDA starts.
        t.device_sized = true;
        if let Some(q) = &t.memory {
            q.device_found(overrides::largest_device_memory());
        }
    }
    let Some(r) = t.residency.clone() else {
        return run(t, func, d, e);
    };
    // Classified by name once per function, not on every call.
    let effect = *t
        .effects
        .entry(func)
        .or_insert_with(|| crate::residency::cuda_effect(func));
    r.ready(effect)?;
    // A memset's first argument is where it writes.
    let first_pointer = d.clone().u64().ok();
    let status = run(t, func, d, e);
    r.after(effect, first_pointer);
    status
}

/// [`dispatch`] past residency.
fn run(t: &mut CudaTenant, func: u32, d: &mut Decoder<'_>, e: &mut Encoder) -> Result<i32, i32> {
    match Library::of(func) {
        Some(Library::Blas) if wormhole_cuda_api::is_lt(func) => {
            lt::dispatch(&mut libs::LibTenant::new(t, Library::Blas), func, d, e)
        }
        Some(Library::Blas) => {
            blas::dispatch(&mut libs::LibTenant::new(t, Library::Blas), func, d, e)
        }
        Some(Library::Rand) => {
            rand::dispatch(&mut libs::LibTenant::new(t, Library::Rand), func, d, e)
        }
        Some(Library::Solver) => {
            solver::dispatch(&mut libs::LibTenant::new(t, Library::Solver), func, d, e)
        }
        _ => generated::dispatch(t, func, d, e),
    }
}

/// The loaded runtime: its entry points and its major version.
#[derive(Default)]
struct Runtime {
    table: ffi::Table,
    major: u32,
}

static RUNTIME_PATH: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Where to find libcudart (the configuration's `cuda_runtime`); by default
/// the dynamic loader's search for libcudart.so.13, then .12. Call before
/// the first CUDA request.
pub fn set_runtime_path(p: Option<PathBuf>) {
    let _ = RUNTIME_PATH.set(p);
}

static CUDART: Loader<Runtime> = Loader::runtime(
    Sonames::Computed(|| match RUNTIME_PATH.get().cloned().flatten() {
        Some(path) => vec![path.display().to_string()],
        None => vec!["libcudart.so.13".into(), "libcudart.so.12".into()],
    }),
    load_runtime,
);

fn load_runtime(symbols: &Symbols) -> Runtime {
    // SAFETY: `symbols` are libcudart's, whose functions have the
    // signatures cuda.api describes (from its headers).
    let table = unsafe { ffi::Table::load(&|name| symbols.address(name)) };
    type GetVersion = unsafe extern "C" fn(*mut i32) -> i32;
    let mut version = 0i32;
    // SAFETY: libcudart declares cudaRuntimeGetVersion(int *) returning a
    // cudaError_t (an int), which `GetVersion` matches.
    if let Some(get_version) = unsafe { symbols.function::<GetVersion>("cudaRuntimeGetVersion") } {
        // SAFETY: `version` is a valid int to write.
        unsafe { get_version(&mut version) };
    }
    log::info!("CUDA runtime loaded: version {version}");
    Runtime {
        table,
        major: (version / 1000) as u32,
    }
}

/// The runtime's entry points (all absent without a runtime).
fn table() -> &'static ffi::Table {
    &CUDART.get().table
}

/// The loaded runtime's major version (0: none).
pub fn runtime_major() -> u32 {
    CUDART.get().major
}

/// Whether a function id is CUDA's (the runtime's, cuBLAS's or cuRAND's).
pub fn is_cuda(func: u32) -> bool {
    Library::of(func).is_some()
}

/// Answers a CUDA request on a server that does not export CUDA: what the
/// native library answers without a driver.
pub fn disabled(func: u32) -> Result<i32, i32> {
    Err(Library::of(func).map_or(NO_LIBRARY, Library::no_driver))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wormhole_cuda_api::fatbin::synth;
    use wormhole_cuda_api::wire::Launch;
    use wormhole_cuda_api::{
        cudaErrorInvalidDeviceFunction, cudaErrorInvalidKernelImage, cudaErrorInvalidValue,
        cudaErrorMemoryAllocation,
    };

    use super::testing::call;

    /// A tenant owning 4 KiB at 0x7000_0000.
    fn tenant_with_4k() -> CudaTenant {
        super::testing::tenant(&[])
    }

    #[test]
    fn a_2d_memset_is_refused_past_the_tenants_memory() {
        let mut t = tenant_with_4k();
        let memset = |p: u64, pitch: u64, width: u64, height: u64| {
            move |e: &mut Encoder| {
                e.u64(p);
                e.u64(pitch);
                e.i32(0);
                e.u64(width);
                e.u64(height);
            }
        };
        let f = func::cudaMemset2D;
        // 8 rows 512 apart: the last one starts at 3584, ends 64 bytes on.
        assert_eq!(
            checks::rect(&t, 0x7000_0000 as *mut c_void, 512, 64, 8),
            Ok(())
        );
        // One more row, or a wider last row, passes the end: refused.
        assert_eq!(
            call(&mut t, f, memset(0x7000_0000, 512, 64, 9)),
            Err(cudaErrorInvalidValue)
        );
        assert_eq!(
            call(&mut t, f, memset(0x7000_0000, 512, 513, 8)),
            Err(cudaErrorInvalidValue)
        );
        // Rows so far apart the extent overflows; a block from outside.
        assert_eq!(
            call(&mut t, f, memset(0x7000_0000, u64::MAX / 2, 1, 3)),
            Err(cudaErrorInvalidValue)
        );
        assert_eq!(
            call(&mut t, f, memset(0x6000_0000, 16, 1, 1)),
            Err(cudaErrorInvalidValue)
        );
        // Nothing to set: nothing checked past the start.
        assert_eq!(
            checks::rect(&t, 0x7000_0000 as *mut c_void, 1 << 40, 0, 1 << 40),
            Ok(())
        );
    }

    // No test here can reach a real runtime (CI has none); each request is
    // one the tenant must refuse before calling the library.
    #[test]
    fn refuses_what_a_tenant_does_not_own() {
        let mut t = tenant_with_4k();
        // A memset past the tenant's allocation, or on an address it never
        // got, is refused; so is a stream it never created.
        let memset = |p: u64, n: u64| {
            move |e: &mut Encoder| {
                e.u64(p);
                e.i32(0);
                e.usize(n as usize);
            }
        };
        assert_eq!(
            call(&mut t, func::cudaMemset, memset(0x7000_0000, 4097)),
            Err(cudaErrorInvalidValue)
        );
        assert_eq!(
            call(&mut t, func::cudaMemset, memset(0x1234, 1)),
            Err(cudaErrorInvalidValue)
        );
        assert_eq!(
            call(&mut t, func::cudaStreamSynchronize, |e| e.u64(99)),
            Err(Kind::Stream.invalid())
        );
        assert_eq!(
            call(&mut t, func::cudaFree, |e| e.u64(0x7000_0010)),
            Err(cudaErrorInvalidValue),
            "only an allocation's start can be freed"
        );
        // Truncated requests are malformed, not crashes.
        assert_eq!(
            call(&mut t, func::cudaMemset, |e| e.u64(0x7000_0000)),
            Err(cudaErrorInvalidValue)
        );
        assert!(call(&mut t, u32::MAX - 1, |_| {}).is_err());
    }

    #[test]
    fn a_memory_quota_refuses_before_the_runtime_and_keeps_nothing_for_failures() {
        let mut t = CudaTenant::new(1 << 30);
        let q = std::sync::Arc::new(crate::quota::Quota::new(1 << 20));
        t.memory = Some(q.clone());
        assert_eq!(
            call(&mut t, func::cudaMalloc, |e| e.u64(2 << 20)),
            Err(cudaErrorMemoryAllocation),
            "past the quota"
        );
        // Within it, the request reaches the runtime (none here, so it
        // fails), and the failed allocation takes nothing from the quota.
        let within = call(&mut t, func::cudaMalloc, |e| e.u64(512 << 10));
        assert_ne!(within, Err(cudaErrorMemoryAllocation));
        assert_ne!(within, Ok(0), "no runtime here, so no allocation");
        assert_eq!(q.used(), 0);
    }

    #[test]
    fn registers_the_fixture_and_checks_launches_against_its_layouts() {
        let mut t = CudaTenant::new(1 << 20);
        let mut bad = synth::fixture();
        bad.truncate(100);
        assert_eq!(
            call(&mut t, func::__cudaRegisterFatBinary, |e| {
                e.u64(1);
                e.bytes(&bad);
            }),
            Err(cudaErrorInvalidKernelImage)
        );
        let fb = synth::fixture();
        let reg = |e: &mut Encoder| {
            e.u64(1);
            e.bytes(&fb);
        };
        assert_eq!(call(&mut t, func::__cudaRegisterFatBinary, reg), Ok(0));
        assert_eq!(
            call(&mut t, func::__cudaRegisterFatBinary, |e| {
                e.u64(1);
                e.bytes(&synth::fixture());
            }),
            Err(cudaErrorInvalidValue),
            "module ids are fresh"
        );
        // What a kernel's and a variable's registrations start with: the
        // module, the host address the client knows it by, its name.
        let in_module = |e: &mut Encoder, host: u64, name: &[u8]| {
            e.u64(1);
            e.u64(host);
            e.bytes(name);
        };
        let vec_add = |e: &mut Encoder| in_module(e, 0x401000, b"vecAdd");
        assert_eq!(call(&mut t, func::__cudaRegisterFunction, vec_add), Ok(0));
        let launch = |func: u64, args: Vec<u8>| {
            move |e: &mut Encoder| {
                Launch {
                    func,
                    grid: [1, 1, 1],
                    block: [32, 1, 1],
                    shared_mem: 0,
                    stream: 0,
                    args,
                }
                .encode(e)
            }
        };
        assert_eq!(
            call(
                &mut t,
                func::cudaLaunchKernel,
                launch(0x402000, vec![0; 28])
            ),
            Err(cudaErrorInvalidDeviceFunction)
        );
        assert_eq!(
            call(
                &mut t,
                func::cudaLaunchKernel,
                launch(0x401000, vec![0; 27])
            ),
            Err(cudaErrorInvalidValue),
            "vecAdd takes 28 bytes of arguments"
        );
        // A device variable of 16 bytes: copies must stay inside it.
        let coeffs = |e: &mut Encoder| {
            in_module(e, 0x601000, b"coeffs");
            e.i32(0);
            e.u64(16);
            e.i32(1);
            e.i32(0);
        };
        assert_eq!(call(&mut t, func::__cudaRegisterVar, coeffs), Ok(0));
        let copy = |symbol: u64, offset: u64, count: u64| {
            move |e: &mut Encoder| {
                wormhole_cuda_api::wire::SymbolCopy {
                    to: false,
                    symbol,
                    offset,
                    count,
                    device: 0,
                }
                .encode(e)
            }
        };
        assert_eq!(
            call(&mut t, func::cudaMemcpyToSymbol, copy(0x601000, 8, 9)),
            Err(cudaErrorInvalidValue)
        );
        assert_eq!(
            call(&mut t, func::cudaMemcpyToSymbol, copy(0x602000, 0, 4)),
            Err(wormhole_cuda_api::cudaErrorInvalidSymbol)
        );
        assert!(matches!(
            call(&mut t, func::cudaMemcpyToSymbol, copy(0x601000, 8, 8)),
            Ok(s) if s != 0
        ));
        // The right shape passes validation and reaches the runtime, whose
        // answer (without one: NO_LIBRARY) is the call's status.
        let r = call(
            &mut t,
            func::cudaLaunchKernel,
            launch(0x401000, vec![0; 28]),
        );
        assert!(matches!(r, Ok(s) if s != 0), "{r:?}");
        if !CUDART.found() {
            assert_eq!(r, Ok(NO_LIBRARY));
        }
    }
}
