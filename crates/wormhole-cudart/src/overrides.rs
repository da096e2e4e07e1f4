//! The hand-written side of the description: `manual` and `client-only`
//! functions, with the C signatures the description gives them (and their C
//! names, hence the allowance).
#![allow(non_snake_case)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use wormhole_cuda_api::fatbin::{self, Kernel};
use wormhole_cuda_api::tracker::Alloc;
use wormhole_cuda_api::wire::{Launch, Memcpy, SymbolCopy, MEMCPY_CHUNK};
use wormhole_cuda_api::*;

pub use crate::host::{
    cudaFreeHost, cudaHostAlloc, cudaHostRegister, cudaHostUnregister, cudaMallocHost,
};
pub use crate::mem3d::{
    cudaMalloc3D, cudaMemcpy3D, cudaMemcpy3DAsync, cudaMemset3D, cudaMemset3DAsync,
};
pub use crate::pools::{
    cudaDeviceGetDefaultMemPool, cudaMemPoolGetAttribute, cudaMemPoolSetAccess,
    cudaMemPoolSetAttribute, cudaMemPoolTrimTo,
};
pub use crate::refused::*;
use crate::rt::{self, last_error, note, tracker, Call};
use crate::Dim3;

/// Runs a call and returns its status, recording it as the last error.
fn status_of(r: Result<i32, i32>) -> i32 {
    match r {
        Ok(s) | Err(s) => note(s),
    }
}

// ---- Errors ---------------------------------------------------------------

pub extern "C" fn cudaGetLastError() -> i32 {
    last_error(true)
}

pub extern "C" fn cudaPeekAtLastError() -> i32 {
    last_error(false)
}

fn error_text(code: i32, name: bool) -> *const c_char {
    static TEXTS: OnceLock<HashMap<(i32, bool), CString>> = OnceLock::new();
    let t = TEXTS.get_or_init(|| {
        let mut m = HashMap::new();
        for &(c, n, s) in errors::ERRORS {
            m.insert((c, true), CString::new(n).unwrap_or_default());
            m.insert((c, false), CString::new(s).unwrap_or_default());
        }
        m.insert(
            (i32::MIN, true),
            CString::new(errors::UNRECOGNIZED).unwrap_or_default(),
        );
        m
    });
    t.get(&(code, name))
        .or_else(|| t.get(&(i32::MIN, true)))
        .map_or(std::ptr::null(), |s| s.as_ptr())
}

pub extern "C" fn cudaGetErrorString(error: i32) -> *const c_char {
    error_text(error, false)
}

pub extern "C" fn cudaGetErrorName(error: i32) -> *const c_char {
    error_text(error, true)
}

