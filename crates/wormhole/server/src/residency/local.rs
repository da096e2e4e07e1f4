//! One tenant's side of delay storing.
//!
//! Three kinds of threads meet here. The serving thread holds the serve
//! lock for the whole of each call (a [`super::Frame`]), and lets go of it
//! only while it waits for the ledger; before a command it makes the
//! command's objects resident. The residency thread reads the link: it
//! hands answers to the waiting serving thread and, asked to evict, takes
//! the serve lock (so the tenant is between calls), checks that no queue
//! has work in flight, and evicts the least recently used objects. The
//! library's threads run destructor callbacks, which forget objects.
//!
//! Locks: the serve lock, then the state's mutex, which is held only for
//! bookkeeping and copies, never across an OpenCL call (a destructor
//! callback, which takes it, may run inside one).

use std::ffi::c_void;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use rustc_hash::{FxHashMap, FxHashSet};
use wormhole_opencl_api::{
    func, CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES, CL_SUCCESS,
};
use wormhole_residency::objects::{Backing, Key, Objects};
use wormhole_residency::proto::FromTenant;
use wormhole_residency::{Access, Policy};
use wormhole_transport::arena::Arena;

use super::engine::{self, Engine, Short};
use super::link::{Answer, Link};
use super::store::Store;
use super::uses::{self, Changed, Uses};
use super::{queues, ResidencyError};
use crate::config::Config;
use crate::opencl::shared::{Placement, SharedBuffers};
use crate::opencl::tenant::Tenant;
use crate::opencl::{ffi, info_value};

/// How long the residency thread waits for the queues' markers before it
/// answers `Busy`.
const DRAIN_WAIT: Duration = Duration::from_millis(20);
/// Kernel arguments past this index are not tracked (a kernel's record
/// stays small); a command using one keeps whatever else it names
/// resident, and the argument is taken as written.
const MAX_ARGS: u32 = 4096;

const CL_MEM_SIZE: u32 = 0x1102;
const CL_DEVICE_GLOBAL_MEM_SIZE: u32 = 0x101F;
const CL_DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;
const CL_KERNEL_ARG_ADDRESS_QUALIFIER: u32 = 0x1196;
const CL_KERNEL_ARG_ACCESS_QUALIFIER: u32 = 0x1197;
const CL_KERNEL_ARG_TYPE_QUALIFIER: u32 = 0x1199;
const CL_KERNEL_ARG_ADDRESS_CONSTANT: u32 = 0x119D;
const CL_KERNEL_ARG_ACCESS_READ_ONLY: u32 = 0x11A0;
const CL_KERNEL_ARG_TYPE_CONST: u64 = 1;

static CURRENT: OnceLock<Arc<Residency>> = OnceLock::new();

/// This process's residency, once started.
pub(super) fn current() -> Option<&'static Arc<Residency>> {
    CURRENT.get()
}

/// The memory of the first device the server exports (what the library
/// reports), 0 if there is none.
pub(super) fn device_memory(filters: &[String]) -> u64 {
    static MEM: OnceLock<u64> = OnceLock::new();
    *MEM.get_or_init(|| {
        for p in crate::opencl::platforms(filters) {
            let mut dev: *mut c_void = std::ptr::null_mut();
            // SAFETY: a platform the library listed; room for one device.
            let s = unsafe {
                ffi::clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &mut dev, std::ptr::null_mut())
            };
            if s == CL_SUCCESS && !dev.is_null() {
                // SAFETY: a device the library gave us; the answer is a
                // cl_ulong.
                let mem = unsafe {
                    info_value::<u64>(ffi::clGetDeviceInfo, dev, CL_DEVICE_GLOBAL_MEM_SIZE)
                };
                return mem.unwrap_or(0);
            }
        }
        0
    })
}

/// A kernel argument residency knows of.
#[derive(Debug, Clone, Copy, Default)]
struct ArgSlot {
    /// The memory object (library handle), 0 for none.
    mem: usize,
    /// Whether the kernel may write it (asked of the library once).
    writes: Option<bool>,
}

struct State {
    objs: Objects,
    /// Evictable objects: where their bytes lie in the arena.
    places: FxHashMap<Key, Placement>,
    /// Sub-buffers and images made from a buffer: their buffer.
    aliases: FxHashMap<Key, Key>,
    kernels: FxHashMap<usize, Vec<ArgSlot>>,
    /// Queues with commands on tracked objects since last seen drained.
    queues: FxHashSet<usize>,
    /// Of those, the ones with a marker still pending (its event, held
    /// until it finished: see `queues.rs`).
    markers: FxHashMap<usize, usize>,
    store: Store,
    /// The last command's objects (kept to spare an allocation per call).
    scratch: Vec<(Key, Access)>,
}

