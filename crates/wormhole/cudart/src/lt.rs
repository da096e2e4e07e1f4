//! cuBLASLt on the client (`cublaslt.api`), for the libcublasLt stand-in
//! to forward to. The descriptors live here as plain values
//! (`wormhole_cuda_api::matmul`) behind opaque tokens: creating, setting
//! and destroying them asks nothing of the server. The heuristic answers
//! one algorithm meaning "the server's choice"; a matmul goes to the server
//! whole, as a cuBLAS call (the handle is a cuBLAS handle).
#![allow(non_snake_case)] // the C names of the entry points

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use wormhole_cuda_api::blas::{CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_SUCCESS};
use wormhole_cuda_api::lt::func;
use wormhole_cuda_api::matmul::{self, Desc, Layout, Matmul, Operand, Preference};
use wormhole_cuda_api::Kind;

use crate::libs::Call;
use crate::state::Global;

#[allow(clippy::missing_safety_doc, unused_imports, unused_variables)]
pub mod gen {
    use std::ffi::{c_char, c_void};

    use super as overrides;
    use wormhole_cuda_api::blas::CUBLAS_STATUS_NOT_SUPPORTED;

    include!(concat!(env!("OUT_DIR"), "/lt_client_gen.rs"));
    include!(concat!(env!("OUT_DIR"), "/lt_forward_gen.rs"));
}

/// A descriptor the application holds a token for.
#[derive(Debug, Clone, Copy)]
enum Object {
    Desc(Desc),
    Layout(Layout),
    Pref(Preference),
}

#[derive(Default)]
struct Objects {
    live: HashMap<usize, Object>,
    next: usize,
}

fn objects() -> MutexGuard<'static, Objects> {
    static O: Global<Objects> = Global::new();
    O.lock()
}

/// Stores `o` under a new token, written to `slot`. Tokens are never
/// reused, so a destroyed descriptor's stays invalid.
///
/// # Safety
/// `slot` is NULL or writable.
unsafe fn create(slot: *mut *mut c_void, o: Result<Object, i32>) -> i32 {
    if slot.is_null() {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    let o = match o {
        Ok(o) => o,
        Err(s) => return s,
    };
    let mut objs = objects();
    objs.next += 1;
    // Never NULL, and unlike any address the application could own.
    let token = 0x11a0_0000_0000 + objs.next * 16;
    objs.live.insert(token, o);
    // SAFETY: `slot` is non-NULL (checked above), and a non-NULL slot is
    // writable: the contract of this function, which the Create calls pass
    // on from cuBLASLt's for their descriptor out-parameter.
    unsafe { *slot = token as *mut c_void };
    CUBLAS_STATUS_SUCCESS
}

fn is_desc(o: &Object) -> bool {
    matches!(o, Object::Desc(_))
}

fn is_layout(o: &Object) -> bool {
    matches!(o, Object::Layout(_))
}

fn is_pref(o: &Object) -> bool {
    matches!(o, Object::Pref(_))
}

fn destroy(token: *mut c_void, is: fn(&Object) -> bool) -> i32 {
    let mut objs = objects();
    match objs.live.get(&(token as usize)) {
        Some(o) if is(o) => {
            objs.live.remove(&(token as usize));
            CUBLAS_STATUS_SUCCESS
        }
        _ => CUBLAS_STATUS_INVALID_VALUE,
    }
}

/// Sets attribute `attr` of descriptor `token` from `size` bytes at `buf`.
///
/// # Safety
/// `buf` is NULL or readable for `size` bytes.
unsafe fn set(
    token: *mut c_void,
    kind: fn(&Object) -> bool,
    attr: i32,
    buf: *const c_void,
    size: usize,
) -> i32 {
    if buf.is_null() || size > 64 {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    // SAFETY: `buf` is non-NULL (checked above), and then readable for
    // `size` bytes (at most 64): the contract of this function, which the
    // SetAttribute calls pass on from cuBLASLt's.
    let v = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size) };
    let mut objs = objects();
    let r = match objs.live.get_mut(&(token as usize)) {
        Some(o) if !kind(o) => Err(CUBLAS_STATUS_INVALID_VALUE),
        Some(Object::Desc(d)) => d.set(attr, v),
        Some(Object::Layout(l)) => l.set(attr, v),
        Some(Object::Pref(p)) => p.set(attr, v),
        None => Err(CUBLAS_STATUS_INVALID_VALUE),
    };
    r.err().unwrap_or(CUBLAS_STATUS_SUCCESS)
}

