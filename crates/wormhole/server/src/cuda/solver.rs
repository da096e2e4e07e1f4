//! The cuSOLVER backend (dense factorisations and solves): decoders
//! generated from `cusolver.api` and the extent checks it names.
//! libcusolver is opened at run time (the soname of the runtime's major
//! first); where it is missing every call answers as cuSOLVER does without
//! a driver (CUSOLVER_STATUS_NOT_INITIALIZED: no handle can be created).

use std::ffi::c_void;

use wormhole_cuda_api::extent;
use wormhole_cuda_api::matmul::elem_size;
use wormhole_cuda_api::solver::{
    func, CUSOLVER_STATUS_INVALID_VALUE, CUSOLVER_STATUS_NOT_INITIALIZED,
    CUSOLVER_STATUS_NOT_SUPPORTED, CUSOLVER_STATUS_SUCCESS,
};
use wormhole_cuda_api::Kind;
use wormhole_wire::{Decoder, Encoder};

use super::libs::LibTenant as Tenant;
use super::loader::Sonames;

library_backend! {
    generated: "solver_server_gen.rs", checks as solver;
    library: CUSOLVER = Sonames::ByRuntimeMajor("libcusolver.so.11", "libcusolver.so.12");
    statuses: CUSOLVER_STATUS_NOT_INITIALIZED, CUSOLVER_STATUS_INVALID_VALUE;
}

/// The customs `cusolver.api` names.
pub mod custom {
    use super::*;

    /// A host workspace: the client's memory is not ours to give the
    /// library, so it gets none (`checks::xfactor` refuses a call that
    /// asks for some).
    pub struct NoHost;

    impl NoHost {
        pub fn arg(&mut self) -> *mut c_void {
            std::ptr::null_mut()
        }

        pub fn reply(&mut self, _t: &mut Tenant, _e: &mut Encoder, _s: i32) -> Result<(), i32> {
            Ok(())
        }
    }

    pub mod nohost {
        use super::*;
        pub fn decode(_t: &mut Tenant, _d: &mut Decoder<'_>) -> Result<NoHost, i32> {
            Ok(NoHost)
        }
    }
}

/// Nothing is hand-written on the server.
pub mod overrides {}

/// The extents `cusolver.api`'s `check=`s name: every device pointer must
/// be the tenant's for all the bytes the call can touch, computed here
/// before the library sees it.
#[allow(clippy::too_many_arguments)]
pub mod checks {
    use super::*;

    fn invalid(_: extent::Invalid) -> i32 {
        CUSOLVER_STATUS_INVALID_VALUE
    }

    /// An m x n column-major matrix with leading dimension `ld`.
    fn matrix(t: &Tenant, p: *mut c_void, m: i64, n: i64, ld: i64, elem: u64) -> Result<(), i32> {
        t.owned(p, extent::matrix(m, n, ld, elem).map_err(invalid)?)
    }

    /// `n` elements of `elem` bytes.
    fn span(t: &Tenant, p: *mut c_void, n: i64, elem: u64) -> Result<(), i32> {
        let n = u64::try_from(n).map_err(|_| CUSOLVER_STATUS_INVALID_VALUE)?;
        t.owned(p, extent::span(n, elem).map_err(invalid)?)
    }

    /// The info word every factorisation and solve writes.
    fn info(t: &Tenant, p: *mut c_void) -> Result<(), i32> {
        t.owned(p, 4)
    }

    fn elem_of(ty: i32) -> Result<u64, i32> {
        elem_size(ty).ok_or(CUSOLVER_STATUS_NOT_SUPPORTED)
    }

    /// A size query reads no matrix, and a NULL one is the library's to
    /// judge; any other must still be the tenant's.
    pub fn query(
        t: &Tenant,
        a: *mut c_void,
        m: i32,
        n: i32,
        lda: i32,
        elem: u64,
    ) -> Result<(), i32> {
        if a.is_null() {
            return Ok(());
        }
        matrix(t, a, m.into(), n.into(), lda.into(), elem)
    }

