//! Device variables by their host shadow: copies to and from them, their
//! sizes and addresses.

use std::ffi::c_void;

use wormhole_cuda_api::tracker::Alloc;
use wormhole_cuda_api::wire::SymbolCopy;
use wormhole_cuda_api::*;

use super::copies::{check_device_range, chunks, is_dev};
use super::registration::vars;
use super::status_of;
use crate::call::Call;
use crate::state::{note, tracker};

/// Checks a symbol copy against the variable's registered size.
fn symbol_range(symbol: *const c_void, count: usize, offset: usize) -> Result<u64, i32> {
    let id = symbol as usize as u64;
    let size = *vars().get(&id).ok_or(cudaErrorInvalidSymbol)?;
    within(size, count, offset)?;
    Ok(id)
}

/// `count` bytes from `offset` must lie in a variable of `size` bytes.
fn within(size: u64, count: usize, offset: usize) -> Result<(), i32> {
    match offset.checked_add(count) {
        Some(end) if end as u64 <= size => Ok(()),
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
            check_device_range(dev, count as u64)?;
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
        for (done, n) in chunks(count as u64) {
            let (done, n) = (done as usize, n as usize);
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
                // SAFETY: `host` holds `count` readable bytes (this
                // function's contract: cudaMemcpyToSymbol's for `src`), and
                // `done + n` is at most `count`.
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
                // SAFETY: `host` holds `count` writable bytes (this
                // function's contract: cudaMemcpyFromSymbol's for `dst`),
                // and `done + n` is at most `count`; `b` has `n` bytes.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), host.add(done), n) };
            }
        }
        Ok(cudaSuccess)
    })())
}

/// A copy to (`to`) or from a symbol, as `cudaMemcpyToSymbol` or
/// `cudaMemcpyFromSymbol` makes it; `other` is the application's side.
///
/// # Safety
/// As for those calls: `other` holds `count` bytes, readable for `to` and
/// writable otherwise, unless it is a device address.
unsafe fn memcpy_symbol(
    to: bool,
    symbol: *const c_void,
    other: *mut u8,
    count: usize,
    offset: usize,
    kind: i32,
) -> i32 {
    let (id, dev) = match symbol_args(to, symbol, other as usize as u64, count, offset, kind) {
        Ok(v) => v,
        Err(e) => return note(e),
    };
    // SAFETY: `symbol_copy` needs `other` to hold `count` bytes unless
    // `dev` is a device address: this function's contract.
    unsafe { symbol_copy(to, id, other, dev, count, offset) }
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
    // SAFETY: `src` holds `count` readable bytes of host memory (or is a
    // device address, never dereferenced here): cudaMemcpyToSymbol's
    // contract, which is memcpy_symbol's; it only reads through `src`.
    unsafe { memcpy_symbol(true, symbol, src as *mut u8, count, offset, kind) }
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
    // SAFETY: `dst` holds `count` writable bytes of host memory (or is a
    // device address, never dereferenced here): cudaMemcpyFromSymbol's
    // contract, which is memcpy_symbol's.
    unsafe { memcpy_symbol(false, symbol, dst.cast(), count, offset, kind) }
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
    // SAFETY: `size` is non-NULL (checked above), and a non-NULL one is a
    // writable size_t: cudaGetSymbolSize's contract.
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
    // SAFETY: `src` holds `count` readable bytes (cudaMemcpyToSymbolAsync's
    // contract, cudaMemcpyToSymbol's), until it returns: the copy is made
    // before this function returns.
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
    // SAFETY: `dst` holds `count` writable bytes (the Async call's contract,
    // cudaMemcpyFromSymbol's); the copy is made before this returns.
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
        let mut r = Call::of_u64(func::cudaGetSymbolAddress, id)?;
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
            // SAFETY: `dev_ptr` is non-NULL (checked on entry), and a
            // non-NULL one is a writable `void *` slot:
            // cudaGetSymbolAddress's contract.
            unsafe { *dev_ptr = p as usize as *mut c_void };
        }
        Ok(status)
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_copy_stays_inside_its_variable() {
        assert_eq!(within(16, 16, 0), Ok(()));
        assert_eq!(within(16, 8, 8), Ok(()));
        assert_eq!(within(16, 0, 16), Ok(()));
        assert_eq!(within(16, 9, 8), Err(cudaErrorInvalidValue));
        assert_eq!(within(16, usize::MAX, 1), Err(cudaErrorInvalidValue));
    }

    #[test]
    fn an_unregistered_variable_is_an_invalid_symbol() {
        static NOT_REGISTERED: u64 = 0;
        let symbol = std::ptr::from_ref(&NOT_REGISTERED).cast::<c_void>();
        let mut size = 0usize;
        // SAFETY: `size` is writable.
        let status = unsafe { cudaGetSymbolSize(&mut size, symbol) };
        assert_eq!(status, cudaErrorInvalidSymbol);
        let mut buf = [0u8; 8];
        // SAFETY: refused before `buf` is touched.
        let status = unsafe { cudaMemcpyFromSymbol(buf.as_mut_ptr().cast(), symbol, 8, 0, 2) };
        assert_eq!(status, cudaErrorInvalidSymbol);
    }
}
