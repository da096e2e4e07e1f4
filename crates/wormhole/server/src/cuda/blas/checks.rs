//! The extents `cublas.api`'s `check=`s name: every device-pointer argument
//! must be the tenant's for all the bytes the call can touch, checked
//! before the library sees the pointer.

use super::*;
use extent::Invalid;

fn invalid(_: Invalid) -> i32 {
    CUBLAS_STATUS_INVALID_VALUE
}

/// A gemm's `[transa, transb, m, n, k]`.
pub type Shape = [i32; 5];

/// A matrix of the call's element type: address, leading dimension, batch
/// stride (in elements; 0 for a single matrix).
pub type Matrix = (*mut c_void, i32, i64);

/// Gemm's A, B and C (`batch` of each, `stride` apart) of `elem`-byte
/// elements.
pub fn gemm(
    tenant: &Tenant,
    shape: Shape,
    abc: [Matrix; 3],
    batch: i32,
    elem: u64,
) -> Result<(), i32> {
    let abc = abc.map(|(ptr, ld, stride)| (ptr, ld, stride, elem));
    gemm_sized(tenant, shape, abc, batch)
}

/// A vector or matrix: its address and its increment or leading dimension.
pub type Strided = (*mut c_void, i32);

/// A GEMV's A (`m` x `n`), x and y.
pub fn gemv(
    tenant: &Tenant,
    trans: i32,
    [m, n]: [i32; 2],
    [a, x, y]: [Strided; 3],
    elem: u64,
) -> Result<(), i32> {
    let (lda, incx, incy) = (a.1.into(), x.1.into(), y.1.into());
    let (ea, ex, ey) =
        extent::gemv(trans, m.into(), n.into(), lda, incx, incy, elem).map_err(invalid)?;
    owned_all(tenant, [(a.0, ea), (x.0, ex), (y.0, ey)])
}

/// A rank-1 update's x, y and A (`m` x `n`).
pub fn ger(
    tenant: &Tenant,
    [m, n]: [i32; 2],
    [x, y, a]: [Strided; 3],
    elem: u64,
) -> Result<(), i32> {
    let (ex, ey, ea) = extent::ger(m.into(), n.into(), x.1.into(), y.1.into(), a.1.into(), elem)
        .map_err(invalid)?;
    owned_all(tenant, [(x.0, ex), (y.0, ey), (a.0, ea)])
}

/// Each `(address, bytes)` must be the tenant's.
fn owned_all(tenant: &Tenant, spans: [(*mut c_void, u64); 3]) -> Result<(), i32> {
    spans
        .into_iter()
        .try_for_each(|(p, bytes)| tenant.owned(p, bytes))
}

/// A matrix of its own element type: address, `cudaDataType`, leading
/// dimension, batch stride (in elements).
pub type Typed = (*mut c_void, i32, i32, i64);

/// GemmEx's A, B and C, each sized by its own type (a type the server
/// cannot size is refused).
pub fn gemm_ex(tenant: &Tenant, shape: Shape, abc: [Typed; 3], batch: i32) -> Result<(), i32> {
    let mut sized = [(std::ptr::null_mut(), 0, 0, 0); 3];
    for (operand, (ptr, ty, ld, stride)) in sized.iter_mut().zip(abc) {
        let elem = matmul::elem_size(ty).ok_or(CUBLAS_STATUS_NOT_SUPPORTED)?;
        *operand = (ptr, ld, stride, elem);
    }
    gemm_sized(tenant, shape, sized, batch)
}

/// A matrix sized: address, leading dimension, batch stride, element size.
type Operand = (*mut c_void, i32, i64, u64);

/// Every gemm's check: A, B and C (address, leading dimension, batch
/// stride, element size) for `shape`, elements first, then each matrix's
/// bytes.
fn gemm_sized(
    tenant: &Tenant,
    [transa, transb, m, n, k]: Shape,
    abc: [Operand; 3],
    batch: i32,
) -> Result<(), i32> {
    let shape = extent::Gemm {
        transa,
        transb,
        m: m.into(),
        n: n.into(),
        k: k.into(),
        lda: abc[0].1.into(),
        ldb: abc[1].1.into(),
        ldc: abc[2].1.into(),
        elem: 1,
    };
    let (ea, eb, ec) = shape.extents().map_err(invalid)?;
    let mut spans = [(std::ptr::null_mut(), 0); 3];
    for (span, ((ptr, _, stride, elem), elems)) in
        spans.iter_mut().zip(abc.into_iter().zip([ea, eb, ec]))
    {
        let one = elems.checked_mul(elem).ok_or(CUBLAS_STATUS_INVALID_VALUE)?;
        *span = (
            ptr,
            extent::strided(one, stride, batch.into(), elem).map_err(invalid)?,
        );
    }
    owned_all(tenant, spans)
}

/// Alpha and beta are of `compute`'s type: that many bytes came (host
/// mode), or that many bytes are the tenant's (device mode).
pub fn scalars(tenant: &Tenant, alpha: &Scalar, beta: &Scalar, compute: i32) -> Result<(), i32> {
    let scalar_bytes = blas::scalar_size(compute).ok_or(CUBLAS_STATUS_INVALID_VALUE)?;
    for scalar in [alpha, beta] {
        match scalar.device {
            Some(ptr) => tenant.owned(ptr, scalar_bytes as u64)?,
            None if scalar.len == scalar_bytes => {}
            None => return Err(CUBLAS_STATUS_INVALID_VALUE),
        }
    }
    Ok(())
}

/// `bytes` from `ptr` (none: NULL passes, as cuBLAS takes it).
pub fn range(tenant: &Tenant, ptr: *mut c_void, bytes: usize) -> Result<(), i32> {
    tenant.owned(ptr, bytes as u64)
}

pub fn vector(tenant: &Tenant, n: i32, x: *mut c_void, incx: i32, elem: u64) -> Result<(), i32> {
    tenant.owned(
        x,
        extent::vector(n.into(), incx.into(), elem).map_err(invalid)?,
    )
}