    pub fn xquery(
        t: &Tenant,
        a: *mut c_void,
        m: i64,
        n: i64,
        lda: i64,
        ty: i32,
    ) -> Result<(), i32> {
        if a.is_null() {
            return Ok(());
        }
        matrix(t, a, m, n, lda, elem_of(ty)?)
    }

    /// The workspace (in elements) the library's own size query answers,
    /// or its failure.
    fn library_lwork(query: impl FnOnce(&mut i32) -> i32) -> Result<i32, i32> {
        let mut need = 0;
        match query(&mut need) {
            CUSOLVER_STATUS_SUCCESS => Ok(need),
            s => Err(s),
        }
    }

    /// A classic call's workspace must be the tenant's for the larger of
    /// the `lwork` it was given and what the library's size query (`$s`
    /// for float, `$d` for double) answers for the same arguments: a short
    /// `lwork` then cannot make the library write past what was checked.
    /// The query's arguments are those before its output, then any after
    /// it (`; params`).
    macro_rules! workspace {
        ($t:expr, $work:expr, $lwork:expr, $elem:expr, $s:ident, $d:ident, ($($arg:expr),*$(; $post:expr)?)) => {{
            // SAFETY: the handle is the tenant's and every region the query
            // is given was checked by the caller; `need` is a local the
            // library writes.
            let need = library_lwork(|need| unsafe {
                if $elem == 4 {
                    ffi::$s($($arg,)* need $(, $post)?)
                } else {
                    ffi::$d($($arg,)* need $(, $post)?)
                }
            })?;
            span($t, $work, i32::max($lwork, need).into(), $elem)
        }};
    }

    /// The classic Cholesky: A, info and the workspace.
    pub fn potrf(
        t: &Tenant,
        h: *mut c_void,
        uplo: i32,
        n: i32,
        a: *mut c_void,
        lda: i32,
        work: *mut c_void,
        lwork: i32,
        dev_info: *mut c_void,
        elem: u64,
    ) -> Result<(), i32> {
        matrix(t, a, n.into(), n.into(), lda.into(), elem)?;
        info(t, dev_info)?;
        workspace!(
            t,
            work,
            lwork,
            elem,
            cusolverDnSpotrf_bufferSize,
            cusolverDnDpotrf_bufferSize,
            (h, uplo, n, a, lda)
        )
    }

    /// The classic LU takes no workspace size: it is what the library's
    /// own size query answers for the same matrix. `ipiv` (may be NULL: no
    /// pivoting) holds min(m, n) ints.
    pub fn getrf(
        t: &Tenant,
        h: *mut c_void,
        m: i32,
        n: i32,
        a: *mut c_void,
        lda: i32,
        work: *mut c_void,
        ipiv: *mut c_void,
        dev_info: *mut c_void,
        elem: u64,
    ) -> Result<(), i32> {
        matrix(t, a, m.into(), n.into(), lda.into(), elem)?;
        info(t, dev_info)?;
        if !ipiv.is_null() {
            span(t, ipiv, m.min(n).into(), 4)?;
        }
        workspace!(
            t,
            work,
            0,
            elem,
            cusolverDnSgetrf_bufferSize,
            cusolverDnDgetrf_bufferSize,
            (h, m, n, a, lda)
        )
    }

    /// A solve with an n x n factor (and, for LU, its n pivots of
    /// `ipiv_elem` bytes; none for Cholesky) into n x nrhs right-hand sides.
    pub fn solve(
        t: &Tenant,
        n: i32,
        nrhs: i32,
        a: *mut c_void,
        lda: i32,
        ipiv: *mut c_void,
        ipiv_elem: u64,
        b: *mut c_void,
        ldb: i32,
        dev_info: *mut c_void,
        elem: u64,
    ) -> Result<(), i32> {
        matrix(t, a, n.into(), n.into(), lda.into(), elem)?;
        matrix(t, b, n.into(), nrhs.into(), ldb.into(), elem)?;
        if ipiv_elem > 0 {
            span(t, ipiv, n.into(), ipiv_elem)?;
        }
        info(t, dev_info)
    }

