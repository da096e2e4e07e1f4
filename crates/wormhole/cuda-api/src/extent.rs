//! How much device memory a cuBLAS or cuRAND call touches, from its sizes,
//! leading dimensions, increments, transposes and batch strides: the server
//! checks `[ptr, ptr + bytes)` of every device-pointer argument against the
//! tenant's allocations before the library sees it. No I/O, no pointers:
//! the arithmetic alone, with every overflow an error.
//!
//! Layouts are BLAS's: column-major matrices whose columns start `ld`
//! elements apart (`ld >= max(1, rows)`, as cuBLAS requires), vectors whose
//! `n` elements are `|inc|` apart (a negative increment walks the same
//! footprint backwards, as in reference BLAS: the pointer is still the
//! lowest address).

use thiserror::Error;

/// An argument combination the library would refuse (or that would make
/// it touch more than 2^64 bytes): the call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Invalid {
    #[error("a size is negative")]
    Negative,
    #[error("a leading dimension is below max(1, rows)")]
    LeadingDimension,
    #[error("a transpose is not N, T or C")]
    Transpose,
    #[error("a batch stride is negative")]
    Stride,
    #[error("the extent overflows")]
    Overflow,
}

/// `cublasOperation_t`: N (0) keeps a matrix, T (1) and C (2) transpose it
/// (for real types the conjugate transpose is the transpose).
pub fn stored_dims(trans: i32, rows: i64, cols: i64) -> Result<(i64, i64), Invalid> {
    match trans {
        0 => Ok((rows, cols)),
        1 | 2 => Ok((cols, rows)),
        _ => Err(Invalid::Transpose),
    }
}

fn mul(a: u64, b: u64) -> Result<u64, Invalid> {
    a.checked_mul(b).ok_or(Invalid::Overflow)
}

fn add(a: u64, b: u64) -> Result<u64, Invalid> {
    a.checked_add(b).ok_or(Invalid::Overflow)
}

/// Bytes a column-major `rows` x `cols` matrix with leading dimension `ld`
/// spans: `((cols - 1) * ld + rows) * elem`, 0 when it is empty. The
/// leading dimension is checked even for an empty matrix, as cuBLAS does.
pub fn matrix(rows: i64, cols: i64, ld: i64, elem: u64) -> Result<u64, Invalid> {
    if rows < 0 || cols < 0 {
        return Err(Invalid::Negative);
    }
    if ld < rows.max(1) {
        return Err(Invalid::LeadingDimension);
    }
    if rows == 0 || cols == 0 {
        return Ok(0);
    }
    let elems = add(mul(cols as u64 - 1, ld as u64)?, rows as u64)?;
    mul(elems, elem)
}

/// Bytes `n` elements `|inc|` apart span: `((n - 1) * |inc| + 1) * elem`;
/// 0 for `n <= 0` (cuBLAS returns at once, touching nothing).
pub fn vector(n: i64, inc: i64, elem: u64) -> Result<u64, Invalid> {
    if n <= 0 {
        return Ok(0);
    }
    let elems = add(mul(n as u64 - 1, inc.unsigned_abs())?, 1)?;
    mul(elems, elem)
}

/// Bytes `batch` items of `single` bytes, `stride` elements apart, span.
/// Negative strides are refused (cuBLAS documents none).
pub fn strided(single: u64, stride: i64, batch: i64, elem: u64) -> Result<u64, Invalid> {
    if batch < 0 {
        return Err(Invalid::Negative);
    }
    if stride < 0 {
        return Err(Invalid::Stride);
    }
    if batch == 0 || single == 0 {
        return Ok(0);
    }
    add(mul(mul(batch as u64 - 1, stride as u64)?, elem)?, single)
}

/// The bytes of A, B and C a GEMM (`C = alpha op(A) op(B) + beta C`, C
/// `m` x `n`, inner dimension `k`) touches. Nothing when `m` or `n` is 0;
/// only C when `k` is 0 (C is still scaled by beta).
pub struct Gemm {
    pub transa: i32,
    pub transb: i32,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub lda: i64,
    pub ldb: i64,
    pub ldc: i64,
    pub elem: u64,
}