impl State {
    fn root(&self, raw: Key) -> Key {
        if self.aliases.is_empty() {
            return raw;
        }
        *self.aliases.get(&raw).unwrap_or(&raw)
    }

    /// The objects a command uses, as their roots (some may not be
    /// tracked: `Objects` skips those).
    fn resolve(&self, u: &Uses, out: &mut Vec<(Key, Access)>) {
        let mut add = |raw: usize, a: Access| {
            if raw != 0 {
                out.push((self.root(raw as Key), a));
            }
        };
        match u {
            Uses::None => {}
            Uses::Mems { mems, n, .. } => {
                for &(m, a) in &mems[..(*n).min(2)] {
                    add(m, a);
                }
            }
            Uses::Kernel { kernel, .. } => {
                if let Some(args) = self.kernels.get(kernel) {
                    for s in args {
                        let a = if s.writes.unwrap_or(true) {
                            Access::Write
                        } else {
                            Access::Read
                        };
                        add(s.mem, a);
                    }
                }
            }
            Uses::List { mems, .. } => {
                for &m in mems {
                    add(m, Access::Read);
                }
            }
        }
    }

    /// Forgets an object the library destroyed; its resident bytes.
    fn forget(&mut self, key: Key) -> u64 {
        self.places.remove(&key);
        self.store.free_piece(key);
        self.objs.remove(key).map_or(0, |r| r.resident)
    }

    /// Where `key` lives, for a call that needs it placed.
    fn placement(&self, key: Key) -> Result<Placement, ResidencyError> {
        self.places
            .get(&key)
            .cloned()
            .ok_or(ResidencyError::NotPlaced(key))
    }

    /// Saves `key` (if it must be) and gives its pages back. Returns
    /// whether it was saved.
    fn evict_one(&mut self, key: Key, arena: &SharedBuffers) -> Result<bool, ResidencyError> {
        let p = self.placement(key)?;
        let started = Instant::now();
        // Out of the directory first: the client's copies in place stop,
        // and any it wrote count.
        if arena.withdraw(key as *mut c_void) {
            self.objs.mark_dirty(key);
        }
        let policy = self.objs.policy();
        let save = self.objs.get(key).is_some_and(|o| o.needs_save(policy));
        if save {
            if let Err(e) = self.save_with_room(key, &p, arena.arena()) {
                arena.republish(key as *mut c_void);
                return Err(e);
            }
        }
        if let Err(e) = arena.discard(&p.range) {
            arena.republish(key as *mut c_void);
            return Err(e.into());
        }
        let ns = started.elapsed().as_nanos() as u64;
        if let Err(e) = self.objs.evicted(key, save, ns) {
            log::error!("residency: {e}");
        }
        Ok(save)
    }

    /// Saves `key`'s bytes, dropping store copies of resident objects (the
    /// least recently used first) when the store is full.
    fn save_with_room(
        &mut self,
        key: Key,
        p: &Placement,
        arena: &Arena,
    ) -> Result<(), ResidencyError> {
        let src = arena
            .ptr_at(p.data, p.size as usize)
            .ok_or(ResidencyError::NotPlaced(key))?;
        let mut spare = self.objs.stored_and_resident().into_iter();
        loop {
            // SAFETY: `src` is the buffer's `size` bytes inside the arena's
            // mapping (checked by `ptr_at`); the client may write them
            // meanwhile, which the directory's withdrawal detects.
            match unsafe { self.store.save(key, src, p.size) } {
                Err(ResidencyError::StoreFull(n)) => {
                    let Some(other) = spare.by_ref().find(|&k| k != key) else {
                        return Err(ResidencyError::StoreFull(n));
                    };
                    if self.objs.drop_backing(other) {
                        self.store.free_piece(other);
                    }
                }
                r => return r,
            }
        }
    }

