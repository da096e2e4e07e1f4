//! Hand-written marshalling for the arguments the description marks
//! `custom`: property lists with handles inside, host memory whose size
//! depends on several arguments, kernel arguments that may be handles.
//! Each module decodes its argument (validating it), yields the C value
//! with `arg`, and may add outputs to the reply with `reply`.

use std::ffi::{c_char, c_void, CString};

use wormhole_opencl_api::{
    func, image_element_size, image_host_size, image_window, map_context_platform,
    map_context_platform_bytes, rect_extent, triple, Kind, CL_CONTEXT_PROPERTIES,
    CL_IMAGE_ELEMENT_SIZE, CL_INVALID_ARG_SIZE, CL_INVALID_HOST_PTR,
    CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, CL_INVALID_VALUE, CL_MEM_COPY_HOST_PTR, CL_MEM_TYPE,
    CL_MEM_USE_HOST_PTR, CL_SUCCESS,
};
use wormhole_wire::{Decoder, Encoder};

use super::tenant::{alloc_zeroed, bad, Tenant};

/// Custom info values: context properties carry a platform handle.
pub fn info(t: &mut Tenant, f: u32, param: u32, v: &mut [u8]) {
    if f == func::clGetContextInfo && param == CL_CONTEXT_PROPERTIES {
        map_context_platform_bytes(v, |raw| {
            t.id_for(Kind::Platform, raw as usize as *mut c_void)
        });
    }
    // CL_MEM_HOST_PTR: the server's pointer means nothing to the client,
    // which substitutes its own; zero it rather than leak an address.
    if f == func::clGetMemObjectInfo && param == 0x1103 {
        v.iter_mut().for_each(|b| *b = 0);
    }
}

/// A custom argument that sends nothing back: the reply is the status
/// alone. (The generated code calls `reply` on every custom argument.)
pub trait NoReply {
    fn reply(&mut self, _t: &mut Tenant, _e: &mut Encoder, _status: i32) -> Result<(), i32> {
        Ok(())
    }
}

/// A zero-terminated property list of 64-bit values.
pub struct Props<T> {
    list: Option<Vec<T>>,
}

impl<T> Props<T> {
    pub fn arg(&mut self) -> *const T {
        self.list.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
    }
}
impl<T> NoReply for Props<T> {}

impl Props<u64> {
    /// The value given for `key` in a zero-terminated list of pairs; 0 if
    /// absent.
    pub fn value_of(&self, key: u64) -> u64 {
        let Some(l) = &self.list else { return 0 };
        l.chunks_exact(2)
            .take_while(|p| p[0] != 0)
            .find(|p| p[0] == key)
            .map_or(0, |p| p[1])
    }
}

fn props_raw(d: &mut Decoder<'_>) -> Result<Option<Vec<u64>>, i32> {
    if !d.bool().map_err(bad)? {
        return Ok(None);
    }
    let mut v = d.u64s().map_err(bad)?;
    v.push(0);
    Ok(Some(v))
}

pub mod context_props {
    use super::*;
    pub fn decode(t: &mut Tenant, d: &mut Decoder<'_>) -> Result<Props<isize>, i32> {
        let Some(mut raw) = props_raw(d)? else {
            return Ok(Props { list: None });
        };
        map_context_platform(&mut raw, |id| {
            t.lookup(id, Kind::Platform).map(|p| p as u64)
        })?;
        Ok(Props {
            list: Some(raw.into_iter().map(|x| x as isize).collect()),
        })
    }
}

pub mod partition_props {
    use super::*;
    pub fn decode(_t: &mut Tenant, d: &mut Decoder<'_>) -> Result<Props<isize>, i32> {
        Ok(Props {
            list: props_raw(d)?.map(|v| v.into_iter().map(|x| x as isize).collect()),
        })
    }
}

pub mod queue_props {
    use super::*;
    pub fn decode(_t: &mut Tenant, d: &mut Decoder<'_>) -> Result<Props<u64>, i32> {
        Ok(Props {
            list: props_raw(d)?,
        })
    }
}

pub use queue_props as sampler_props;

