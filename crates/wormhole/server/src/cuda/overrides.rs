//! The server's hand-written CUDA decoders (the description's `manual`
//! functions) and overrides, named after the C functions they stand for.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_void, CString};

use wormhole_cuda_api::fatbin::{self, FATBIN_MAGIC, WRAPPER_MAGIC};
use wormhole_cuda_api::launch;
use wormhole_cuda_api::tracker::Alloc;
use wormhole_cuda_api::wire::{self, Launch, Memcpy, SymbolCopy};
use wormhole_cuda_api::*;
use wormhole_wire::{Decoder, Encoder};

use super::tenant::{bad, CudaTenant as Tenant, Func, Module};
use super::{ffi, runtime_major, Dim3, Wrapper};

/// Without a driver the native runtime reports version 0, successfully.
///
/// # Safety
/// `v` is NULL or writable.
pub unsafe fn cudaDriverGetVersion(_t: &mut Tenant, v: *mut i32) -> i32 {
    // SAFETY: `v` is NULL or the decoder's i32 local
    // (`d_cudaDriverGetVersion`), the one int the call writes.
    let s = unsafe { ffi::cudaDriverGetVersion(v) };
    if s == super::NO_LIBRARY && !v.is_null() {
        // SAFETY: checked non-NULL.
        unsafe { *v = 0 };
        return cudaSuccess;
    }
    s
}

/// A tenant with a memory quota sees no more than the quota, of which
/// what it already holds is not free.
///
/// # Safety
/// `free` and `total` are NULL or writable.
pub unsafe fn cudaMemGetInfo(t: &mut Tenant, free: *mut usize, total: *mut usize) -> i32 {
    // SAFETY: `free` and `total` are each NULL or the decoder's size_t local
    // (`d_cudaMemGetInfo`), one size_t each, the most the call writes.
    let s = unsafe { ffi::cudaMemGetInfo(free, total) };
    if let (true, Some(q)) = (s == cudaSuccess, &t.memory) {
        let left = q.limit().saturating_sub(q.used());
        // SAFETY: each is written only when non-NULL, and is then the decoder's
        // size_t local that the library just filled.
        unsafe {
            if !free.is_null() {
                *free = (*free).min(usize::try_from(left).unwrap_or(usize::MAX));
            }
            if !total.is_null() {
                *total = usize::try_from(q.clamp(*total as u64)).unwrap_or(usize::MAX);
            }
        }
    }
    s
}

/// Where `totalGlobalMem` lies in `cudaDeviceProp` (CUDA 12 and 13): after
/// `name[256]`, the 16-byte uuid, `luid[8]`, `luidDeviceNodeMask` and 4
/// bytes of padding.
const TOTAL_GLOBAL_MEM_AT: usize = 288;

/// A device's properties as the runtime fills them, in room for any
/// version's `cudaDeviceProp`, and the call's status.
fn properties(device: i32) -> (i32, Vec<u8>) {
    let mut buf = vec![0u8; 4096];
    // SAFETY: 4096 bytes is more than any version's cudaDeviceProp.
    let status = unsafe { ffi::cudaGetDeviceProperties(buf.as_mut_ptr().cast(), device) };
    (status, buf)
}

/// The `totalGlobalMem` field of properties `buf` (of [`properties`]).
fn total_global_mem(buf: &mut [u8]) -> &mut [u8; 8] {
    let field = &mut buf[TOTAL_GLOBAL_MEM_AT..TOTAL_GLOBAL_MEM_AT + 8];
    field.try_into().expect("an 8-byte range is 8 bytes")
}

/// The largest CUDA device's memory, in bytes (0 without a runtime or a
/// device). Read from each device's properties, which start no context.
pub fn largest_device_memory() -> u64 {
    let mut n = 0i32;
    // SAFETY: `n` is a writable int, all cudaGetDeviceCount writes.
    if unsafe { ffi::cudaGetDeviceCount(&mut n) } != cudaSuccess {
        return 0;
    }
    (0..n)
        .filter_map(|d| {
            let (status, mut buf) = properties(d);
            (status == cudaSuccess).then(|| u64::from_le_bytes(*total_global_mem(&mut buf)))
        })
        .max()
        .unwrap_or(0)
}

