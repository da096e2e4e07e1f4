//! Answers to info queries that cannot change while their object lives (a
//! device's name, a buffer's size, a queue's context), kept with the object
//! so that each is asked of the server once. Libraries such as CLBlast ask
//! the same questions around every call they make, and each would otherwise
//! be a round trip: most of the time CLBlast's own tests took through
//! Wormhole. The description marks these queries `cached`, naming the
//! parameters that can change (reference counts, map counts).

use std::ffi::c_void;
use std::sync::Mutex;

use wormhole_opencl_api::{info_handle, InfoHandle, Kind, CL_INVALID_VALUE, CL_SUCCESS};

use crate::objects::obj;

/// Answers kept per object; past this, queries are forwarded each time.
const MAX_ENTRIES: usize = 256;
/// Larger values are forwarded each time.
const MAX_VALUE: usize = 16 * 1024;
/// The first ask uses a buffer this large: most values fit, so a miss
/// usually costs one round trip, as the query did before.
const PROBE: usize = 256;

/// One object's answers.
#[derive(Default)]
pub struct InfoCache(Mutex<Vec<Entry>>);

struct Entry {
    func: u32,
    param: u32,
    extra: u64,
    value: Box<[u8]>,
}

/// What a generated `cached` stub asks.
pub struct CachedQuery {
    pub func: u32,
    /// The queried object, as the application passed it.
    pub obj: *mut c_void,
    pub kind: Kind,
    /// The other argument that selects the answer (a device, an argument
    /// index; 0 when there is none), or `None` when it is not valid, in which
    /// case the query is forwarded for the library's error.
    pub extra: Option<u64>,
    pub param: u32,
    /// Parameters whose answer can change.
    pub mutable: &'static [u32],
}

/// The cache key of a handle argument: its id, 0 for NULL, `None` when it
/// is not a live handle of that kind.
pub fn key_of(p: *mut c_void, kind: Kind) -> Option<u64> {
    obj(p, kind).ok().map(|o| o.map_or(0, |o| o.id))
}

/// Answers `q` from the object's cache, or asks the server through `fetch`
/// (the ordinary stub, given a size, a value buffer and a size-returned
/// pointer) and keeps the answer. Anything unusual (an invalid handle, a
/// failed query, a value that is too large) is forwarded exactly as the
/// application asked, so errors are the library's.
///
/// # Safety
/// `value` is NULL or writable for `size` bytes, `size_ret` is NULL or a
/// writable usize; `fetch` must be safe to call with such arguments.
pub unsafe fn cached_info(
    q: CachedQuery,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
    fetch: &dyn Fn(usize, *mut c_void, *mut usize) -> i32,
) -> i32 {
    let forward = || fetch(size, value, size_ret);
    let Some(extra) = q.extra else {
        return forward();
    };
    let handles = info_handle(q.func, q.param);
    if q.mutable.contains(&q.param) || matches!(handles, Some(InfoHandle::Custom)) {
        return forward();
    }
    let Ok(Some(o)) = obj(q.obj, q.kind) else {
        return forward();
    };
    let key = (q.func, q.param, extra);
    if let Some(status) = o.info.answer(key, handles, |v| {
        // SAFETY: `value` is NULL or writable for `size` bytes and `size_ret` NULL or a writable
        // size_t (this fn's contract, the info query's), which is answer's.
        unsafe { answer(v, size, value, size_ret) }
    }) {
        return status;
    }
    let Some(v) = learn(fetch) else {
        return forward();
    };
    // SAFETY: `value` is NULL or writable for `size` bytes and `size_ret` NULL or a writable size_t
    // (this fn's contract, the info query's), which is answer's.
    let status = unsafe { answer(&v, size, value, size_ret) };
    o.info.keep(key, v);
    status
}