/// # Safety
/// `v` is NULL or writable.
pub unsafe extern "C" fn cudaRuntimeGetVersion(v: *mut i32) -> i32 {
    if v.is_null() {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: checked non-NULL; the caller's contract.
    unsafe { *v = runtime_version(rt::MAJOR.load(Ordering::Relaxed)) };
    cudaSuccess
}

// ---- Devices ----------------------------------------------------------------

/// # Safety
/// `prop` is NULL or holds a `cudaDeviceProp` of this library's version.
pub unsafe extern "C" fn cudaGetDeviceProperties(prop: *mut c_void, device: i32) -> i32 {
    if prop.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let major = rt::MAJOR.load(Ordering::Relaxed);
    status_of((|| {
        let mut c = Call::begin(func::cudaGetDeviceProperties)?;
        c.enc.u32(major);
        c.enc.i32(device);
        let mut r = c.finish()?;
        let status = r.status();
        if r.has_outputs() {
            // SAFETY: the caller's contract: room for this version's struct.
            unsafe { r.out_bytes(prop, devprop_size(major) as u64)? };
        }
        Ok(status)
    })())
}

/// CUDA 12's headers rename cudaGetDeviceProperties to this.
///
/// # Safety
/// As for [`cudaGetDeviceProperties`].
pub unsafe extern "C" fn cudaGetDeviceProperties_v2(prop: *mut c_void, device: i32) -> i32 {
    // SAFETY: same contract.
    unsafe { cudaGetDeviceProperties(prop, device) }
}

// ---- Memory -------------------------------------------------------------------

/// # Safety
/// `dev_ptr` is NULL or writable.
pub unsafe extern "C" fn cudaMalloc(dev_ptr: *mut *mut c_void, size: usize) -> i32 {
    if dev_ptr.is_null() {
        return note(cudaErrorInvalidValue);
    }
    status_of((|| {
        let mut c = Call::begin(func::cudaMalloc)?;
        c.enc.u64(size as u64);
        let mut r = c.finish()?;
        let status = r.status();
        if r.has_outputs() {
            let p = r.with(|d| d.u64().map_err(|_| cudaErrorUnknown))?;
            let dev = r.with(|d| d.i32().map_err(|_| cudaErrorUnknown))?;
            // A server handing out overlapping ranges is broken: refuse.
            // (NULL, for a zero-byte allocation, is never device memory.)
            if p != 0 {
                tracker()
                    .insert(Alloc {
                        start: p,
                        size: size as u64,
                        device: dev,
                    })
                    .map_err(|_| cudaErrorUnknown)?;
            }
            // SAFETY: checked non-NULL; the caller's contract.
            unsafe { *dev_ptr = p as usize as *mut c_void };
        }
        Ok(status)
    })())
}

pub extern "C" fn cudaFree(dev_ptr: *mut c_void) -> i32 {
    if dev_ptr.is_null() {
        return cudaSuccess;
    }
    let p = dev_ptr as usize as u64;
    if tracker().find(p).map(|a| a.start) != Some(p) {
        return note(cudaErrorInvalidValue);
    }
    status_of((|| {
        let mut c = Call::begin(func::cudaFree)?;
        c.enc.u64(p);
        let mut r = c.finish()?;
        let status = r.status_with_deferred();
        if status == cudaSuccess {
            // While the reply still holds the channel: once it is free,
            // another thread's cudaMalloc may be given this address, and
            // must find it gone from the tracker.
            tracker().remove(p);
            crate::pools::freed(p);
        }
        drop(r);
        Ok(status)
    })())
}

fn is_dev(p: u64) -> bool {
    p != 0 && tracker().find(p).is_some()
}

/// One copy, split into requests of at most `MEMCPY_CHUNK` host bytes.
///
/// # Safety
/// `dst` and `src` hold `count` bytes of the memory their direction says.
unsafe fn memcpy(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: i32,
    stream: u64,
) -> i32 {
    let (d, s) = (dst as usize as u64, src as usize as u64);
    let dir = match direction(kind, is_dev(d), is_dev(s)) {
        Ok(dir) => dir,
        Err(e) => return note(e),
    };
    if count == 0 {
        return cudaSuccess;
    }
    let check = |p: u64, n: u64| {
        tracker()
            .check(p, n)
            .map(|_| ())
            .map_err(|_| cudaErrorInvalidValue)
    };
    let res = (|| -> Result<i32, i32> {
        match dir {
            Direction::HostToHost => {
                // SAFETY: the caller's contract.
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count) };
                Ok(cudaSuccess)
            }
            Direction::DeviceToDevice => {
                check(d, count as u64)?;
                check(s, count as u64)?;
                let mut c = Call::begin(func::cudaMemcpy)?;
                Memcpy {
                    dir,
                    dst: d,
                    src: s,
                    count: count as u64,
                    stream,
                }
                .encode(&mut c.enc);
                for v in [dir as u64, count as u64, stream] {
                    c.shape(v);
                }
                c.finish_async(false)
            }
            Direction::HostToDevice | Direction::DeviceToHost => {
                let dev = if dir == Direction::HostToDevice { d } else { s };
                check(dev, count as u64)?;
                let mut off = 0u64;
                while off < count as u64 {
                    let n = (count as u64 - off).min(MEMCPY_CHUNK);
                    let mut c = Call::begin(func::cudaMemcpy)?;
                    let m = if dir == Direction::HostToDevice {
                        Memcpy {
                            dir,
                            dst: d + off,
                            src: 0,
                            count: n,
                            stream,
                        }
                    } else {
                        Memcpy {
                            dir,
                            dst: 0,
                            src: s + off,
                            count: n,
                            stream,
                        }
                    };
                    m.encode(&mut c.enc);
                    if dir == Direction::HostToDevice {
                        // SAFETY: the caller's contract: `src` holds `count` bytes.
                        let data = unsafe {
                            std::slice::from_raw_parts(
                                (src as *const u8).add(off as usize),
                                n as usize,
                            )
                        };
                        c.enc.bytes(data);
                        // The data travel in the request, so the copy can
                        // go without waiting, as native copies from
                        // pageable memory return once the data are staged;
                        // the range was checked above.
                        for v in [dir as u64, n, stream] {
                            c.shape(v);
                        }
                        let status = c.finish_async(false)?;
                        if status != cudaSuccess {
                            return Ok(status);
                        }
                        off += n;
                        continue;
                    }
                    let mut r = c.finish()?;
                    let status = r.status_with_deferred();
                    if status != cudaSuccess {
                        return Ok(status);
                    }
                    let bytes =
                        r.with(|d| d.bytes().map(|b| b.to_vec()).map_err(|_| cudaErrorUnknown))?;
                    if bytes.len() as u64 != n {
                        return Err(cudaErrorUnknown);
                    }
                    // SAFETY: the caller's contract: `dst` holds `count` bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            bytes.as_ptr(),
                            (dst as *mut u8).add(off as usize),
                            n as usize,
                        )
                    };
                    off += n;
                }
                Ok(cudaSuccess)
            }
        }
    })();
    status_of(res)
}

/// # Safety
/// As for the native cudaMemcpy.
pub unsafe extern "C" fn cudaMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: i32,
) -> i32 {
    // SAFETY: same contract.
    unsafe { memcpy(dst, src, count, kind, 0) }
}

/// The host side of the copy is done when this returns, which the native
/// call only guarantees at the next synchronisation: a copy to the device
/// carries its data and goes batched, one from the device waits for them.
///
/// # Safety
/// As for the native cudaMemcpyAsync.
pub unsafe extern "C" fn cudaMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: i32,
    stream: *mut c_void,
) -> i32 {
    let sid = match rt::handle_id(stream, Kind::Stream) {
        Ok(s) => s,
        Err(e) => return note(e),
    };
    // SAFETY: same contract.
    unsafe { memcpy(dst, src, count, kind, sid) }
}

/// `struct cudaPointerAttributes` (CUDA 11 and later).
#[repr(C)]
struct PointerAttributes {
    kind: i32,
    device: i32,
    device_pointer: *mut c_void,
    host_pointer: *mut c_void,
}

/// Answered from the trackers, without a round trip: device memory is ours
/// if the tracker knows it, page-locked host memory if `host` does, and
/// anything else is unregistered host memory.
///
/// # Safety
/// `attributes` is NULL or writable.
pub unsafe extern "C" fn cudaPointerGetAttributes(
    attributes: *mut c_void,
    ptr: *const c_void,
) -> i32 {
    if attributes.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let a = tracker().find(ptr as usize as u64);
    let v = match a {
        Some(a) => PointerAttributes {
            kind: 2, // cudaMemoryTypeDevice
            device: a.device,
            device_pointer: ptr as *mut c_void,
            host_pointer: std::ptr::null_mut(),
        },
        None => match crate::host::find(ptr as usize as u64) {
            // Page-locked, but out of the device's reach (host.rs).
            Some(h) => PointerAttributes {
                kind: 1, // cudaMemoryTypeHost
                device: h.device,
                device_pointer: std::ptr::null_mut(),
                host_pointer: ptr as *mut c_void,
            },
            None => PointerAttributes {
                kind: 0, // cudaMemoryTypeUnregistered
                device: -2,
                device_pointer: std::ptr::null_mut(),
                host_pointer: ptr as *mut c_void,
            },
        },
    };
    // SAFETY: checked non-NULL; the caller's contract.
    unsafe { std::ptr::write(attributes as *mut PointerAttributes, v) };
    cudaSuccess
}