    /// Brings `key`'s bytes back from its backing and puts it back in the
    /// directory.
    fn restore_one(&mut self, key: Key, arena: &SharedBuffers) -> Result<(), ResidencyError> {
        let p = self.placement(key)?;
        let started = Instant::now();
        match self.objs.get(key).map(|o| o.backing) {
            // Zeros: punched pages read as zeros (again, in case the client
            // wrote into them while they were out).
            Some(Backing::Zero) => arena.discard(&p.range)?,
            Some(Backing::Stored) => {
                let dst = arena
                    .arena()
                    .ptr_at(p.data, p.size as usize)
                    .ok_or(ResidencyError::NotPlaced(key))?;
                // SAFETY: `dst` is the buffer's bytes in the arena's
                // mapping, which nothing on the device touches (the object
                // is not resident, so no command used it since).
                unsafe { self.store.load(key, dst, p.size)? };
            }
            _ => return Err(ResidencyError::NoBacking(key)),
        }
        arena.republish(key as *mut c_void);
        let ns = started.elapsed().as_nanos() as u64;
        if let Err(e) = self.objs.restored(key, ns) {
            log::error!("residency: {e}");
        }
        Ok(())
    }
}

/// A tenant's residency.
pub struct Residency {
    engine: Engine,
    state: Mutex<State>,
    arena: Arc<SharedBuffers>,
    /// Counts what can take an object or a queue out of residency's view
    /// (an eviction, a queue let go): `prepare`'s shortcut holds only while
    /// it has not moved.
    epoch: AtomicU64,
    last_launch: LastLaunch,
}

/// The last kernel launch `prepare` let through, and the epoch then.
#[derive(Default)]
struct LastLaunch {
    kernel: AtomicUsize,
    queue: AtomicUsize,
    epoch: AtomicU64,
}

/// What a destructor callback needs.
struct Watch {
    res: Arc<Residency>,
    alias: bool,
}

/// The library destroyed a tracked object: forget it, give its bytes back.
extern "C" fn gone(mem: *mut c_void, user: *mut c_void) {
    // SAFETY: `user` is the Box leaked in `watch`, and the library calls a
    // destructor callback exactly once.
    let w = unsafe { Box::from_raw(user as *mut Watch) };
    let key = mem as Key;
    if w.alias {
        w.res.state().aliases.remove(&key);
        return;
    }
    let freed = w.res.state().forget(key);
    if freed > 0 {
        w.res
            .engine
            .link
            .send(&FromTenant::Release { bytes: freed });
    }
}

/// A memory object's size, as the library reports it.
fn mem_size(raw: *mut c_void) -> u64 {
    // SAFETY: a live memory object the library just made; a size_t.
    unsafe { info_value::<usize>(ffi::clGetMemObjectInfo, raw, CL_MEM_SIZE) }
        .map_or(0, |s| s as u64)
}

/// Whether kernel argument `index` may be written by the kernel: not if it
/// is `__constant`, points to `const`, or is a `read_only` image.
fn arg_writes(kernel: usize, index: u32) -> bool {
    let k = kernel as *mut c_void;
    let ask = |param: u32, size: usize, out: *mut c_void| {
        // SAFETY: a kernel from the tenant's table (the call that set the
        // argument just used it); `out` holds `size` bytes.
        unsafe { ffi::clGetKernelArgInfo(k, index, param, size, out, std::ptr::null_mut()) }
    };
    let mut addr = 0u32;
    let mut access = 0u32;
    let mut qual = 0u64;
    let ok = ask(
        CL_KERNEL_ARG_ADDRESS_QUALIFIER,
        4,
        (&mut addr as *mut u32).cast(),
    ) == CL_SUCCESS
        && ask(
            CL_KERNEL_ARG_ACCESS_QUALIFIER,
            4,
            (&mut access as *mut u32).cast(),
        ) == CL_SUCCESS
        && ask(
            CL_KERNEL_ARG_TYPE_QUALIFIER,
            8,
            (&mut qual as *mut u64).cast(),
        ) == CL_SUCCESS;
    !(ok && (addr == CL_KERNEL_ARG_ADDRESS_CONSTANT
        || qual & CL_KERNEL_ARG_TYPE_CONST != 0
        || access == CL_KERNEL_ARG_ACCESS_READ_ONLY))
}

