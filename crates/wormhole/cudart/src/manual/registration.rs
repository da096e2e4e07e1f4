//! What nvcc's host code registers at load: fat binaries (modules), their
//! kernels by host stub address and their device variables, sent to the
//! server without waiting; a kernel's parameter layout is read from its
//! cubin at its first launch.

use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

use wormhole_cuda_api::fatbin::{self, Kernel};
use wormhole_cuda_api::*;

use crate::call::Call;
use crate::state;
use crate::state::Global;

/// A registered fat binary: what `__cudaRegisterFatBinary` returns.
struct Module {
    id: u64,
    /// nvcc's embedded fat binary (empty if it was unreadable) and the
    /// layouts read from it so far.
    image: &'static [u8],
    layouts: Mutex<fatbin::Layouts>,
}

/// A registered kernel, by host stub address.
struct Func {
    module: &'static Module,
    name: Box<[u8]>,
    /// Found at its first launch, not at registration: a framework
    /// registers thousands of kernels (PyTorch, about 20,000) and launches
    /// few, and finding one may inflate compressed cubins (natively, CUDA
    /// loads modules lazily too). `Some(None)`: in no cubin we could read.
    /// Shared, so that a launch takes it without copying it.
    layout: Option<Option<Arc<Kernel>>>,
}

/// The layout of the kernel whose host stub is `host`, found at first
/// use. `Err`: not registered; `Ok(None)`: no readable layout.
pub(super) fn kernel_layout(host: u64) -> Result<Option<Arc<Kernel>>, i32> {
    let mut all = funcs();
    let f = all.get_mut(&host).ok_or(cudaErrorInvalidDeviceFunction)?;
    if f.layout.is_none() {
        let m = f.module;
        let found = match m
            .layouts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .find(m.image, &f.name)
        {
            Ok(k) => k.cloned().map(Arc::new),
            Err(e) => {
                state::log(&format!("fat binary: {e}"));
                None
            }
        };
        f.layout = Some(found);
    }
    Ok(f.layout.clone().flatten())
}

/// Sends a registration without waiting for its answer: registering
/// returns nothing, and a library registers a call per kernel (PyTorch,
/// about 20,000 at import). The first of each kind waits, as every
/// deferred call's does. A later one that fails is reported by no later
/// call (it has no status, so the server keeps none for it): the kernel's
/// launches fail instead, as natively.
fn post_registration(c: Call<'static>) {
    // The runtime's last error is not touched: registration has no status.
    let _ = c.finish_async_as(false, |r| (r.raw_status(), cudaSuccess));
}

/// Whether `host` is a registered kernel's host stub.
pub(super) fn is_registered(host: u64) -> bool {
    funcs().contains_key(&host)
}

fn funcs() -> MutexGuard<'static, HashMap<u64, Func>> {
    static F: Global<HashMap<u64, Func>> = Global::new();
    F.lock()
}

/// `__fatBinC_Wrapper_t`.
#[repr(C)]
struct Wrapper {
    magic: u32,
    version: u32,
    data: *const u8,
    filename_or_fatbins: *mut c_void,
}

/// Copies the fat binary nvcc embedded and sends it to the server, which
/// registers it with the real runtime. Registration cannot fail visibly
/// (it returns no status); a failure shows at launch.
///
/// # Safety
/// `fat_cubin` is nvcc's wrapper for an embedded fat binary.
pub unsafe extern "C" fn __cudaRegisterFatBinary(fat_cubin: *mut c_void) -> *mut *mut c_void {
    let id = state::fresh_id();
    let mut image: &'static [u8] = &[];
    let mut layouts = fatbin::Layouts::default();
    // SAFETY: `fat_cubin` is NULL (as_ref answers None) or nvcc's readable
    // `__fatBinC_Wrapper_t`, whose layout Wrapper is: the contract of the
    // host code nvcc generates, the only caller.
    let w = unsafe { (fat_cubin as *const Wrapper).as_ref() };
    if let Some(w) = w.filter(|w| w.magic == fatbin::WRAPPER_MAGIC && !w.data.is_null()) {
        // SAFETY: the wrapper points to a fat binary, whose header is 16 bytes.
        let header = unsafe { std::slice::from_raw_parts(w.data, 16) };
        if let Ok(len) = fatbin::fatbin_len(header) {
            // SAFETY: the header says how long the fat binary is. It lies in
            // the program's (or a library's) data, which stays mapped until
            // __cudaUnregisterFatBinary, after the module's last
            // registration; only those read it through the module.
            let fb: &'static [u8] = unsafe { std::slice::from_raw_parts(w.data, len as usize) };
            match fatbin::Layouts::new(fb) {
                Ok(l) => (image, layouts) = (fb, l),
                Err(e) => state::log(&format!("fat binary: {e}")),
            }
            if let Ok(mut c) = Call::begin(func::__cudaRegisterFatBinary) {
                c.enc.u64(id);
                c.enc.bytes(fb);
                post_registration(c);
            }
        }
    }
    let layouts = Mutex::new(layouts);
    Box::into_raw(Box::new(Module { id, image, layouts })) as *mut *mut c_void
}

