//! The extents `cublas.api`'s `check=`s name: every device-pointer argument
//! must be the tenant's for all the bytes the call can touch, checked
//! before the library sees the pointer.

use super::*;
use extent::Invalid;

fn invalid(_: Invalid) -> i32 {
    CUBLAS_STATUS_INVALID_VALUE
}

pub fn gemm(
    tenant: &Tenant,
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
        tenant, transa, transb, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1, elem,
    )
}

pub fn gemm_strided(
    tenant: &Tenant,
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
    let shape = extent::Gemm {
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
    let (ea, eb, ec) = shape.extents().map_err(invalid)?;
    let batch = i64::from(batch);
    tenant.owned(
        a,
        extent::strided(ea, stride_a, batch, elem).map_err(invalid)?,
    )?;
    tenant.owned(
        b,
        extent::strided(eb, stride_b, batch, elem).map_err(invalid)?,
    )?;
    tenant.owned(
        c,
        extent::strided(ec, stride_c, batch, elem).map_err(invalid)?,
    )
}

pub fn gemv(
    tenant: &Tenant,
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
    tenant.owned(a, ea)?;
    tenant.owned(x, ex)?;
    tenant.owned(y, ey)
}

pub fn ger(
    tenant: &Tenant,
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
    tenant.owned(x, ex)?;
    tenant.owned(y, ey)?;
    tenant.owned(a, ea)
}

/// A matrix of its own element type: address, `cudaDataType`, leading
/// dimension, batch stride (in elements).
pub type Typed = (*mut c_void, i32, i32, i64);

/// GemmEx's A, B and C, each sized by its own type (a type the server
/// cannot size is refused).
pub fn gemm_ex(
    tenant: &Tenant,
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
    let shape = extent::Gemm {
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
    let (ea, eb, ec) = shape.extents().map_err(invalid)?;
    for ((ptr, ty, _, stride), elems) in [(a, ea), (b, eb), (c, ec)] {
        let elem = size(ty)?;
        let one = elems.checked_mul(elem).ok_or(CUBLAS_STATUS_INVALID_VALUE)?;
        let bytes = extent::strided(one, stride, batch.into(), elem).map_err(invalid)?;
        tenant.owned(ptr, bytes)?;
    }
    Ok(())
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
