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