pub fn d_cudaGetDeviceProperties(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let major = d.u32().map_err(bad)?;
    let device = d.i32().map_err(bad)?;
    d.finish().map_err(bad)?;
    // The struct's layout is the runtime's: a client of another major
    // would read it wrongly.
    let have = runtime_major();
    if have != 0 && have != major {
        return Err(cudaErrorNotSupported);
    }
    let (status, mut buf) = properties(device);
    if let (true, Some(q)) = (status == cudaSuccess, &t.memory) {
        // As `cudaMemGetInfo`: a device no larger than the quota.
        let field = total_global_mem(&mut buf);
        *field = q.clamp(u64::from_le_bytes(*field)).to_le_bytes();
    }
    buf.truncate(devprop_size(major));
    e.u8(1);
    e.opt_bytes(Some(&buf));
    Ok(status)
}

pub fn d_cudaMalloc(t: &mut Tenant, d: &mut Decoder<'_>, e: &mut Encoder) -> Result<i32, i32> {
    let size = d.u64().map_err(bad)?;
    d.finish().map_err(bad)?;
    if size > t.max_alloc {
        return Err(cudaErrorMemoryAllocation);
    }
    // Charged before the runtime is asked; given back below unless the
    // allocation ends up tracked (then `cudaFree` gives it back).
    if t.memory.as_ref().is_some_and(|q| !q.charge(size)) {
        return Err(cudaErrorMemoryAllocation);
    }
    let give_back = |t: &Tenant| {
        if let Some(q) = &t.memory {
            q.release(size);
        }
    };
    let mut p: *mut c_void = std::ptr::null_mut();
    let mut dev = 0i32;
    let status = match &t.residency {
        // Delay storing: an address range of the tenant's own, whose
        // memory may go and come back (residency/cuda.rs).
        Some(r) if size > 0 => {
            // SAFETY: a valid out-pointer.
            let s = unsafe { ffi::cudaGetDevice(&mut dev) };
            match s {
                s if s != cudaSuccess => s,
                _ => match r.alloc(size, dev) {
                    Ok(at) => {
                        p = at as usize as *mut c_void;
                        cudaSuccess
                    }
                    Err(s) => s,
                },
            }
        }
        // SAFETY: a valid out-pointer.
        _ => unsafe { ffi::cudaMalloc(&mut p, size as usize) },
    };
    if status != cudaSuccess {
        give_back(t);
        return Ok(status);
    }
    if p.is_null() {
        give_back(t);
        // A zero-byte allocation: nothing to track.
        e.u8(1);
        e.u64(0);
        e.i32(0);
        return Ok(status);
    }
    // SAFETY: a valid out-pointer.
    unsafe { ffi::cudaGetDevice(&mut dev) };
    let a = Alloc {
        start: p as usize as u64,
        size,
        device: dev,
    };
    if t.allocs.insert(a).is_err() {
        free(t, p);
        give_back(t);
        return Err(cudaErrorUnknown);
    }
    e.u8(1);
    e.u64(a.start);
    e.i32(dev);
    Ok(status)
}

pub fn d_cudaFree(t: &mut Tenant, d: &mut Decoder<'_>, _e: &mut Encoder) -> Result<i32, i32> {
    let p = d.u64().map_err(bad)?;
    d.finish().map_err(bad)?;
    if t.allocs.find(p).map(|a| a.start) != Some(p) {
        return Err(cudaErrorInvalidValue);
    }
    let status = free(t, p as usize as *mut c_void);
    if status == cudaSuccess {
        if let (Some(a), Some(q)) = (t.allocs.remove(p), &t.memory) {
            q.release(a.size);
        }
    }
    Ok(status)
}

/// Frees `p`, the start of one of this tenant's allocations: residency's
/// or the runtime's, whichever made it.
fn free(t: &Tenant, p: *mut c_void) -> i32 {
    match &t.residency {
        Some(r) if r.owns(p as usize as u64) => {
            r.free(p as usize as u64).err().unwrap_or(cudaSuccess)
        }
        // SAFETY: the start of one of this tenant's allocations.
        _ => unsafe { ffi::cudaFree(p) },
    }
}