fn desc_of(objs: &Objects, token: *mut c_void) -> Result<Desc, i32> {
    match objs.live.get(&(token as usize)) {
        Some(Object::Desc(d)) => Ok(*d),
        _ => Err(CUBLAS_STATUS_INVALID_VALUE),
    }
}

fn layout_of(objs: &Objects, token: *mut c_void) -> Result<Layout, i32> {
    match objs.live.get(&(token as usize)) {
        Some(Object::Layout(l)) => Ok(*l),
        _ => Err(CUBLAS_STATUS_INVALID_VALUE),
    }
}

fn status(r: Result<i32, i32>) -> i32 {
    match r {
        Ok(s) | Err(s) => s,
    }
}

/// The version of the cuBLAS this runtime's major stands in for.
pub extern "C" fn cublasLtGetVersion() -> usize {
    wormhole_cuda_api::blas::version(crate::state::MAJOR.load(Ordering::Relaxed)) as usize
}

/// A cuBLASLt handle is a cuBLAS handle.
///
/// # Safety
/// As cublasCreate_v2.
pub unsafe extern "C" fn cublasLtCreate(handle: *mut *mut c_void) -> i32 {
    // SAFETY: `handle` is NULL or a writable handle slot, cublasLtCreate's
    // contract, which is cublasCreate_v2's (it checks for NULL).
    unsafe { crate::libs::blas_manual::cublasCreate_v2(handle) }
}

/// # Safety
/// As cublasDestroy_v2.
pub unsafe extern "C" fn cublasLtDestroy(handle: *mut c_void) -> i32 {
    // SAFETY: the stub does not read `handle`: it looks it up in the
    // client's table and refuses an unknown one, so any value is sound.
    unsafe { crate::blas::gen::cublasDestroy_v2(handle) }
}

/// # Safety
/// `desc` is NULL or writable.
pub unsafe extern "C" fn cublasLtMatmulDescCreate(
    desc: *mut *mut c_void,
    computeType: i32,
    scaleType: i32,
) -> i32 {
    // SAFETY: `desc` is NULL or writable (cuBLASLt's contract for the
    // out-parameter), which is what `create` needs.
    unsafe { create(desc, Desc::new(computeType, scaleType).map(Object::Desc)) }
}

pub extern "C" fn cublasLtMatmulDescDestroy(desc: *mut c_void) -> i32 {
    destroy(desc, is_desc)
}

/// # Safety
/// `buf` is NULL or readable for `size` bytes.
pub unsafe extern "C" fn cublasLtMatmulDescSetAttribute(
    desc: *mut c_void,
    attr: i32,
    buf: *const c_void,
    size: usize,
) -> i32 {
    // SAFETY: `buf` is NULL or readable for `size` bytes, cuBLASLt's
    // contract for an attribute's value, which is what `set` needs.
    unsafe { set(desc, is_desc, attr, buf, size) }
}

/// # Safety
/// `layout` is NULL or writable.
pub unsafe extern "C" fn cublasLtMatrixLayoutCreate(
    layout: *mut *mut c_void,
    ty: i32,
    rows: u64,
    cols: u64,
    ld: i64,
) -> i32 {
    // SAFETY: `layout` is NULL or writable (cuBLASLt's contract for the
    // out-parameter), which is what `create` needs.
    unsafe { create(layout, Layout::new(ty, rows, cols, ld).map(Object::Layout)) }
}

pub extern "C" fn cublasLtMatrixLayoutDestroy(layout: *mut c_void) -> i32 {
    destroy(layout, is_layout)
}

/// # Safety
/// `buf` is NULL or readable for `size` bytes.
pub unsafe extern "C" fn cublasLtMatrixLayoutSetAttribute(
    layout: *mut c_void,
    attr: i32,
    buf: *const c_void,
    size: usize,
) -> i32 {
    // SAFETY: `buf` is NULL or readable for `size` bytes, cuBLASLt's
    // contract for an attribute's value, which is what `set` needs.
    unsafe { set(layout, is_layout, attr, buf, size) }
}

/// # Safety
/// `pref` is NULL or writable.
pub unsafe extern "C" fn cublasLtMatmulPreferenceCreate(pref: *mut *mut c_void) -> i32 {
    // SAFETY: `pref` is NULL or writable (cuBLASLt's contract for the
    // out-parameter), which is what `create` needs.
    unsafe { create(pref, Ok(Object::Pref(Preference::default()))) }
}