/// Asks for the whole value with buffers of ours.
fn learn(fetch: &dyn Fn(usize, *mut c_void, *mut usize) -> i32) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; PROBE];
    let mut len = 0usize;
    match fetch(PROBE, buf.as_mut_ptr().cast(), &mut len) {
        CL_SUCCESS if len <= PROBE => {
            buf.truncate(len);
            return Some(buf);
        }
        // Too small a buffer, or a bad parameter: the size query tells.
        CL_INVALID_VALUE => {}
        _ => return None,
    }
    if fetch(0, std::ptr::null_mut(), &mut len) != CL_SUCCESS || len > MAX_VALUE {
        return None;
    }
    let mut buf = vec![0u8; len];
    let mut got = 0usize;
    if fetch(len, buf.as_mut_ptr().cast(), &mut got) != CL_SUCCESS || got != len {
        return None;
    }
    Some(buf)
}

/// Answers an info query as the library does: the value if the buffer
/// holds it, `CL_INVALID_VALUE` if it is too small, and the size.
///
/// # Safety
/// `value` is NULL or holds `size` bytes; `size_ret` is NULL or a size_t.
pub(crate) unsafe fn answer(
    v: &[u8],
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    if !value.is_null() {
        if size < v.len() {
            return CL_INVALID_VALUE;
        }
        // SAFETY: `value` is non-NULL and writable for `size` bytes by the info query's contract
        // (param_value_size), and `size >= v.len()` was checked above.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), value.cast::<u8>(), v.len()) };
    }
    if !size_ret.is_null() {
        // SAFETY: `size_ret` is non-NULL and a writable size_t by the info query's contract
        // (param_value_size_ret).
        unsafe { *size_ret = v.len() };
    }
    CL_SUCCESS
}

impl InfoCache {
    /// Runs `f` on the kept answer, if there is one whose handles are all
    /// still the application's. An answer naming an object the application
    /// has since released is dropped: the server may still hold that object
    /// and answer with a fresh handle for it.
    fn answer(
        &self,
        (func, param, extra): (u32, u32, u64),
        handles: Option<InfoHandle>,
        f: impl FnOnce(&[u8]) -> i32,
    ) -> Option<i32> {
        let mut entries = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let i = entries
            .iter()
            .position(|e| e.func == func && e.param == param && e.extra == extra)?;
        if let Some(InfoHandle::One(k) | InfoHandle::Array(k)) = handles {
            let live = entries[i].value.chunks(8).all(|c| {
                let p = c.try_into().map_or(0, usize::from_le_bytes);
                p == 0 || matches!(obj(p as *mut c_void, k), Ok(Some(_)))
            });
            if !live {
                entries.swap_remove(i);
                return None;
            }
        }
        Some(f(&entries[i].value))
    }

    /// Records an answer this side knows without asking (a buffer's size,
    /// as it was created): the first query costs no round trip either.
    pub fn know(&self, func: u32, param: u32, value: &[u8]) {
        self.keep((func, param, 0), value.to_vec());
    }

