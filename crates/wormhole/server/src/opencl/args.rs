//! Kernel arguments: what the library will take as a handle must be one
//! this tenant holds.
//!
//! The library takes a memory object's, sampler's or image's argument
//! bytes as a handle and dereferences it (at the set or at the launch), so
//! those bytes must be NULL or an object of the right kind that this
//! tenant holds: otherwise a client could make the library follow any
//! address (PoCL 3.1 crashes at the launch on `0xdeadbeef000` as a buffer,
//! constant, sampler or image), or take a sampler for a buffer.
//!
//! What each argument is comes from the library's argument information,
//! which the tenant always asks for when it builds (`programs.rs`). Where
//! there is none all the same (a binary without the metadata, or a library
//! that gives none for binaries), the checks fail closed as far as the
//! library lets them: [`probe`] finds the pointer arguments (`__global`,
//! `__constant`, `__local`), which then take no raw bytes. Samplers and
//! images cannot be told from 8-byte scalars that way (see
//! docs/wormhole-security.md, "Library gaps").

#![allow(non_snake_case)]

use std::ffi::c_void;

use rustc_hash::FxHashMap;
use wormhole_opencl_api::{
    Kind, CL_INVALID_ARG_SIZE, CL_INVALID_ARG_VALUE, CL_INVALID_MEM_OBJECT, CL_INVALID_SAMPLER,
    CL_KERNEL_ARG_INFO_NOT_AVAILABLE, CL_MEM_OBJECT_BUFFER, CL_MEM_TYPE, CL_SUCCESS,
};

use super::ffi;
use super::tenant::Tenant;

const CL_KERNEL_ARG_ADDRESS_QUALIFIER: u32 = 0x1196;
const CL_KERNEL_ARG_TYPE_NAME: u32 = 0x1198;
const CL_KERNEL_ARG_ADDRESS_GLOBAL: u32 = 0x119B;
const CL_KERNEL_ARG_ADDRESS_LOCAL: u32 = 0x119C;
const CL_KERNEL_ARG_ADDRESS_CONSTANT: u32 = 0x119D;
const HANDLE_SIZE: usize = std::mem::size_of::<usize>();

/// What a kernel argument is declared as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgDecl {
    /// `__global`/`__constant`: a memory object; `image` for image types.
    Mem {
        image: bool,
    },
    Local,
    Sampler,
    Plain,
    /// No argument information, and not a pointer ([`probe`]): a scalar,
    /// a sampler or an image, which the library does not let us tell
    /// apart.
    Opaque,
}