pub fn d_cudaMemcpy(t: &mut Tenant, d: &mut Decoder<'_>, e: &mut Encoder) -> Result<i32, i32> {
    let m = Memcpy::decode(d).map_err(bad)?;
    let stream = t.lookup(m.stream, Kind::Stream)?;
    let n = m.count as usize;
    let copy = |dst: *mut c_void, src: *const c_void, kind: i32| -> i32 {
        // SAFETY: both ranges were checked (device: in this tenant's
        // allocations; host: our own buffer of `n` bytes).
        unsafe {
            if stream.is_null() {
                ffi::cudaMemcpy(dst, src, n, kind)
            } else {
                let s = ffi::cudaMemcpyAsync(dst, src, n, kind, stream);
                if s != cudaSuccess {
                    return s;
                }
                // The host side is a request or reply buffer, reused next.
                ffi::cudaStreamSynchronize(stream)
            }
        }
    };
    match m.dir {
        Direction::HostToDevice => {
            let data = d.bytes().map_err(bad)?;
            d.finish().map_err(bad)?;
            if data.len() != n {
                return Err(cudaErrorInvalidValue);
            }
            let dst = t.devptr(m.dst, m.count)?;
            t.wrote(m.dst);
            Ok(copy(
                dst,
                data.as_ptr().cast(),
                memcpy_kind::cudaMemcpyHostToDevice,
            ))
        }
        Direction::DeviceToHost => {
            d.finish().map_err(bad)?;
            let src = t.devptr(m.src, m.count)?;
            let mut buf = vec![0u8; n];
            let s = copy(
                buf.as_mut_ptr().cast(),
                src,
                memcpy_kind::cudaMemcpyDeviceToHost,
            );
            if s == cudaSuccess {
                e.u8(1);
                e.bytes(&buf);
            }
            Ok(s)
        }
        Direction::DeviceToDevice => {
            d.finish().map_err(bad)?;
            let dst = t.devptr(m.dst, m.count)?;
            let src = t.devptr(m.src, m.count)?;
            t.wrote(m.dst);
            Ok(copy(dst, src, memcpy_kind::cudaMemcpyDeviceToDevice))
        }
        Direction::HostToHost => Err(cudaErrorInvalidMemcpyDirection),
    }
}

/// The client sends every copy as cudaMemcpy (with its stream).
pub fn d_cudaMemcpyAsync(t: &mut Tenant, d: &mut Decoder<'_>, e: &mut Encoder) -> Result<i32, i32> {
    d_cudaMemcpy(t, d, e)
}

pub fn d___cudaRegisterFatBinary(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    _e: &mut Encoder,
) -> Result<i32, i32> {
    let id = d.u64().map_err(bad)?;
    let image: Box<[u8]> = d.bytes().map_err(bad)?.into();
    d.finish().map_err(bad)?;
    if t.modules.contains_key(&id) || t.modules.len() >= 1 << 16 {
        return Err(cudaErrorInvalidValue);
    }
    // Checked here, not by the runtime: a damaged image is refused. Its
    // compressed cubins are inflated only when a kernel needs them.
    let layouts = fatbin::Layouts::new(&image).map_err(|_| cudaErrorInvalidKernelImage)?;
    debug_assert_eq!(image.get(..4), Some(FATBIN_MAGIC.to_le_bytes().as_slice()));
    let wrapper = Box::new(Wrapper {
        magic: WRAPPER_MAGIC,
        version: 1,
        data: image.as_ptr(),
        filename_or_fatbins: std::ptr::null_mut(),
    });
    let handle = match super::table().__cudaRegisterFatBinary {
        // SAFETY: a wrapper around a checked fat binary; both live as long
        // as the tenant (they are kept in its module table).
        Some(f) => unsafe { f((&*wrapper as *const Wrapper).cast_mut().cast()) },
        None => std::ptr::null_mut(),
    };
    t.modules.insert(
        id,
        Module {
            handle,
            image,
            _wrapper: wrapper,
            layouts,
        },
    );
    Ok(cudaSuccess)
}

/// After the module's kernels and variables are registered (CUDA 10.1+).
pub fn d___cudaRegisterFatBinaryEnd(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    _e: &mut Encoder,
) -> Result<i32, i32> {
    let id = d.u64().map_err(bad)?;
    d.finish().map_err(bad)?;
    let m = t.modules.get(&id).ok_or(cudaErrorInvalidResourceHandle)?;
    if let (Some(end), false) = (
        super::table().__cudaRegisterFatBinaryEnd,
        m.handle.is_null(),
    ) {
        // SAFETY: the handle the runtime returned for this module.
        unsafe { end(m.handle) };
    }
    Ok(cudaSuccess)
}