impl Gemm {
    /// `(A, B, C)` in bytes.
    pub fn extents(&self) -> Result<(u64, u64, u64), Invalid> {
        if self.m < 0 || self.n < 0 || self.k < 0 {
            return Err(Invalid::Negative);
        }
        let (ar, ac) = stored_dims(self.transa, self.m, self.k)?;
        let (br, bc) = stored_dims(self.transb, self.k, self.n)?;
        let a = matrix(ar, ac, self.lda, self.elem)?;
        let b = matrix(br, bc, self.ldb, self.elem)?;
        let c = matrix(self.m, self.n, self.ldc, self.elem)?;
        if self.m == 0 || self.n == 0 {
            return Ok((0, 0, 0));
        }
        Ok((a, b, c))
    }
}

/// The bytes of A, x and y a GEMV (`y = alpha op(A) x + beta y`, A `m` x
/// `n`) touches.
pub fn gemv(
    trans: i32,
    m: i64,
    n: i64,
    lda: i64,
    incx: i64,
    incy: i64,
    elem: u64,
) -> Result<(u64, u64, u64), Invalid> {
    // x has op(A)'s columns, y its rows.
    let (xl, yl) = match stored_dims(trans, m, n)? {
        _ if trans == 0 => (n, m),
        _ => (m, n),
    };
    let [a, x, y] = matrix_and_vectors(m, n, lda, [(xl, incx), (yl, incy)], elem)?;
    Ok((a, x, y))
}

/// The bytes of x, y and A a rank-1 update (`A += alpha x y^T`, A `m` x
/// `n`) touches.
pub fn ger(
    m: i64,
    n: i64,
    incx: i64,
    incy: i64,
    lda: i64,
    elem: u64,
) -> Result<(u64, u64, u64), Invalid> {
    let [a, x, y] = matrix_and_vectors(m, n, lda, [(m, incx), (n, incy)], elem)?;
    Ok((x, y, a))
}

/// The bytes of an `m` x `n` matrix and of two vectors (length, increment)
/// that a level-2 call touches: none where the matrix is empty.
fn matrix_and_vectors(
    m: i64,
    n: i64,
    lda: i64,
    [(xl, incx), (yl, incy)]: [(i64, i64); 2],
    elem: u64,
) -> Result<[u64; 3], Invalid> {
    if m < 0 || n < 0 {
        return Err(Invalid::Negative);
    }
    let a = matrix(m, n, lda, elem)?;
    if m == 0 || n == 0 {
        return Ok([0; 3]);
    }
    Ok([a, vector(xl, incx, elem)?, vector(yl, incy, elem)?])
}

