//! The cuBLASLt backend: a client's matmul (`wormhole_cuda_api::matmul`),
//! checked and run through NVIDIA's descriptors, which the server builds
//! for the call and destroys after it. The algorithm is cuBLASLt's own
//! heuristic's first answer for the request's descriptors, workspace bound
//! and operand alignments: the client never names one (see `cublaslt.api`).
//!
//! libcublasLt is opened at run time, of the loaded runtime's major first.
//! Where it is missing, a matmul answers CUBLAS_STATUS_NOT_INITIALIZED, as
//! the rest of cuBLAS does.

use std::ffi::c_void;

use wormhole_cuda_api::blas::{CUBLAS_STATUS_NOT_SUPPORTED, CUBLAS_STATUS_SUCCESS};
use wormhole_cuda_api::lt::func;
use wormhole_cuda_api::matmul::{desc_attr, layout_attr, pref_attr, Layout, Matmul};
use wormhole_cuda_api::Kind;
use wormhole_wire::{Decoder, Encoder};

// cuBLASLt's statuses are cuBLAS's: the same answers without the library
// and for a malformed request.
pub use super::blas::{bad, NO_LIBRARY};
use super::libs::LibTenant as Tenant;
use super::loader::{Sonames, Symbols};

type Create = unsafe extern "C" fn(*mut *mut c_void) -> i32;
type DescCreate = unsafe extern "C" fn(*mut *mut c_void, i32, i32) -> i32;
type LayoutCreate = unsafe extern "C" fn(*mut *mut c_void, i32, u64, u64, i64) -> i32;
type SetAttr = unsafe extern "C" fn(*mut c_void, i32, *const c_void, usize) -> i32;
type Destroy = unsafe extern "C" fn(*mut c_void) -> i32;
type Heuristic = unsafe extern "C" fn(
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    i32,
    *mut HeuristicResult,
    *mut i32,
) -> i32;

/// The descriptor calls the client answers itself (so the description
/// leaves them out of the generated table) but the server needs.
struct Descriptors {
    desc_create: DescCreate,
    desc_set: SetAttr,
    desc_destroy: Destroy,
    layout_create: LayoutCreate,
    layout_set: SetAttr,
    layout_destroy: Destroy,
    pref_create: Create,
    pref_set: SetAttr,
    pref_destroy: Destroy,
    heuristic: Heuristic,
}

library_backend! {
    generated: "lt_server_gen.rs";
    library: CUBLASLT = Sonames::ByRuntimeMajor("libcublasLt.so.12", "libcublasLt.so.13");
    loads: Option<Descriptors> = descriptors;
}

/// The descriptor calls, all of them or none.
fn descriptors(symbols: &Symbols) -> Option<Descriptors> {
    // SAFETY: each type below is the C signature (cublasLt.h) of the
    // libcublasLt function named beside it.
    unsafe {
        Some(Descriptors {
            desc_create: symbols.function("cublasLtMatmulDescCreate")?,
            desc_set: symbols.function("cublasLtMatmulDescSetAttribute")?,
            desc_destroy: symbols.function("cublasLtMatmulDescDestroy")?,
            layout_create: symbols.function("cublasLtMatrixLayoutCreate")?,
            layout_set: symbols.function("cublasLtMatrixLayoutSetAttribute")?,
            layout_destroy: symbols.function("cublasLtMatrixLayoutDestroy")?,
            pref_create: symbols.function("cublasLtMatmulPreferenceCreate")?,
            pref_set: symbols.function("cublasLtMatmulPreferenceSetAttribute")?,
            pref_destroy: symbols.function("cublasLtMatmulPreferenceDestroy")?,
            heuristic: symbols.function("cublasLtMatmulAlgoGetHeuristic")?,
        })
    }
}

/// `cublasLtMatmulHeuristicResult_t`.
#[repr(C)]
pub struct HeuristicResult {
    algo: [u64; 8],
    workspace_size: usize,
    state: i32,
    waves_count: f32,
    reserved: [i32; 4],
}

/// NVIDIA descriptors made for one call, destroyed when it ends.
struct Made<'a> {
    lib: &'a Descriptors,
    desc: *mut c_void,
    layouts: [*mut c_void; 4],
    pref: *mut c_void,
}

