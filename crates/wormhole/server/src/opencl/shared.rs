//! Buffers in memory shared with the client (the tenant's arena).
//!
//! A CPU device computes in host memory, so a buffer created with
//! `CL_MEM_USE_HOST_PTR` over a piece of the arena is the device's own
//! storage, and the client sees it too: a map of it returns arena memory,
//! which the client hands the application (or copies a transfer into)
//! without any bytes crossing the channel. Only buffers the application
//! creates without a host pointer of its own, in contexts of CPU devices
//! alone, go there; the rest are untouched. The arena holds buffer contents
//! only, which the client may scribble on as it could on its own buffers.

use std::collections::HashMap;
use std::ffi::c_void;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use range_alloc::RangeAllocator;
use wormhole_opencl_api::{
    handle_list, CL_CONTEXT_DEVICES, CL_MEM_ALLOC_HOST_PTR, CL_MEM_ASSOCIATED_MEMOBJECT,
    CL_MEM_COPY_HOST_PTR, CL_MEM_FLAGS, CL_MEM_USE_HOST_PTR, CL_SUCCESS,
};
use wormhole_transport::arena::{Arena, DIRECTORY_LEN};

use super::ffi;

const CL_DEVICE_TYPE: u32 = 0x1000;
const CL_DEVICE_TYPE_CPU: u64 = 1 << 1;
const CL_DEVICE_MEM_BASE_ADDR_ALIGN: u32 = 0x1019;
/// Pieces are whole pages, so that freed ones can be given back.
const PAGE: u64 = 4096;
/// Where a buffer starts in its piece. Not at the page boundary: PoCL puts
/// its own buffers 128 bytes into a page (`malloc`'d, then aligned), and
/// applications copy to and from mapped buffers with their own `memcpy`.
/// From a page-aligned buffer, a `malloc`'d block lies 16 bytes further on
/// modulo a page, which makes glibc's `rep movsb` 4x slower on AMD hosts
/// (see `wormhole_transport::copy`); 128 bytes in, it does not.
const LEAD: u64 = 128;

struct State {
    free: RangeAllocator<u64>,
    /// Buffers placed in the arena, by the library's handle.
    buffers: HashMap<usize, Placed>,
}

struct Placed {
    /// The flags the application would see natively.
    flags: u64,
    /// Where the buffer's bytes start in the arena, and how many.
    data: u64,
    size: u64,
    /// The client's id for it, once published in the arena's directory.
    id: Option<u64>,
    /// Its whole piece (whole pages).
    range: Range<u64>,
    /// The client wrote it in place, as the directory said when another
    /// buffer took its slot.
    written: bool,
}

/// Where a buffer in the arena lies, for residency (`crate::residency`).
#[derive(Debug, Clone)]
pub struct Placement {
    /// Its bytes: `[data, data + size)`.
    pub data: u64,
    pub size: u64,
    /// Its whole piece, whose pages eviction gives back.
    pub range: Range<u64>,
    /// Made without contents (all zeros until written).
    pub zeroed: bool,
}

/// A tenant's arena and what is allocated in it.
pub struct SharedBuffers {
    arena: Arc<Arena>,
    state: Mutex<State>,
}

impl SharedBuffers {
    pub fn new(arena: Arc<Arena>) -> Arc<Self> {
        let len = arena.len() as u64 / PAGE * PAGE;
        // The directory stays out of every piece. An arena no larger than
        // it has one page to give, past its end, which `create` refuses.
        let end = len.max(DIRECTORY_LEN + PAGE);
        Arc::new(SharedBuffers {
            arena,
            state: Mutex::new(State {
                free: RangeAllocator::new(DIRECTORY_LEN..end),
                buffers: HashMap::new(),
            }),
        })
    }

    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A piece for `size` bytes starting `lead` bytes into it.
    fn alloc(&self, size: usize, lead: u64) -> Option<Range<u64>> {
        let len = (size as u64).checked_add(lead + PAGE - 1)? / PAGE * PAGE;
        // range-alloc asserts on a zero length and on one whose double
        // overflows: anything longer than the arena cannot fit anyway.
        if len == 0 || len > self.arena.len() as u64 {
            return None;
        }
        self.state().free.allocate_range(len).ok()
    }

