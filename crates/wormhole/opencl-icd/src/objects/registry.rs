//! Which objects live: the registry by id and by handle, the check of the
//! application's handles, their reference counts, and the quarantine that
//! keeps a released object's memory for a while.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use rustc_hash::{FxHashMap, FxHashSet};
use wormhole_opencl_api::Kind;

use super::{Obj, Placement, MAGIC};

struct Registry {
    by_id: FxHashMap<u64, usize>,
    live: FxHashSet<usize>,
    quarantine: VecDeque<usize>,
    /// The memory objects and samplers in the quarantine: a kernel argument
    /// naming one is a handle the application released (see [`arg_object`]).
    released_args: FxHashMap<usize, Kind>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    let m = R.get_or_init(|| {
        Mutex::new(Registry {
            by_id: FxHashMap::default(),
            live: FxHashSet::default(),
            quarantine: VecDeque::new(),
            released_args: FxHashMap::default(),
        })
    });
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn dispatch_ptr() -> *const c_void {
    static TABLE: OnceLock<usize> = OnceLock::new();
    *TABLE.get_or_init(|| Box::leak(Box::new(crate::gen::dispatch_table())).as_ptr() as usize)
        as *const c_void
}

/// The object for a server id, creating one (with no references of the
/// application's) for an id seen for the first time.
pub fn object_for(id: u64, kind: Kind, refs: u32) -> *mut c_void {
    if id == 0 {
        return std::ptr::null_mut();
    }
    let mut r = registry();
    if let Some(&p) = r.by_id.get(&id) {
        if refs > 0 {
            // SAFETY: registered pointers are live Objs.
            unsafe { (*(p as *const Obj)).refs.fetch_add(refs, Ordering::Relaxed) };
        }
        return p as *mut c_void;
    }
    let obj = Box::into_raw(Box::new(Obj {
        dispatch: dispatch_ptr(),
        magic: MAGIC,
        id,
        kind,
        refs: AtomicU32::new(refs),
        host_ptr: AtomicUsize::new(0),
        user_pending: std::sync::atomic::AtomicBool::new(false),
        placement: std::sync::atomic::AtomicU8::new(Placement::Unknown as u8),
        info: Default::default(),
        shape_key: AtomicU64::new(0),
        in_order: std::sync::atomic::AtomicBool::new(false),
        profiling: std::sync::atomic::AtomicBool::new(false),
        args_set: AtomicU64::new(0),
        created_in: AtomicU64::new(0),
        created_flags: AtomicU64::new(0),
        counted: AtomicU64::new(0),
        mem_budget: AtomicU64::new(0),
        stands_for: AtomicU32::new(0),
        ended: std::sync::atomic::AtomicI32::new(crate::event_state::NOT_ENDED),
    }));
    r.by_id.insert(id, obj as usize);
    r.live.insert(obj as usize);
    obj as *mut c_void
}

/// The object behind an application's handle, if it is one of ours and of
/// the right kind.
pub fn obj(p: *mut c_void, kind: Kind) -> Result<Option<&'static Obj>, i32> {
    if p.is_null() {
        return Ok(None);
    }
    if !registry().live.contains(&(p as usize)) {
        return Err(kind.invalid());
    }
    typed(p, kind).map(Some)
}

/// A registered handle as the object it is, checked for kind.
fn typed(p: *mut c_void, kind: Kind) -> Result<&'static Obj, i32> {
    // SAFETY: the caller found `p` registered (now, or in a `Checked` still
    // valid), so it is an Obj we allocated; released ones stay allocated in
    // the quarantine for a while after.
    let o = unsafe { &*(p as *const Obj) };
    if o.magic != MAGIC || o.kind != kind {
        return Err(kind.invalid());
    }
    Ok(o)
}

/// Bumped, under the registry's lock, whenever an object leaves the
/// registry: a [`Checked`] older than that is forgotten.
static RETIRED: AtomicU64 = AtomicU64::new(0);

/// The last few handles calls found registered, valid until the next
/// release anywhere in the process. A loop of launches names the same queue
/// and kernel again and again; this spares each of them the registry's lock
/// and hash lookup. It lives beside the channel, under the lock every call
/// already holds.
#[derive(Default)]
pub struct Checked {
    /// The value of [`RETIRED`] when these were found registered.
    at: u64,
    ptrs: [usize; 4],
    next: usize,
}

impl Checked {
    /// Whether `p` was found registered since the last release.
    fn holds(&mut self, p: usize) -> bool {
        let now = RETIRED.load(Ordering::Acquire);
        if now != self.at {
            *self = Checked {
                at: now,
                ..Checked::default()
            };
            return false;
        }
        self.ptrs.contains(&p)
    }