impl Drop for Made<'_> {
    fn drop(&mut self) {
        // SAFETY: each non-NULL pointer is a descriptor the matching create
        // call made for this call alone, destroyed once, here.
        unsafe {
            if !self.desc.is_null() {
                (self.lib.desc_destroy)(self.desc);
            }
            for l in self.layouts.into_iter().filter(|l| !l.is_null()) {
                (self.lib.layout_destroy)(l);
            }
            if !self.pref.is_null() {
                (self.lib.pref_destroy)(self.pref);
            }
        }
    }
}

fn ok(s: i32) -> Result<(), i32> {
    if s == CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(s)
    }
}

/// Sets one attribute from a value's bytes.
///
/// # Safety
/// `set` is one of libcublasLt's SetAttribute calls and `obj` a live
/// descriptor of its kind.
unsafe fn put<T: Copy>(set: SetAttr, obj: *mut c_void, attr: i32, v: T) -> Result<(), i32> {
    // SAFETY: `v` lives across the call, which copies its size in bytes.
    ok(unsafe { set(obj, attr, (&v as *const T).cast(), std::mem::size_of::<T>()) })
}

/// The largest power of two up to 256 that divides `p`, as PyTorch and
/// cuBLASLt's own examples compute an operand's alignment.
fn alignment(p: u64) -> u32 {
    if p == 0 {
        256
    } else {
        1u32 << p.trailing_zeros().min(8)
    }
}

/// Builds NVIDIA's descriptors for `mm` and picks the heuristic's first
/// algorithm, within `workspace` bytes.
fn prepare<'a>(
    lib: &'a Descriptors,
    handle: *mut c_void,
    mm: &Matmul,
    workspace: u64,
) -> Result<(Made<'a>, HeuristicResult), i32> {
    let mut m = Made {
        lib,
        desc: std::ptr::null_mut(),
        layouts: [std::ptr::null_mut(); 4],
        pref: std::ptr::null_mut(),
    };
    let d = &mm.desc;
    // SAFETY: the create calls write a descriptor to the slot given; every
    // set names a descriptor just made, with a value of the attribute's
    // type (cublasLt.h); `Made` destroys them.
    unsafe {
        ok((lib.desc_create)(&mut m.desc, d.compute, d.scale))?;
        put(lib.desc_set, m.desc, desc_attr::TRANSA, d.transa)?;
        put(lib.desc_set, m.desc, desc_attr::TRANSB, d.transb)?;
        put(lib.desc_set, m.desc, desc_attr::EPILOGUE, d.epilogue)?;
        if d.bias != 0 {
            put(lib.desc_set, m.desc, desc_attr::BIAS_POINTER, d.bias)?;
        }
        if d.bias_stride != 0 {
            put(
                lib.desc_set,
                m.desc,
                desc_attr::BIAS_BATCH_STRIDE,
                d.bias_stride,
            )?;
        }
        if d.bias_type != -1 {
            put(lib.desc_set, m.desc, desc_attr::BIAS_DATA_TYPE, d.bias_type)?;
        }
        if d.sm_count != 0 {
            put(lib.desc_set, m.desc, desc_attr::SM_COUNT_TARGET, d.sm_count)?;
        }
        let ops = [&mm.a, &mm.b, &mm.c, &mm.d];
        for (slot, o) in m.layouts.iter_mut().zip(ops) {
            let l: &Layout = &o.layout;
            ok((lib.layout_create)(slot, l.ty, l.rows, l.cols, l.ld))?;
            if l.batch != 1 {
                put(lib.layout_set, *slot, layout_attr::BATCH_COUNT, l.batch)?;
                put(
                    lib.layout_set,
                    *slot,
                    layout_attr::STRIDED_BATCH_OFFSET,
                    l.stride,
                )?;
            }
        }
        ok((lib.pref_create)(&mut m.pref))?;
        put(
            lib.pref_set,
            m.pref,
            pref_attr::MAX_WORKSPACE_BYTES,
            workspace,
        )?;
        for (i, o) in ops.iter().enumerate() {
            let attr = pref_attr::MIN_ALIGNMENT_A_BYTES + i as i32;
            put(lib.pref_set, m.pref, attr, alignment(o.ptr))?;
        }
        let mut r: HeuristicResult = std::mem::zeroed();
        let mut n = 0;
        let [a, b, c, dd] = m.layouts;
        ok((lib.heuristic)(
            handle, m.desc, a, b, c, dd, m.pref, 1, &mut r, &mut n,
        ))?;
        if n < 1 || r.state != CUBLAS_STATUS_SUCCESS {
            return Err(CUBLAS_STATUS_NOT_SUPPORTED);
        }
        Ok((m, r))
    }
}