    fn free(&self, r: Range<u64>) {
        // Freed pages go back to the system now, not when the tenant ends.
        if let Err(e) = self.arena.discard(r.start, r.end - r.start) {
            log::warn!("shared buffers: giving pages back failed: {e}");
        }
        self.state().free.free_range(r);
    }

    /// Tells the client, through the arena's directory, where buffer `mem`
    /// (known to it as `id`) lies, if it is one placed here.
    pub fn publish(&self, mem: *mut c_void, id: u64) {
        let mut st = self.state();
        if let Some(b) = st.buffers.get_mut(&(mem as usize)) {
            b.id = Some(id);
            let replaced = self.arena.publish(id, b.data, b.size);
            note_replaced(&mut st, replaced);
        }
    }

    /// Where `mem` lies, if it is a buffer placed here (not a sub-buffer).
    pub fn placement(&self, mem: *mut c_void) -> Option<Placement> {
        let st = self.state();
        let b = st.buffers.get(&(mem as usize))?;
        Some(Placement {
            data: b.data,
            size: b.size,
            range: b.range.clone(),
            zeroed: b.flags & CL_MEM_COPY_HOST_PTR == 0,
        })
    }

    /// Takes `mem` out of the directory (the client then asks the server
    /// for its transfers) and says whether the client wrote it in place
    /// since it was last asked.
    pub fn withdraw(&self, mem: *mut c_void) -> bool {
        let mut st = self.state();
        let Some(b) = st.buffers.get_mut(&(mem as usize)) else {
            return false;
        };
        let in_slot = b.id.is_some_and(|id| self.arena.withdraw_written(id));
        std::mem::take(&mut b.written) | in_slot
    }

    /// Puts `mem` back in the directory (after [`SharedBuffers::withdraw`]).
    pub fn republish(&self, mem: *mut c_void) {
        let mut st = self.state();
        if let Some(b) = st.buffers.get(&(mem as usize)) {
            if let Some(id) = b.id {
                let replaced = self.arena.publish(id, b.data, b.size);
                note_replaced(&mut st, replaced);
            }
        }
    }

    /// Gives a piece's pages back (they read as zeros afterwards).
    pub fn discard(&self, range: &Range<u64>) -> Result<(), wormhole_transport::TransportError> {
        self.arena.discard(range.start, range.end - range.start)
    }

    /// Whether `mem`'s storage is in the arena (its own, or that of the
    /// buffer it is a sub-buffer of).
    pub fn holds(&self, mem: *mut c_void) -> bool {
        self.root(mem).is_some()
    }

    /// The buffer in the arena that `mem` is (or belongs to), with the
    /// flags the application gave it.
    fn root(&self, mem: *mut c_void) -> Option<u64> {
        let mut m = mem;
        // A sub-buffer or image inherits its buffer's storage; the chain is
        // at most a buffer under an image under a sub-buffer.
        for _ in 0..4 {
            if let Some(b) = self.state().buffers.get(&(m as usize)) {
                return Some(b.flags);
            }
            m = associated(m)?;
        }
        None
    }

    /// The flags the application would see for `mem` natively, if its
    /// storage is (or belongs to a buffer that is) in the arena: ours added
    /// USE_HOST_PTR, and the application's host-pointer flags come back.
    pub fn native_flags(&self, mem: *mut c_void, reported: u64) -> u64 {
        let host = CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR | CL_MEM_ALLOC_HOST_PTR;
        match self.root(mem) {
            Some(flags) => (reported & !host) | (flags & host),
            None => reported,
        }
    }
}

/// A buffer whose directory slot another took, written in place before:
/// the mark stays with it.
fn note_replaced(st: &mut State, replaced: Option<u64>) {
    if let Some(old) = replaced {
        if let Some(b) = st.buffers.values_mut().find(|b| b.id == Some(old)) {
            b.written = true;
        }
    }
}