    /// `obj`, skipping the registry for a handle found there since the last
    /// release.
    pub(crate) fn obj(&mut self, p: *mut c_void, kind: Kind) -> Result<Option<&'static Obj>, i32> {
        if p.is_null() {
            return Ok(None);
        }
        // `holds` reads RETIRED before the registry is consulted below, so
        // a release between the two makes the entry stale at once.
        if !self.holds(p as usize) {
            let o = obj(p, kind)?;
            self.ptrs[self.next] = p as usize;
            self.next = (self.next + 1) % self.ptrs.len();
            return Ok(o);
        }
        typed(p, kind).map(Some)
    }
}

/// What a pointer-sized kernel argument's bytes are to us.
pub enum ArgObject {
    /// One of the application's objects.
    Live(&'static Obj),
    /// A memory object or sampler the application released (its memory
    /// is still in the quarantine, so nothing else can have its address).
    Released(Kind),
    /// Anything else: bytes.
    Bytes,
}

/// Like [`obj`], for any kind, and for released memory objects and
/// samplers too: used to recognise handles in kernel arguments.
pub fn arg_object(p: *mut c_void) -> ArgObject {
    if p.is_null() {
        return ArgObject::Bytes;
    }
    let r = registry();
    if r.live.contains(&(p as usize)) {
        // SAFETY: registered, hence a live Obj.
        return ArgObject::Live(unsafe { &*(p as *const Obj) });
    }
    match r.released_args.get(&(p as usize)) {
        Some(&k) => ArgObject::Released(k),
        None => ArgObject::Bytes,
    }
}

/// Counts a retain. An object with no count (platforms, root devices,
/// objects first seen in query results) stays uncounted: natively retaining
/// and releasing a root device changes nothing, and counting from 0 here
/// made its handle invalid after one retain and one release (found with
/// OpenCV, which does that to every device it uses).
pub fn retained(p: *mut c_void, kind: Kind) {
    if let Ok(Some(o)) = obj(p, kind) {
        let _ = o
            .refs
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                (r > 0).then(|| r.saturating_add(1))
            });
    }
}

/// Frees the object when the application's last reference goes. Platforms
/// and root devices are never freed.
pub fn released(p: *mut c_void, kind: Kind) {
    let Ok(Some(o)) = obj(p, kind) else { return };
    let prev = o.refs.load(Ordering::Relaxed);
    if prev == 0 {
        return;
    }
    if o.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
        let counted = o.counted.swap(0, Ordering::Relaxed);
        if counted > 0 {
            crate::room::released(counted);
        }
        let mut r = registry();
        r.by_id.remove(&o.id);
        r.live.remove(&(p as usize));
        RETIRED.fetch_add(1, Ordering::Release);
        // The memory stays allocated (with its dispatch table) for a while:
        // the ICD loader reads the table through a handle before we can
        // check it, so a use after release then gets CL_INVALID_* instead
        // of a crash. Bounded, so that objects released in a loop (events)
        // do not leak.
        r.quarantine.push_back(p as usize);
        if matches!(kind, Kind::Mem | Kind::Sampler) {
            r.released_args.insert(p as usize, kind);
        }
        let evicted = if r.quarantine.len() > QUARANTINE {
            r.quarantine.pop_front()
        } else {
            None
        };
        if let Some(old) = evicted {
            r.released_args.remove(&old);
        }
        drop(r);
        if let Some(old) = evicted {
            // SAFETY: unregistered when it entered the quarantine, so no
            // lookup can return it; the application released its last
            // reference, and only the quarantine held the pointer.
            unsafe { drop(Box::from_raw(old as *mut Obj)) };
        }
    }
}

/// How many released objects stay allocated (see [`released`]).
const QUARANTINE: usize = 4096;

/// Gives the application its handle for an event created by an async call.
///
/// # Safety
/// `p` is NULL or a writable handle slot.
pub unsafe fn adopt_new(id: Option<u64>, p: *mut *mut c_void, kind: Kind) {
    if let (Some(id), false) = (id, p.is_null()) {
        // SAFETY: `p` is non-NULL and a writable handle slot (this fn's contract: the enqueue's
        // cl_event out-slot).
        unsafe { *p = object_for(id, kind, 1) };
    }
}

