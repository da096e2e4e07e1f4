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

use wormhole_cuda_api::blas::{
    func, CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_NOT_SUPPORTED,
    CUBLAS_STATUS_SUCCESS,
};
use wormhole_cuda_api::extent;
use wormhole_cuda_api::{blas, matmul, Kind};
use wormhole_wire::{Decoder, Encoder, WireError};

use super::libs::LibTenant as Tenant;
use super::loader::{Loader, Sonames};

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
    clippy::type_complexity,
    unused_imports
)]
mod generated {
    use super::checks as blas;
    use super::*;
    include!(concat!(env!("OUT_DIR"), "/blas_server_gen.rs"));
}
pub use generated::{dispatch, ffi};

type SetPointerMode = unsafe extern "C" fn(*mut c_void, i32) -> i32;

#[derive(Default)]
struct Loaded {
    table: ffi::Table,
    /// Not described (the client answers the pointer-mode calls itself):
    /// the server sets each handle's mode from the request's scalars.
    set_pointer_mode: Option<SetPointerMode>,
}

static CUBLAS: Loader<Loaded> = Loader::new(
    Sonames::ByRuntimeMajor("libcublas.so.12", "libcublas.so.13"),
    |symbols| Loaded {
        // SAFETY: `symbols` are libcublas's, whose functions have the
        // signatures cublas.api describes (from its headers).
        table: unsafe { ffi::Table::load(&|name| symbols.address(name)) },
        // SAFETY: cublasSetPointerMode_v2(cublasHandle_t, cublasPointerMode_t).
        set_pointer_mode: unsafe { symbols.function("cublasSetPointerMode_v2") },
    },
);

fn table() -> &'static ffi::Table {
    &CUBLAS.get().table
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
            let f = CUBLAS.get().set_pointer_mode.ok_or(NO_LIBRARY)?;
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

/// A scalar of the call's compute type (cublasGemmEx): its bytes here
/// (host pointer mode) or a device address. It is decoded before the
/// compute type, so `checks::scalars` sizes and checks it after.
pub struct Scalar {
    bytes: [u8; 16],
    len: usize,
    device: Option<*mut c_void>,
}

impl Scalar {
    fn decode(t: &mut Tenant, d: &mut Decoder<'_>, h: *mut c_void) -> Result<Self, i32> {
        let s = match d.u8().map_err(bad)? {
            0 => {
                let b = d.bytes().map_err(bad)?;
                let mut bytes = [0u8; 16];
                bytes
                    .get_mut(..b.len())
                    .ok_or(CUBLAS_STATUS_INVALID_VALUE)?
                    .copy_from_slice(b);
                Scalar {
                    bytes,
                    len: b.len(),
                    device: None,
                }
            }
            1 => Scalar {
                bytes: [0; 16],
                len: 0,
                device: Some(d.u64().map_err(bad)? as usize as *mut c_void),
            },
            _ => return Err(CUBLAS_STATUS_INVALID_VALUE),
        };
        t.pointer_mode(h, s.device.is_some())?;
        Ok(s)
    }

    /// What the library gets.
    pub fn arg(&mut self) -> *mut c_void {
        match self.device {
            Some(p) => p,
            None => self.bytes.as_mut_ptr().cast(),
        }
    }