/// The server's device count, asked once: a process's devices do not
/// change. A failure to initialise (no driver, no device, no server) is
/// kept as natively; any other failure is asked again next time.
pub(crate) fn device_count() -> Result<i32, i32> {
    static N: OnceLock<Result<i32, i32>> = OnceLock::new();
    if let Some(n) = N.get() {
        return *n;
    }
    let mut n = 0;
    // SAFETY: a valid out-pointer.
    let r = match unsafe { crate::gen::cudaGetDeviceCount(&mut n) } {
        0 => Ok(n),
        s => Err(s),
    };
    if matches!(r, Ok(_) | Err(3 | 35 | 100)) {
        let _ = N.set(r);
    }
    r
}

/// Whether the runtime can initialise, as natively calls that need no
/// device round trip still need a driver: the first such call asks the
/// server (its answer, an initialisation failure or success, is kept).
pub(crate) fn init_status() -> i32 {
    match device_count() {
        Err(s @ (3 | 35 | 100)) => s,
        _ => cudaSuccess,
    }
}

thread_local! {
    /// This thread's current device, as the runtime keeps one per host
    /// thread (0, the runtime's default, until the thread sets one).
    static THREAD_DEVICE: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// The device the tenant's calls now run on: the one the last switch this
/// client sent made current (changed only under the connection's lock).
static TENANT_DEVICE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The calling thread's current device.
pub(crate) fn current_device() -> i32 {
    THREAD_DEVICE.with(std::cell::Cell::get)
}

/// Makes `device` (a valid one) the calling thread's current device.
pub(crate) fn set_thread_device(device: i32) {
    THREAD_DEVICE.with(|d| d.set(device));
}

/// Before a request from this thread: if the tenant's current device is
/// another thread's, a switch to this thread's goes first, in the same
/// ring and without waiting (it is a device this thread's cudaSetDevice
/// found valid). A process whose threads share one device never sends one.
/// Returns the switch's status: cudaSuccess unless WORMHOLE_SYNC=1 made it
/// wait and it failed, which the call it precedes then answers.
pub(crate) fn follow_thread_device(
    link: &mut wormhole_client::Link,
) -> Result<i32, wormhole_client::LinkError> {
    let want = current_device();
    if TENANT_DEVICE.load(Ordering::Relaxed) == want {
        return Ok(cudaSuccess);
    }
    let mut enc = link.request(func::cudaSetDevice)?;
    enc.i32(want);
    if wormhole_client::force_sync() {
        let mut a = link.exchange(enc, None)?;
        link.recycle(&mut a.cursor);
        if a.status != cudaSuccess {
            return Ok(a.status);
        }
    } else {
        link.post(enc, None, false)?;
    }
    TENANT_DEVICE.store(want, Ordering::Relaxed);
    Ok(cudaSuccess)
}

/// # Safety
/// `count` is NULL or writable.
pub unsafe extern "C" fn cudaGetDeviceCount(count: *mut i32) -> i32 {
    if count.is_null() {
        return note(cudaErrorInvalidValue);
    }
    match device_count() {
        Ok(n) => {
            // SAFETY: checked non-NULL; the caller's contract.
            unsafe { *count = n };
            cudaSuccess
        }
        Err(s) => note(s),
    }
}

/// The calling thread's device: one of the server's (cudaErrorInvalidDevice
/// otherwise, as natively). Nothing is asked of the server: the tenant
/// switches to it with this thread's next call (`follow_thread_device`).
pub extern "C" fn cudaSetDevice(device: i32) -> i32 {
    let init = init_status();
    if init != cudaSuccess {
        return note(init);
    }
    match device_count() {
        Ok(n) if (0..n).contains(&device) => {
            set_thread_device(device);
            cudaSuccess
        }
        Ok(_) => note(cudaErrorInvalidDevice),
        Err(s) => note(s),
    }
}

/// # Safety
/// `device` is NULL or writable.
pub unsafe extern "C" fn cudaGetDevice(device: *mut i32) -> i32 {
    if device.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let init = init_status();
    if init != cudaSuccess {
        return note(init);
    }
    // SAFETY: checked non-NULL; the caller's contract.
    unsafe { *device = current_device() };
    cudaSuccess
}

// ---- Kernels ----------------------------------------------------------------

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
fn kernel_layout(host: u64) -> Result<Option<Arc<Kernel>>, i32> {
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
                rt::log(&format!("fat binary: {e}"));
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

fn funcs() -> MutexGuard<'static, HashMap<u64, Func>> {
    static F: OnceLock<Mutex<HashMap<u64, Func>>> = OnceLock::new();
    F.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
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
    let id = rt::fresh_id();
    let mut image: &'static [u8] = &[];
    let mut layouts = fatbin::Layouts::default();
    // SAFETY: the caller's contract: NULL or nvcc's wrapper.
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
                Err(e) => rt::log(&format!("fat binary: {e}")),
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
    // SAFETY: the caller's contract.
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
    // SAFETY: the caller's contract.
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
fn vars() -> MutexGuard<'static, HashMap<u64, u64>> {
    static V: OnceLock<Mutex<HashMap<u64, u64>>> = OnceLock::new();
    V.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Checks a symbol copy against the variable's registered size.
fn symbol_range(symbol: *const c_void, count: usize, offset: usize) -> Result<u64, i32> {
    let id = symbol as usize as u64;
    let size = *vars().get(&id).ok_or(cudaErrorInvalidSymbol)?;
    match offset.checked_add(count) {
        Some(end) if end as u64 <= size => Ok(id),
        _ => Err(cudaErrorInvalidValue),
    }
}

/// The variable's id and, when the other side of a symbol copy is device
/// memory, its address (0: host memory).
fn symbol_args(
    to: bool,
    symbol: *const c_void,
    other: u64,
    count: usize,
    offset: usize,
    kind: i32,
) -> Result<(u64, u64), i32> {
    let id = symbol_range(symbol, count, offset)?;
    let other_dev = is_dev(other);
    let dir = if to {
        direction(kind, true, other_dev)?
    } else {
        direction(kind, other_dev, true)?
    };
    match dir {
        Direction::DeviceToDevice => Ok((id, other)),
        Direction::HostToDevice | Direction::DeviceToHost => Ok((id, 0)),
        Direction::HostToHost => Err(cudaErrorInvalidMemcpyDirection),
    }
}

/// One symbol copy; host data in chunks of at most `MEMCPY_CHUNK`.
///
/// # Safety
/// `host` holds `count` bytes (readable for `to`, writable otherwise)
/// unless `dev` is a device address.
unsafe fn symbol_copy(
    to: bool,
    symbol: u64,
    host: *mut u8,
    dev: u64,
    count: usize,
    offset: usize,
) -> i32 {
    status_of((|| {
        if dev != 0 {
            tracker()
                .check(dev, count as u64)
                .map_err(|_| cudaErrorInvalidValue)?;
            let mut c = Call::begin(func::cudaMemcpyToSymbol)?;
            SymbolCopy {
                to,
                symbol,
                offset: offset as u64,
                count: count as u64,
                device: dev,
            }
            .encode(&mut c.enc);
            return Ok(c.finish()?.status_with_deferred());
        }
        let mut done = 0usize;
        while done < count {
            let n = (count - done).min(MEMCPY_CHUNK as usize);
            let mut c = Call::begin(func::cudaMemcpyToSymbol)?;
            SymbolCopy {
                to,
                symbol,
                offset: (offset + done) as u64,
                count: n as u64,
                device: 0,
            }
            .encode(&mut c.enc);
            if to {
                // SAFETY: the caller's contract: `host` holds `count` bytes.
                c.enc
                    .bytes(unsafe { std::slice::from_raw_parts(host.add(done), n) });
            }
            let mut r = c.finish()?;
            let status = r.status_with_deferred();
            if status != cudaSuccess {
                return Ok(status);
            }
            if !to {
                let b = r.with(|d| d.bytes().map(|b| b.to_vec()).map_err(|_| cudaErrorUnknown))?;
                if b.len() != n {
                    return Err(cudaErrorUnknown);
                }
                // SAFETY: the caller's contract: `host` holds `count` bytes.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), host.add(done), n) };
            }
            done += n;
        }
        Ok(cudaSuccess)
    })())
}

/// # Safety
/// As for the native call.
pub unsafe extern "C" fn cudaMemcpyToSymbol(
    symbol: *const c_void,
    src: *const c_void,
    count: usize,
    offset: usize,
    kind: i32,
) -> i32 {
    let (id, dev) = match symbol_args(true, symbol, src as usize as u64, count, offset, kind) {
        Ok(v) => v,
        Err(e) => return note(e),
    };
    // SAFETY: the caller's contract.
    unsafe { symbol_copy(true, id, src as *mut u8, dev, count, offset) }
}

/// # Safety
/// As for the native call.
pub unsafe extern "C" fn cudaMemcpyFromSymbol(
    dst: *mut c_void,
    symbol: *const c_void,
    count: usize,
    offset: usize,
    kind: i32,
) -> i32 {
    let (id, dev) = match symbol_args(false, symbol, dst as usize as u64, count, offset, kind) {
        Ok(v) => v,
        Err(e) => return note(e),
    };
    // SAFETY: the caller's contract.
    unsafe { symbol_copy(false, id, dst as *mut u8, dev, count, offset) }
}

/// The registered size of a `__device__` or `__constant__` variable.
///
/// # Safety
/// `size` is NULL or writable.
pub unsafe extern "C" fn cudaGetSymbolSize(size: *mut usize, symbol: *const c_void) -> i32 {
    if size.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let Some(&n) = vars().get(&(symbol as usize as u64)) else {
        return note(cudaErrorInvalidSymbol);
    };
    // SAFETY: checked non-NULL; the caller's contract.
    unsafe { *size = n as usize };
    cudaSuccess
}

/// In stream order: once the stream's earlier work is done, the copy is
/// made as cudaMemcpyToSymbol makes it, before returning. Stricter than
/// natively (the caller waits), never looser.
///
/// # Safety
/// As cudaMemcpyToSymbol.
pub unsafe extern "C" fn cudaMemcpyToSymbolAsync(
    symbol: *const c_void,
    src: *const c_void,
    count: usize,
    offset: usize,
    kind: i32,
    stream: *mut c_void,
) -> i32 {
    // SAFETY: the caller's contract.
    after_stream(stream, || unsafe {
        cudaMemcpyToSymbol(symbol, src, count, offset, kind)
    })
}

/// As [`cudaMemcpyToSymbolAsync`], the other way.
///
/// # Safety
/// As cudaMemcpyFromSymbol.
pub unsafe extern "C" fn cudaMemcpyFromSymbolAsync(
    dst: *mut c_void,
    symbol: *const c_void,
    count: usize,
    offset: usize,
    kind: i32,
    stream: *mut c_void,
) -> i32 {
    // SAFETY: the caller's contract.
    after_stream(stream, || unsafe {
        cudaMemcpyFromSymbol(dst, symbol, count, offset, kind)
    })
}

/// Runs `copy` once `stream`'s earlier work is done: the stream-ordered
/// symbol copies, made synchronously.
fn after_stream(stream: *mut c_void, copy: impl FnOnce() -> i32) -> i32 {
    // SAFETY: no pointer but the stream handle, which the stub checks.
    let s = unsafe { crate::gen::cudaStreamSynchronize(stream) };
    if s != cudaSuccess {
        return s;
    }
    copy()
}

/// The variable's device address, which the tracker then knows (so copies
/// and kernels may use it like an allocation).
///
/// # Safety
/// `dev_ptr` is NULL or writable.
pub unsafe extern "C" fn cudaGetSymbolAddress(
    dev_ptr: *mut *mut c_void,
    symbol: *const c_void,
) -> i32 {
    if dev_ptr.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let id = symbol as usize as u64;
    let Some(size) = vars().get(&id).copied() else {
        return note(cudaErrorInvalidSymbol);
    };
    status_of((|| {
        let mut c = Call::begin(func::cudaGetSymbolAddress)?;
        c.enc.u64(id);
        let mut r = c.finish()?;
        let status = r.status();
        if r.has_outputs() {
            let p = r.with(|d| d.u64().map_err(|_| cudaErrorUnknown))?;
            let mut t = tracker();
            if t.find(p).is_none() {
                t.insert(Alloc {
                    start: p,
                    size,
                    device: 0,
                })
                .map_err(|_| cudaErrorUnknown)?;
            }
            // SAFETY: checked non-NULL; the caller's contract.
            unsafe { *dev_ptr = p as usize as *mut c_void };
        }
        Ok(status)
    })())
}

#[derive(Clone, Copy)]
struct Config {
    grid: Dim3,
    block: Dim3,
    shared_mem: usize,
    stream: *mut c_void,
}

thread_local! {
    /// `<<<...>>>` configurations pushed and not yet popped.
    static CONFIGS: RefCell<Vec<Config>> = const { RefCell::new(Vec::new()) };
}

pub extern "C" fn __cudaPushCallConfiguration(
    grid: Dim3,
    block: Dim3,
    shared_mem: usize,
    stream: *mut c_void,
) -> u32 {
    CONFIGS.with(|c| {
        c.borrow_mut().push(Config {
            grid,
            block,
            shared_mem,
            stream,
        })
    });
    0
}

/// # Safety
/// Every pointer is writable (nvcc's host code passes locals).
pub unsafe extern "C" fn __cudaPopCallConfiguration(
    grid: *mut Dim3,
    block: *mut Dim3,
    shared_mem: *mut usize,
    stream: *mut *mut c_void,
) -> i32 {
    let Some(c) = CONFIGS.with(|c| c.borrow_mut().pop()) else {
        return note(cudaErrorInvalidValue);
    };
    // SAFETY: the caller's contract.
    unsafe {
        if !grid.is_null() {
            *grid = c.grid;
        }
        if !block.is_null() {
            *block = c.block;
        }
        if !shared_mem.is_null() {
            *shared_mem = c.shared_mem;
        }
        if !stream.is_null() {
            *stream = c.stream;
        }
    }
    cudaSuccess
}

/// Packs the arguments by value (the kernel's layout from its cubin) and
/// queues the launch: like the OpenCL path's enqueues, it is batched until
/// the next synchronising call once a launch of the same shape succeeded.
///
/// # Safety
/// `args` holds one pointer per kernel parameter, each to that parameter's
/// value, as for the native call.
pub unsafe extern "C" fn cudaLaunchKernel(
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: *mut c_void,
) -> i32 {
    let layout = match kernel_layout(func as usize as u64) {
        Ok(Some(l)) => l,
        // The kernel is in no cubin we could read: no layout to pack by.
        Ok(None) => return note(cudaErrorInvalidKernelImage),
        Err(e) => return note(e),
    };
    let sid = match rt::handle_id(stream, Kind::Stream) {
        Ok(s) => s,
        Err(e) => return note(e),
    };
    if args.is_null() && !layout.params.is_empty() {
        return note(cudaErrorInvalidValue);
    }
    let packed = wormhole_cuda_api::launch::pack(&layout, |i, size| {
        // SAFETY: the caller's contract: args[i] points to parameter i's
        // value, `size` bytes (the kernel's own layout says so).
        unsafe { std::slice::from_raw_parts(*args.add(i) as *const u8, size) }
    });
    let l = Launch {
        func: func as usize as u64,
        grid: [grid.x, grid.y, grid.z],
        block: [block.x, block.y, block.z],
        shared_mem: shared_mem as u64,
        stream: sid,
        args: packed,
    };
    status_of((|| {
        let mut c = Call::begin(func::cudaLaunchKernel)?;
        l.encode(&mut c.enc);
        for v in [
            l.func,
            u64::from(grid.x),
            u64::from(block.x),
            l.shared_mem,
            sid,
        ] {
            c.shape(v);
        }
        c.finish_async(false)
    })())
}

/// nvcc 12.x and 13's launch sites: the handle of a kernel is its host
/// stub's address, checked to be registered.
///
/// # Safety
/// `kernel` is NULL or writable.
pub unsafe extern "C" fn __cudaGetKernel(kernel: *mut *mut c_void, host_fun: *const c_void) -> i32 {
    if kernel.is_null() {
        return cudaErrorInvalidValue;
    }
    if !funcs().contains_key(&(host_fun as usize as u64)) {
        return cudaErrorInvalidDeviceFunction;
    }
    // SAFETY: checked non-NULL; the caller's contract.
    unsafe { *kernel = host_fun.cast_mut() };
    cudaSuccess
}

/// A launch through a handle from __cudaGetKernel, which is the stub's
/// address: cudaLaunchKernel's very arguments.
pub use cudaLaunchKernel as __cudaLaunchKernel;
/// The same under `--default-stream per-thread`. The tenant runs a client's
/// calls in order, so the legacy default stream (which serialises more) is
/// correct here, only less concurrent.
pub use cudaLaunchKernel as __cudaLaunchKernel_ptsz;

/// The native runtime answers 0 with success where there is no driver;
/// with no server, so do we.
///
/// # Safety
/// `v` is NULL or writable.
pub unsafe extern "C" fn cudaDriverGetVersion(v: *mut i32) -> i32 {
    // SAFETY: same contract.
    let s = unsafe { crate::gen::cudaDriverGetVersion(v) };
    if s == rt::NO_SERVER && !v.is_null() {
        // SAFETY: checked non-NULL; the caller's contract.
        unsafe { *v = 0 };
        return cudaSuccess;
    }
    s
}

/// # Safety
/// `id` is NULL or holds `len` writable bytes.
pub unsafe extern "C" fn cudaDeviceGetPCIBusId(id: *mut c_void, len: i32, device: i32) -> i32 {
    // Otherwise a negative length would reach the server as a huge one.
    if id.is_null() || len < 1 {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: same contract.
    unsafe { crate::gen::cudaDeviceGetPCIBusId(id, len, device) }
}

// ---- Kernel queries and settings ---------------------------------------------

/// A kernel is named to the server by its host stub's address, which must
/// have been registered.
fn kernel_call(f: u32, kernel: *const c_void) -> Result<Call<'static>, i32> {
    let id = kernel as usize as u64;
    if !funcs().contains_key(&id) {
        return Err(cudaErrorInvalidDeviceFunction);
    }
    let mut c = Call::begin(f)?;
    c.enc.u64(id);
    Ok(c)
}

/// # Safety
/// `attr` is NULL or a writable `struct cudaFuncAttributes`.
pub unsafe extern "C" fn cudaFuncGetAttributes(attr: *mut c_void, kernel: *const c_void) -> i32 {
    if attr.is_null() {
        return note(cudaErrorInvalidValue);
    }
    status_of((|| {
        let c = kernel_call(func::cudaFuncGetAttributes, kernel)?;
        let mut r = c.finish()?;
        let status = r.status();
        if r.has_outputs() {
            let b = r.with(|d| d.bytes().map(<[u8]>::to_vec).map_err(|_| cudaErrorUnknown))?;
            if b.len() != FUNC_ATTRIBUTES_LEN {
                return Err(cudaErrorUnknown);
            }
            // SAFETY: the caller's contract: the struct is that long.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), attr.cast::<u8>(), b.len()) };
        }
        Ok(status)
    })())
}

pub extern "C" fn cudaFuncSetAttribute(kernel: *const c_void, attr: i32, value: i32) -> i32 {
    status_of((|| {
        let mut c = kernel_call(func::cudaFuncSetAttribute, kernel)?;
        c.enc.i32(attr);
        c.enc.i32(value);
        Ok(c.finish()?.status())
    })())
}

pub extern "C" fn cudaFuncSetCacheConfig(kernel: *const c_void, config: i32) -> i32 {
    status_of((|| {
        let mut c = kernel_call(func::cudaFuncSetCacheConfig, kernel)?;
        c.enc.i32(config);
        Ok(c.finish()?.status())
    })())
}

/// # Safety
/// `blocks` is NULL or writable.
pub unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    blocks: *mut i32,
    kernel: *const c_void,
    block_size: i32,
    shared: usize,
    flags: u32,
) -> i32 {
    // SAFETY: the same contract.
    unsafe {
        occupancy(
            func::cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
            blocks,
            kernel,
            block_size,
            shared,
            flags,
        )
    }
}

/// # Safety
/// `blocks` is NULL or writable.
pub unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    blocks: *mut i32,
    kernel: *const c_void,
    block_size: i32,
    shared: usize,
) -> i32 {
    // SAFETY: the same contract; no flags is cudaOccupancyDefault (0).
    unsafe {
        occupancy(
            func::cudaOccupancyMaxActiveBlocksPerMultiprocessor,
            blocks,
            kernel,
            block_size,
            shared,
            0,
        )
    }
}