/// Bytes `n` elements of `elem` bytes take (cuRAND's outputs).
pub fn span(n: u64, elem: u64) -> Result<u64, Invalid> {
    mul(n, elem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrices_span_columns_ld_apart() {
        // 3 x 2 with ld 5: the second column starts at element 5.
        assert_eq!(matrix(3, 2, 5, 4), Ok((5 + 3) * 4));
        assert_eq!(matrix(3, 1, 3, 8), Ok(24));
        assert_eq!(matrix(0, 7, 1, 4), Ok(0), "empty, ld >= 1");
        assert_eq!(matrix(4, 0, 4, 4), Ok(0));
        assert_eq!(matrix(3, 2, 2, 4), Err(Invalid::LeadingDimension));
        assert_eq!(matrix(0, 2, 0, 4), Err(Invalid::LeadingDimension));
        assert_eq!(matrix(2, 2, -1, 4), Err(Invalid::LeadingDimension));
        assert_eq!(matrix(-1, 2, 1, 4), Err(Invalid::Negative));
        assert_eq!(matrix(2, -3, 4, 4), Err(Invalid::Negative));
        assert_eq!(
            matrix(i64::MAX, i64::MAX, i64::MAX, 4),
            Err(Invalid::Overflow)
        );
        assert_eq!(matrix(1, 1 << 40, 1 << 30, 1 << 10), Err(Invalid::Overflow));
    }

    #[test]
    fn vectors_span_n_increments() {
        assert_eq!(vector(4, 1, 4), Ok(16));
        assert_eq!(vector(4, 3, 4), Ok((3 * 3 + 1) * 4));
        assert_eq!(vector(4, -3, 4), Ok((3 * 3 + 1) * 4), "same footprint");
        assert_eq!(vector(4, 0, 4), Ok(4), "every element is the first");
        assert_eq!(vector(0, 1, 4), Ok(0));
        assert_eq!(vector(-5, 1, 4), Ok(0));
        assert_eq!(vector(i64::MAX, i64::MIN, 4), Err(Invalid::Overflow));
        assert_eq!(vector(3, i64::MAX, 4), Err(Invalid::Overflow));
    }

    #[test]
    fn gemm_follows_the_transposes() {
        let g = |transa, transb, lda, ldb| Gemm {
            transa,
            transb,
            m: 2,
            n: 3,
            k: 4,
            lda,
            ldb,
            ldc: 2,
            elem: 4,
        };
        // A is m x k = 2 x 4, B is k x n = 4 x 3, C 2 x 3.
        assert_eq!(g(0, 0, 2, 4).extents(), Ok((32, 48, 24)));
        // op(A) = A^T: A is stored k x m = 4 x 2 (lda >= 4).
        assert_eq!(g(1, 0, 2, 4).extents(), Err(Invalid::LeadingDimension));
        assert_eq!(g(1, 0, 4, 4).extents(), Ok((32, 48, 24)));
        // op(B) = B^T: B is stored n x k = 3 x 4 (ldb >= 3).
        assert_eq!(g(0, 2, 2, 3).extents(), Ok((32, 48, 24)));
        assert_eq!(g(0, 7, 2, 3).extents(), Err(Invalid::Transpose));
        let mut k0 = g(0, 0, 2, 1);
        k0.k = 0;
        assert_eq!(k0.extents(), Ok((0, 0, 24)), "C is still scaled");
        let mut m0 = g(0, 0, 1, 4);
        m0.m = 0;
        m0.ldc = 1;
        assert_eq!(m0.extents(), Ok((0, 0, 0)));
        let mut neg = g(0, 0, 2, 4);
        neg.k = -1;
        assert_eq!(neg.extents(), Err(Invalid::Negative));
    }

    #[test]
    fn batches_add_strides() {
        assert_eq!(strided(64, 16, 3, 4), Ok(2 * 16 * 4 + 64));
        assert_eq!(strided(64, 0, 3, 4), Ok(64), "one matrix shared");
        assert_eq!(strided(64, 16, 0, 4), Ok(0));
        assert_eq!(strided(0, 16, 9, 4), Ok(0));
        assert_eq!(strided(64, -16, 3, 4), Err(Invalid::Stride));
        assert_eq!(strided(64, 16, -1, 4), Err(Invalid::Negative));
        assert_eq!(strided(64, i64::MAX, 3, 4), Err(Invalid::Overflow));
    }

    #[test]
    fn gemv_and_ger_size_their_vectors() {
        // A 3 x 2; y = A x: x has 2, y 3; y = A^T x: x has 3, y 2.
        assert_eq!(gemv(0, 3, 2, 3, 1, 1, 4), Ok((24, 8, 12)));
        assert_eq!(gemv(1, 3, 2, 3, 1, 2, 4), Ok((24, 12, 12)));
        assert_eq!(gemv(0, 3, 2, 2, 1, 1, 4), Err(Invalid::LeadingDimension));
        assert_eq!(gemv(5, 3, 2, 3, 1, 1, 4), Err(Invalid::Transpose));
        assert_eq!(gemv(0, 0, 2, 1, 1, 1, 4), Ok((0, 0, 0)));
        assert_eq!(ger(3, 2, 1, 1, 3, 4), Ok((12, 8, 24)));
        assert_eq!(ger(3, 2, 1, 1, 0, 4), Err(Invalid::LeadingDimension));
        assert_eq!(ger(-3, 2, 1, 1, 3, 4), Err(Invalid::Negative));
        assert_eq!(span(u64::MAX, 4), Err(Invalid::Overflow));
        assert_eq!(span(10, 8), Ok(80));
    }
}