/// The argument's declaration from the library's argument information, or
/// `None` where it has none.
fn declared(kernel: *mut c_void, index: u32) -> Result<Option<ArgDecl>, i32> {
    // SAFETY: a kernel from the table; `out` holds `n` bytes, the size of
    // the cl_kernel_arg_address_qualifier asked for.
    let q = match super::extents::scalar_info::<u32>(|n, out| unsafe {
        ffi::clGetKernelArgInfo(
            kernel,
            index,
            CL_KERNEL_ARG_ADDRESS_QUALIFIER,
            n,
            out,
            std::ptr::null_mut(),
        )
    }) {
        Err(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) => return Ok(None),
        r => r?,
    };
    let mut name = [0u8; 64];
    // SAFETY: a buffer of the size passed; a name that does not fit is an
    // error and leaves the buffer as it was (zeroed).
    unsafe {
        ffi::clGetKernelArgInfo(
            kernel,
            index,
            CL_KERNEL_ARG_TYPE_NAME,
            name.len(),
            name.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    let name = name.split(|&b| b == 0).next().unwrap_or(&[]);
    Ok(Some(match q {
        CL_KERNEL_ARG_ADDRESS_GLOBAL | CL_KERNEL_ARG_ADDRESS_CONSTANT => ArgDecl::Mem {
            image: name.starts_with(b"image"),
        },
        CL_KERNEL_ARG_ADDRESS_LOCAL => ArgDecl::Local,
        _ if name == b"sampler_t" => ArgDecl::Sampler,
        _ => ArgDecl::Plain,
    }))
}

/// Without argument information: whether the argument is a pointer, found
/// by asking the library to set values that only pointers take. PoCL 3.1
/// (measured on a kernel from a binary) sets `(8 bytes, NULL)` for
/// `__global`, `__constant` and `__local` arguments only, and `(1 byte,
/// NULL)` for `__local` ones only; scalars, samplers and images refuse
/// both. A `__global` and a `__constant` argument take the same values, so
/// both are [`ArgDecl::Mem`].
///
/// A probe sets the argument (to NULL, or to one byte of local memory), so
/// it is made only at the first set of an index, whose own value replaces
/// the probe's next; where that set fails, the launch is refused as one
/// with an argument not set ([`super::launch`]).
///
/// # Safety
/// `kernel` is a kernel from the tenant's table.
unsafe fn probe(kernel: *mut c_void, index: u32) -> Result<ArgDecl, i32> {
    const CL_INVALID_ARG_INDEX: i32 = -49;
    // SAFETY: `kernel` is from the tenant's table (this function's
    // contract); a NULL value with a size only asks the library to check.
    let pointer = unsafe { ffi::clSetKernelArg(kernel, index, HANDLE_SIZE, std::ptr::null()) };
    match pointer {
        CL_SUCCESS => {}
        CL_INVALID_ARG_INDEX => return Err(pointer),
        _ => return Ok(ArgDecl::Opaque),
    }
    // SAFETY: the same kernel; a NULL value of one byte, as for `__local`.
    let local = unsafe { ffi::clSetKernelArg(kernel, index, 1, std::ptr::null()) };
    Ok(if local == CL_SUCCESS {
        ArgDecl::Local
    } else {
        ArgDecl::Mem { image: false }
    })
}

/// The declaration of a kernel's argument, from the tenant's cache or the
/// library (and then cached: a kernel's declarations never change), and
/// whether finding it took a probe.
///
/// # Safety
/// `kernel` is a kernel from the tenant's table.
unsafe fn decl(t: &mut Tenant, kernel: *mut c_void, index: u32) -> Result<(ArgDecl, bool), i32> {
    if let Some(d) = t.arg_decls.get(kernel, index) {
        return Ok((d, false));
    }
    let (d, probed) = match declared(kernel, index)? {
        Some(d) => (d, false),
        // SAFETY: `kernel` is from the tenant's table (this function's
        // contract), as `probe` needs.
        None => (unsafe { probe(kernel, index) }?, true),
    };
    t.arg_decls.insert(kernel, index, d);
    // SAFETY: the same kernel from the tenant's table, as `first_set` needs.
    unsafe { super::launch::first_set(t, kernel) };
    Ok((d, probed))
}

/// A pointer-sized value as the handle the library would take it for.
///
/// # Safety
/// `value` is NULL or holds `size` bytes.
unsafe fn handle(size: usize, value: *const c_void) -> Option<*mut c_void> {
    if value.is_null() || size != HANDLE_SIZE {
        return None;
    }
    // SAFETY: `value` holds `size` = pointer-sized bytes (the caller's
    // contract); they may be unaligned.
    Some(unsafe { std::ptr::read_unaligned(value as *const *mut c_void) })
}

fn mem_type(mem: *mut c_void) -> Option<u32> {
    // SAFETY: a memory object this tenant holds; the answer is a
    // cl_mem_object_type.
    unsafe { super::info_value::<u32>(ffi::clGetMemObjectInfo, mem, CL_MEM_TYPE) }
}

/// Refuses what the library must not be given for an argument declared as
/// `decl`.
///
/// # Safety
/// `value` is NULL or holds `size` bytes.
unsafe fn check(t: &Tenant, decl: ArgDecl, size: usize, value: *const c_void) -> Result<(), i32> {
    // SAFETY: `value` is NULL or holds `size` bytes (this function's
    // contract: the decoder's `kernel_arg` checked the length).
    let h = unsafe { handle(size, value) };
    match decl {
        ArgDecl::Mem { image } => {
            if size != HANDLE_SIZE {
                return Err(CL_INVALID_ARG_SIZE);
            }
            match h {
                None => Ok(()),
                Some(h) if h.is_null() => Ok(()),
                Some(h) if !t.holds(Kind::Mem, h) => Err(CL_INVALID_MEM_OBJECT),
                Some(h) => match mem_type(h) {
                    Some(ty) if (ty == CL_MEM_OBJECT_BUFFER) != image => Ok(()),
                    _ => Err(CL_INVALID_ARG_VALUE),
                },
            }
        }
        ArgDecl::Local if !value.is_null() => Err(CL_INVALID_ARG_VALUE),
        ArgDecl::Sampler => {
            if size != HANDLE_SIZE {
                return Err(CL_INVALID_ARG_SIZE);
            }
            match h {
                Some(h) if t.holds(Kind::Sampler, h) => Ok(()),
                _ => Err(CL_INVALID_SAMPLER),
            }
        }
        // A scalar, a sampler or an image: a buffer is none of them, and
        // the library crashes at the launch on one given for an image.
        ArgDecl::Opaque => match h {
            Some(h) if t.holds(Kind::Mem, h) && mem_type(h) == Some(CL_MEM_OBJECT_BUFFER) => {
                Err(CL_INVALID_MEM_OBJECT)
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The memory objects and samplers set as kernel arguments, each with a
/// reference of the tenant's while it is set: the library takes none (at
/// its launch, PoCL 3.1 aborts on a buffer and crashes on an image that
/// was released after it was set: natively a use after free, here the
/// client's request), and takes its own for the commands it runs. The
/// reference goes when the argument is set again or the tenant lets the
/// kernel go.
#[derive(Default)]
pub struct ArgObjects(FxHashMap<(usize, u32), (Kind, usize)>);

impl ArgObjects {
    /// Records what argument `index` of `kernel` now holds.
    fn set(&mut self, kernel: *mut c_void, index: u32, obj: Option<(Kind, *mut c_void)>) {
        if obj.is_none() && self.0.is_empty() {
            return;
        }
        let key = (kernel as usize, index);
        if obj.map(|(k, raw)| (k, raw as usize)) == self.0.get(&key).copied() {
            // Set again to the same object: the reference it holds stays.
            return;
        }
        let old = match obj {
            Some((kind, raw)) => {
                super::retain_real(kind, raw);
                self.0.insert(key, (kind, raw as usize))
            }
            None => self.0.remove(&key),
        };
        if let Some((kind, raw)) = old {
            // SAFETY: the reference taken when it was set.
            unsafe { super::release_real(kind, raw as *mut c_void) };
        }
    }

    /// A clone holds its source's arguments.
    pub fn cloned(&mut self, from: *mut c_void, to: *mut c_void) {
        let held: Vec<(u32, (Kind, usize))> = self
            .0
            .iter()
            .filter(|((k, _), _)| *k == from as usize)
            .map(|(&(_, i), &o)| (i, o))
            .collect();
        for (i, (kind, raw)) in held {
            self.set(to, i, Some((kind, raw as *mut c_void)));
        }
    }

    /// Drops the references a kernel's arguments hold (the tenant let the
    /// kernel go; commands that use them hold the library's own).
    pub fn forget(&mut self, kernel: *mut c_void) {
        if self.0.is_empty() {
            return;
        }
        let mine: Vec<(usize, u32)> = self
            .0
            .keys()
            .filter(|(k, _)| *k == kernel as usize)
            .copied()
            .collect();
        for key in mine {
            if let Some((kind, raw)) = self.0.remove(&key) {
                // SAFETY: the reference taken when it was set.
                unsafe { super::release_real(kind, raw as *mut c_void) };
            }
        }
    }

    /// Drops every reference (the harness's teardown).
    pub fn clear(&mut self) {
        for (_, (kind, raw)) in self.0.drain() {
            // SAFETY: the reference taken when it was set.
            unsafe { super::release_real(kind, raw as *mut c_void) };
        }
    }
}

/// The object an accepted value makes the library follow, if any.
///
/// # Safety
/// `value` is NULL or holds `size` bytes.
unsafe fn followed(
    t: &Tenant,
    decl: ArgDecl,
    size: usize,
    value: *const c_void,
) -> Option<(Kind, *mut c_void)> {
    if !matches!(
        decl,
        ArgDecl::Mem { .. } | ArgDecl::Sampler | ArgDecl::Opaque
    ) {
        return None;
    }
    // SAFETY: `value` is NULL or holds `size` bytes (this function's
    // contract), as `handle` needs.
    let h = unsafe { handle(size, value) }.filter(|h| !h.is_null())?;
    [Kind::Mem, Kind::Sampler]
        .into_iter()
        .find(|&k| t.holds(k, h))
        .map(|k| (k, h))
}

/// `clSetKernelArg` with the checks above; a value the library accepts for
/// a `__local` argument is recorded for the launch's bound
/// ([`super::launch`]), an object for [`ArgObjects`].
///
/// # Safety
/// `value` is NULL or holds `size` bytes; `kernel` comes from the tenant's
/// table.
pub unsafe fn clSetKernelArg(
    t: &mut Tenant,
    kernel: *mut c_void,
    index: u32,
    size: usize,
    value: *const c_void,
) -> i32 {
    // SAFETY: `kernel` is from the tenant's table (the decoder's `handle`).
    let (decl, probed) = match unsafe { decl(t, kernel, index) } {
        Ok(d) => d,
        Err(e) => return e,
    };
    // SAFETY: `value` is NULL or holds `size` bytes of the request (the
    // decoder's `kernel_arg` checked the length).
    let s = match unsafe { check(t, decl, size, value) } {
        Ok(()) => {
            // SAFETY: `value` is NULL or holds `size` bytes, checked above
            // to be a held object wherever the library takes a handle.
            unsafe { ffi::clSetKernelArg(kernel, index, size, value) }
        }
        Err(e) => e,
    };
    super::launch::arg_set(t, kernel, index, decl, size, s, probed);
    // A scalar or `__local` argument never names an object, so never held
    // one: nothing to do (the common case of a loop of launches).
    if s == CL_SUCCESS && !matches!(decl, ArgDecl::Plain | ArgDecl::Local) {
        // SAFETY: `value` as for `check` above: NULL or `size` bytes.
        let obj = unsafe { followed(t, decl, size, value) };
        t.arg_objects.set(kernel, index, obj);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing reaches the library unless it is NULL or a held object of
    /// the declared kind: checked without a library (no object is held,
    /// so every non-NULL handle is refused before a query).
    #[test]
    fn raw_bytes_are_refused_where_a_handle_is_declared() {
        let t = Tenant::new(Vec::new(), Default::default(), None);
        let raw = 0xdea_dbee_f000_u64.to_le_bytes();
        let zero = 0u64.to_le_bytes();
        let p = |b: &[u8; 8]| b.as_ptr() as *const c_void;
        let checked = |d, size, v| {
            // SAFETY: `v` is NULL or holds 8 bytes, and `size` is at most 8
            // where it is not NULL.
            unsafe { check(&t, d, size, v) }
        };
        let mem = ArgDecl::Mem { image: false };
        for d in [mem, ArgDecl::Mem { image: true }] {
            assert_eq!(checked(d, 8, p(&raw)), Err(CL_INVALID_MEM_OBJECT));
            assert_eq!(checked(d, 8, p(&zero)), Ok(()), "NULL buffer");
            assert_eq!(checked(d, 8, std::ptr::null()), Ok(()));
            assert_eq!(checked(d, 4, p(&raw)), Err(CL_INVALID_ARG_SIZE));
        }
        assert_eq!(
            checked(ArgDecl::Sampler, 8, p(&raw)),
            Err(CL_INVALID_SAMPLER)
        );
        assert_eq!(
            checked(ArgDecl::Sampler, 8, p(&zero)),
            Err(CL_INVALID_SAMPLER)
        );
        assert_eq!(
            checked(ArgDecl::Local, 8, p(&raw)),
            Err(CL_INVALID_ARG_VALUE)
        );
        assert_eq!(checked(ArgDecl::Local, 1 << 20, std::ptr::null()), Ok(()));
        assert_eq!(checked(ArgDecl::Plain, 8, p(&raw)), Ok(()));
        // Without information a scalar cannot be told from an image.
        assert_eq!(checked(ArgDecl::Opaque, 8, p(&raw)), Ok(()));
    }
}