/// # Safety
/// `blocks` is NULL or writable.
unsafe fn occupancy(
    f: u32,
    blocks: *mut i32,
    kernel: *const c_void,
    block_size: i32,
    shared: usize,
    flags: u32,
) -> i32 {
    if blocks.is_null() {
        return note(cudaErrorInvalidValue);
    }
    status_of((|| {
        let mut c = kernel_call(f, kernel)?;
        c.enc.i32(block_size);
        c.enc.u64(shared as u64);
        c.enc.u32(flags);
        let mut r = c.finish()?;
        let status = r.status();
        if r.has_outputs() {
            let n = r.with(|d| d.i32().map_err(|_| cudaErrorUnknown))?;
            // SAFETY: checked non-NULL; the caller's contract.
            unsafe { *blocks = n };
        }
        Ok(status)
    })())
}

/// `cudaLaunchConfig_t` as CUDA 12 and 13 lay it out.
#[repr(C)]
struct LaunchConfig {
    grid: Dim3,
    block: Dim3,
    shared_mem: usize,
    stream: *mut c_void,
    attrs: *const LaunchAttribute,
    num_attrs: u32,
}

/// `cudaLaunchAttribute`: an id, then a 64-byte value at offset 8.
#[repr(C)]
struct LaunchAttribute {
    id: u32,
    _pad: u32,
    _value: [u8; 64],
}