/// The memory object `mem` was made from (a sub-buffer's or an image's
/// buffer), if any.
pub(crate) fn associated(mem: *mut c_void) -> Option<*mut c_void> {
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: a memory object from the table (or its parent, from the
    // library); the answer is one pointer, into `p`.
    let s = unsafe {
        ffi::clGetMemObjectInfo(
            mem,
            CL_MEM_ASSOCIATED_MEMOBJECT,
            std::mem::size_of::<*mut c_void>(),
            &mut p as *mut *mut c_void as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    (s == CL_SUCCESS && !p.is_null()).then_some(p)
}

/// How far into its piece a buffer starts, for devices that want host
/// pointers aligned to `align` bytes: [`LEAD`] when that is aligned enough,
/// else the start of the page.
fn lead_for(align: u64) -> u64 {
    if align != 0 && LEAD.is_multiple_of(align) {
        LEAD
    } else {
        0
    }
}

/// If every device of `ctx` is a CPU device (computes in host memory): the
/// largest base-address alignment, in bytes, that they ask of host pointers.
fn cpu_context(ctx: *mut c_void) -> Option<u64> {
    // SAFETY: `ctx` is a context from the tenant's table; `value` and
    // `size_ret` are as handle_list passes them: NULL or room for `size`
    // bytes, NULL or one size_t.
    let devs = handle_list(4096, |size, value, size_ret| unsafe {
        ffi::clGetContextInfo(ctx, CL_CONTEXT_DEVICES, size, value, size_ret)
    })?;
    let mut align = 1u64;
    for &d in &devs {
        // SAFETY: a device of the context; the answers are a cl_bitfield
        // and a cl_uint.
        let (ty, bits) = unsafe {
            (
                super::info_value::<u64>(ffi::clGetDeviceInfo, d, CL_DEVICE_TYPE)?,
                super::info_value::<u32>(ffi::clGetDeviceInfo, d, CL_DEVICE_MEM_BASE_ADDR_ALIGN)?,
            )
        };
        if ty & CL_DEVICE_TYPE_CPU == 0 {
            return None;
        }
        align = align.max(u64::from(bits) / 8);
    }
    Some(align)
}

struct Piece {
    owner: Arc<SharedBuffers>,
    range: Range<u64>,
}

/// Runs when the library destroys the buffer (not when the client lets go:
/// commands and sub-buffers may still hold it), so a piece is never reused
/// while the device may touch it.
extern "C" fn piece_freed(mem: *mut c_void, user: *mut c_void) {
    // SAFETY: `user` is the Box<Piece> leaked in `create`, and the library
    // calls a destructor callback exactly once.
    let piece = unsafe { Box::from_raw(user as *mut Piece) };
    let placed = piece.owner.state().buffers.remove(&(mem as usize));
    if let Some(id) = placed.and_then(|b| b.id) {
        piece.owner.arena.withdraw(id);
    }
    piece.owner.free(piece.range.clone());
}

/// Creates a buffer in the arena, if it belongs there: `flags` as the
/// application gave them (a host pointer of its own keeps it out;
/// ALLOC_HOST_PTR, host-accessible memory, is what the arena is), `data`
/// the initial contents for COPY_HOST_PTR. `None`: create it as usual.
///
/// # Safety
/// `ctx` is a context from the table; `data`, when `flags` has
/// COPY_HOST_PTR, points to `size` readable bytes.
pub unsafe fn create(
    sb: &Arc<SharedBuffers>,
    ctx: *mut c_void,
    flags: u64,
    size: usize,
    data: *const c_void,
) -> Option<*mut c_void> {
    // ALLOC_HOST_PTR asks for host-accessible memory: the arena is that.
    if size == 0 || flags & CL_MEM_USE_HOST_PTR != 0 {
        return None;
    }
    let copy = flags & CL_MEM_COPY_HOST_PTR != 0;
    if copy && data.is_null() {
        return None;
    }
    let lead = lead_for(cpu_context(ctx)?);
    let range = sb.alloc(size, lead)?;
    let Some(p) = sb.arena.ptr_at(range.start + lead, size) else {
        sb.free(range);
        return None;
    };
    if copy {
        // SAFETY: with COPY_HOST_PTR, `data` is non-NULL (checked above) and
        // points at request bytes that `custom::host_ptr` checked are at least
        // `size` (via `objects::clCreateBuffer`); `p` is `size` bytes of a
        // piece no buffer uses yet (`ptr_at`).
        unsafe { wormhole_transport::copy::copy_bulk(p, data as *const u8, size) };
    }
    let lib_flags = (flags & !(CL_MEM_COPY_HOST_PTR | CL_MEM_ALLOC_HOST_PTR)) | CL_MEM_USE_HOST_PTR;
    let mut err = 0;
    // SAFETY: `p` is `size` bytes of the arena, alive as long as the tenant.
    let mem = unsafe { ffi::clCreateBuffer(ctx, lib_flags, size, p.cast(), &mut err) };
    if err != CL_SUCCESS || mem.is_null() {
        sb.free(range);
        return None;
    }
    let piece = Box::into_raw(Box::new(Piece {
        owner: sb.clone(),
        range: range.clone(),
    }));
    // SAFETY: a buffer the library just made; `piece_freed` takes the box.
    let s = unsafe {
        ffi::clSetMemObjectDestructorCallback(mem, piece_freed as *mut c_void, piece.cast())
    };
    if s != CL_SUCCESS {
        // No way to learn when it dies: keep the piece for the tenant's
        // life rather than risk handing it out twice.
        // SAFETY: the callback was refused, so the box is still ours.
        drop(unsafe { Box::from_raw(piece) });
        log::warn!("shared buffers: no destructor callback ({s}); piece kept");
    }
    let placed = Placed {
        flags,
        data: range.start + lead,
        size: size as u64,
        id: None,
        range,
        written: false,
    };
    sb.state().buffers.insert(mem as usize, placed);
    Some(mem)
}

/// Fixes CL_MEM_FLAGS of a buffer in the arena to what the application
/// asked for.
///
/// # Safety
/// `value` is NULL or holds at least `size` bytes the library just wrote.
pub unsafe fn fix_flags(
    sb: &SharedBuffers,
    mem: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
) {
    if param != CL_MEM_FLAGS || value.is_null() || size < 8 {
        return;
    }
    // SAFETY: `value` is non-NULL and `size` >= 8 (checked above): the
    // decoder's `out_buf` of `size` bytes (`queries::clGetMemObjectInfo`),
    // holding the cl_mem_flags the library just wrote; a byte buffer, so
    // read and written unaligned.
    unsafe {
        let v = value as *mut u64;
        v.write_unaligned(sb.native_flags(mem, v.read_unaligned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_pages_within_the_arena_and_absurd_sizes_are_refused() {
        let sb = SharedBuffers::new(Arena::create(1 << 20).expect("arena"));
        // Everything past the directory.
        let room = (1 << 20) - DIRECTORY_LEN as usize;
        assert_eq!(sb.alloc(0, 0), None);
        assert_eq!(sb.alloc(usize::MAX, LEAD), None);
        assert_eq!(sb.alloc(1 << 63, 0), None);
        assert_eq!(sb.alloc(room + 1, 0), None);
        assert_eq!(sb.alloc(room, LEAD), None);
        let a = sb.alloc(1, LEAD).expect("one page");
        assert_eq!(a.end - a.start, PAGE);
        assert!(a.start >= DIRECTORY_LEN);
        // The lead pushes a page's worth of bytes into a second page.
        let b = sb.alloc(PAGE as usize, LEAD).expect("two pages");
        assert_eq!(b.end - b.start, 2 * PAGE);
        assert!(a.end <= b.start || b.end <= a.start);
        // What is left cannot hold the whole room again until freed.
        assert_eq!(sb.alloc(room, 0), None);
        sb.free(a);
        sb.free(b);
        assert_eq!(sb.alloc(room, 0), Some(DIRECTORY_LEN..1 << 20));
    }

    #[test]
    fn buffers_lead_into_their_page_unless_the_device_wants_more() {
        assert_eq!(lead_for(128), LEAD);
        assert_eq!(lead_for(4), LEAD);
        assert_eq!(lead_for(256), 0);
        assert_eq!(lead_for(4096), 0);
        assert_eq!(lead_for(0), 0);
    }
}