/// The application's handle for an object an async call created under `id`.
pub fn adopt_id(id: u64, kind: Kind) -> *mut c_void {
    object_for(id, kind, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel argument naming a memory object or sampler the application
    /// released is known as one while the object's memory is quarantined
    /// (nothing else can have its address then), and as bytes after.
    #[test]
    fn a_released_handle_is_known_until_its_memory_can_be_reused() {
        let mem = object_for(1 << 40, Kind::Mem, 1);
        let smp = object_for((1 << 40) + 1, Kind::Sampler, 1);
        let ev = object_for((1 << 40) + 2, Kind::Event, 1);
        assert!(matches!(arg_object(mem), ArgObject::Live(o) if o.kind == Kind::Mem));
        for (p, k) in [(mem, Kind::Mem), (smp, Kind::Sampler), (ev, Kind::Event)] {
            released(p, k);
        }
        assert!(matches!(arg_object(mem), ArgObject::Released(Kind::Mem)));
        assert!(matches!(
            arg_object(smp),
            ArgObject::Released(Kind::Sampler)
        ));
        assert!(
            matches!(arg_object(ev), ArgObject::Bytes),
            "only memory objects and samplers are kernel arguments"
        );
        // Releases of other objects push them out of the quarantine.
        for i in 0..QUARANTINE as u64 {
            let e = object_for((1 << 41) + i, Kind::Event, 1);
            released(e, Kind::Event);
        }
        assert!(matches!(
            arg_object(mem),
            ArgObject::Bytes | ArgObject::Live(_)
        ));
        assert!(!registry().released_args.contains_key(&(mem as usize)));
        assert!(registry().released_args.len() <= QUARANTINE);
    }

    /// Ids from 1 << 43 up are these tests' own. Kinds are chosen so that
    /// a released handle's memory, reused by another test's event, cannot
    /// pass for the object.
    const BASE: u64 = 1 << 43;

    #[test]
    fn a_counted_object_lives_until_its_last_release() {
        let p = object_for(BASE, Kind::Mem, 1);
        retained(p, Kind::Mem);
        released(p, Kind::Mem);
        assert!(matches!(obj(p, Kind::Mem), Ok(Some(o)) if o.id == BASE));
        released(p, Kind::Mem);
        assert_eq!(obj(p, Kind::Mem).err(), Some(Kind::Mem.invalid()));
        // A later release of the dead handle changes nothing and is refused
        // by kind, not by a crash.
        released(p, Kind::Mem);
        assert_eq!(obj(p, Kind::Mem).err(), Some(Kind::Mem.invalid()));
    }

    #[test]
    fn an_uncounted_object_survives_retains_and_releases() {
        let d = object_for(BASE + 1, Kind::Device, 0);
        retained(d, Kind::Device);
        released(d, Kind::Device);
        released(d, Kind::Device);
        assert!(matches!(obj(d, Kind::Device), Ok(Some(_))));
    }

    #[test]
    fn an_id_seen_again_is_the_same_handle_with_its_references_added() {
        let a = object_for(BASE + 2, Kind::Sampler, 1);
        let b = object_for(BASE + 2, Kind::Sampler, 1);
        assert_eq!(a, b);
        released(a, Kind::Sampler);
        assert!(matches!(obj(a, Kind::Sampler), Ok(Some(_))));
        released(b, Kind::Sampler);
        assert!(obj(a, Kind::Sampler).is_err());
        assert!(object_for(0, Kind::Sampler, 1).is_null(), "id 0 is NULL");
    }

    #[test]
    fn handles_are_checked_for_registration_and_kind() {
        assert!(matches!(obj(std::ptr::null_mut(), Kind::Queue), Ok(None)));
        let q = object_for(BASE + 3, Kind::Queue, 1);
        assert_eq!(obj(q, Kind::Kernel).err(), Some(Kind::Kernel.invalid()));
        let mut not_ours = [0u64; 4];
        let p = not_ours.as_mut_ptr().cast::<c_void>();
        assert_eq!(obj(p, Kind::Queue).err(), Some(Kind::Queue.invalid()));
        assert!(matches!(arg_object(p), ArgObject::Bytes));
    }

    #[test]
    fn a_checked_handle_is_looked_up_again_after_any_release() {
        let mut checked = Checked::default();
        let q = object_for(BASE + 4, Kind::Queue, 1);
        assert!(matches!(checked.obj(q, Kind::Queue), Ok(Some(o)) if o.id == BASE + 4));
        // Found before, the kind is still checked.
        assert_eq!(checked.obj(q, Kind::Mem).err(), Some(Kind::Mem.invalid()));
        released(q, Kind::Queue);
        assert_eq!(
            checked.obj(q, Kind::Queue).err(),
            Some(Kind::Queue.invalid())
        );
    }
}
