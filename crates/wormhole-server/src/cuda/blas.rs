//! The cuBLAS backend: decoders generated from `cublas.api`, the checks it
//! names (the extent of every device-pointer argument, before the library
//! sees it), and the scalars and results whose meaning follows the
//! handle's pointer mode.
//!
//! libcublas is opened at run time, of the loaded runtime's major first
//! (libcublas.so.13 with libcudart.so.13), from the loader's search path.
//! Where it is missing, every call answers as cuBLAS does without a driver
//! (CUBLAS_STATUS_NOT_INITIALIZED: no handle can be created).

use std::ffi::c_void;
use std::sync::OnceLock;

use wormhole_cuda_api::blas::{
    func, CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_NOT_SUPPORTED,
    CUBLAS_STATUS_SUCCESS,
};
use wormhole_cuda_api::extent;
use wormhole_cuda_api::Kind;
use wormhole_wire::{Decoder, Encoder, WireError};

use super::libs::{open_library, LibTenant as Tenant};

/// What a call answers without the library.
pub const NO_LIBRARY: i32 = CUBLAS_STATUS_NOT_INITIALIZED;

/// A malformed request.
pub fn bad(_: WireError) -> i32 {
    CUBLAS_STATUS_INVALID_VALUE
}

#[allow(
    clippy::needless_return,
    clippy::match_single_binding,
    clippy::missing_safety_doc,
    unused_imports
)]
mod generated {
    use super::checks as blas;
    use super::*;
    include!(concat!(env!("OUT_DIR"), "/blas_server_gen.rs"));
}
pub use generated::{dispatch, ffi};

type SetPointerMode = unsafe extern "C" fn(*mut c_void, i32) -> i32;

struct Loaded {
    table: ffi::Table,
    /// Not described (the client answers the pointer-mode calls itself):
    /// the server sets each handle's mode from the request's scalars.
    set_pointer_mode: Option<SetPointerMode>,
}

fn library() -> Option<&'static Loaded> {
    static L: OnceLock<Option<Loaded>> = OnceLock::new();
    L.get_or_init(|| {
        let names: &[&str] = if super::runtime_major() == 12 {
            &["libcublas.so.12", "libcublas.so.13"]
        } else {
            &["libcublas.so.13", "libcublas.so.12"]
        };
        open_library(names, |sym| {
            let spm = sym("cublasSetPointerMode_v2");
            Loaded {
                // SAFETY: every name is looked up in libcublas, whose
                // functions have the signatures cublas.api describes.
                table: unsafe { ffi::Table::load(sym) },
                set_pointer_mode: if spm.is_null() {
                    None
                } else {
                    // SAFETY: cublasSetPointerMode_v2(cublasHandle_t, int).
                    Some(unsafe { std::mem::transmute::<*mut c_void, SetPointerMode>(spm) })
                },
            }
        })
    })
    .as_ref()
}

fn table() -> &'static ffi::Table {
    static EMPTY: OnceLock<ffi::Table> = OnceLock::new();
    match library() {
        Some(l) => &l.table,
        None => EMPTY.get_or_init(ffi::Table::default),
    }
}

impl Tenant<'_> {
    /// Makes the real handle's pointer mode the one this request's scalars
    /// need; a request mixing modes is refused (the client never sends
    /// one: a handle has one mode).
    pub fn pointer_mode(&mut self, h: *mut c_void, device: bool) -> Result<(), i32> {
        match self.mode {
            Some(m) if m != device => return Err(CUBLAS_STATUS_INVALID_VALUE),
            _ => self.mode = Some(device),
        }
        let cur = self
            .cu
            .blas_modes
            .get(&(h as usize))
            .copied()
            .unwrap_or(false);
        if cur != device {
            let f = library()
                .and_then(|l| l.set_pointer_mode)
                .ok_or(NO_LIBRARY)?;
            // SAFETY: `h` is a live handle from the tenant's table; mode 0
            // is CUBLAS_POINTER_MODE_HOST, 1 DEVICE.
            let s = unsafe { f(h, device as i32) };
            if s != CUBLAS_STATUS_SUCCESS {
                return Err(s);
            }
            self.cu.blas_modes.insert(h as usize, device);
        }
        Ok(())
    }
}

/// A value that crosses the wire as itself (scalars, results).
pub trait Value: Copy + Default {
    const SIZE: u64;
    fn read(d: &mut Decoder<'_>) -> Result<Self, WireError>;
    fn write(self, e: &mut Encoder);
}

impl Value for f32 {
    const SIZE: u64 = 4;
    fn read(d: &mut Decoder<'_>) -> Result<Self, WireError> {
        d.u32().map(f32::from_bits)
    }
    fn write(self, e: &mut Encoder) {
        e.u32(self.to_bits())
    }
}

impl Value for f64 {
    const SIZE: u64 = 8;
    fn read(d: &mut Decoder<'_>) -> Result<Self, WireError> {
        d.u64().map(f64::from_bits)
    }
    fn write(self, e: &mut Encoder) {
        e.u64(self.to_bits())
    }
}

impl Value for i32 {
    const SIZE: u64 = 4;
    fn read(d: &mut Decoder<'_>) -> Result<Self, WireError> {
        d.i32()
    }
    fn write(self, e: &mut Encoder) {
        e.u32(self as u32)
    }
}

/// A scalar or result: a value here (host pointer mode) or a checked
/// device address (device pointer mode). Tag 0 then the value (scalars) or
/// nothing (results); tag 1 then the address.
pub struct ByMode<T> {
    value: T,
    device: Option<*mut c_void>,
}

impl<T: Value> ByMode<T> {
    fn decode(
        t: &mut Tenant,
        d: &mut Decoder<'_>,
        h: *mut c_void,
        input: bool,
    ) -> Result<Self, i32> {
        let device = match d.u8().map_err(bad)? {
            0 => false,
            1 => true,
            _ => return Err(CUBLAS_STATUS_INVALID_VALUE),
        };
        let v = if device {
            let p = d.u64().map_err(bad)? as usize as *mut c_void;
            t.owned(p, T::SIZE)?;
            ByMode {
                value: T::default(),
                device: Some(p),
            }
        } else {
            ByMode {
                value: if input {
                    T::read(d).map_err(bad)?
                } else {
                    T::default()
                },
                device: None,
            }
        };
        t.pointer_mode(h, device)?;
        Ok(v)
    }

