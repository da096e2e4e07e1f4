//! cuBLAS and cuRAND on the client: the runtime their generated stubs
//! (`crate::blas`, `crate::rand`) call, their hand-written functions, and
//! the forwarding table through which the libcublas and libcurand
//! stand-ins reach them.
//!
//! They share everything with the CUDA runtime client in this library: one
//! connection, one tenant on the server, one handle table (a cuBLAS handle,
//! a cuRAND generator and a stream are ids of the same table, checked by
//! kind), so the device pointers and streams cudaMalloc and
//! cudaStreamCreate returned are the ones cuBLAS and cuRAND calls name.
//! Their statuses are their own: nothing here touches the runtime's last
//! error except a failure to reach the server, which native cuBLAS and
//! cuRAND leave there too.
#![allow(non_snake_case)]

use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, OnceLock};

use wormhole_cuda_api::{blas, rand, solver, Kind, Library};

use crate::state::Global;
use crate::{call, state};

/// A cuBLAS or cuRAND call being marshalled: the runtime's call, with
/// this library's statuses and handle rules.
pub struct Call {
    inner: call::Call<'static>,
    lib: Library,
}

/// A library's `$outer` is the runtime's `$inner` (its field `inner`)
/// with the library's statuses on top: everything else is the runtime's.
macro_rules! wraps {
    ($outer:ty => $inner:ty) => {
        impl Deref for $outer {
            type Target = $inner;
            fn deref(&self) -> &$inner {
                &self.inner
            }
        }

        impl DerefMut for $outer {
            fn deref_mut(&mut self) -> &mut $inner {
                &mut self.inner
            }
        }
    };
}