    fn keep(&self, (func, param, extra): (u32, u32, u64), value: Vec<u8>) {
        let mut entries = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let known = entries
            .iter()
            .any(|e| e.func == func && e.param == param && e.extra == extra);
        if !known && entries.len() < MAX_ENTRIES {
            entries.push(Entry {
                func,
                param,
                extra,
                value: value.into_boxed_slice(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use wormhole_opencl_api::{func, CL_MEM_SIZE};

    use super::*;
    use crate::objects::object_for;

    /// CL_MEM_REFERENCE_COUNT, which changes.
    const REFS: u32 = 0x1105;

    /// What the forwarding stub does for a value of `v`: answers as the
    /// library would, counting its calls (each a round trip).
    fn stub<'a>(
        v: &'a [u8],
        calls: &'a Cell<u32>,
    ) -> impl Fn(usize, *mut c_void, *mut usize) -> i32 + 'a {
        move |size, value, size_ret| {
            calls.set(calls.get() + 1);
            // SAFETY: `cached_info` passes its caller's buffers or its own.
            unsafe { answer(v, size, value, size_ret) }
        }
    }

    fn query(id: u64, param: u32, extra: Option<u64>) -> CachedQuery {
        CachedQuery {
            func: func::clGetMemObjectInfo,
            obj: object_for((1 << 45) + id, Kind::Mem, 1),
            kind: Kind::Mem,
            extra,
            param,
            mutable: &[REFS],
        }
    }

    /// Asks through the cache with a buffer of `cap` bytes.
    fn ask(
        q: CachedQuery,
        cap: usize,
        fetch: &dyn Fn(usize, *mut c_void, *mut usize) -> i32,
    ) -> (i32, Vec<u8>, usize) {
        let mut buf = vec![0u8; cap];
        let mut len = 0usize;
        // SAFETY: `buf` holds `cap` bytes; `len` is a usize.
        let s = unsafe { cached_info(q, cap, buf.as_mut_ptr().cast(), &mut len, fetch) };
        (s, buf, len)
    }

    #[test]
    fn a_value_is_asked_once_then_answered_here() {
        let size = 4096u64.to_le_bytes();
        let calls = Cell::new(0);
        let fetch = stub(&size, &calls);
        let (s, buf, len) = ask(query(1, CL_MEM_SIZE, Some(0)), 8, &fetch);
        assert_eq!(
            (s, &buf[..], len, calls.get()),
            (CL_SUCCESS, &size[..], 8, 1)
        );
        let (s, buf, len) = ask(query(1, CL_MEM_SIZE, Some(0)), 8, &fetch);
        assert_eq!((s, &buf[..], len), (CL_SUCCESS, &size[..], 8));
        assert_eq!(calls.get(), 1, "the second ask costs no round trip");
        // Too small a buffer gets the library's error from here too.
        let (s, buf, _) = ask(query(1, CL_MEM_SIZE, Some(0)), 4, &fetch);
        assert_eq!((s, buf), (CL_INVALID_VALUE, vec![0; 4]));
        // Another selector (a device, say) is another answer.
        ask(query(1, CL_MEM_SIZE, Some(9)), 8, &fetch);
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn what_can_change_or_cannot_be_keyed_is_always_forwarded() {
        let refs = 2u32.to_le_bytes();
        let calls = Cell::new(0);
        let fetch = stub(&refs, &calls);
        for _ in 0..2 {
            let (s, buf, _) = ask(query(2, REFS, Some(0)), 4, &fetch);
            assert_eq!((s, &buf[..]), (CL_SUCCESS, &refs[..]));
        }
        assert_eq!(calls.get(), 2);
        for _ in 0..2 {
            ask(query(2, CL_MEM_SIZE, None), 4, &fetch);
        }
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn a_value_larger_than_the_probe_is_sized_then_kept() {
        let big: Vec<u8> = (0..PROBE as u32 * 3).map(|i| i as u8).collect();
        let calls = Cell::new(0);
        let fetch = stub(&big, &calls);
        let (s, buf, len) = ask(query(3, CL_MEM_SIZE, Some(0)), big.len(), &fetch);
        assert_eq!((s, len), (CL_SUCCESS, big.len()));
        assert_eq!(buf, big);
        assert_eq!(calls.get(), 3, "probe, size query, whole value");
        let (_, buf, _) = ask(query(3, CL_MEM_SIZE, Some(0)), big.len(), &fetch);
        assert_eq!((&buf, calls.get()), (&big, 3));
    }

    #[test]
    fn a_known_answer_costs_no_round_trip_at_all() {
        let q = query(4, CL_MEM_SIZE, Some(0));
        let Ok(Some(o)) = obj(q.obj, Kind::Mem) else {
            panic!("a fresh object is live");
        };
        o.info
            .know(func::clGetMemObjectInfo, CL_MEM_SIZE, &64u64.to_le_bytes());
        let calls = Cell::new(0);
        let fetch = stub(&[], &calls);
        let (s, buf, _) = ask(q, 8, &fetch);
        assert_eq!(
            (s, buf, calls.get()),
            (CL_SUCCESS, 64u64.to_le_bytes().to_vec(), 0)
        );
    }
}