/// Ends a module's registration (after its kernels and variables).
pub extern "C" fn __cudaRegisterFatBinaryEnd(h: *mut *mut c_void) {
    let Some(m) = module_of(h) else { return };
    if let Ok(mut c) = Call::begin(func::__cudaRegisterFatBinaryEnd) {
        c.enc.u64(m.id);
        post_registration(c);
    }
}

/// Modules live as long as the process: the server frees them with the
/// tenant.
pub extern "C" fn __cudaUnregisterFatBinary(_h: *mut *mut c_void) {}

/// A module is loaded once registered (see cuda.api).
pub extern "C" fn __cudaInitModule(h: *mut *mut c_void) -> c_char {
    module_of(h).is_some() as c_char
}

fn module_of(h: *mut *mut c_void) -> Option<&'static Module> {
    // SAFETY: `h` is what __cudaRegisterFatBinary returned (a leaked Module).
    (!h.is_null()).then(|| unsafe { &*(h as *const Module) })
}

/// # Safety
/// As nvcc's host code calls it: `h` from __cudaRegisterFatBinary,
/// `device_name` a NUL-terminated string.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn __cudaRegisterFunction(
    h: *mut *mut c_void,
    host_fun: *const c_char,
    _device_fun: *mut c_char,
    device_name: *const c_char,
    _thread_limit: i32,
    _tid: *mut c_void,
    _bid: *mut c_void,
    _bdim: *mut c_void,
    _gdim: *mut c_void,
    _wsize: *mut i32,
) {
    let Some(m) = module_of(h) else { return };
    if device_name.is_null() {
        return;
    }
    // SAFETY: `device_name` is non-NULL (checked above) and NUL-terminated:
    // nvcc's host code passes the kernel's mangled name, a static string.
    let name = unsafe { std::ffi::CStr::from_ptr(device_name) }.to_bytes();
    funcs().insert(
        host_fun as usize as u64,
        Func {
            module: m,
            name: name.into(),
            layout: None,
        },
    );
    if let Ok(mut c) = Call::begin(func::__cudaRegisterFunction) {
        c.enc.u64(m.id);
        c.enc.u64(host_fun as usize as u64);
        c.enc.bytes(name);
        post_registration(c);
    }
}

/// Device variables are registered with the server under the host
/// shadow's address, which symbol copies name.
///
/// # Safety
/// As nvcc's host code calls it.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn __cudaRegisterVar(
    h: *mut *mut c_void,
    host_var: *mut c_char,
    _device_address: *mut c_char,
    device_name: *const c_char,
    ext: i32,
    size: usize,
    constant: i32,
    global: i32,
) {
    let Some(m) = module_of(h) else { return };
    if device_name.is_null() {
        return;
    }
    // SAFETY: `device_name` is non-NULL (checked above) and NUL-terminated:
    // nvcc's host code passes the variable's name, a static string.
    let name = unsafe { std::ffi::CStr::from_ptr(device_name) }.to_bytes();
    vars().insert(host_var as usize as u64, size as u64);
    if let Ok(mut c) = Call::begin(func::__cudaRegisterVar) {
        c.enc.u64(m.id);
        c.enc.u64(host_var as usize as u64);
        c.enc.bytes(name);
        c.enc.i32(ext);
        c.enc.u64(size as u64);
        c.enc.i32(constant);
        c.enc.i32(global);
        post_registration(c);
    }
}

/// Registered device variables: host shadow address -> size.
pub(super) fn vars() -> MutexGuard<'static, HashMap<u64, u64>> {
    static V: Global<HashMap<u64, u64>> = Global::new();
    V.lock()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wrapper that is not nvcc's still gives a module (registration has
    /// no status to fail with), with no kernel layout and nothing sent.
    #[test]
    fn modules_exist_once_registered() {
        assert_eq!(__cudaInitModule(std::ptr::null_mut()), 0);
        let foreign = Wrapper {
            magic: 0,
            version: 1,
            data: std::ptr::null(),
            filename_or_fatbins: std::ptr::null_mut(),
        };
        // SAFETY: a readable wrapper, refused for its magic.
        let module =
            unsafe { __cudaRegisterFatBinary(std::ptr::from_ref(&foreign).cast_mut().cast()) };
        assert_eq!(__cudaInitModule(module), 1);
        assert!(module_of(module).is_some_and(|m| m.image.is_empty()));
        // SAFETY: a NULL module is ignored.
        unsafe {
            __cudaRegisterFunction(
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null_mut(),
                c"k".as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(kernel_layout(0).err(), Some(cudaErrorInvalidDeviceFunction));
    }
}