wraps!(Call => call::Call<'static>);

/// What a call answers when the server cannot be reached: no handle can
/// exist then, so a call on one reports the bad handle, as native cuBLAS
/// and cuRAND do for a handle that failed to be created; the create calls
/// report the library's failure to initialise without a driver.
pub fn offline_status(func: u32) -> i32 {
    match Library::of(func) {
        Some(Library::Blas) => blas::CUBLAS_STATUS_NOT_INITIALIZED,
        Some(Library::Rand) if func == rand::func::curandCreateGenerator => {
            rand::CURAND_STATUS_INITIALIZATION_FAILED
        }
        Some(Library::Rand) => rand::CURAND_STATUS_NOT_INITIALIZED,
        Some(Library::Solver) => solver::CUSOLVER_STATUS_NOT_INITIALIZED,
        _ => state::NO_SERVER,
    }
}

impl Call {
    pub fn begin(func: u32) -> Result<Call, i32> {
        let lib = Library::of(func).unwrap_or(Library::Blas);
        let inner = call::Call::begin(func).map_err(|_| offline_status(func))?;
        Ok(Call { inner, lib })
    }

    /// A handle: a library's own handles (cuBLAS handles, cuRAND
    /// generators, cuSOLVER handles and parameters) must be ones this
    /// process was given (NULL is refused as natively); a stream may be
    /// NULL (the default stream), and so may Jacobi SVD settings (the
    /// library's defaults).
    pub fn handle(&mut self, p: *mut c_void, kind: Kind) -> Result<(), i32> {
        let own = kind != Kind::Stream && kind != Kind::Event;
        let bad = if own {
            kind.invalid()
        } else {
            self.lib.invalid_value()
        };
        if p.is_null() && own && kind != Kind::GesvdjInfo {
            return Err(bad);
        }
        let id = state::handle_id(p, kind).map_err(|_| bad)?;
        self.inner.shape(id);
        self.inner.enc.u64(id);
        Ok(())
    }

    /// A device address. The server checks it for the whole extent the call
    /// touches (which it computes from the other arguments); the client
    /// sends it as it is.
    pub fn devptr(&mut self, p: *mut c_void, _size: Option<u64>) -> Result<(), i32> {
        self.inner.enc.u64(p as usize as u64);
        Ok(())
    }

    pub fn finish(self) -> Result<Reply, i32> {
        let lib = self.lib;
        self.inner
            .finish()
            .map(|inner| Reply { inner })
            .map_err(|_| lib.no_driver())
    }

    /// A call the description marks async: deferred, as the runtime's are,
    /// once one of its shape has succeeded. Its status, when it waits, is
    /// the library's alone: the server answers an earlier deferred failure
    /// of this library in it, and leaves the runtime's to the runtime.
    pub fn finish_async(self, wake: bool) -> Result<i32, i32> {
        let lib = self.lib;
        self.inner
            .finish_async_as(wake, |r| (r.raw_status(), r.raw_status()))
            .map_err(|_| lib.no_driver())
    }
}

/// A reply whose status is the library's, not the runtime's.
pub struct Reply {
    inner: call::Reply<'static>,
}

wraps!(Reply => call::Reply<'static>);

impl Reply {
    pub fn status(&self) -> i32 {
        self.inner.raw_status()
    }
}

/// What the client remembers of a cuBLAS handle.
#[derive(Debug, Clone, Copy, Default)]
struct HandleState {
    /// cublasPointerMode_t: 0 host, 1 device.
    device_mode: bool,
    /// What the server's handle was last given (a new handle has the
    /// default stream and math mode, and its own workspace).
    stream: usize,
    math: i32,
    workspace: Option<(usize, usize)>,
}

fn states() -> MutexGuard<'static, HashMap<u64, HandleState>> {
    static S: Global<HashMap<u64, HandleState>> = Global::new();
    S.lock()
}

/// A live cuBLAS handle's id, or CUBLAS_STATUS_NOT_INITIALIZED.
fn blas_handle(h: *mut c_void) -> Result<u64, i32> {
    if h.is_null() {
        return Err(Kind::Cublas.invalid());
    }
    state::handle_id(h, Kind::Cublas)
}

fn device_mode(h: *mut c_void) -> bool {
    states()
        .get(&(h as usize as u64))
        .is_some_and(|s| s.device_mode)
}

/// Forgets a destroyed handle (the generated stubs call this).
pub fn released(p: *mut c_void, kind: Kind) {
    match kind {
        Kind::Cublas => {
            states().remove(&(p as usize as u64));
        }
        Kind::Cusolver => {
            solver_streams().remove(&(p as usize as u64));
        }
        _ => {}
    }
    state::released(p, kind);
}

/// Scalars and results whose meaning follows the handle's pointer mode: in
/// host mode a scalar travels by value and a result comes back in the
/// reply; in device mode both are device addresses the server checks. On
/// the wire: a tag (0 host, 1 device), then the value or the address.
mod by_mode {
    use super::*;

    /// In device pointer mode, sends the tag and the address and returns
    /// true; in host mode sends nothing.
    pub fn put_if_device(c: &mut Call, p: *const c_void, h: *mut c_void) -> bool {
        let device = device_mode(h);
        if device {
            c.enc.u8(1);
            c.enc.u64(p as usize as u64);
        }
        device
    }

    /// # Safety
    /// In host mode `p` is NULL or points to `N` readable bytes.
    pub unsafe fn put_scalar<const N: usize>(
        c: &mut Call,
        p: *const c_void,
        h: *mut c_void,
    ) -> Result<(), i32> {
        if put_if_device(c, p, h) {
            return Ok(());
        }
        if p.is_null() {
            return Err(blas::CUBLAS_STATUS_INVALID_VALUE);
        }
        let mut v = [0u8; N];
        // SAFETY: `p` is non-NULL (checked above), and a host-mode scalar
        // points to `N` readable bytes: this function's contract, which its
        // callers pass on from cuBLAS's for alpha and beta.
        unsafe { std::ptr::copy_nonoverlapping(p as *const u8, v.as_mut_ptr(), N) };
        c.enc.u8(0);
        match N {
            4 => c.enc.u32(u32::from_ne_bytes([v[0], v[1], v[2], v[3]])),
            _ => c
                .enc
                .u64(u64::from_ne_bytes(v[..8].try_into().unwrap_or([0; 8]))),
        }
        Ok(())
    }

    /// Returns whether the result comes back in the reply (host mode).
    pub fn put_result(c: &mut Call, p: *mut c_void, h: *mut c_void) -> Result<bool, i32> {
        if put_if_device(c, p, h) {
            return Ok(false);
        }
        if p.is_null() {
            return Err(blas::CUBLAS_STATUS_INVALID_VALUE);
        }
        c.enc.u8(0);
        Ok(true)
    }

    /// # Safety
    /// `p` points to N (4 or 8) writable bytes when `host`.
    pub unsafe fn take_result<const N: usize>(
        host: bool,
        r: &mut Reply,
        p: *mut c_void,
    ) -> Result<(), i32> {
        if !host {
            return Ok(());
        }
        let bad = |_| blas::CUBLAS_STATUS_INTERNAL_ERROR;
        match N {
            4 => {
                let v = r.with(|d| d.u32().map_err(bad))?;
                // SAFETY: in host mode `p` points to N = 4 writable bytes
                // (this function's contract: cuBLAS's for a result that
                // `put_result` found non-NULL); unaligned-safe write.
                unsafe { std::ptr::write_unaligned(p as *mut u32, v) };
            }
            _ => {
                let v = r.with(|d| d.u64().map_err(bad))?;
                // SAFETY: in host mode `p` points to N = 8 writable bytes
                // (this function's contract: cuBLAS's for a result that
                // `put_result` found non-NULL); unaligned-safe write.
                unsafe { std::ptr::write_unaligned(p as *mut u64, v) };
            }
        }
        Ok(())
    }
}

macro_rules! scalar_in {
    ($name:ident, $t:ty, $n:literal) => {
        /// A scalar input (alpha, beta), by the handle's pointer mode.
        pub mod $name {
            use super::*;
            /// # Safety
            /// `p` is the application's scalar pointer.
            pub unsafe fn put(c: &mut Call, p: *const $t, h: *mut c_void) -> Result<(), i32> {
                // SAFETY: `p` is the application's alpha or beta, which
                // cuBLAS requires to point to one readable `$t` ($n bytes)
                // in host mode: put_scalar's contract.
                unsafe { by_mode::put_scalar::<$n>(c, p as *const c_void, h) }
            }
            pub fn take(_: (), _r: &mut Reply, _p: *const $t, _h: *mut c_void) -> Result<(), i32> {
                Ok(())
            }
        }
    };
}
scalar_in!(hf32, f32, 4);
scalar_in!(hf64, f64, 8);

/// A scalar of a call's compute type (cublasGemmEx's alpha and beta): 2,
/// 4, 8 or 16 bytes, by the handle's pointer mode. In host mode its bytes
/// travel with their length, since the server decodes the compute type
/// after them (and checks the two agree).
pub mod hscal {
    use super::*;
    /// # Safety
    /// In host mode `p` is NULL or points to a scalar of `compute`'s type.
    pub unsafe fn put(
        c: &mut Call,
        p: *const c_void,
        h: *mut c_void,
        compute: i32,
    ) -> Result<(), i32> {
        let n = blas::scalar_size(compute).ok_or(blas::CUBLAS_STATUS_INVALID_VALUE)?;
        if by_mode::put_if_device(c, p, h) {
            return Ok(());
        }
        if p.is_null() {
            return Err(blas::CUBLAS_STATUS_INVALID_VALUE);
        }
        c.enc.u8(0);
        // SAFETY: `p` is non-NULL (checked above) and, in host mode, points
        // to a scalar of `compute`'s type, `n` bytes: this function's
        // contract (cublasGemmEx's for alpha and beta).
        c.enc
            .bytes(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) });
        Ok(())
    }
    pub fn take(
        _: (),
        _r: &mut Reply,
        _p: *const c_void,
        _h: *mut c_void,
        _c: i32,
    ) -> Result<(), i32> {
        Ok(())
    }
}