/// Host data for a memory object created with USE or COPY_HOST_PTR.
pub struct HostData<'a> {
    data: Option<&'a [u8]>,
}

impl HostData<'_> {
    pub fn arg(&mut self) -> *mut c_void {
        self.data
            .map_or(std::ptr::null_mut(), |b| b.as_ptr() as *mut c_void)
    }
}
impl NoReply for HostData<'_> {}

/// Tag 0: NULL; 1: data follows; 2: a pointer given without USE/COPY flags
/// (an application error that the native library reports).
fn host_data<'a>(d: &mut Decoder<'a>, flags: u64, need: Option<u64>) -> Result<HostData<'a>, i32> {
    match d.u8().map_err(bad)? {
        0 => Ok(HostData { data: None }),
        1 => {
            let b = d.bytes().map_err(bad)?;
            if flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR) == 0 {
                return Err(CL_INVALID_HOST_PTR);
            }
            let need = need.ok_or(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)?;
            if (b.len() as u64) < need {
                return Err(CL_INVALID_VALUE);
            }
            Ok(HostData { data: Some(b) })
        }
        2 => Err(CL_INVALID_HOST_PTR),
        _ => Err(CL_INVALID_VALUE),
    }
}

pub mod host_ptr {
    use super::*;
    pub fn decode<'a>(
        _t: &mut Tenant,
        d: &mut Decoder<'a>,
        flags: &u64,
        size: &usize,
    ) -> Result<HostData<'a>, i32> {
        host_data(d, *flags, Some(*size as u64))
    }
}

fn format_elem(format: Option<&[u8]>) -> Option<u64> {
    let f = format?;
    if f.len() < 8 {
        return None;
    }
    let order = u32::from_le_bytes(f[0..4].try_into().ok()?);
    let ty = u32::from_le_bytes(f[4..8].try_into().ok()?);
    image_element_size(order, ty)
}

/// `cl_image_desc`, with its buffer handle translated.
pub struct ImageDesc {
    desc: Option<Box<wormhole_opencl_api::ImageDesc>>,
}

impl NoReply for ImageDesc {}

impl ImageDesc {
    pub fn arg(&mut self) -> *const c_void {
        self.desc.as_deref().map_or(std::ptr::null(), |d| {
            d as *const wormhole_opencl_api::ImageDesc as *const c_void
        })
    }
    fn host_size(&self, elem: Option<u64>) -> Option<u64> {
        self.desc.as_deref()?.host_size(elem?)
    }
}

pub mod image_desc {
    use super::*;
    pub fn decode(t: &mut Tenant, d: &mut Decoder<'_>) -> Result<ImageDesc, i32> {
        let Some(b) = d.opt_bytes().map_err(bad)? else {
            return Ok(ImageDesc { desc: None });
        };
        let mut desc = wormhole_opencl_api::ImageDesc::from_bytes(b).ok_or(CL_INVALID_VALUE)?;
        desc.mem_object = t.lookup(desc.mem_object as u64, Kind::Mem)? as usize;
        Ok(ImageDesc {
            desc: Some(Box::new(desc)),
        })
    }
}

pub mod image_host_ptr {
    use super::*;
    pub fn decode<'a>(
        _t: &mut Tenant,
        d: &mut Decoder<'a>,
        flags: &u64,
        format: &Option<&[u8]>,
        desc: &ImageDesc,
    ) -> Result<HostData<'a>, i32> {
        host_data(d, *flags, desc.host_size(format_elem(*format)))
    }
}

pub mod image2d_host_ptr {
    use super::*;
    pub fn decode<'a>(
        _t: &mut Tenant,
        d: &mut Decoder<'a>,
        flags: &u64,
        format: &Option<&[u8]>,
        w: &usize,
        h: &usize,
        row: &usize,
    ) -> Result<HostData<'a>, i32> {
        let need = format_elem(*format)
            .and_then(|e| image_host_size(0x10F1, *w as u64, *h as u64, 1, 1, *row as u64, 0, e));
        host_data(d, *flags, need)
    }
}