/// A registration's module (and its id), host address and name.
fn module_and_name<'a>(
    t: &'a mut Tenant,
    d: &mut Decoder<'_>,
) -> Result<(&'a mut Module, u64, u64, CString), i32> {
    let module = d.u64().map_err(bad)?;
    let host = d.u64().map_err(bad)?;
    let name = CString::new(d.bytes().map_err(bad)?).map_err(|_| cudaErrorInvalidValue)?;
    let m = t
        .modules
        .get_mut(&module)
        .ok_or(cudaErrorInvalidResourceHandle)?;
    Ok((m, module, host, name))
}

pub fn d___cudaRegisterFunction(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    _e: &mut Encoder,
) -> Result<i32, i32> {
    let (m, module, host, name) = module_and_name(t, d)?;
    d.finish().map_err(bad)?;
    let handle = m.handle;
    let kernel_name: Box<[u8]> = name.as_bytes().into();
    let stand_in = Box::new(0u8);
    if let (Some(f), false) = (super::table().__cudaRegisterFunction, handle.is_null()) {
        let hp = (&*stand_in as *const u8).cast::<c_char>();
        // SAFETY: the runtime's module handle; `hp` is a unique address we
        // keep for the tenant's life; `name` is NUL-terminated and kept by
        // the runtime only as a string it copies.
        unsafe {
            f(
                handle,
                hp,
                name.as_ptr().cast_mut(),
                name.as_ptr(),
                -1,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        // The runtime may keep `name`: it lives as long as the tenant.
        std::mem::forget(name);
    }
    t.funcs.insert(
        host,
        Func {
            host: stand_in,
            module,
            name: kernel_name,
            layout: None,
        },
    );
    Ok(cudaSuccess)
}

pub fn d___cudaRegisterVar(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    _e: &mut Encoder,
) -> Result<i32, i32> {
    let (m, _, host, name) = module_and_name(t, d)?;
    let handle = m.handle;
    let ext = d.i32().map_err(bad)?;
    let size = d.u64().map_err(bad)?;
    let constant = d.i32().map_err(bad)?;
    let global = d.i32().map_err(bad)?;
    d.finish().map_err(bad)?;
    if size > t.max_alloc {
        return Err(cudaErrorMemoryAllocation);
    }
    if t.vars.contains_key(&host) || t.vars.len() >= 1 << 20 {
        return Err(cudaErrorInvalidValue);
    }
    let stand_in: Box<[u8]> = vec![0u8; (size as usize).max(1)].into();
    if let (Some(f), false) = (super::table().__cudaRegisterVar, handle.is_null()) {
        // SAFETY: as for __cudaRegisterFunction; `stand_in` holds `size`
        // bytes and lives as long as the tenant.
        unsafe {
            f(
                handle,
                stand_in.as_ptr().cast_mut().cast(),
                name.as_ptr().cast_mut(),
                name.as_ptr(),
                ext,
                size as usize,
                constant,
                global,
            )
        };
        std::mem::forget(name);
    }
    t.vars.insert(host, stand_in);
    Ok(cudaSuccess)
}

pub fn d_cudaLaunchKernel(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    _e: &mut Encoder,
) -> Result<i32, i32> {
    let l = Launch::decode(d).map_err(bad)?;
    d.finish().map_err(bad)?;
    let stream = t.lookup(l.stream, Kind::Stream)?;
    let layout = t.layout(l.func)?.ok_or(cudaErrorInvalidKernelImage)?;
    let mut args = l.args;
    let offsets = launch::unpack(layout, &args).map_err(|_| cudaErrorInvalidValue)?;
    let host = t
        .funcs
        .get(&l.func)
        .map(|f| &*f.host as *const u8)
        .ok_or(cudaErrorInvalidDeviceFunction)?;
    let base = args.as_mut_ptr();
    // SAFETY: every offset was checked to lie inside `args`.
    let mut argv: Vec<*mut c_void> = offsets
        .iter()
        .map(|&o| unsafe { base.add(o) }.cast())
        .collect();
    let dim = |v: [u32; 3]| Dim3 {
        x: v[0],
        y: v[1],
        z: v[2],
    };
    // SAFETY: the kernel's stand-in address as registered; the arguments
    // match the kernel's own parameter layout; the launch copies them
    // before returning.
    Ok(unsafe {
        ffi::cudaLaunchKernel(
            host.cast(),
            dim(l.grid),
            dim(l.block),
            argv.as_mut_ptr(),
            l.shared_mem as usize,
            stream,
        )
    })
}

/// Both symbol copies arrive as cudaMemcpyToSymbol (with a direction).
pub fn d_cudaMemcpyToSymbol(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let c = SymbolCopy::decode(d).map_err(bad)?;
    let shadow = t.vars.get(&c.symbol).ok_or(cudaErrorInvalidSymbol)?;
    // The variable's size is the shadow's (at least one byte).
    match c.offset.checked_add(c.count) {
        Some(end) if end <= shadow.len() as u64 => {}
        _ => return Err(cudaErrorInvalidValue),
    }
    let sym: *const c_void = shadow.as_ptr().cast();
    let (n, off) = (c.count as usize, c.offset as usize);
    if c.device != 0 {
        d.finish().map_err(bad)?;
        let p = t.devptr(c.device, c.count)?;
        // SAFETY: the symbol is registered; the device range is the tenant's.
        return Ok(unsafe {
            if c.to {
                ffi::cudaMemcpyToSymbol(sym, p, n, off, memcpy_kind::cudaMemcpyDeviceToDevice)
            } else {
                ffi::cudaMemcpyFromSymbol(p, sym, n, off, memcpy_kind::cudaMemcpyDeviceToDevice)
            }
        });
    }
    if c.to {
        let data = d.bytes().map_err(bad)?;
        d.finish().map_err(bad)?;
        if data.len() != n {
            return Err(cudaErrorInvalidValue);
        }
        // SAFETY: `data` holds `n` bytes; the range fits the variable.
        Ok(unsafe {
            ffi::cudaMemcpyToSymbol(
                sym,
                data.as_ptr().cast(),
                n,
                off,
                memcpy_kind::cudaMemcpyHostToDevice,
            )
        })
    } else {
        d.finish().map_err(bad)?;
        let mut buf = vec![0u8; n];
        // SAFETY: `buf` holds `n` bytes; the range fits the variable.
        let s = unsafe {
            ffi::cudaMemcpyFromSymbol(
                buf.as_mut_ptr().cast(),
                sym,
                n,
                off,
                memcpy_kind::cudaMemcpyDeviceToHost,
            )
        };
        if s == cudaSuccess {
            e.u8(1);
            e.bytes(&buf);
        }
        Ok(s)
    }
}

/// The client sends both directions as cudaMemcpyToSymbol.
pub fn d_cudaMemcpyFromSymbol(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    d_cudaMemcpyToSymbol(t, d, e)
}

/// A variable's device address, which the tenant may then use like an
/// allocation of the variable's size.
pub fn d_cudaGetSymbolAddress(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let id = d.u64().map_err(bad)?;
    d.finish().map_err(bad)?;
    let shadow = t.vars.get(&id).ok_or(cudaErrorInvalidSymbol)?;
    let size = shadow.len() as u64;
    let sym: *const c_void = shadow.as_ptr().cast();
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: a registered symbol and a valid out-pointer.
    let status = unsafe { ffi::cudaGetSymbolAddress(&mut p, sym) };
    if status != cudaSuccess {
        return Ok(status);
    }
    let start = p as usize as u64;
    if start != 0 && t.allocs.find(start).is_none() {
        t.allocs
            .insert(Alloc {
                start,
                size,
                device: 0,
            })
            .map_err(|_| cudaErrorUnknown)?;
    }
    e.u8(1);
    e.u64(start);
    Ok(status)
}

// ---- Kernel queries and settings ---------------------------------------------

/// The runtime's name for a client's kernel: the stand-in host address the
/// server registered it under, found by the client's stub address.
fn kernel(t: &Tenant, d: &mut Decoder<'_>) -> Result<*const c_void, i32> {
    let host = d.u64().map_err(bad)?;
    let f = t.funcs.get(&host).ok_or(cudaErrorInvalidDeviceFunction)?;
    Ok((&*f.host as *const u8).cast())
}

pub fn d_cudaFuncGetAttributes(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let k = kernel(t, d)?;
    d.finish().map_err(bad)?;
    // Aligned as the struct's size_t fields need.
    let mut attr = [0u64; FUNC_ATTRIBUTES_LEN / 8];
    // SAFETY: a registered kernel and room for the whole struct.
    let status = unsafe { ffi::cudaFuncGetAttributes(attr.as_mut_ptr().cast(), k) };
    if status == cudaSuccess {
        let bytes: Vec<u8> = attr.iter().flat_map(|w| w.to_ne_bytes()).collect();
        e.u8(1);
        e.bytes(&bytes);
    }
    Ok(status)
}

pub fn d_cudaFuncSetAttribute(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    _e: &mut Encoder,
) -> Result<i32, i32> {
    let k = kernel(t, d)?;
    let (attr, value) = (d.i32().map_err(bad)?, d.i32().map_err(bad)?);
    d.finish().map_err(bad)?;
    // SAFETY: a registered kernel; the runtime checks the rest.
    Ok(unsafe { ffi::cudaFuncSetAttribute(k, attr, value) })
}

pub fn d_cudaFuncSetCacheConfig(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    _e: &mut Encoder,
) -> Result<i32, i32> {
    let k = kernel(t, d)?;
    let config = d.i32().map_err(bad)?;
    d.finish().map_err(bad)?;
    // SAFETY: a registered kernel; the runtime checks the rest.
    Ok(unsafe { ffi::cudaFuncSetCacheConfig(k, config) })
}

/// Both occupancy queries arrive as the one with flags.
pub fn d_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let k = kernel(t, d)?;
    let block = d.i32().map_err(bad)?;
    let shared = usize::try_from(d.u64().map_err(bad)?).map_err(|_| cudaErrorInvalidValue)?;
    let flags = d.u32().map_err(bad)?;
    d.finish().map_err(bad)?;
    let mut n = 0i32;
    // SAFETY: a registered kernel and a valid out-pointer.
    let status = unsafe {
        ffi::cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&mut n, k, block, shared, flags)
    };
    if status == cudaSuccess {
        e.u8(1);
        e.i32(n);
    }
    Ok(status)
}