    /// A size query's matrix and vector (TAU, W), each checked unless NULL.
    pub fn query_with_vector(
        t: &Tenant,
        a: *mut c_void,
        m: i32,
        n: i32,
        lda: i32,
        v: *mut c_void,
        len: i32,
        elem: u64,
    ) -> Result<(), i32> {
        query(t, a, m, n, lda, elem)?;
        if !v.is_null() {
            span(t, v, len.into(), elem)?;
        }
        Ok(())
    }

    /// Rows of the reflectors' matrix `ormqr` applies: m from the left
    /// (side 0), n from the right (1).
    fn reflector_rows(side: i32, m: i32, n: i32) -> Result<i32, i32> {
        match side {
            0 => Ok(m),
            1 => Ok(n),
            _ => Err(CUSOLVER_STATUS_INVALID_VALUE),
        }
    }

    pub fn ormqr_query(
        t: &Tenant,
        side: i32,
        m: i32,
        n: i32,
        k: i32,
        a: *mut c_void,
        lda: i32,
        tau: *mut c_void,
        c: *mut c_void,
        ldc: i32,
        elem: u64,
    ) -> Result<(), i32> {
        query_with_vector(t, a, reflector_rows(side, m, n)?, k, lda, tau, k, elem)?;
        query(t, c, m, n, ldc, elem)
    }

    /// Householder QR: A, TAU of min(m, n), info, and the workspace.
    pub fn geqrf(
        t: &Tenant,
        h: *mut c_void,
        m: i32,
        n: i32,
        a: *mut c_void,
        lda: i32,
        tau: *mut c_void,
        work: *mut c_void,
        lwork: i32,
        dev_info: *mut c_void,
        elem: u64,
    ) -> Result<(), i32> {
        matrix(t, a, m.into(), n.into(), lda.into(), elem)?;
        span(t, tau, m.min(n).into(), elem)?;
        info(t, dev_info)?;
        workspace!(
            t,
            work,
            lwork,
            elem,
            cusolverDnSgeqrf_bufferSize,
            cusolverDnDgeqrf_bufferSize,
            (h, m, n, a, lda)
        )
    }

    /// Q's first n columns from k reflectors: A m x n, TAU of k.
    pub fn orgqr(
        t: &Tenant,
        h: *mut c_void,
        m: i32,
        n: i32,
        k: i32,
        a: *mut c_void,
        lda: i32,
        tau: *mut c_void,
        work: *mut c_void,
        lwork: i32,
        dev_info: *mut c_void,
        elem: u64,
    ) -> Result<(), i32> {
        matrix(t, a, m.into(), n.into(), lda.into(), elem)?;
        span(t, tau, k.into(), elem)?;
        info(t, dev_info)?;
        workspace!(
            t,
            work,
            lwork,
            elem,
            cusolverDnSorgqr_bufferSize,
            cusolverDnDorgqr_bufferSize,
            (h, m, n, k, a, lda, tau)
        )
    }

    /// op(Q) applied to C (m x n) from k reflectors.
    pub fn ormqr(
        t: &Tenant,
        h: *mut c_void,
        side: i32,
        trans: i32,
        m: i32,
        n: i32,
        k: i32,
        a: *mut c_void,
        lda: i32,
        tau: *mut c_void,
        c: *mut c_void,
        ldc: i32,
        work: *mut c_void,
        lwork: i32,
        dev_info: *mut c_void,
        elem: u64,
    ) -> Result<(), i32> {
        let rows = reflector_rows(side, m, n)?;
        matrix(t, a, rows.into(), k.into(), lda.into(), elem)?;
        span(t, tau, k.into(), elem)?;
        matrix(t, c, m.into(), n.into(), ldc.into(), elem)?;
        info(t, dev_info)?;
        workspace!(
            t,
            work,
            lwork,
            elem,
            cusolverDnSormqr_bufferSize,
            cusolverDnDormqr_bufferSize,
            (h, side, trans, m, n, k, a, lda, tau, c, ldc)
        )
    }