impl Residency {
    /// Starts residency on `sock`, the link the listener passed (fd 4), with
    /// the store it passed (fd 6) or a memory file, of `store_size` bytes or
    /// else `cap` (the most the tenant may hold). Buffers go in `shared`, or,
    /// where the client maps no arena (TCP, shared buffers off), in an
    /// arena of the tenant's own.
    pub(super) fn start(
        config: &Config,
        sock: OwnedFd,
        shared: Option<Arc<SharedBuffers>>,
        cap: u64,
    ) -> Result<(Arc<Residency>, Arc<SharedBuffers>), ResidencyError> {
        super::check_link(&sock)?;
        let arena = match shared {
            Some(a) => a,
            None => {
                let len = match config.shared_buffers {
                    0 => 64 << 30,
                    n => usize::try_from(n).unwrap_or(64 << 30),
                };
                SharedBuffers::new(Arena::create(len)?)
            }
        };
        let device = device_memory(&config.platforms);
        let store = engine::open_store(config, cap)?;
        let policy = engine::policy(config);
        let r = Arc::new(Residency {
            engine: Engine::new(policy, Link::new(sock)),
            state: Mutex::new(State {
                objs: Objects::new(policy),
                places: FxHashMap::default(),
                aliases: FxHashMap::default(),
                kernels: FxHashMap::default(),
                queues: FxHashSet::default(),
                markers: FxHashMap::default(),
                store,
                scratch: Vec::new(),
            }),
            arena: arena.clone(),
            epoch: AtomicU64::new(0),
            last_launch: LastLaunch::default(),
        });
        r.engine
            .link
            .send(&FromTenant::Hello { device_mem: device });
        let reader = r.clone();
        std::thread::Builder::new()
            .name("wh-residency".into())
            .spawn(move || {
                reader
                    .engine
                    .read_loop(|seq, bytes, force| reader.on_evict(seq, bytes, force))
            })?;
        let _ = CURRENT.set(r.clone());
        Ok((r, arena))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    pub(super) fn enter(&self) {
        self.engine.serve.enter();
    }

    pub(super) fn leave(&self) {
        self.engine.serve.leave();
    }

    /// Before a call: the command's objects resident, its queue tracked.
    pub(super) fn prepare(&self, t: &Tenant, func: u32, req: &[u8]) -> Result<(), i32> {
        let u = uses::of(t, func, req);
        let queue = u.queue();
        if queue == 0 {
            return Ok(());
        }
        // The same kernel on the same queue as last time, with nothing
        // evicted, no queue let go and no argument set to another memory
        // object since: its objects are resident and were marked (dirty,
        // in use) then; only eviction clears a mark. The LRU order keeps
        // their first use since the last eviction, which is all it needs.
        let epoch = self.epoch.load(Ordering::Acquire);
        if let Uses::Kernel { kernel, .. } = u {
            if self.engine.is_last()
                && self.last_launch.kernel.load(Ordering::Relaxed) == kernel
                && self.last_launch.queue.load(Ordering::Relaxed) == queue
                && self.last_launch.epoch.load(Ordering::Relaxed) == epoch
            {
                return Ok(());
            }
        }
        let r = self.prepare_slowly(&u, queue);
        if let (Ok(()), Uses::Kernel { kernel, .. }) = (&r, &u) {
            self.last_launch.kernel.store(*kernel, Ordering::Relaxed);
            self.last_launch.queue.store(queue, Ordering::Relaxed);
            self.last_launch.epoch.store(epoch, Ordering::Relaxed);
        }
        r
    }

    fn prepare_slowly(&self, u: &Uses, queue: usize) -> Result<(), i32> {
        let mut st = self.state();
        let mut list = std::mem::take(&mut st.scratch);
        list.clear();
        st.resolve(u, &mut list);
        if list.is_empty() {
            st.scratch = list;
            return Ok(());
        }
        // The method's check: this tenant used the device last, and what
        // it uses is still there. Then nothing moves and nobody is asked.
        let here = self.engine.is_last() && st.objs.touch_resident(&list);
        if !here {
            drop(st);
            return self.slow(list, queue);
        }
        let new = st.queues.insert(queue);
        st.scratch = list;
        drop(st);
        if new {
            queues::hold(queue);
        }
        Ok(())
    }

    fn slow(&self, list: Vec<(Key, Access)>, queue: usize) -> Result<(), i32> {
        let restored = self.make_resident(&list)?;
        let mut st = self.state();
        for &(k, a) in &list {
            st.objs.touch(k, a);
        }
        let new = st.queues.insert(queue);
        let c = st.objs.counters;
        drop(st);
        if new {
            queues::hold(queue);
        }
        if restored {
            self.engine.link.send(&FromTenant::Stats(c));
        }
        Ok(())
    }

    /// A switch if another tenant used the device since, then room for
    /// what must come back, then the copies back, made with the serve lock
    /// held again, so that nothing of the tenant's is evicted from then
    /// until its call ends. While it waits for room the command's objects
    /// are held (wanted), unless the tenant is asked for room and has
    /// nothing else to give: a waiting tenant holding what another's
    /// request needs, while that request is ahead of its own, would be a
    /// deadlock. What was taken so comes back in another round (a few at
    /// most). Returns whether anything came back.
    fn make_resident(&self, list: &[(Key, Access)]) -> Result<bool, i32> {
        let switched = self.engine.switch_in();
        if switched {
            self.state().objs.switch_in();
        }
        // Eager: the whole set comes back at a switch.
        let all = switched && self.engine.policy == Policy::Eager;
        let held = self.state().objs.plan(list, all);
        let r = self.engine.bring_back(held.clone(), |plan| {
            let mut st = self.state();
            engine::restore_round(
                &mut *st,
                |s| &s.objs,
                list,
                plan,
                |s, k| s.restore_one(k, &self.arena),
            )
        });
        let mut st = self.state();
        for &k in &held.pinned {
            st.objs.unpin(k);
        }
        drop(st);
        let pid = std::process::id();
        r.map_err(|short| match short {
            Short::NoRoom(bytes) => {
                log::info!("tenant {pid}: no room to restore {bytes} bytes: the command fails");
                CL_MEM_OBJECT_ALLOCATION_FAILURE
            }
            Short::Failed(e) => {
                log::error!("tenant {pid}: restoring an object: {e}");
                CL_OUT_OF_RESOURCES
            }
            Short::KeptEvicted => {
                log::info!(
                    "tenant {pid}: a command's objects kept being evicted while it waited: it fails"
                );
                CL_MEM_OBJECT_ALLOCATION_FAILURE
            }
        })
    }

    /// A memory object the library just made for this tenant: counted
    /// against the device (refused: `CL_MEM_OBJECT_ALLOCATION_FAILURE`),
    /// tracked until the library destroys it.
    pub(crate) fn created(self: &Arc<Self>, raw: *mut c_void) -> Result<(), i32> {
        let key = raw as Key;
        let placement = self.arena.placement(raw);
        if placement.is_none() {
            if let Some(parent) = crate::opencl::shared::associated(raw) {
                // A sub-buffer or an image of a buffer: its buffer's bytes.
                let mut st = self.state();
                let root = st.root(parent as Key);
                if st.places.contains_key(&root) {
                    st.aliases.insert(key, root);
                    drop(st);
                    self.watch(raw, true);
                }
                return Ok(());
            }
        }
        let (size, evictable, zeroed) = match &placement {
            Some(p) => (p.size, true, p.zeroed),
            None => (mem_size(raw), false, false),
        };
        if size > 0 {
            let a = self.engine.ask(|seq| FromTenant::Need {
                seq,
                bytes: size,
                restore: false,
                retry: false,
            });
            if a == Answer::No {
                return Err(CL_MEM_OBJECT_ALLOCATION_FAILURE);
            }
        }
        {
            let mut st = self.state();
            // An entry left by an object whose end we missed.
            let stale = st.forget(key);
            if stale > 0 {
                self.engine.link.send(&FromTenant::Release { bytes: stale });
            }
            let _ = st.objs.insert(key, size, evictable, zeroed);
            if let Some(p) = placement {
                st.places.insert(key, p);
            }
        }
        self.watch(raw, false);
        Ok(())
    }

    /// Learns when the library destroys `raw`.
    fn watch(self: &Arc<Self>, raw: *mut c_void, alias: bool) {
        let user = Box::into_raw(Box::new(Watch {
            res: self.clone(),
            alias,
        }));
        // SAFETY: a live memory object; `gone` takes the box.
        let s =
            unsafe { ffi::clSetMemObjectDestructorCallback(raw, gone as *mut c_void, user.cast()) };
        if s != CL_SUCCESS {
            // SAFETY: the callback was refused, so the box is still ours.
            drop(unsafe { Box::from_raw(user) });
            // Without its end we cannot track it: not counted, not moved.
            let key = raw as Key;
            let mut st = self.state();
            if alias {
                st.aliases.remove(&key);
            } else {
                let freed = st.forget(key);
                drop(st);
                if freed > 0 {
                    self.engine.link.send(&FromTenant::Release { bytes: freed });
                }
            }
            log::warn!("residency: no destructor callback ({s}): an object is not tracked");
        }
    }

    /// The tenant let go of a kernel: its arguments are no longer asked.
    pub(crate) fn kernel_gone(&self, kernel: *mut c_void) {
        self.state().kernels.remove(&(kernel as usize));
        self.forget_launch(kernel as usize);
    }

    /// The last launch's shortcut no longer holds for `kernel`.
    fn forget_launch(&self, kernel: usize) {
        if self.last_launch.kernel.load(Ordering::Relaxed) == kernel {
            self.last_launch.kernel.store(0, Ordering::Relaxed);
        }
    }

    /// After a call: kernel arguments set or cloned, mappings made or
    /// undone (a mapped object is pinned while any mapping of it lives).
    pub(super) fn after(&self, t: &Tenant, req: &[u8], status: i32) {
        let Some((f, d)) = uses::header(req) else {
            return;
        };
        if !matches!(
            f,
            func::clSetKernelArg
                | func::clCloneKernel
                | func::clEnqueueMapBuffer
                | func::clEnqueueMapImage
                | func::clEnqueueUnmapMemObject
        ) {
            return;
        }
        match uses::changed(t, f, d) {
            Changed::None => {}
            Changed::KernelArg { kernel, index, mem } if status == CL_SUCCESS => {
                self.set_arg(kernel, index, mem)
            }
            Changed::Cloned { from, to } if status == CL_SUCCESS => {
                let mut st = self.state();
                if let Some(args) = st.kernels.get(&from).cloned() {
                    st.kernels.insert(to, args);
                }
            }
            Changed::Mapping { mem } => {
                let mut st = self.state();
                let root = st.root(mem as Key);
                let n = t
                    .mappings
                    .values()
                    .filter(|m| st.root(m.mem() as Key) == root)
                    .count();
                st.objs.set_pins(root, n as u32);
            }
            _ => {}
        }
    }

    fn set_arg(&self, kernel: usize, index: u32, mem: usize) {
        if index >= MAX_ARGS {
            return;
        }
        let i = index as usize;
        let known = {
            let mut st = self.state();
            let slot = st.kernels.get_mut(&kernel).and_then(|v| v.get_mut(i));
            match (mem, slot) {
                // A value that is no memory object (the common case of a
                // scalar set again and again): at most a slot cleared.
                (0, Some(s)) => {
                    if s.mem != 0 {
                        s.mem = 0;
                        self.forget_launch(kernel);
                    }
                    return;
                }
                (0, None) => return,
                (_, s) => s.and_then(|s| s.writes),
            }
        };
        let writes = Some(known.unwrap_or_else(|| arg_writes(kernel, index)));
        self.forget_launch(kernel);
        let mut st = self.state();
        let args = st.kernels.entry(kernel).or_default();
        if args.len() <= i {
            args.resize(i + 1, ArgSlot::default());
        }
        args[i] = ArgSlot { mem, writes };
    }

    /// Evicts idle objects for at least `bytes` (all for `u64::MAX`), if
    /// the tenant is between calls with nothing in flight; else `Busy`.
    fn on_evict(&self, seq: u32, bytes: u64, force: bool) {
        let mut done = Vec::new();
        let answer = self.engine.evict_turn(seq, || {
            let held: Vec<(usize, Option<usize>)> = {
                let st = self.state();
                st.queues
                    .iter()
                    .map(|&q| (q, st.markers.get(&q).copied()))
                    .collect()
            };
            let looked = queues::drained(&held, DRAIN_WAIT);
            done = looked.done;
            let answer = if done.len() == held.len() {
                let mut st = self.state();
                let victims = self.engine.victims(&st.objs, bytes, force);
                Engine::evicted(seq, victims, |v| st.evict_one(v.key, &self.arena))
            } else {
                FromTenant::Busy { seq }
            };
            let mut st = self.state();
            for q in &done {
                st.queues.remove(q);
                st.markers.remove(q);
            }
            st.markers.extend(looked.pending);
            drop(st);
            // Still under the serve lock: the serving thread's next call
            // sees it.
            self.epoch.fetch_add(1, Ordering::Release);
            answer
        });
        for q in done {
            queues::let_go(q);
        }
        self.engine
            .stats_after(answer, || self.state().objs.counters);
    }

    /// One line for the tenant's report.
    pub(crate) fn summary(&self) -> String {
        let st = self.state();
        self.engine.summary("", "objects", &st.objs, &st.store)
    }
}