/// Hand-written decoders the description names (`manual`).
#[allow(non_snake_case)] // d_ + the C name
pub mod overrides {
    use super::*;

    /// `cublasLtMatmul`: the handle, the matmul, the stream.
    pub fn d_cublasLtMatmul(
        t: &mut Tenant,
        d: &mut Decoder<'_>,
        _e: &mut Encoder,
    ) -> Result<i32, i32> {
        let handle = t.handle(d, Kind::Cublas)?;
        let mm = Matmul::decode(d).map_err(bad)?;
        let stream = t.opt_handle(d, Kind::Stream)?;
        d.finish().map_err(bad)?;
        mm.validate()?;
        for (p, bytes) in mm.extents()? {
            t.owned(p as usize as *mut c_void, bytes)?;
        }
        // Past every check: without the library, its answer.
        let loaded = CUBLASLT.get();
        let (Some(desc), Some(run)) = (loaded.extra.as_ref(), loaded.table.cublasLtMatmul) else {
            return Ok(NO_LIBRARY);
        };
        let workspace = mm.max_workspace.min(mm.workspace_size);
        let (made, r) = match prepare(desc, handle, &mm, workspace) {
            Ok(x) => x,
            Err(s) => return Ok(s),
        };
        let [a, b, c, dd] = made.layouts;
        let ptr = |p: u64| p as usize as *mut c_void;
        // SAFETY: every address is inside one of the tenant's allocations
        // for the extent its layout gives (checked above), the scalars are
        // of the scale type (validate), the descriptors were made for this
        // call, and the algorithm is cuBLASLt's own for them.
        let s = unsafe {
            run(
                handle,
                made.desc,
                mm.alpha.as_ptr().cast(),
                ptr(mm.a.ptr),
                a,
                ptr(mm.b.ptr),
                b,
                mm.beta.as_ptr().cast(),
                ptr(mm.c.ptr),
                c,
                ptr(mm.d.ptr),
                dd,
                (&r.algo as *const [u64; 8]).cast(),
                ptr(mm.workspace),
                workspace as usize,
                stream,
            )
        };
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::CudaTenant;
    use wormhole_cuda_api::blas::{CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_NOT_INITIALIZED};
    use wormhole_cuda_api::matmul::{Desc, Operand, EPILOGUE_BIAS};
    use wormhole_cuda_api::Library;

    use crate::cuda::testing::BASE;

    /// A tenant owning 4 KiB at BASE, a cuBLAS handle (id 0x100) and a
    /// stream (0x102).
    fn tenant() -> CudaTenant {
        crate::cuda::testing::tenant(&[
            (0x100, Kind::Cublas, 0x1000),
            (0x102, Kind::Stream, 0x3000),
        ])
    }

    /// An 8x8 linear layer with a bias, every operand inside the allocation.
    fn linear() -> Matmul {
        let mut desc = Desc::new(68, 0).expect("desc");
        desc.epilogue = EPILOGUE_BIAS;
        desc.bias = BASE + 3 * 256;
        let op = |i: u64| Operand {
            ptr: BASE + i * 256,
            layout: Layout::new(0, 8, 8, 8).expect("layout"),
        };
        Matmul {
            desc,
            alpha: 1f32.to_ne_bytes().to_vec(),
            beta: 0f32.to_ne_bytes().to_vec(),
            a: op(0),
            b: op(1),
            c: op(2),
            d: op(2),
            max_workspace: u64::MAX,
            workspace: BASE + 1024,
            workspace_size: 1024,
        }
    }

    fn run(t: &mut CudaTenant, handle: u64, mm: &Matmul, stream: u64) -> Result<i32, i32> {
        let mut e = Encoder::new();
        e.u64(handle);
        mm.encode(&mut e);
        e.u64(stream);
        let bytes = e.into_vec();
        let mut out = Encoder::new();
        let mut lt = crate::cuda::libs::LibTenant::new(t, Library::Blas);
        dispatch(
            &mut lt,
            func::cublasLtMatmul,
            &mut Decoder::new(&bytes),
            &mut out,
        )
    }

    #[test]
    fn a_matmul_inside_the_tenants_memory_reaches_the_library() {
        let mut t = tenant();
        // Every check passed: the (missing) library answers.
        assert_eq!(run(&mut t, 0x100, &linear(), 0x102), Ok(NO_LIBRARY));
        assert_eq!(run(&mut t, 0x100, &linear(), 0), Ok(NO_LIBRARY));
    }

    #[test]
    fn every_operand_the_bias_and_the_workspace_are_checked() {
        let mut t = tenant();
        let outside = BASE + 4096 - 8;
        let cases: [fn(&mut Matmul, u64); 6] = [
            |m, p| m.a.ptr = p,
            |m, p| m.b.ptr = p,
            |m, p| m.c.ptr = p,
            |m, p| m.d.ptr = p,
            |m, p| m.desc.bias = p,
            |m, p| m.workspace = p,
        ];
        for (i, put) in cases.iter().enumerate() {
            let mut mm = linear();
            put(&mut mm, outside);
            assert_eq!(
                run(&mut t, 0x100, &mm, 0),
                Err(CUBLAS_STATUS_INVALID_VALUE),
                "operand {i}"
            );
        }
        // A batch that walks past the end, a bias that is a whole column.
        let mut mm = linear();
        for o in [&mut mm.a, &mut mm.b, &mut mm.c, &mut mm.d] {
            o.layout.batch = 2;
            o.layout.stride = 1024;
        }
        assert_eq!(run(&mut t, 0x100, &mm, 0), Err(CUBLAS_STATUS_INVALID_VALUE));
        let mut mm = linear();
        mm.desc.bias = BASE + 4096 - 16;
        assert_eq!(run(&mut t, 0x100, &mm, 0), Err(CUBLAS_STATUS_INVALID_VALUE));
    }

    #[test]
    fn foreign_handles_and_malformed_requests_are_refused() {
        let mut t = tenant();
        // A handle or stream that is not the tenant's, of the wrong kind.
        assert_eq!(
            run(&mut t, 0x999, &linear(), 0),
            Err(CUBLAS_STATUS_NOT_INITIALIZED)
        );
        assert_eq!(
            run(&mut t, 0x102, &linear(), 0),
            Err(CUBLAS_STATUS_NOT_INITIALIZED)
        );
        assert_eq!(
            run(&mut t, 0x100, &linear(), 0x100),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        // Scalars of the wrong size, shapes that disagree, an aux epilogue.
        let mut mm = linear();
        mm.beta = vec![0; 8];
        assert_eq!(run(&mut t, 0x100, &mm, 0), Err(CUBLAS_STATUS_INVALID_VALUE));
        let mut mm = linear();
        mm.b.layout.cols = 7;
        assert_eq!(run(&mut t, 0x100, &mm, 0), Err(CUBLAS_STATUS_INVALID_VALUE));
        let mut mm = linear();
        mm.desc.epilogue = 128 | 2;
        assert_eq!(run(&mut t, 0x100, &mm, 0), Err(CUBLAS_STATUS_NOT_SUPPORTED));
        // Cut anywhere, or with a byte too many: refused, no panic.
        let mut e = Encoder::new();
        e.u64(0x100);
        linear().encode(&mut e);
        e.u64(0);
        let bytes = e.into_vec();
        for cut in 0..bytes.len() {
            let mut lt = crate::cuda::libs::LibTenant::new(&mut t, Library::Blas);
            let r = dispatch(
                &mut lt,
                func::cublasLtMatmul,
                &mut Decoder::new(&bytes[..cut]),
                &mut Encoder::new(),
            );
            assert!(r.is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        let mut lt = crate::cuda::libs::LibTenant::new(&mut t, Library::Blas);
        let r = dispatch(
            &mut lt,
            func::cublasLtMatmul,
            &mut Decoder::new(&long),
            &mut Encoder::new(),
        );
        assert_eq!(r, Err(CUBLAS_STATUS_INVALID_VALUE));
        // The descriptor calls are the client's: never dispatched here.
        let mut lt = crate::cuda::libs::LibTenant::new(&mut t, Library::Blas);
        let r = dispatch(
            &mut lt,
            func::cublasLtMatmulDescCreate,
            &mut Decoder::new(&[]),
            &mut Encoder::new(),
        );
        assert!(r.is_err());
    }

    #[test]
    fn alignments_are_powers_of_two_up_to_256() {
        assert_eq!(alignment(0x1000), 256);
        assert_eq!(alignment(0x1004), 4);
        assert_eq!(alignment(0x1010), 16);
        assert_eq!(alignment(3), 1);
        assert_eq!(alignment(0), 256);
    }
}