pub mod image3d_host_ptr {
    use super::*;
    #[allow(clippy::too_many_arguments)]
    pub fn decode<'a>(
        _t: &mut Tenant,
        d: &mut Decoder<'a>,
        flags: &u64,
        format: &Option<&[u8]>,
        w: &usize,
        h: &usize,
        depth: &usize,
        row: &usize,
        slice: &usize,
    ) -> Result<HostData<'a>, i32> {
        let need = format_elem(*format).and_then(|e| {
            image_host_size(
                0x10F2,
                *w as u64,
                *h as u64,
                *depth as u64,
                1,
                *row as u64,
                *slice as u64,
                e,
            )
        });
        host_data(d, *flags, need)
    }
}

/// Program sources with their exact lengths (sources may hold any byte).
pub struct Sources<'a> {
    ptrs: Option<Vec<*const c_char>>,
    lens: Vec<usize>,
    _src: Vec<&'a [u8]>,
}

impl Sources<'_> {
    pub fn arg(&mut self) -> *const *const c_char {
        self.ptrs.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
    }
}
impl NoReply for Sources<'_> {}

/// A program's sources or binaries are charged to the tenant's quota when
/// the library has made the program (`quota::charge_program`); one that
/// cannot fit is refused before the library copies it.
fn program_fits(t: &Tenant, parts: &[&[u8]]) -> Result<(), i32> {
    let bytes = parts.iter().map(|p| p.len() as u64).sum();
    match &t.memory {
        Some(q) if !q.fits(bytes) => Err(wormhole_opencl_api::CL_OUT_OF_HOST_MEMORY),
        _ => Ok(()),
    }
}

/// A list's entry count, which must be the count another argument gave
/// (the library would read that many entries).
fn count_of(d: &mut Decoder<'_>, expected: u32) -> Result<u32, i32> {
    let n = d.u32().map_err(bad)?;
    if n != expected {
        return Err(CL_INVALID_VALUE);
    }
    Ok(n)
}

pub mod sources {
    use super::*;
    pub fn decode<'a>(
        t: &mut Tenant,
        d: &mut Decoder<'a>,
        count: &u32,
    ) -> Result<Sources<'a>, i32> {
        // NULL strings is CL_INVALID_VALUE; some libraries (PoCL 3)
        // dereference it, so it never reaches them.
        if !d.bool().map_err(bad)? {
            return Err(CL_INVALID_VALUE);
        }
        let n = count_of(d, *count)?;
        let src: Vec<&[u8]> = (0..n)
            .map(|_| d.bytes().map_err(bad))
            .collect::<Result<_, _>>()?;
        program_fits(t, &src)?;
        // A length of 0 tells the library to read up to a NUL, which the
        // request does not have after an empty string: it would read on
        // into whatever follows. An empty string is given as one.
        let ptrs = src
            .iter()
            .map(|s| {
                if s.is_empty() {
                    c"".as_ptr()
                } else {
                    s.as_ptr() as *const c_char
                }
            })
            .collect();
        Ok(Sources {
            ptrs: Some(ptrs),
            lens: src.iter().map(|s| s.len()).collect(),
            _src: src,
        })
    }
}

/// Points into a [`Sources`] that outlives the call.
pub struct Lengths {
    ptr: *const usize,
}

impl Lengths {
    pub fn arg(&mut self) -> *const usize {
        self.ptr
    }
}
impl NoReply for Lengths {}

pub mod source_lengths {
    use super::*;
    pub fn decode(_t: &mut Tenant, _d: &mut Decoder<'_>, s: &Sources<'_>) -> Result<Lengths, i32> {
        let ptr = if s.ptrs.is_some() {
            s.lens.as_ptr()
        } else {
            std::ptr::null()
        };
        Ok(Lengths { ptr })
    }
}

/// Zero bytes kept after each program binary: a library may read a fixed
/// header from a binary whatever length it is given (PoCL 3.1 does), so a
/// short one must not let it read past our copy.
pub const BINARY_PAD: usize = 4096;