pub fn d_cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    d_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(t, d, e)
}

// ---- 2D copies from the device --------------------------------------------------

/// Rows of a pitched device range, packed into the reply (the client sends
/// only copies to the host this way, at most MEMCPY_CHUNK bytes each).
pub fn d_cudaMemcpy2D(t: &mut Tenant, d: &mut Decoder<'_>, e: &mut Encoder) -> Result<i32, i32> {
    let src = d.u64().map_err(bad)?;
    let spitch = d.u64().map_err(bad)?;
    let width = d.u64().map_err(bad)?;
    let height = d.u64().map_err(bad)?;
    let stream = t.lookup(d.u64().map_err(bad)?, Kind::Stream)?;
    d.finish().map_err(bad)?;
    let packed = width.checked_mul(height).ok_or(cudaErrorInvalidValue)?;
    if width > spitch || packed > wire::MEMCPY_CHUNK {
        return Err(cudaErrorInvalidValue);
    }
    if packed == 0 {
        e.u8(1);
        e.bytes(&[]);
        return Ok(cudaSuccess);
    }
    // The last row ends `width` past its start, not `spitch`.
    let extent = spitch
        .checked_mul(height - 1)
        .and_then(|v| v.checked_add(width))
        .ok_or(cudaErrorInvalidValue)?;
    let p = t.devptr(src, extent)?;
    let mut buf = vec![0u8; packed as usize];
    let (w, h, sp) = (width as usize, height as usize, spitch as usize);
    let to_host = memcpy_kind::cudaMemcpyDeviceToHost;
    // SAFETY: the device range was checked against the tenant's
    // allocations; `buf` holds the `height` packed rows of `width` bytes.
    let status = unsafe {
        if stream.is_null() {
            ffi::cudaMemcpy2D(buf.as_mut_ptr().cast(), w, p, sp, w, h, to_host)
        } else {
            let s =
                ffi::cudaMemcpy2DAsync(buf.as_mut_ptr().cast(), w, p, sp, w, h, to_host, stream);
            if s != cudaSuccess {
                return Ok(s);
            }
            // `buf` is this request's: the copy must be done before the reply.
            ffi::cudaStreamSynchronize(stream)
        }
    };
    if status == cudaSuccess {
        e.u8(1);
        e.bytes(&buf);
    }
    Ok(status)
}

/// The client sends both 2D copies as cudaMemcpy2D (with its stream).
pub fn d_cudaMemcpy2DAsync(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    d_cudaMemcpy2D(t, d, e)
}