/// Attributes a launch may drop and stay correct: an ignored entry, a
/// priority (a hint) and programmatic stream serialisation (which only
/// allows the next kernel to start early; without it launches serialise).
const DROPPABLE_LAUNCH_ATTRIBUTES: [u32; 3] = [0, 6, 8];

/// # Safety
/// `config` is NULL or a `cudaLaunchConfig_t` whose `attrs` hold
/// `numAttrs` entries; `args` as for cudaLaunchKernel.
pub unsafe extern "C" fn cudaLaunchKernelExC(
    config: *const c_void,
    kernel: *const c_void,
    args: *mut *mut c_void,
) -> i32 {
    // SAFETY: the caller's contract.
    let Some(cfg) = (unsafe { config.cast::<LaunchConfig>().as_ref() }) else {
        return note(cudaErrorInvalidValue);
    };
    let attrs: &[LaunchAttribute] = if cfg.num_attrs == 0 || cfg.attrs.is_null() {
        &[]
    } else {
        // SAFETY: the caller's contract: `attrs` holds `numAttrs` entries.
        unsafe { std::slice::from_raw_parts(cfg.attrs, cfg.num_attrs as usize) }
    };
    if attrs
        .iter()
        .any(|a| !DROPPABLE_LAUNCH_ATTRIBUTES.contains(&a.id))
    {
        return note(cudaErrorNotSupported);
    }
    // SAFETY: the same contract as cudaLaunchKernel's.
    unsafe {
        cudaLaunchKernel(
            kernel,
            cfg.grid,
            cfg.block,
            args,
            cfg.shared_mem,
            cfg.stream,
        )
    }
}