    /// The symmetric eigenproblem: A n x n, W of n, info, the workspace.
    pub fn syevd(
        t: &Tenant,
        h: *mut c_void,
        jobz: i32,
        uplo: i32,
        n: i32,
        a: *mut c_void,
        lda: i32,
        w: *mut c_void,
        work: *mut c_void,
        lwork: i32,
        dev_info: *mut c_void,
        elem: u64,
    ) -> Result<(), i32> {
        matrix(t, a, n.into(), n.into(), lda.into(), elem)?;
        span(t, w, n.into(), elem)?;
        info(t, dev_info)?;
        workspace!(
            t,
            work,
            lwork,
            elem,
            cusolverDnSsyevd_bufferSize,
            cusolverDnDsyevd_bufferSize,
            (h, jobz, uplo, n, a, lda, w)
        )
    }

    /// U's and V's columns: all of their rows (m, n), or min(m, n) with
    /// `econ`; None without vectors (jobz 0), where neither is touched.
    fn svd_vector_cols(jobz: i32, econ: i32, m: i32, n: i32) -> Result<Option<(i32, i32)>, i32> {
        match (jobz, econ) {
            (0, 0 | 1) => Ok(None),
            (1, 0) => Ok(Some((m, n))),
            (1, 1) => Ok(Some((m.min(n), m.min(n)))),
            _ => Err(CUSOLVER_STATUS_INVALID_VALUE),
        }
    }

    /// The SVD's outputs: S of min(m, n) and, with vectors, U (m rows) and
    /// V (n rows). A size query (`query`) leaves NULL ones to the library.
    fn svd_outputs(
        t: &Tenant,
        jobz: i32,
        econ: i32,
        m: i32,
        n: i32,
        s: *mut c_void,
        u: *mut c_void,
        ldu: i32,
        v: *mut c_void,
        ldv: i32,
        elem: u64,
        query: bool,
    ) -> Result<(), i32> {
        let check = |p: *mut c_void, rows: i32, cols: i32, ld: i32| {
            if query && p.is_null() {
                return Ok(());
            }
            matrix(t, p, rows.into(), cols.into(), ld.into(), elem)
        };
        check(s, m.min(n), 1, m.min(n).max(1))?;
        if let Some((u_cols, v_cols)) = svd_vector_cols(jobz, econ, m, n)? {
            check(u, m, u_cols, ldu)?;
            check(v, n, v_cols, ldv)?;
        }
        Ok(())
    }

    pub fn svd_query(
        t: &Tenant,
        jobz: i32,
        econ: i32,
        m: i32,
        n: i32,
        a: *mut c_void,
        lda: i32,
        s: *mut c_void,
        u: *mut c_void,
        ldu: i32,
        v: *mut c_void,
        ldv: i32,
        elem: u64,
    ) -> Result<(), i32> {
        query(t, a, m, n, lda, elem)?;
        svd_outputs(t, jobz, econ, m, n, s, u, ldu, v, ldv, elem, true)
    }

    /// Jacobi SVD: A, S, U and V as above, info, and the workspace for the
    /// larger of `lwork` and the library's size query.
    pub fn gesvdj(
        t: &Tenant,
        h: *mut c_void,
        jobz: i32,
        econ: i32,
        m: i32,
        n: i32,
        a: *mut c_void,
        lda: i32,
        s: *mut c_void,
        u: *mut c_void,
        ldu: i32,
        v: *mut c_void,
        ldv: i32,
        work: *mut c_void,
        lwork: i32,
        dev_info: *mut c_void,
        params: *mut c_void,
        elem: u64,
    ) -> Result<(), i32> {
        matrix(t, a, m.into(), n.into(), lda.into(), elem)?;
        svd_outputs(t, jobz, econ, m, n, s, u, ldu, v, ldv, elem, false)?;
        info(t, dev_info)?;
        // `params` is NULL or the tenant's.
        workspace!(
            t,
            work,
            lwork,
            elem,
            cusolverDnSgesvdj_bufferSize,
            cusolverDnDgesvdj_bufferSize,
            (h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv; params)
        )
    }