/// Program binaries, one per device, each copied with [`BINARY_PAD`] zero
/// bytes after it (the lengths given the library are the tenant's).
pub struct Binaries<'a> {
    lens: Option<Vec<usize>>,
    ptrs: Option<Vec<*const u8>>,
    _copies: Vec<Vec<u8>>,
    _request: std::marker::PhantomData<&'a [u8]>,
}

impl Binaries<'_> {
    pub fn arg(&mut self) -> *const usize {
        self.lens.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
    }
}
impl NoReply for Binaries<'_> {}

/// `b` followed by [`BINARY_PAD`] zero bytes.
fn padded(b: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(b.len() + BINARY_PAD);
    v.extend_from_slice(b);
    v.resize(b.len() + BINARY_PAD, 0);
    v
}

pub mod binaries {
    use super::*;
    pub fn decode<'a>(
        t: &mut Tenant,
        d: &mut Decoder<'a>,
        num_devices: &u32,
    ) -> Result<Binaries<'a>, i32> {
        if !d.bool().map_err(bad)? {
            return Ok(Binaries {
                lens: None,
                ptrs: None,
                _copies: Vec::new(),
                _request: std::marker::PhantomData,
            });
        }
        let n = count_of(d, *num_devices)?;
        let mut bins: Vec<Option<&[u8]>> = Vec::new();
        for _ in 0..n {
            bins.push(d.opt_bytes().map_err(bad)?);
        }
        let parts: Vec<&[u8]> = bins.iter().map(|b| b.unwrap_or(&[])).collect();
        program_fits(t, &parts)?;
        let copies: Vec<Vec<u8>> = bins.iter().flatten().map(|b| padded(b)).collect();
        // A copy's heap block stays where it is when `copies` moves.
        let mut next = copies.iter();
        let ptrs = bins
            .iter()
            .map(|b| match b {
                Some(_) => next.next().map_or(std::ptr::null(), |c| c.as_ptr()),
                None => std::ptr::null(),
            })
            .collect();
        Ok(Binaries {
            lens: Some(parts.iter().map(|b| b.len()).collect()),
            ptrs: Some(ptrs),
            _copies: copies,
            _request: std::marker::PhantomData,
        })
    }
}

/// Points into a [`Binaries`] that outlives the call.
pub struct BinaryPtrs {
    ptr: *const *const u8,
}

impl BinaryPtrs {
    pub fn arg(&mut self) -> *const *const u8 {
        self.ptr
    }
}
impl NoReply for BinaryPtrs {}

pub mod binary_ptrs {
    use super::*;
    pub fn decode(
        _t: &mut Tenant,
        _d: &mut Decoder<'_>,
        b: &Binaries<'_>,
    ) -> Result<BinaryPtrs, i32> {
        Ok(BinaryPtrs {
            ptr: b.ptrs.as_ref().map_or(std::ptr::null(), |v| v.as_ptr()),
        })
    }
}

/// Names of embedded headers for clCompileProgram.
pub struct Names {
    _names: Vec<CString>,
    ptrs: Option<Vec<*const c_char>>,
}

impl Names {
    pub fn arg(&mut self) -> *const *const c_char {
        self.ptrs.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
    }
}
impl NoReply for Names {}

pub mod header_names {
    use super::*;
    pub fn decode(_t: &mut Tenant, d: &mut Decoder<'_>, n_headers: &u32) -> Result<Names, i32> {
        if !d.bool().map_err(bad)? {
            return Ok(Names {
                _names: Vec::new(),
                ptrs: None,
            });
        }
        let n = count_of(d, *n_headers)?;
        let names: Vec<CString> = (0..n)
            .map(|_| CString::new(d.bytes().map_err(bad)?).map_err(|_| CL_INVALID_VALUE))
            .collect::<Result<_, _>>()?;
        let ptrs = names.iter().map(|c| c.as_ptr()).collect();
        Ok(Names {
            _names: names,
            ptrs: Some(ptrs),
        })
    }
}

/// A kernel argument: NULL (local memory), plain bytes, or a handle.
pub struct KernelArg<'a> {
    bytes: Option<&'a [u8]>,
    handle: usize,
    is_handle: bool,
}