    pub fn reply(&mut self, _t: &mut Tenant, _e: &mut Encoder, _status: i32) -> Result<(), i32> {
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
    by_mode!(rf64, f64, false);
    by_mode!(ri32, i32, false);

    pub mod hscal {
        use super::*;
        pub fn decode(t: &mut Tenant, d: &mut Decoder<'_>, h: &*mut c_void) -> Result<Scalar, i32> {
            Scalar::decode(t, d, *h)
        }
    }
    // Complex scalars: sized by the call's check (`scalars`), as GemmEx's.
    pub use hscal as hc64;
    pub use hscal as hc128;
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

    /// A matrix of its own element type: address, `cudaDataType`, leading
    /// dimension, batch stride (in elements).
    pub type Typed = (*mut c_void, i32, i32, i64);

    /// GemmEx's A, B and C, each sized by its own type (a type the server
    /// cannot size is refused).
    pub fn gemm_ex(
        t: &Tenant,
        transa: i32,
        transb: i32,
        m: i32,
        n: i32,
        k: i32,
        a: Typed,
        b: Typed,
        c: Typed,
        batch: i32,
    ) -> Result<(), i32> {
        let size = |ty| matmul::elem_size(ty).ok_or(CUBLAS_STATUS_NOT_SUPPORTED);
        // Elements first (element size 1), then each matrix's bytes.
        let g = extent::Gemm {
            transa,
            transb,
            m: m.into(),
            n: n.into(),
            k: k.into(),
            lda: a.2.into(),
            ldb: b.2.into(),
            ldc: c.2.into(),
            elem: 1,
        };
        let (ea, eb, ec) = g.extents().map_err(invalid)?;
        for ((p, ty, _, stride), elems) in [(a, ea), (b, eb), (c, ec)] {
            let elem = size(ty)?;
            let one = elems.checked_mul(elem).ok_or(CUBLAS_STATUS_INVALID_VALUE)?;
            let bytes = extent::strided(one, stride, batch.into(), elem).map_err(invalid)?;
            t.owned(p, bytes)?;
        }
        Ok(())
    }

    /// Alpha and beta are of `compute`'s type: that many bytes came (host
    /// mode), or that many bytes are the tenant's (device mode).
    pub fn scalars(t: &Tenant, alpha: &Scalar, beta: &Scalar, compute: i32) -> Result<(), i32> {
        let n = blas::scalar_size(compute).ok_or(CUBLAS_STATUS_INVALID_VALUE)?;
        for s in [alpha, beta] {
            match s.device {
                Some(p) => t.owned(p, n as u64)?,
                None if s.len == n => {}
                None => return Err(CUBLAS_STATUS_INVALID_VALUE),
            }
        }
        Ok(())
    }

    /// `bytes` from `p` (none: NULL passes, as cuBLAS takes it).
    pub fn range(t: &Tenant, p: *mut c_void, bytes: usize) -> Result<(), i32> {
        t.owned(p, bytes as u64)
    }

    pub fn vector(t: &Tenant, n: i32, x: *mut c_void, incx: i32, elem: u64) -> Result<(), i32> {
        t.owned(
            x,
            extent::vector(n.into(), incx.into(), elem).map_err(invalid)?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::{dispatch, CudaTenant};
    use super::*;
    use wormhole_cuda_api::rand::{self, CURAND_STATUS_NOT_INITIALIZED};

    use crate::cuda::testing::{call, BASE};

    const HANDLE: u64 = 0x200;
    const GEN: u64 = 0x201;
    const STREAM: u64 = 0x202;

    /// A tenant with one 4 KiB allocation, a cuBLAS handle, a cuRAND
    /// generator and a stream.
    fn tenant() -> CudaTenant {
        crate::cuda::testing::tenant(&[
            (HANDLE, Kind::Cublas, 0x1000),
            (GEN, Kind::Curand, 0x2000),
            (STREAM, Kind::Stream, 0x3000),
        ])
    }

    /// An SGEMM request as the client marshals it: host-mode scalars by
    /// value (tag 0, then the bits).
    #[allow(clippy::too_many_arguments)]
    fn sgemm(
        h: u64,
        trans: (i32, i32),
        mnk: (i32, i32, i32),
        a: u64,
        lda: i32,
        b: u64,
        ldb: i32,
        c: u64,
        ldc: i32,
    ) -> impl FnOnce(&mut Encoder) {
        move |e: &mut Encoder| {
            e.u64(h);
            e.i32(trans.0);
            e.i32(trans.1);
            e.i32(mnk.0);
            e.i32(mnk.1);
            e.i32(mnk.2);
            e.u8(0);
            e.u32(1.0f32.to_bits());
            e.u64(a);
            e.i32(lda);
            e.u64(b);
            e.i32(ldb);
            e.u8(0);
            e.u32(0.0f32.to_bits());
            e.u64(c);
            e.i32(ldc);
        }
    }

    /// Whether a request passed every check: it reached the library,
    /// which tests never load.
    fn reached(r: Result<i32, i32>) -> bool {
        r == Ok(NO_LIBRARY)
    }

    #[test]
    fn gemm_extents_are_checked_before_the_library() {
        let mut t = tenant();
        // 16 x 16 floats = 1 KiB each: A, B, C fit in the 4 KiB allocation.
        let fits = sgemm(
            HANDLE,
            (0, 0),
            (16, 16, 16),
            BASE,
            16,
            BASE + 1024,
            16,
            BASE + 2048,
            16,
        );
        let r = call(&mut t, func::cublasSgemm_v2, fits);
        assert!(reached(r), "{r:?}");
        // C one float past the end of the allocation.
        let over = sgemm(
            HANDLE,
            (0, 0),
            (16, 16, 16),
            BASE,
            16,
            BASE,
            16,
            BASE + 3072 + 4,
            16,
        );
        assert_eq!(
            call(&mut t, func::cublasSgemm_v2, over),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        // A transposed is stored k x m: lda 16 is too small for k = 32...
        let lda = sgemm(HANDLE, (1, 0), (16, 16, 32), BASE, 16, BASE, 32, BASE, 16);
        assert_eq!(
            call(&mut t, func::cublasSgemm_v2, lda),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        // ...and a huge leading dimension makes A run off the allocation.
        let far = sgemm(HANDLE, (0, 0), (4, 4, 4), BASE, 1 << 30, BASE, 4, BASE, 4);
        assert_eq!(
            call(&mut t, func::cublasSgemm_v2, far),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        let neg = sgemm(HANDLE, (0, 0), (4, -4, 4), BASE, 4, BASE, 4, BASE, 4);
        assert_eq!(
            call(&mut t, func::cublasSgemm_v2, neg),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        // An address the tenant never got.
        let foreign = sgemm(HANDLE, (0, 0), (2, 2, 2), 0x1234, 2, BASE, 2, BASE, 2);
        assert_eq!(
            call(&mut t, func::cublasSgemm_v2, foreign),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        // Mixed pointer modes in one request (alpha by value, beta on the
        // device) are refused before anything runs: a handle has one mode.
        let mixed = |e: &mut Encoder| {
            e.u64(HANDLE);
            for v in [0, 0, 2, 2, 2] {
                e.i32(v);
            }
            e.u8(0);
            e.u32(1.0f32.to_bits());
            e.u64(BASE);
            e.i32(2);
            e.u64(BASE);
            e.i32(2);
            e.u8(1);
            e.u64(BASE + 64);
            e.u64(BASE);
            e.i32(2);
        };
        assert_eq!(
            call(&mut t, func::cublasSgemm_v2, mixed),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        // Nothing touched (m = 0): any pointer passes, as natively.
        let empty = sgemm(HANDLE, (0, 0), (0, 4, 4), 0, 1, 0, 4, 0, 1);
        assert!(call(&mut t, func::cublasSgemm_v2, empty).is_ok());
        // Handles: unknown, of another kind, NULL.
        for h in [0x999, GEN, STREAM, 0] {
            let r = call(
                &mut t,
                func::cublasSgemm_v2,
                sgemm(h, (0, 0), (2, 2, 2), BASE, 2, BASE, 2, BASE, 2),
            );
            assert_eq!(r, Err(CUBLAS_STATUS_NOT_INITIALIZED), "handle {h:#x}");
        }
    }

    #[test]
    fn batches_count_every_stride() {
        let mut t = tenant();
        let batched = |stride_c: i64, batch: i32| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                e.i32(0);
                e.i32(0);
                for v in [8, 8, 8] {
                    e.i32(v);
                }
                e.u8(0);
                e.u32(1.0f32.to_bits());
                e.u64(BASE);
                e.i32(8);
                e.i64(0);
                e.u64(BASE);
                e.i32(8);
                e.i64(0);
                e.u8(0);
                e.u32(0.0f32.to_bits());
                e.u64(BASE);
                e.i32(8);
                e.i64(stride_c);
                e.i32(batch);
            }
        };
        // 8 x 8 floats = 256 bytes; 16 of them 64 floats apart fill 4 KiB.
        assert!(call(&mut t, func::cublasSgemmStridedBatched, batched(64, 16)).is_ok());
        assert_eq!(
            call(&mut t, func::cublasSgemmStridedBatched, batched(64, 17)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        assert_eq!(
            call(&mut t, func::cublasSgemmStridedBatched, batched(-64, 2)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        assert_eq!(
            call(
                &mut t,
                func::cublasSgemmStridedBatched,
                batched(i64::MAX, 3)
            ),
            Err(CUBLAS_STATUS_INVALID_VALUE),
            "overflow"
        );
    }

    #[test]
    fn level1_vectors_and_results_by_pointer_mode() {
        let mut t = tenant();
        let dot = |n: i32, incx: i32, result: Option<u64>| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                e.i32(n);
                e.u64(BASE);
                e.i32(incx);
                e.u64(BASE + 2048);
                e.i32(1);
                match result {
                    None => e.u8(0),
                    Some(p) => {
                        e.u8(1);
                        e.u64(p);
                    }
                }
            }
        };
        assert!(reached(call(
            &mut t,
            func::cublasSdot_v2,
            dot(512, 1, None)
        )));
        assert_eq!(
            call(&mut t, func::cublasSdot_v2, dot(513, 1, None)),
            Err(CUBLAS_STATUS_INVALID_VALUE),
            "y runs 4 bytes past the end"
        );
        assert_eq!(
            call(&mut t, func::cublasSdot_v2, dot(300, -4, None)),
            Err(CUBLAS_STATUS_INVALID_VALUE),
            "a negative increment spans |inc| too"
        );
        // A device-mode result must be the tenant's too.
        assert_eq!(
            call(&mut t, func::cublasSdot_v2, dot(4, 1, Some(0x10))),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        assert_eq!(
            call(&mut t, func::cublasSdot_v2, dot(4, 1, Some(BASE + 4094))),
            Err(CUBLAS_STATUS_INVALID_VALUE),
            "4 bytes of result at 2 from the end"
        );
        let saxpy = |e: &mut Encoder| {
            e.u64(HANDLE);
            e.i32(4);
            e.u8(0);
            e.u32(2.0f32.to_bits());
            e.u64(BASE);
            e.i32(1);
            e.u64(BASE + 64);
            e.i32(1);
        };
        assert!(call(&mut t, func::cublasSaxpy_v2, saxpy).is_ok());
        let sger_mixed = |e: &mut Encoder| {
            e.u64(HANDLE);
            e.i32(2);
            e.i32(2);
            e.u8(7);
            e.u64(BASE);
            e.u64(BASE);
            e.i32(1);
            e.u64(BASE);
            e.i32(1);
            e.u64(BASE);
            e.i32(2);
        };
        assert_eq!(
            call(&mut t, func::cublasSger_v2, sger_mixed),
            Err(CUBLAS_STATUS_INVALID_VALUE),
            "a tag that is neither host nor device"
        );
        // Truncated and oversized requests are malformed, not crashes.
        let mut e = Encoder::new();
        dot(4, 1, None)(&mut e);
        let full = e.as_slice().to_vec();
        for cut in 0..full.len() {
            let mut out = Encoder::new();
            let r = dispatch(
                &mut t,
                func::cublasSdot_v2,
                &mut Decoder::new(&full[..cut]),
                &mut out,
            );
            assert!(r.is_err(), "cut at {cut}");
        }
        let mut long = full.clone();
        long.push(0);
        let mut out = Encoder::new();
        assert_eq!(
            dispatch(
                &mut t,
                func::cublasSdot_v2,
                &mut Decoder::new(&long),
                &mut out
            ),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
    }

    #[test]
    fn gemv_and_ger_cover_matrix_and_vectors() {
        let mut t = tenant();
        let gemv = |trans: i32, m: i32, n: i32, incy: i32| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                e.i32(trans);
                e.i32(m);
                e.i32(n);
                e.u8(0);
                e.u32(1.0f32.to_bits());
                e.u64(BASE);
                e.i32(m);
                e.u64(BASE + 2048);
                e.i32(1);
                e.u8(0);
                e.u32(0.0f32.to_bits());
                e.u64(BASE + 3072);
                e.i32(incy);
            }
        };
        assert!(reached(call(
            &mut t,
            func::cublasSgemv_v2,
            gemv(0, 16, 16, 1)
        )));
        // y = A x has m = 16 elements: incy 17 spans 15 * 17 + 1 floats,
        // exactly the 1 KiB left; 18 runs past it.
        assert!(call(&mut t, func::cublasSgemv_v2, gemv(0, 16, 16, 17)).is_ok());
        assert_eq!(
            call(&mut t, func::cublasSgemv_v2, gemv(0, 16, 16, 18)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        assert_eq!(
            call(&mut t, func::cublasSgemv_v2, gemv(3, 16, 16, 1)),
            Err(CUBLAS_STATUS_INVALID_VALUE),
            "not a transpose"
        );
    }

    #[test]
    fn curand_outputs_and_generators_are_the_tenants() {
        let mut t = tenant();
        let uniform = |g: u64, p: u64, n: u64| {
            move |e: &mut Encoder| {
                e.u64(g);
                e.u64(p);
                e.u64(n);
            }
        };
        let r = call(
            &mut t,
            rand::func::curandGenerateUniform,
            uniform(GEN, BASE, 1024),
        );
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(
            call(
                &mut t,
                rand::func::curandGenerateUniform,
                uniform(GEN, BASE, 1025)
            ),
            Err(rand::CURAND_STATUS_OUT_OF_RANGE)
        );
        assert_eq!(
            call(
                &mut t,
                rand::func::curandGenerateUniformDouble,
                uniform(GEN, BASE, 513)
            ),
            Err(rand::CURAND_STATUS_OUT_OF_RANGE),
            "doubles are 8 bytes"
        );
        assert_eq!(
            call(
                &mut t,
                rand::func::curandGenerate,
                uniform(GEN, BASE, u64::MAX / 2)
            ),
            Err(rand::CURAND_STATUS_OUT_OF_RANGE),
            "overflow"
        );
        for g in [0, HANDLE, 0x999] {
            assert_eq!(
                call(
                    &mut t,
                    rand::func::curandGenerateUniform,
                    uniform(g, BASE, 4)
                ),
                Err(CURAND_STATUS_NOT_INITIALIZED)
            );
        }
        // A stream must be the tenant's stream.
        let set_stream = |s: u64| {
            move |e: &mut Encoder| {
                e.u64(GEN);
                e.u64(s);
            }
        };
        assert_eq!(
            call(&mut t, rand::func::curandSetStream, set_stream(HANDLE)),
            Err(rand::CURAND_STATUS_OUT_OF_RANGE)
        );
        assert!(call(&mut t, rand::func::curandSetStream, set_stream(STREAM)).is_ok());
    }

    #[test]
    fn destroying_a_handle_forgets_it_only_once_the_library_agrees() {
        let mut t = tenant();
        let r = call(&mut t, func::cublasDestroy_v2, |e| e.u64(HANDLE));
        // Without a library the destroy fails, and the handle stays.
        assert!(reached(r));
        assert!(t.lookup(HANDLE, Kind::Cublas).is_ok());
        assert_eq!(
            call(&mut t, func::cublasDestroy_v2, |e| e.u64(GEN)),
            Err(CUBLAS_STATUS_NOT_INITIALIZED),
            "a generator is not a cuBLAS handle"
        );
    }

    /// A GemmEx request as the client marshals it, host scalars of
    /// `scalar` bytes: A and B of `ab` type, C of `ct`, compute `compute`.
    fn gemm_ex(
        mnk: i32,
        ab: i32,
        ct: i32,
        c: u64,
        scalar: usize,
        compute: i32,
    ) -> impl FnOnce(&mut Encoder) {
        move |e: &mut Encoder| {
            e.u64(HANDLE);
            e.i32(0);
            e.i32(0);
            for _ in 0..3 {
                e.i32(mnk);
            }
            e.u8(0);
            e.bytes(&vec![0; scalar]);
            e.u64(BASE);
            e.i32(ab);
            e.i32(mnk);
            e.u64(BASE + 1024);
            e.i32(ab);
            e.i32(mnk);
            e.u8(0);
            e.bytes(&vec![0; scalar]);
            e.u64(c);
            e.i32(ct);
            e.i32(mnk);
            e.i32(compute);
            e.i32(-1);
        }
    }

    #[test]
    fn gemm_ex_sizes_each_matrix_and_the_scalars_by_their_types() {
        let mut t = tenant();
        let f = func::cublasGemmEx;
        // 16x16 halves (512 bytes) for A and B, floats for C (1 KiB): all
        // inside the 4 KiB; float scalars with CUBLAS_COMPUTE_32F.
        assert_eq!(
            call(&mut t, f, gemm_ex(16, 2, 0, BASE + 2048, 4, 68)),
            Ok(NO_LIBRARY)
        );
        // C of floats 3 KiB in: its last 1 KiB would pass the end.
        assert_eq!(
            call(&mut t, f, gemm_ex(16, 2, 0, BASE + 3072 + 4, 4, 68)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        // The same C in halves fits.
        assert_eq!(
            call(&mut t, f, gemm_ex(16, 2, 2, BASE + 3072 + 4, 4, 68)),
            Ok(NO_LIBRARY)
        );
        // Scalars that are not the compute type's, a compute type that is
        // none, a matrix type the server cannot size.
        assert_eq!(
            call(&mut t, f, gemm_ex(16, 2, 0, BASE + 2048, 2, 68)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        assert_eq!(
            call(&mut t, f, gemm_ex(16, 2, 0, BASE + 2048, 2, 64)),
            Ok(NO_LIBRARY)
        );
        assert_eq!(
            call(&mut t, f, gemm_ex(16, 2, 0, BASE + 2048, 4, 999)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        assert_eq!(
            call(&mut t, f, gemm_ex(16, 77, 0, BASE + 2048, 4, 68)),
            Err(CUBLAS_STATUS_NOT_SUPPORTED)
        );
        // More than 16 bytes of scalar never reach a check.
        assert_eq!(
            call(&mut t, f, gemm_ex(16, 2, 0, BASE + 2048, 17, 68)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
    }

    #[test]
    fn complex_scalars_and_elements_are_sized_by_their_precision() {
        let mut t = tenant();
        // 16x16 complex floats (2 KiB) for A and B, C 1 KiB in: C's last
        // 1 KiB would pass the 4 KiB, as doubles (4 KiB each) would.
        let cgemm = |scalar: usize, c: u64| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                for v in [0, 0, 16, 16, 16] {
                    e.i32(v);
                }
                e.u8(0);
                e.bytes(&vec![0; scalar]);
                e.u64(BASE);
                e.i32(16);
                e.u64(BASE);
                e.i32(16);
                e.u8(0);
                e.bytes(&vec![0; scalar]);
                e.u64(c);
                e.i32(16);
            }
        };
        let (c, z) = (func::cublasCgemm_v2, func::cublasZgemm_v2);
        assert_eq!(call(&mut t, c, cgemm(8, BASE + 2048)), Ok(NO_LIBRARY));
        assert_eq!(
            call(&mut t, c, cgemm(8, BASE + 2049)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        // A cuComplex is 8 bytes, a cuDoubleComplex 16: no other size.
        assert_eq!(
            call(&mut t, c, cgemm(4, BASE + 2048)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        assert_eq!(
            call(&mut t, c, cgemm(16, BASE + 2048)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        assert_eq!(
            call(&mut t, z, cgemm(8, BASE)),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        // 16x16 complex doubles are the whole 4 KiB: all three at BASE fit.
        assert_eq!(call(&mut t, z, cgemm(16, BASE)), Ok(NO_LIBRARY));
    }
}