    /// What the library gets.
    pub fn arg(&mut self) -> *mut T {
        match self.device {
            Some(p) => p as *mut T,
            None => &mut self.value,
        }
    }

    /// A result in host mode comes back in the reply.
    pub fn reply(&mut self, _t: &mut Tenant, e: &mut Encoder, status: i32) -> Result<(), i32> {
        if self.device.is_none() && status == CUBLAS_STATUS_SUCCESS {
            self.value.write(e);
        }
        Ok(())
    }
}

/// The customs `cublas.api` names.
pub mod custom {
    use super::*;

    macro_rules! by_mode {
        ($name:ident, $t:ty, $input:literal) => {
            pub mod $name {
                use super::*;
                pub fn decode(
                    t: &mut Tenant,
                    d: &mut Decoder<'_>,
                    h: &*mut c_void,
                ) -> Result<ByMode<$t>, i32> {
                    ByMode::decode(t, d, *h, $input)
                }
            }
        };
    }
    by_mode!(hf32, f32, true);
    by_mode!(hf64, f64, true);
    by_mode!(rf32, f32, false);
    by_mode!(ri32, i32, false);
}

/// Nothing is hand-written on the server.
pub mod overrides {}

/// The extents `cublas.api`'s `check=`s name: every device-pointer argument
/// must be the tenant's for all the bytes the call can touch.
#[allow(clippy::too_many_arguments)]
pub mod checks {
    use super::*;
    use extent::Invalid;

    fn invalid(_: Invalid) -> i32 {
        CUBLAS_STATUS_INVALID_VALUE
    }

    pub fn gemm(
        t: &Tenant,
        transa: i32,
        transb: i32,
        m: i32,
        n: i32,
        k: i32,
        a: *mut c_void,
        lda: i32,
        b: *mut c_void,
        ldb: i32,
        c: *mut c_void,
        ldc: i32,
        elem: u64,
    ) -> Result<(), i32> {
        gemm_strided(
            t, transa, transb, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1, elem,
        )
    }

    pub fn gemm_strided(
        t: &Tenant,
        transa: i32,
        transb: i32,
        m: i32,
        n: i32,
        k: i32,
        a: *mut c_void,
        lda: i32,
        stride_a: i64,
        b: *mut c_void,
        ldb: i32,
        stride_b: i64,
        c: *mut c_void,
        ldc: i32,
        stride_c: i64,
        batch: i32,
        elem: u64,
    ) -> Result<(), i32> {
        let g = extent::Gemm {
            transa,
            transb,
            m: m.into(),
            n: n.into(),
            k: k.into(),
            lda: lda.into(),
            ldb: ldb.into(),
            ldc: ldc.into(),
            elem,
        };
        let (ea, eb, ec) = g.extents().map_err(invalid)?;
        let batch = i64::from(batch);
        t.owned(
            a,
            extent::strided(ea, stride_a, batch, elem).map_err(invalid)?,
        )?;
        t.owned(
            b,
            extent::strided(eb, stride_b, batch, elem).map_err(invalid)?,
        )?;
        t.owned(
            c,
            extent::strided(ec, stride_c, batch, elem).map_err(invalid)?,
        )
    }

    pub fn gemv(
        t: &Tenant,
        trans: i32,
        m: i32,
        n: i32,
        a: *mut c_void,
        lda: i32,
        x: *mut c_void,
        incx: i32,
        y: *mut c_void,
        incy: i32,
        elem: u64,
    ) -> Result<(), i32> {
        let (ea, ex, ey) = extent::gemv(
            trans,
            m.into(),
            n.into(),
            lda.into(),
            incx.into(),
            incy.into(),
            elem,
        )
        .map_err(invalid)?;
        t.owned(a, ea)?;
        t.owned(x, ex)?;
        t.owned(y, ey)
    }

    pub fn ger(
        t: &Tenant,
        m: i32,
        n: i32,
        x: *mut c_void,
        incx: i32,
        y: *mut c_void,
        incy: i32,
        a: *mut c_void,
        lda: i32,
        elem: u64,
    ) -> Result<(), i32> {
        let (ex, ey, ea) = extent::ger(
            m.into(),
            n.into(),
            incx.into(),
            incy.into(),
            lda.into(),
            elem,
        )
        .map_err(invalid)?;
        t.owned(x, ex)?;
        t.owned(y, ey)?;
        t.owned(a, ea)
    }

    pub fn vector(t: &Tenant, n: i32, x: *mut c_void, incx: i32, elem: u64) -> Result<(), i32> {
        t.owned(
            x,
            extent::vector(n.into(), incx.into(), elem).map_err(invalid)?,
        )
    }
}