impl KernelArg<'_> {
    /// Points into `self` for a handle: the caller keeps it in place until
    /// the call (the generated code passes `v.arg()` straight to it).
    pub fn arg(&mut self) -> *const c_void {
        if self.is_handle {
            &self.handle as *const usize as *const c_void
        } else {
            self.bytes.map_or(std::ptr::null(), |b| b.as_ptr().cast())
        }
    }
}
impl NoReply for KernelArg<'_> {}

pub mod kernel_arg {
    use super::*;
    pub fn decode<'a>(
        t: &mut Tenant,
        d: &mut Decoder<'a>,
        size: &usize,
        _kernel: &*mut c_void,
        _index: &u32,
    ) -> Result<KernelArg<'a>, i32> {
        let mut a = KernelArg {
            bytes: None,
            handle: 0,
            is_handle: false,
        };
        match d.u8().map_err(bad)? {
            0 => {}
            1 => {
                let b = d.bytes().map_err(bad)?;
                // Whether bytes may stand where the kernel takes an object
                // is for `args::clSetKernelArg`, which knows the kernel's
                // declarations.
                if b.len() != *size {
                    return Err(CL_INVALID_ARG_SIZE);
                }
                a.bytes = Some(b);
            }
            2 => {
                let kind = match d.u8().map_err(bad)? {
                    0 => Kind::Mem,
                    1 => Kind::Sampler,
                    _ => return Err(CL_INVALID_VALUE),
                };
                if *size != std::mem::size_of::<usize>() {
                    return Err(CL_INVALID_ARG_SIZE);
                }
                a.handle = t.lookup(d.u64().map_err(bad)?, kind)? as usize;
                a.is_handle = true;
            }
            _ => return Err(CL_INVALID_VALUE),
        }
        Ok(a)
    }
}

/// A server-side window of host memory for a rectangular or image transfer.
pub struct Window<'a> {
    out: Option<Vec<u8>>,
    input: Option<&'a [u8]>,
}

impl Window<'_> {
    pub fn arg(&mut self) -> *mut c_void {
        if let Some(v) = self.out.as_mut() {
            return v.as_mut_ptr().cast();
        }
        self.input
            .map_or(std::ptr::null_mut(), |b| b.as_ptr() as *mut c_void)
    }
    pub fn reply(&mut self, _t: &mut Tenant, e: &mut Encoder, s: i32) -> Result<(), i32> {
        if self.input.is_none() {
            e.opt_bytes(if s == CL_SUCCESS {
                self.out.as_deref()
            } else {
                None
            });
        }
        Ok(())
    }
}

fn window_out<'a>(
    t: &mut Tenant,
    d: &mut Decoder<'a>,
    extent: Option<u64>,
) -> Result<Window<'a>, i32> {
    if !d.bool().map_err(bad)? {
        return Ok(Window {
            out: None,
            input: None,
        });
    }
    let n = extent.ok_or(CL_INVALID_VALUE)?;
    Ok(Window {
        out: Some(alloc_zeroed(n, t.limits.max_alloc)?),
        input: None,
    })
}

fn window_in<'a>(d: &mut Decoder<'a>, extent: Option<u64>) -> Result<Window<'a>, i32> {
    let Some(b) = d.opt_bytes().map_err(bad)? else {
        return Ok(Window {
            out: None,
            input: None,
        });
    };
    if (b.len() as u64) < extent.ok_or(CL_INVALID_VALUE)? {
        return Err(CL_INVALID_VALUE);
    }
    Ok(Window {
        out: None,
        input: Some(b),
    })
}

fn rect(region: &Option<&[u8]>, row: usize, slice: usize) -> Option<u64> {
    Some(rect_extent(triple((*region)?)?, 1, row as u64, slice as u64)?.extent)
}