// ---- Stream-ordered allocation and capture mode -------------------------------

/// # Safety
/// As cudaMalloc.
pub unsafe extern "C" fn cudaMallocAsync(
    dev_ptr: *mut *mut c_void,
    size: usize,
    _stream: *mut c_void,
) -> i32 {
    // SAFETY: the same contract.
    let status = unsafe { cudaMalloc(dev_ptr, size) };
    if status == cudaSuccess {
        // SAFETY: cudaMalloc succeeded, so `dev_ptr` was checked non-NULL
        // and written.
        crate::pools::allocated(unsafe { *dev_ptr } as usize as u64);
    }
    status
}

pub extern "C" fn cudaFreeAsync(dev_ptr: *mut c_void, _stream: *mut c_void) -> i32 {
    cudaFree(dev_ptr)
}

thread_local! {
    /// cudaStreamCaptureMode of this thread (cudaStreamCaptureModeGlobal).
    static CAPTURE_MODE: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// # Safety
/// `mode` is NULL or a readable and writable int.
pub unsafe extern "C" fn cudaThreadExchangeStreamCaptureMode(mode: *mut i32) -> i32 {
    if mode.is_null() {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: checked non-NULL; the caller's contract.
    let wanted = unsafe { *mode };
    if !(0..=2).contains(&wanted) {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: as above.
    unsafe { *mode = CAPTURE_MODE.with(|m| m.replace(wanted)) };
    cudaSuccess
}

/// Writes `v` through `p` unless it is NULL.
///
/// # Safety
/// `p` is NULL or valid for a write of a `T`.
unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-NULL, and the caller's contract.
        unsafe { p.write(v) };
    }
}

/// What every form of cudaStreamGetCaptureInfo answers: the stream checked
/// by the server (as cudaStreamIsCapturing), then "not capturing", id 0,
/// no graph and no dependencies (capture is never forwarded).
///
/// # Safety
/// Each pointer is NULL or valid for a write of its type.
unsafe fn capture_info(
    stream: *mut c_void,
    status: *mut i32,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    ndeps: *mut usize,
) -> i32 {
    if status.is_null() {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: `status` is valid for a write (checked non-NULL, the caller's
    // contract).
    let r = unsafe { crate::gen::cudaStreamIsCapturing(stream, status) };
    if r != cudaSuccess {
        return r;
    }
    // SAFETY: each is NULL or writable, the caller's contract.
    unsafe {
        put(id, 0);
        put(graph, std::ptr::null_mut());
        put(deps, std::ptr::null());
        put(edges, std::ptr::null());
        put(ndeps, 0);
    }
    cudaSuccess
}

/// # Safety
/// CUDA 13: seven parameters, each output NULL or writable. CUDA 12: the
/// legacy three (`stream`, `status`, `id`); the others are not read.
pub unsafe extern "C" fn cudaStreamGetCaptureInfo(
    stream: *mut c_void,
    status: *mut i32,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    ndeps: *mut usize,
) -> i32 {
    use std::ptr::null_mut;
    // SAFETY: the caller's contract for its major; CUDA 12 callers passed
    // only three arguments, so the other registers hold nothing of theirs.
    unsafe {
        if rt::MAJOR.load(Ordering::Relaxed) >= 13 {
            capture_info(stream, status, id, graph, deps, edges, ndeps)
        } else {
            capture_info(
                stream,
                status,
                id,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
            )
        }
    }
}

/// # Safety
/// Each output NULL or writable (CUDA 12's six-parameter form).
pub unsafe extern "C" fn cudaStreamGetCaptureInfo_v2(
    stream: *mut c_void,
    status: *mut i32,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    ndeps: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { capture_info(stream, status, id, graph, deps, std::ptr::null_mut(), ndeps) }
}

/// # Safety
/// Each output NULL or writable (CUDA 12's seven-parameter form).
pub unsafe extern "C" fn cudaStreamGetCaptureInfo_v3(
    stream: *mut c_void,
    status: *mut i32,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    ndeps: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { capture_info(stream, status, id, graph, deps, edges, ndeps) }
}

/// No driver symbol is ever found (the driver API is not forwarded).
///
/// # Safety
/// `symbol` is NULL or a C string; `func` and `status` are NULL or writable.
pub unsafe extern "C" fn cudaGetDriverEntryPoint(
    symbol: *const c_char,
    func: *mut *mut c_void,
    _flags: u64,
    status: *mut i32,
) -> i32 {
    if symbol.is_null() || func.is_null() {
        return note(cudaErrorInvalidValue);
    }
    /// cudaDriverEntryPointSymbolNotFound.
    const NOT_FOUND: i32 = 1;
    // SAFETY: checked non-NULL or left alone; the caller's contract.
    unsafe {
        func.write(std::ptr::null_mut());
        put(status, NOT_FOUND);
    }
    cudaSuccess
}

/// As cudaGetDriverEntryPoint, for any version.
///
/// # Safety
/// As cudaGetDriverEntryPoint.
pub unsafe extern "C" fn cudaGetDriverEntryPointByVersion(
    symbol: *const c_char,
    func: *mut *mut c_void,
    _version: u32,
    flags: u64,
    status: *mut i32,
) -> i32 {
    // SAFETY: the same contract.
    unsafe { cudaGetDriverEntryPoint(symbol, func, flags, status) }
}

/// Runs a host function in stream order: once the stream's earlier work is
/// done, in the calling thread (which the native runtime leaves free; see
/// cuda.api). Not run when waiting for the stream failed.
///
/// # Safety
/// `func` is NULL or a function that may be called with `data`.
pub unsafe extern "C" fn cudaLaunchHostFunc(
    stream: *mut c_void,
    func: crate::HostFn,
    data: *mut c_void,
) -> i32 {
    let Some(f) = func else {
        return note(cudaErrorInvalidValue);
    };
    // SAFETY: the stream is a handle, checked by the client and the server.
    let r = unsafe { crate::gen::cudaStreamSynchronize(stream) };
    if r != cudaSuccess {
        return r;
    }
    // SAFETY: the caller's contract.
    unsafe { f(data) };
    cudaSuccess
}

/// The older form: the callback also gets the stream and its status (it is
/// called even when waiting for the stream failed); `flags` must be 0.
///
/// # Safety
/// `callback` is NULL or a function that may be called with these arguments.
pub unsafe extern "C" fn cudaStreamAddCallback(
    stream: *mut c_void,
    callback: crate::StreamCallback,
    data: *mut c_void,
    flags: u32,
) -> i32 {
    let (Some(f), 0) = (callback, flags) else {
        return note(cudaErrorInvalidValue);
    };
    // SAFETY: the stream is a handle, checked by the client and the server.
    let r = unsafe { crate::gen::cudaStreamSynchronize(stream) };
    // SAFETY: the caller's contract.
    unsafe { f(stream, r, data) };
    cudaSuccess
}

// ---- Pitched memory and 2D copies ---------------------------------------------

/// The pitch cudaMallocPitch gives: rows start 512 bytes apart or a
/// multiple of it (the texture alignment of NVIDIA's GPUs).
const PITCH_ALIGN: usize = 512;

/// # Safety
/// `dev_ptr` and `pitch` are NULL or writable.
pub unsafe extern "C" fn cudaMallocPitch(
    dev_ptr: *mut *mut c_void,
    pitch: *mut usize,
    width: usize,
    height: usize,
) -> i32 {
    if dev_ptr.is_null() || pitch.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let Some((p, total)) = width
        .checked_next_multiple_of(PITCH_ALIGN)
        .and_then(|p| Some((p, p.checked_mul(height)?)))
    else {
        return note(cudaErrorMemoryAllocation);
    };
    // SAFETY: checked non-NULL; the caller's contract.
    let status = unsafe { cudaMalloc(dev_ptr, total) };
    if status == cudaSuccess {
        // SAFETY: as above.
        unsafe { *pitch = p };
    }
    status
}

/// A 2D copy: from the device, rows packed into replies of at most
/// MEMCPY_CHUNK bytes; otherwise as its rows' copies (batched).
///
/// # Safety
/// As for the native cudaMemcpy2D: each of the `height` rows of `width`
/// bytes, `dpitch` and `spitch` apart, lies in the memory its side names.
unsafe fn memcpy_2d(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    (width, height): (usize, usize),
    kind: i32,
    stream: u64,
) -> i32 {
    if width > dpitch || width > spitch {
        return note(cudaErrorInvalidPitchValue);
    }
    let (d, s) = (dst as usize as u64, src as usize as u64);
    let from_device = matches!(
        direction(kind, is_dev(d), is_dev(s)),
        Ok(Direction::DeviceToHost)
    );
    let rows_per_request = MEMCPY_CHUNK as usize / width.max(1);
    if from_device && rows_per_request > 0 {
        // SAFETY: the same contract.
        return unsafe {
            memcpy_2d_back(
                dst,
                dpitch,
                s,
                spitch,
                (width, height),
                rows_per_request,
                stream,
            )
        };
    }
    for row in 0..height {
        let (Some(d), Some(s)) = (row.checked_mul(dpitch), row.checked_mul(spitch)) else {
            return note(cudaErrorInvalidValue);
        };
        // Device rows are addresses of the server's, not of this process:
        // offset without dereferencing.
        let (d, s) = (dst.wrapping_byte_add(d), src.wrapping_byte_add(s));
        // SAFETY: the caller's contract, row by row.
        let status = unsafe { memcpy(d, s, width, kind, stream) };
        if status != cudaSuccess {
            return status;
        }
    }
    cudaSuccess
}

/// Rows from the device, `rows` at a time, each batch one request whose
/// reply packs them.
///
/// # Safety
/// `dst` holds `height` rows of `width` bytes, `dpitch` apart.
unsafe fn memcpy_2d_back(
    dst: *mut c_void,
    dpitch: usize,
    src: u64,
    spitch: usize,
    (width, height): (usize, usize),
    rows: usize,
    stream: u64,
) -> i32 {
    let res = (|| -> Result<i32, i32> {
        let mut row = 0;
        while row < height {
            let n = rows.min(height - row);
            let first = (row as u64)
                .checked_mul(spitch as u64)
                .and_then(|o| src.checked_add(o))
                .ok_or(cudaErrorInvalidValue)?;
            let extent = (spitch as u64)
                .checked_mul(n as u64 - 1)
                .and_then(|v| v.checked_add(width as u64))
                .ok_or(cudaErrorInvalidValue)?;
            tracker()
                .check(first, extent)
                .map_err(|_| cudaErrorInvalidValue)?;
            let mut c = Call::begin(func::cudaMemcpy2D)?;
            for v in [first, spitch as u64, width as u64, n as u64, stream] {
                c.enc.u64(v);
            }
            let mut r = c.finish()?;
            let status = r.status_with_deferred();
            if status != cudaSuccess {
                return Ok(status);
            }
            let packed = r.with(|d| d.bytes().map(<[u8]>::to_vec).map_err(|_| cudaErrorUnknown))?;
            if packed.len() != n * width {
                return Err(cudaErrorUnknown);
            }
            for (i, line) in packed.chunks_exact(width.max(1)).enumerate() {
                // SAFETY: the caller's contract: row `row + i` of `dst`
                // holds `width` bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        line.as_ptr(),
                        dst.cast::<u8>().add((row + i) * dpitch),
                        width,
                    )
                };
            }
            row += n;
        }
        Ok(cudaSuccess)
    })();
    status_of(res)
}

/// # Safety
/// As for the native call.
pub unsafe extern "C" fn cudaMemcpy2D(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: i32,
) -> i32 {
    // SAFETY: the same contract.
    unsafe { memcpy_2d(dst, dpitch, src, spitch, (width, height), kind, 0) }
}

/// # Safety
/// As for the native call.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cudaMemcpy2DAsync(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: i32,
    stream: *mut c_void,
) -> i32 {
    let sid = match rt::handle_id(stream, Kind::Stream) {
        Ok(s) => s,
        Err(e) => return note(e),
    };
    // SAFETY: the same contract.
    unsafe { memcpy_2d(dst, dpitch, src, spitch, (width, height), kind, sid) }
}