pub extern "C" fn cublasLtMatmulPreferenceDestroy(pref: *mut c_void) -> i32 {
    destroy(pref, is_pref)
}

/// # Safety
/// `buf` is NULL or readable for `size` bytes.
pub unsafe extern "C" fn cublasLtMatmulPreferenceSetAttribute(
    pref: *mut c_void,
    attr: i32,
    buf: *const c_void,
    size: usize,
) -> i32 {
    // SAFETY: `buf` is NULL or readable for `size` bytes, cuBLASLt's
    // contract for an attribute's value, which is what `set` needs.
    unsafe { set(pref, is_pref, attr, buf, size) }
}

/// `cublasLtMatmulHeuristicResult_t`.
#[repr(C)]
struct HeuristicResult {
    algo: [u64; 8],
    workspace_size: usize,
    state: i32,
    waves_count: f32,
    reserved: [i32; 4],
}

/// One answer, standing for the algorithm the server's cuBLASLt will pick
/// for these descriptors at the matmul; it needs no workspace beyond the
/// preference's bound, which it carries.
///
/// # Safety
/// `results` is NULL or writable for `requested` results, `count` NULL or
/// writable.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cublasLtMatmulAlgoGetHeuristic(
    handle: *mut c_void,
    desc: *mut c_void,
    a: *mut c_void,
    b: *mut c_void,
    c: *mut c_void,
    d: *mut c_void,
    pref: *mut c_void,
    requested: i32,
    results: *mut c_void,
    count: *mut i32,
) -> i32 {
    if results.is_null() || count.is_null() || requested < 1 {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if handle.is_null() {
        return Kind::Cublas.invalid();
    }
    if let Err(s) = crate::state::handle_id(handle, Kind::Cublas) {
        return s;
    }
    let pref = {
        let objs = objects();
        let descs = (|| {
            let desc = desc_of(&objs, desc)?;
            let l = [a, b, c, d].map(|t| layout_of(&objs, t));
            let [a, b, c, d] = [l[0]?, l[1]?, l[2]?, l[3]?];
            matmul::validate(&desc, [&a, &b, &c, &d])?;
            match objs.live.get(&(pref as usize)) {
                Some(Object::Pref(p)) => Ok(*p),
                _ => Err(CUBLAS_STATUS_INVALID_VALUE),
            }
        })();
        match descs {
            Ok(p) => p,
            Err(s) => return s,
        }
    };
    let r = HeuristicResult {
        algo: matmul::algo_words(&pref),
        workspace_size: 0,
        state: CUBLAS_STATUS_SUCCESS,
        waves_count: 1.0,
        reserved: [0; 4],
    };
    // SAFETY: `results` holds at least one result (requested >= 1) and
    // `count` an int, by the caller's contract; written unaligned, since
    // nothing here can see the caller's array's alignment.
    unsafe {
        results.cast::<HeuristicResult>().write_unaligned(r);
        *count = 1;
    }
    CUBLAS_STATUS_SUCCESS
}

/// # Safety
/// As cublasLtMatmul: `alpha` and `beta` readable scalars of the scale
/// type, `algo` NULL or a readable `cublasLtMatmulAlgo_t`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cublasLtMatmul(
    handle: *mut c_void,
    desc: *mut c_void,
    alpha: *const c_void,
    A: *const c_void,
    Adesc: *mut c_void,
    B: *const c_void,
    Bdesc: *mut c_void,
    beta: *const c_void,
    C: *const c_void,
    Cdesc: *mut c_void,
    D: *mut c_void,
    Ddesc: *mut c_void,
    algo: *const c_void,
    workspace: *mut c_void,
    workspaceSizeInBytes: usize,
    stream: *mut c_void,
) -> i32 {
    let mm = (|| -> Result<Matmul, i32> {
        let objs = objects();
        let desc = desc_of(&objs, desc)?;
        let op = |ptr: *const c_void, t| -> Result<Operand, i32> {
            Ok(Operand {
                ptr: ptr as usize as u64,
                layout: layout_of(&objs, t)?,
            })
        };
        let (a, b, c, d) = (op(A, Adesc)?, op(B, Bdesc)?, op(C, Cdesc)?, op(D, Ddesc)?);
        if alpha.is_null() || beta.is_null() {
            return Err(CUBLAS_STATUS_INVALID_VALUE);
        }
        let n = desc.scalar_size();
        // SAFETY: alpha and beta are non-NULL (checked above) and, by
        // cublasLtMatmul's contract in host pointer mode (the only one this
        // client accepts), each points to one scalar of the descriptor's
        // scale type: `n` readable bytes.
        let scalar = |p: *const c_void| unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) };
        let max_workspace = if algo.is_null() {
            u64::MAX
        } else {
            // SAFETY: `algo` is non-NULL (checked just above), and a
            // non-NULL one points to a cublasLtMatmulAlgo_t (8 readable
            // u64s): cublasLtMatmul's contract; read unaligned.
            let words = unsafe { algo.cast::<[u64; 8]>().read_unaligned() };
            // One this client's heuristic did not answer is refused.
            matmul::algo_workspace(&words).ok_or(CUBLAS_STATUS_INVALID_VALUE)?
        };
        let mm = Matmul {
            desc,
            alpha: scalar(alpha).to_vec(),
            beta: scalar(beta).to_vec(),
            a,
            b,
            c,
            d,
            max_workspace,
            workspace: workspace as usize as u64,
            workspace_size: workspaceSizeInBytes as u64,
        };
        mm.validate()?;
        Ok(mm)
    })();
    let mm = match mm {
        Ok(mm) => mm,
        Err(s) => return s,
    };
    status((|| {
        let mut c = Call::begin(func::cublasLtMatmul)?;
        c.handle(handle, Kind::Cublas)?;
        // What decides whether cuBLASLt can run it (not the addresses).
        let d = &mm.desc;
        for v in [
            d.compute,
            d.scale,
            d.transa,
            d.transb,
            d.epilogue as i32,
            d.bias_type,
        ] {
            c.shape(v as u64);
        }
        for o in [&mm.a, &mm.b, &mm.c, &mm.d] {
            let l = &o.layout;
            for v in [
                l.ty as u64,
                l.rows,
                l.cols,
                l.ld as u64,
                l.batch as u64,
                l.stride as u64,
            ] {
                c.shape(v);
            }
        }
        mm.encode(&mut c.enc);
        c.handle(stream, Kind::Stream)?;
        c.finish_async(false)
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_are_tokens_of_their_own_kind() {
        let mut d = std::ptr::null_mut();
        let mut l = std::ptr::null_mut();
        // SAFETY: valid slots.
        unsafe {
            assert_eq!(cublasLtMatmulDescCreate(&mut d, 68, 0), 0);
            assert_eq!(cublasLtMatrixLayoutCreate(&mut l, 0, 4, 4, 4), 0);
            assert_eq!(cublasLtMatrixLayoutCreate(&mut l, 0, 4, 4, 4), 0);
            assert_eq!(
                cublasLtMatrixLayoutCreate(std::ptr::null_mut(), 0, 4, 4, 4),
                7
            );
            // A type the model cannot size.
            let mut x = std::ptr::null_mut();
            assert_eq!(cublasLtMatrixLayoutCreate(&mut x, 77, 4, 4, 4), 15);
            assert!(x.is_null());
        }
        let t = 1i32.to_ne_bytes();
        // SAFETY: 4 readable bytes.
        unsafe {
            assert_eq!(
                cublasLtMatmulDescSetAttribute(d, 3, t.as_ptr().cast(), 4),
                0
            );
            // Row order is refused where it is set; a layout is not set
            // through the matmul descriptor's call.
            assert_eq!(
                cublasLtMatrixLayoutSetAttribute(l, 1, t.as_ptr().cast(), 4),
                15
            );
            assert_eq!(
                cublasLtMatmulDescSetAttribute(l, 3, t.as_ptr().cast(), 4),
                7
            );
            assert_eq!(
                cublasLtMatmulDescSetAttribute(d, 3, t.as_ptr().cast(), 3),
                7
            );
        }
        // Destroyed once, by its own kind's call only.
        assert_eq!(cublasLtMatmulPreferenceDestroy(d), 7);
        assert_eq!(cublasLtMatmulDescDestroy(d), 0);
        assert_eq!(cublasLtMatmulDescDestroy(d), 7);
        assert_eq!(cublasLtMatrixLayoutDestroy(l), 0);
        assert_eq!(cublasLtMatrixLayoutDestroy(0x1234 as *mut c_void), 7);
    }
}