macro_rules! complex_in {
    ($name:ident, $data_type:literal) => {
        /// A complex scalar input (alpha, beta), by the handle's pointer
        /// mode: as a GemmEx scalar of that `cudaDataType`.
        pub mod $name {
            use super::*;
            /// # Safety
            /// `p` is the application's scalar pointer.
            pub unsafe fn put(c: &mut Call, p: *const c_void, h: *mut c_void) -> Result<(), i32> {
                // SAFETY: `p` is the application's complex alpha or beta,
                // which cuBLAS requires to point to one readable value of
                // `$data_type`'s type in host mode: hscal::put's contract.
                unsafe { hscal::put(c, p, h, $data_type) }
            }
            pub fn take(
                _: (),
                _r: &mut Reply,
                _p: *const c_void,
                _h: *mut c_void,
            ) -> Result<(), i32> {
                Ok(())
            }
        }
    };
}
// CUDA_C_32F (cuComplex, 8 bytes) and CUDA_C_64F (cuDoubleComplex, 16).
complex_in!(hc64, 4);
complex_in!(hc128, 5);

macro_rules! result_out {
    ($name:ident, $t:ty, $n:literal) => {
        /// A result (dot, nrm2, amax), by the handle's pointer mode.
        pub mod $name {
            use super::*;
            pub fn put(c: &mut Call, p: *mut $t, h: *mut c_void) -> Result<bool, i32> {
                by_mode::put_result(c, p as *mut c_void, h)
            }
            /// # Safety
            /// `p` is the application's result pointer, checked by `put`.
            pub unsafe fn take(
                host: bool,
                r: &mut Reply,
                p: *mut $t,
                _h: *mut c_void,
            ) -> Result<(), i32> {
                // SAFETY: `p` is the application's result pointer, which
                // `put` found non-NULL in host mode and cuBLAS requires to
                // hold one writable `$t` ($n bytes): take_result's contract.
                unsafe { by_mode::take_result::<$n>(host, r, p as *mut c_void) }
            }
        }
    };
}
result_out!(rf32, f32, 4);
result_out!(rf64, f64, 8);
result_out!(ri32, i32, 4);