pub mod rect_out {
    use super::*;
    /// The host window of a rectangular read. The rectangle is checked
    /// against the buffer first (as the call's `check=` does again), so
    /// that one past it gets the library's `CL_INVALID_VALUE`, not the
    /// `CL_OUT_OF_HOST_MEMORY` of a window too large to allocate.
    #[allow(clippy::too_many_arguments)]
    pub fn decode<'a>(
        t: &mut Tenant,
        d: &mut Decoder<'a>,
        region: &Option<&[u8]>,
        _host_origin: &Option<&[u8]>,
        row: &usize,
        slice: &usize,
        buffer: &*mut c_void,
        buffer_origin: &Option<&[u8]>,
        buffer_row: &usize,
        buffer_slice: &usize,
    ) -> Result<Window<'a>, i32> {
        let short = |b: &Option<&[u8]>| b.is_some_and(|b| b.len() < 24);
        if !short(region) && !short(buffer_origin) {
            // SAFETY: `buffer` came from the table; origin and region are
            // NULL or 24 bytes (checked just above).
            unsafe {
                super::super::extents::buffer_rect_ok(
                    *buffer,
                    super::super::tenant::opt_ptr(*buffer_origin),
                    super::super::tenant::opt_ptr(*region),
                    *buffer_row,
                    *buffer_slice,
                )
            }?;
        }
        window_out(t, d, rect(region, *row, *slice))
    }
}

pub mod rect_in {
    use super::*;
    pub fn decode<'a>(
        _t: &mut Tenant,
        d: &mut Decoder<'a>,
        region: &Option<&[u8]>,
        _host_origin: &Option<&[u8]>,
        row: &usize,
        slice: &usize,
    ) -> Result<Window<'a>, i32> {
        window_in(d, rect(region, *row, *slice))
    }
}

/// An image's type and element size, which size its transfers' windows.
pub(super) fn image_shape(image: *mut c_void) -> Option<(u32, u64)> {
    let mut elem: usize = 0;
    let mut ty: u32 = 0;
    // SAFETY: `image` came from the tenant's table (or is NULL, which the
    // library rejects); `elem` and `ty` are valid to write.
    let s = unsafe {
        match super::ffi::clGetImageInfo(
            image,
            CL_IMAGE_ELEMENT_SIZE,
            std::mem::size_of::<usize>(),
            &mut elem as *mut usize as *mut c_void,
            std::ptr::null_mut(),
        ) {
            CL_SUCCESS => super::ffi::clGetMemObjectInfo(
                image,
                CL_MEM_TYPE,
                4,
                &mut ty as *mut u32 as *mut c_void,
                std::ptr::null_mut(),
            ),
            s => s,
        }
    };
    (s == CL_SUCCESS).then_some((ty, elem as u64))
}

fn image_extent(
    image: *mut c_void,
    region: &Option<&[u8]>,
    row: usize,
    slice: usize,
) -> Option<u64> {
    let (ty, elem) = image_shape(image)?;
    Some(image_window(ty, triple((*region)?)?, elem, row as u64, slice as u64)?.extent)
}

pub mod image_out {
    use super::*;
    pub fn decode<'a>(
        t: &mut Tenant,
        d: &mut Decoder<'a>,
        image: &*mut c_void,
        region: &Option<&[u8]>,
        row: &usize,
        slice: &usize,
    ) -> Result<Window<'a>, i32> {
        window_out(t, d, image_extent(*image, region, *row, *slice))
    }
}

pub mod image_in {
    use super::*;
    pub fn decode<'a>(
        _t: &mut Tenant,
        d: &mut Decoder<'a>,
        image: &*mut c_void,
        region: &Option<&[u8]>,
        row: &usize,
        slice: &usize,
    ) -> Result<Window<'a>, i32> {
        window_in(d, image_extent(*image, region, *row, *slice))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binary shorter than any library's header still has zeros where a
    /// header read would land, and keeps its own bytes in front.
    #[test]
    fn a_binary_is_copied_with_zeros_after_it() {
        let short = padded(b"BC");
        assert_eq!(short.len(), 2 + BINARY_PAD);
        assert_eq!(&short[..2], b"BC");
        assert!(short[2..].iter().all(|&b| b == 0));
        assert_eq!(padded(&[]).len(), BINARY_PAD);
    }
}