    /// A 64-bit size query's matrix and vector, each checked unless NULL.
    pub fn xquery_with_vector(
        t: &Tenant,
        a: *mut c_void,
        m: i64,
        n: i64,
        lda: i64,
        ty_a: i32,
        v: *mut c_void,
        len: i64,
        ty_v: i32,
    ) -> Result<(), i32> {
        xquery(t, a, m, n, lda, ty_a)?;
        if !v.is_null() {
            span(t, v, len, elem_of(ty_v)?)?;
        }
        Ok(())
    }

    /// The 64-bit QR and eigensolver: A, a vector of `len` (TAU, W) of its
    /// own type, the device workspace, info; no host workspace.
    pub fn xvector_factor(
        t: &Tenant,
        m: i64,
        n: i64,
        ty_a: i32,
        a: *mut c_void,
        lda: i64,
        v: *mut c_void,
        len: i64,
        ty_v: i32,
        work: *mut c_void,
        work_bytes: usize,
        host_bytes: usize,
        dev_info: *mut c_void,
    ) -> Result<(), i32> {
        xfactor(
            t,
            m,
            n,
            ty_a,
            a,
            lda,
            std::ptr::null_mut(),
            work,
            work_bytes,
            host_bytes,
            dev_info,
        )?;
        span(t, v, len, elem_of(ty_v)?)
    }

    /// The 64-bit factorisations (Cholesky when `ipiv` is NULL, LU with
    /// min(m, n) 64-bit pivots otherwise): the device workspace is the size
    /// given, and no host workspace can be given.
    pub fn xfactor(
        t: &Tenant,
        m: i64,
        n: i64,
        ty: i32,
        a: *mut c_void,
        lda: i64,
        ipiv: *mut c_void,
        work: *mut c_void,
        work_bytes: usize,
        host_bytes: usize,
        dev_info: *mut c_void,
    ) -> Result<(), i32> {
        if host_bytes != 0 {
            return Err(CUSOLVER_STATUS_NOT_SUPPORTED);
        }
        matrix(t, a, m, n, lda, elem_of(ty)?)?;
        if !ipiv.is_null() {
            span(t, ipiv, m.min(n), 8)?;
        }
        t.owned(work, work_bytes as u64)?;
        info(t, dev_info)
    }

    /// The 64-bit solves: as `solve`, each matrix of its own type.
    pub fn xsolve(
        t: &Tenant,
        n: i64,
        nrhs: i64,
        ty_a: i32,
        a: *mut c_void,
        lda: i64,
        ipiv: *mut c_void,
        ipiv_elem: u64,
        ty_b: i32,
        b: *mut c_void,
        ldb: i64,
        dev_info: *mut c_void,
    ) -> Result<(), i32> {
        matrix(t, a, n, n, lda, elem_of(ty_a)?)?;
        matrix(t, b, n, nrhs, ldb, elem_of(ty_b)?)?;
        if ipiv_elem > 0 {
            span(t, ipiv, n, ipiv_elem)?;
        }
        info(t, dev_info)
    }
}

#[cfg(test)]
mod tests {
    use super::super::CudaTenant;
    use super::*;

    use crate::cuda::testing::{call, BASE};

    const HANDLE: u64 = 0x300;
    const PARAMS: u64 = 0x301;
    const GESVDJ: u64 = 0x302;
    const CUDA_R_32F: i32 = 0;
    const CUDA_R_64F: i32 = 1;

    /// A tenant with one 4 KiB allocation, a cuSOLVER handle and parameters.
    fn tenant() -> CudaTenant {
        crate::cuda::testing::tenant(&[
            (HANDLE, Kind::Cusolver, 0x1000),
            (PARAMS, Kind::CusolverParams, 0x2000),
            (GESVDJ, Kind::GesvdjInfo, 0x3000),
        ])
    }

    /// Whether a request passed every check: it reached the library,
    /// which tests never load.
    fn reached(r: Result<i32, i32>) -> bool {
        r == Ok(NO_LIBRARY)
    }