/// Hand-written cuBLAS functions: those the description marks
/// `client-only` or `client-override`, with its C signatures.
pub mod blas_manual {
    use super::*;
    use crate::blas::gen;

    /// # Safety
    /// `handle` is NULL or a writable handle slot.
    pub unsafe extern "C" fn cublasCreate_v2(handle: *mut *mut c_void) -> i32 {
        if handle.is_null() {
            return blas::CUBLAS_STATUS_INVALID_VALUE;
        }
        // SAFETY: `handle` is non-NULL (checked above), and a non-NULL slot
        // is writable: cublasCreate's contract, passed on to the stub.
        let s = unsafe { gen::cublasCreate_v2(handle) };
        if s == blas::CUBLAS_STATUS_SUCCESS {
            // SAFETY: the same readable slot, into which the stub wrote the
            // new handle on success.
            let h = unsafe { *handle };
            states().insert(h as usize as u64, HandleState::default());
        }
        s
    }

    /// # Safety
    /// As cublasSetStream_v2.
    pub unsafe extern "C" fn cublasSetStream_v2(handle: *mut c_void, stream: *mut c_void) -> i32 {
        let v = stream as usize;
        // SAFETY: the stub is passed the application's own handle and
        // stream, unread here; it looks both up in the client's tables
        // before use, so any value is sound (cublasSetStream's contract).
        set(
            handle,
            v,
            |st| &mut st.stream,
            || unsafe { gen::cublasSetStream_v2(handle, stream) },
        )
    }

    /// # Safety
    /// `handle` is the application's cuBLAS handle (checked).
    pub unsafe extern "C" fn cublasSetMathMode(handle: *mut c_void, mode: i32) -> i32 {
        // SAFETY: no pointer the library reads but the handle, checked.
        set(
            handle,
            mode,
            |st| &mut st.math,
            || unsafe { gen::cublasSetMathMode(handle, mode) },
        )
    }

    /// # Safety
    /// `handle` is the application's cuBLAS handle and `workspace` a device
    /// address (both checked).
    pub unsafe extern "C" fn cublasSetWorkspace_v2(
        handle: *mut c_void,
        workspace: *mut c_void,
        size: usize,
    ) -> i32 {
        let v = Some((workspace as usize, size));
        // SAFETY: the workspace is a device address, checked by both sides.
        set(
            handle,
            v,
            |st| &mut st.workspace,
            || unsafe { gen::cublasSetWorkspace_v2(handle, workspace, size) },
        )
    }