    /// Xgetrf of an n x n double matrix at `a`, pivots at `ipiv`, `work`
    /// bytes of device workspace at `w`, `host` bytes of host workspace.
    fn xgetrf(
        n: i64,
        a: u64,
        ipiv: u64,
        w: u64,
        work: usize,
        host: usize,
        info: u64,
    ) -> impl FnOnce(&mut Encoder) {
        move |e: &mut Encoder| {
            e.u64(HANDLE);
            e.u64(PARAMS);
            e.i64(n);
            e.i64(n);
            e.i32(CUDA_R_64F);
            e.u64(a);
            e.i64(n);
            e.u64(ipiv);
            e.i32(CUDA_R_64F);
            e.u64(w);
            e.usize(work);
            e.usize(host);
            e.u64(info);
        }
    }

    #[test]
    fn the_64_bit_lu_is_checked_whole_before_the_library() {
        let mut t = tenant();
        let f = func::cusolverDnXgetrf;
        // 16 x 16 doubles (2 KiB), 16 pivots (128 B), 1 KiB of workspace.
        let (a, ipiv, w, info) = (BASE, BASE + 2048, BASE + 2048 + 128, BASE + 4092);
        assert!(reached(call(
            &mut t,
            f,
            xgetrf(16, a, ipiv, w, 1024, 0, info)
        )));
        // No pivots (NULL) is the library's to accept.
        assert!(reached(call(&mut t, f, xgetrf(16, a, 0, w, 1024, 0, info))));
        // Each region one byte or one element too long.
        let bad = Err(CUSOLVER_STATUS_INVALID_VALUE);
        assert_eq!(call(&mut t, f, xgetrf(23, a, ipiv, w, 1024, 0, info)), bad);
        assert_eq!(
            call(&mut t, f, xgetrf(16, a, BASE + 3969, w, 8, 0, info)),
            bad
        );
        assert_eq!(call(&mut t, f, xgetrf(16, a, ipiv, w, 1921, 0, info)), bad);
        assert_eq!(
            call(&mut t, f, xgetrf(16, a, ipiv, w, 1024, 0, BASE + 4093)),
            bad
        );
        // The client's host workspace is not the server's to give.
        assert_eq!(
            call(&mut t, f, xgetrf(16, a, ipiv, w, 1024, 64, info)),
            Err(CUSOLVER_STATUS_NOT_SUPPORTED)
        );
        // Parameters where the handle goes: a handle of the other kind.
        let swapped = |e: &mut Encoder| {
            xgetrf(16, a, ipiv, w, 1024, 0, info)(e);
            let mut bytes = e.as_slice().to_vec();
            bytes[..8].copy_from_slice(&PARAMS.to_le_bytes());
            *e = Encoder::new();
            e.raw(&bytes);
        };
        assert_eq!(
            call(&mut t, f, swapped),
            Err(CUSOLVER_STATUS_NOT_INITIALIZED)
        );
    }