    /// Sets one of a handle's settings: on the server only when it changes
    /// (`send`), and remembered once the server took it. A handle that is
    /// not ours goes to `send` too, which refuses it as before.
    fn set<T: PartialEq>(
        handle: *mut c_void,
        value: T,
        field: impl Fn(&mut HandleState) -> &mut T,
        send: impl FnOnce() -> i32,
    ) -> i32 {
        let Ok(id) = blas_handle(handle) else {
            return send();
        };
        if states().get_mut(&id).is_some_and(|st| *field(st) == value) {
            return blas::CUBLAS_STATUS_SUCCESS;
        }
        let s = send();
        if s == blas::CUBLAS_STATUS_SUCCESS {
            if let Some(st) = states().get_mut(&id) {
                *field(st) = value;
            }
        }
        s
    }

    /// # Safety
    /// `stream` is NULL or writable.
    pub unsafe extern "C" fn cublasGetStream_v2(
        handle: *mut c_void,
        stream: *mut *mut c_void,
    ) -> i32 {
        let id = match blas_handle(handle) {
            Ok(id) => id,
            Err(e) => return e,
        };
        if stream.is_null() {
            return blas::CUBLAS_STATUS_INVALID_VALUE;
        }
        let s = states().get(&id).map_or(0, |s| s.stream);
        // SAFETY: `stream` is non-NULL (checked above), and a non-NULL one
        // is a writable cudaStream_t slot: cublasGetStream's contract.
        unsafe { *stream = s as *mut c_void };
        blas::CUBLAS_STATUS_SUCCESS
    }

    pub extern "C" fn cublasSetPointerMode_v2(handle: *mut c_void, mode: i32) -> i32 {
        let id = match blas_handle(handle) {
            Ok(id) => id,
            Err(e) => return e,
        };
        if !matches!(mode, 0 | 1) {
            return blas::CUBLAS_STATUS_INVALID_VALUE;
        }
        states().entry(id).or_default().device_mode = mode == 1;
        blas::CUBLAS_STATUS_SUCCESS
    }

    /// # Safety
    /// `mode` is NULL or writable.
    pub unsafe extern "C" fn cublasGetPointerMode_v2(handle: *mut c_void, mode: *mut i32) -> i32 {
        if let Err(e) = blas_handle(handle) {
            return e;
        }
        if mode.is_null() {
            return blas::CUBLAS_STATUS_INVALID_VALUE;
        }
        // SAFETY: `mode` is non-NULL (checked above), and a non-NULL one is
        // a writable cublasPointerMode_t: cublasGetPointerMode's contract.
        unsafe { *mode = device_mode(handle) as i32 };
        blas::CUBLAS_STATUS_SUCCESS
    }

    /// The server's library's version; without a server or a library
    /// there, the version of the wheel the description was checked against
    /// (natively a NULL handle works too).
    ///
    /// # Safety
    /// `version` is NULL or writable.
    pub unsafe extern "C" fn cublasGetVersion_v2(handle: *mut c_void, version: *mut i32) -> i32 {
        if version.is_null() {
            return blas::CUBLAS_STATUS_INVALID_VALUE;
        }
        // SAFETY: `version` is a writable int (checked non-NULL above), and
        // `handle` is passed on as the application gave it, as natively.
        if unsafe { gen::cublasGetVersion_v2(handle, version) } != blas::CUBLAS_STATUS_SUCCESS {
            // SAFETY: `version` is non-NULL (checked above), and a non-NULL
            // one is a writable int: cublasGetVersion's contract.
            unsafe { *version = blas::version(state::MAJOR.load(Ordering::Relaxed)) };
        }
        blas::CUBLAS_STATUS_SUCCESS
    }

    pub extern "C" fn cublasGetStatusName(status: i32) -> *const c_char {
        blas::status_text(status).0.as_ptr()
    }

    pub extern "C" fn cublasGetStatusString(status: i32) -> *const c_char {
        blas::status_text(status).1.as_ptr()
    }
}

/// The stream each cuSOLVER handle was last given (cusolverDnGetStream's
/// answer; a new handle has the default stream).
fn solver_streams() -> MutexGuard<'static, HashMap<u64, usize>> {
    static S: Global<HashMap<u64, usize>> = Global::new();
    S.lock()
}

/// A host workspace (cuSOLVER's 64-bit API): never the client's memory on
/// the server, so nothing travels; the server gives the library none and
/// refuses a call that asks for some.
pub mod nohost {
    use super::*;
    pub fn put(_c: &mut Call, _p: *mut c_void) -> Result<(), i32> {
        Ok(())
    }
    pub fn take(_: (), _r: &mut Reply, _p: *mut c_void) -> Result<(), i32> {
        Ok(())
    }
}

/// Hand-written cuSOLVER functions.
pub mod solver_manual {
    use super::*;
    use crate::solver::gen;

    /// # Safety
    /// As cusolverDnSetStream.
    pub unsafe extern "C" fn cusolverDnSetStream(handle: *mut c_void, stream: *mut c_void) -> i32 {
        // SAFETY: the stub reads neither pointer: it looks the handle and
        // the stream up in the client's tables and refuses unknown ones, so
        // any values are sound.
        let s = unsafe { gen::cusolverDnSetStream(handle, stream) };
        if s == solver::CUSOLVER_STATUS_SUCCESS {
            solver_streams().insert(handle as usize as u64, stream as usize);
        }
        s
    }

    /// # Safety
    /// `stream` is NULL or writable.
    pub unsafe extern "C" fn cusolverDnGetStream(
        handle: *mut c_void,
        stream: *mut *mut c_void,
    ) -> i32 {
        if handle.is_null() || state::handle_id(handle, Kind::Cusolver).is_err() {
            return solver::CUSOLVER_STATUS_NOT_INITIALIZED;
        }
        if stream.is_null() {
            return solver::CUSOLVER_STATUS_INVALID_VALUE;
        }
        let s = solver_streams()
            .get(&(handle as usize as u64))
            .copied()
            .unwrap_or(0);
        // SAFETY: `stream` is non-NULL (checked above), and a non-NULL one
        // is a writable cudaStream_t slot: cusolverDnGetStream's contract.
        unsafe { *stream = s as *mut c_void };
        solver::CUSOLVER_STATUS_SUCCESS
    }
}

/// Hand-written cuRAND functions.
pub mod rand_manual {
    use super::*;

    /// As cublasGetVersion_v2: the server's library's, else the client's.
    ///
    /// # Safety
    /// `version` is NULL or writable.
    pub unsafe extern "C" fn curandGetVersion(version: *mut i32) -> i32 {
        if version.is_null() {
            return rand::CURAND_STATUS_OUT_OF_RANGE;
        }
        // SAFETY: `version` is a writable int (checked non-NULL above).
        if unsafe { crate::rand::gen::curandGetVersion(version) } != rand::CURAND_STATUS_SUCCESS {
            // SAFETY: `version` is non-NULL (checked above), and a non-NULL
            // one is a writable int: curandGetVersion's contract.
            unsafe { *version = rand::version(state::MAJOR.load(Ordering::Relaxed)) };
        }
        rand::CURAND_STATUS_SUCCESS
    }
}

use wormhole_cuda_api::forward::{
    BLAS as FORWARD_BLAS, DRIVER as FORWARD_DRIVER, LT as FORWARD_LT, RAND as FORWARD_RAND,
    SOLVER as FORWARD_SOLVER,
};

/// The client's implementation of every function of an API, in its
/// description's order, when `fingerprint` is that description's (the
/// stand-in asking was generated from the same one).
pub fn forward_table(api: u32, fingerprint: u64) -> Option<&'static [usize]> {
    static B: OnceLock<[usize; crate::blas::gen::FORWARD_LEN]> = OnceLock::new();
    static R: OnceLock<[usize; crate::rand::gen::FORWARD_LEN]> = OnceLock::new();
    static D: OnceLock<[usize; crate::driver::gen::FORWARD_LEN]> = OnceLock::new();
    static L: OnceLock<[usize; crate::lt::gen::FORWARD_LEN]> = OnceLock::new();
    static S: OnceLock<[usize; crate::solver::gen::FORWARD_LEN]> = OnceLock::new();
    match api {
        FORWARD_BLAS if fingerprint == crate::blas::gen::FINGERPRINT => {
            Some(B.get_or_init(crate::blas::gen::forward_table))
        }
        FORWARD_RAND if fingerprint == crate::rand::gen::FINGERPRINT => {
            Some(R.get_or_init(crate::rand::gen::forward_table))
        }
        FORWARD_DRIVER if fingerprint == crate::driver::gen::FINGERPRINT => {
            Some(D.get_or_init(crate::driver::gen::forward_table))
        }
        FORWARD_LT if fingerprint == crate::lt::gen::FINGERPRINT => {
            Some(L.get_or_init(crate::lt::gen::forward_table))
        }
        FORWARD_SOLVER if fingerprint == crate::solver::gen::FINGERPRINT => {
            Some(S.get_or_init(crate::solver::gen::forward_table))
        }
        _ => None,
    }
}