    #[test]
    fn solves_check_both_matrices_pivots_and_info() {
        let mut t = tenant();
        // Sgetrs: 8 x 8 floats (256 B), 8 int pivots, 8 x 4 right-hand sides.
        let sgetrs = |n: i32, nrhs: i32, ipiv: u64, ldb: i32| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                e.i32(0);
                e.i32(n);
                e.i32(nrhs);
                e.u64(BASE);
                e.i32(n);
                e.u64(ipiv);
                e.u64(BASE + 512);
                e.i32(ldb);
                e.u64(BASE + 4000);
            }
        };
        let f = func::cusolverDnSgetrs;
        assert!(reached(call(&mut t, f, sgetrs(8, 4, BASE + 256, 8))));
        let bad = Err(CUSOLVER_STATUS_INVALID_VALUE);
        // Pivots are not optional in a solve; B's leading dimension below n.
        assert_eq!(call(&mut t, f, sgetrs(8, 4, 0, 8)), bad);
        assert_eq!(call(&mut t, f, sgetrs(8, 4, BASE + 256, 7)), bad);
        // B spanning past the allocation: 4 KiB - 512 B holds 896 floats.
        assert_eq!(call(&mut t, f, sgetrs(8, 113, BASE + 256, 8)), bad);
        // Xpotrs: no pivots; B of its own (float) type.
        let xpotrs = |ty_b: i32, nrhs: i64| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                e.u64(PARAMS);
                e.i32(0);
                e.i64(8);
                e.i64(nrhs);
                e.i32(CUDA_R_64F);
                e.u64(BASE);
                e.i64(8);
                e.i32(ty_b);
                e.u64(BASE + 512);
                e.i64(8);
                e.u64(BASE + 4000);
            }
        };
        let f = func::cusolverDnXpotrs;
        assert!(reached(call(&mut t, f, xpotrs(CUDA_R_32F, 100))));
        assert_eq!(call(&mut t, f, xpotrs(CUDA_R_64F, 100)), bad);
        assert_eq!(
            call(&mut t, f, xpotrs(1234, 1)),
            Err(CUSOLVER_STATUS_NOT_SUPPORTED)
        );
    }

    #[test]
    fn qr_and_eigen_check_their_vectors_and_sides() {
        let mut t = tenant();
        let bad = Err(CUSOLVER_STATUS_INVALID_VALUE);
        // Dormqr: C is 8 x 4 doubles at BASE + 1024; the reflectors (k = 4)
        // are m x k from the left and n x k from the right. With m = 8,
        // n = 4: from the left A spans 256 B, from the right 128 B.
        let dormqr = |side: i32, lda: i32, tau: u64| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                e.i32(side);
                e.i32(1);
                e.i32(8);
                e.i32(4);
                e.i32(4);
                e.u64(BASE + 4096 - 256);
                e.i32(lda);
                e.u64(tau);
                e.u64(BASE + 1024);
                e.i32(8);
                e.u64(BASE + 2048);
                e.i32(16);
                e.u64(BASE + 3000);
            }
        };
        let f = func::cusolverDnDormqr;
        // Both sides fit: they go on to ask the library for the workspace.
        assert_eq!(call(&mut t, f, dormqr(0, 8, BASE)), Err(NO_LIBRARY));
        assert_eq!(call(&mut t, f, dormqr(1, 4, BASE)), Err(NO_LIBRARY));
        // From the right with an 8-row leading dimension the last column
        // ends past the allocation (A starts 256 B before its end: fine for
        // 8 x 4 with lda 8, not for lda 9).
        assert_eq!(call(&mut t, f, dormqr(0, 9, BASE)), bad);
        assert_eq!(call(&mut t, f, dormqr(2, 8, BASE)), bad);
        // TAU of k = 4 doubles must be the tenant's.
        assert_eq!(call(&mut t, f, dormqr(0, 8, BASE + 4090)), bad);

        // Xsyevd: W is n elements of its own type.
        let xsyevd = |n: i64, ty_w: i32, w: u64| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                e.u64(PARAMS);
                e.i32(1);
                e.i32(0);
                e.i64(n);
                e.i32(CUDA_R_64F);
                e.u64(BASE);
                e.i64(n);
                e.i32(ty_w);
                e.u64(w);
                e.i32(CUDA_R_64F);
                e.u64(BASE + 2048);
                e.usize(1024);
                e.usize(0);
                e.u64(BASE + 4092);
            }
        };
        let f = func::cusolverDnXsyevd;
        // 16 x 16 doubles (2 KiB) and 16 W at BASE + 3968 (128 B: doubles fit).
        assert!(reached(call(
            &mut t,
            f,
            xsyevd(16, CUDA_R_64F, BASE + 3968)
        )));
        assert!(reached(call(
            &mut t,
            f,
            xsyevd(16, CUDA_R_32F, BASE + 4030)
        )));
        assert_eq!(call(&mut t, f, xsyevd(16, CUDA_R_64F, BASE + 3969)), bad);
        assert_eq!(
            call(&mut t, f, xsyevd(16, 77, BASE + 3968)),
            Err(CUSOLVER_STATUS_NOT_SUPPORTED)
        );
    }

    #[test]
    fn the_svd_checks_its_vectors_only_when_asked_for_them() {
        let mut t = tenant();
        // Dgesvdj of a 16 x 8 matrix (1 KiB) at BASE, S (8) at BASE + 1024,
        // U at BASE + 1088, V at BASE + 3200: U is 16 x 16 (2 KiB, past
        // V's start but inside the allocation) or, economical, 16 x 8.
        let with_settings = |jobz: i32, econ: i32, u: u64, ldv: i32, settings: u64| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                e.i32(jobz);
                e.i32(econ);
                e.i32(16);
                e.i32(8);
                e.u64(BASE);
                e.i32(16);
                e.u64(BASE + 1024);
                e.u64(u);
                e.i32(16);
                e.u64(BASE + 3200);
                e.i32(ldv);
                e.u64(BASE + 4000);
                e.i32(8);
                e.u64(BASE + 4092);
                e.u64(settings);
            }
        };
        let dgesvdj = |jobz, econ, u, ldv| with_settings(jobz, econ, u, ldv, GESVDJ);
        let f = func::cusolverDnDgesvdj;
        let bad = Err(CUSOLVER_STATUS_INVALID_VALUE);
        // Fits (8 x 8 V of 512 B at BASE + 3200): on to the library's size
        // query.
        assert_eq!(
            call(&mut t, f, dgesvdj(1, 1, BASE + 1088, 8)),
            Err(NO_LIBRARY)
        );
        assert_eq!(
            call(&mut t, f, dgesvdj(1, 0, BASE + 1088, 8)),
            Err(NO_LIBRARY)
        );
        // The full U from further on runs past the allocation; the
        // economical one does not.
        assert_eq!(call(&mut t, f, dgesvdj(1, 0, BASE + 2500, 8)), bad);
        assert_eq!(
            call(&mut t, f, dgesvdj(1, 1, BASE + 2500, 8)),
            Err(NO_LIBRARY)
        );
        // Without vectors U and V are not looked at (a foreign U passes).
        assert_eq!(
            call(&mut t, f, dgesvdj(0, 0, 0x1234_5678, 8)),
            Err(NO_LIBRARY)
        );
        assert_eq!(call(&mut t, f, dgesvdj(1, 1, 0x1234_5678, 8)), bad);
        // V's leading dimension below n, and modes that do not exist.
        assert_eq!(call(&mut t, f, dgesvdj(1, 1, BASE + 1088, 7)), bad);
        assert_eq!(call(&mut t, f, dgesvdj(2, 0, BASE + 1088, 8)), bad);
        assert_eq!(call(&mut t, f, dgesvdj(1, 2, BASE + 1088, 8)), bad);
        // No settings at all: refused here, as NVIDIA's library (CUDA 13)
        // crashes on NULL.
        let r = call(&mut t, f, with_settings(1, 1, BASE + 1088, 8, 0));
        assert!(r.is_err() && !reached(r), "{r:?}");
    }

    #[test]
    fn classic_factorisations_check_their_matrix_first() {
        let mut t = tenant();
        // Dpotrf of 16 x 16 doubles fits; 23 x 23 does not. The workspace
        // is checked against the library's own size query, which a test
        // cannot reach: a matrix that fits goes on to ask it.
        let dpotrf = |n: i32| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                e.i32(0);
                e.i32(n);
                e.u64(BASE);
                e.i32(n);
                e.u64(BASE + 2048);
                e.i32(16);
                e.u64(BASE + 4092);
            }
        };
        let f = func::cusolverDnDpotrf;
        assert_eq!(call(&mut t, f, dpotrf(16)), Err(NO_LIBRARY));
        assert_eq!(
            call(&mut t, f, dpotrf(23)),
            Err(CUSOLVER_STATUS_INVALID_VALUE)
        );
        // A size query with a NULL matrix is the library's; with a foreign
        // one it is refused.
        let query = |a: u64| {
            move |e: &mut Encoder| {
                e.u64(HANDLE);
                e.i32(0);
                e.i32(16);
                e.u64(a);
                e.i32(16);
                e.u8(1);
            }
        };
        let f = func::cusolverDnSpotrf_bufferSize;
        assert!(!matches!(
            call(&mut t, f, query(0)),
            Err(CUSOLVER_STATUS_INVALID_VALUE)
        ));
        assert_eq!(
            call(&mut t, f, query(0x1234_0000)),
            Err(CUSOLVER_STATUS_INVALID_VALUE)
        );
    }
}