/// The private entry through which the libcublas and libcurand stand-ins
/// reach this library's one copy of the client (exported by the libcudart
/// stand-ins): the table of `api` and its length, or NULL when the caller
/// was built from another description.
///
/// # Safety
/// `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn wormhole_cuda_forward_table(
    api: u32,
    fingerprint: u64,
    len: *mut usize,
) -> *const usize {
    match forward_table(api, fingerprint) {
        Some(t) => {
            if !len.is_null() {
                // SAFETY: `len` is non-NULL (checked above), and a non-NULL
                // one is a writable usize: this entry's contract with the
                // stand-ins (wormhole-cuda-forward passes a local).
                unsafe { *len = t.len() };
            }
            t.as_ptr()
        }
        None => {
            state::log(&format!(
                "a stand-in asked for table {api} of another description ({fingerprint:#x})"
            ));
            std::ptr::null()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_given_only_to_their_own_description() {
        let b = forward_table(FORWARD_BLAS, crate::blas::gen::FINGERPRINT).expect("blas");
        assert_eq!(b.len(), crate::blas::gen::FORWARD_LEN);
        assert!(b.iter().all(|&p| p != 0));
        assert!(forward_table(FORWARD_BLAS, crate::rand::gen::FINGERPRINT).is_none());
        assert!(forward_table(FORWARD_RAND, crate::blas::gen::FINGERPRINT).is_none());
        assert!(forward_table(9, crate::blas::gen::FINGERPRINT).is_none());
        let mut len = 0usize;
        // SAFETY: a valid out-pointer.
        let p = unsafe {
            wormhole_cuda_forward_table(FORWARD_RAND, crate::rand::gen::FINGERPRINT, &mut len)
        };
        assert!(!p.is_null());
        assert_eq!(len, crate::rand::gen::FORWARD_LEN);
        // SAFETY: `len` is still a local usize, writable; a refused table
        // writes no length anyway.
        let q = unsafe { wormhole_cuda_forward_table(FORWARD_RAND, 0, &mut len) };
        assert!(q.is_null());
    }

    #[test]
    fn unreachable_server_answers_as_no_driver() {
        assert_eq!(
            offline_status(blas::func::cublasCreate_v2),
            blas::CUBLAS_STATUS_NOT_INITIALIZED
        );
        assert_eq!(
            offline_status(rand::func::curandCreateGenerator),
            rand::CURAND_STATUS_INITIALIZATION_FAILED
        );
        assert_eq!(
            offline_status(rand::func::curandGenerateUniform),
            rand::CURAND_STATUS_NOT_INITIALIZED
        );
    }

    #[test]
    fn local_answers_need_no_server() {
        use blas_manual::*;
        let name = |s| {
            // SAFETY: the table's strings are static and NUL-terminated.
            unsafe { std::ffi::CStr::from_ptr(cublasGetStatusName(s)) }
        };
        assert_eq!(name(7), c"CUBLAS_STATUS_INVALID_VALUE");
        assert_eq!(name(2), c"unrecognized status");
        let mut v = 0;
        // SAFETY: a valid out-pointer.
        let s = unsafe { cublasGetVersion_v2(std::ptr::null_mut(), &mut v) };
        assert_eq!(s, 0);
        assert!(v == 120903 || v == 131000);
        // A handle this process was never given.
        assert_eq!(
            cublasSetPointerMode_v2(0x4321 as *mut c_void, 1),
            blas::CUBLAS_STATUS_NOT_INITIALIZED
        );
        // SAFETY: NULL is refused before any write.
        let s = unsafe { cublasCreate_v2(std::ptr::null_mut()) };
        assert_eq!(s, blas::CUBLAS_STATUS_INVALID_VALUE);
    }
}
