//! Delay storing for CUDA (docs/delay-storing.md, "CUDA").
//!
//! Kernels hold raw device pointers, stored inside other allocations too,
//! so an allocation must come back where it was: each `cudaMalloc` is a
//! range of the device's address space reserved for the allocation's life
//! (`cuda::vmm`), with physical memory put under it while it is resident
//! and taken away when it is evicted. Raw pointers also make a command's
//! use invisible, so the unit of a switch is the tenant, as a VM is in the
//! paper: before any call that may touch device memory, the tenant's
//! whole allocation set is made resident. Delay storing still pays: while
//! the tenant used the device last and nothing of it was taken, a call
//! costs two atomic loads; eviction takes the least recently used
//! allocations and copies out only those changed since their last save.
//!
//! What changes an allocation: a copy or memset into it (that one), and
//! any launch or library call (every allocation: a kernel may write
//! through any pointer it finds). The ledger, the link and the store are
//! the OpenCL side's.
//!
//! Threads and locks as in `local.rs`: the serve lock for a whole call,
//! then the state's mutex for bookkeeping and copies. The residency thread
//! evicts only with the serve lock held and every stream of the tenant
//! idle (`cudaStreamQuery`, which never blocks).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use wormhole_cuda_api::{cudaErrorMemoryAllocation, cudaErrorUnknown, cudaSuccess, Library};
use wormhole_residency::objects::{Backing, Key, Objects};
use wormhole_residency::proto::FromTenant;
use wormhole_residency::Access;

use super::engine::{self, Engine, Short};
use super::link::{Answer, Link};
use super::store::Store;
use super::ResidencyError;
use crate::config::Config;
use crate::cuda::ffi;
use crate::cuda::vmm::{self, Vmm};

/// A tenant whose slabs came back keeps them this long before it gives
/// any up (it answers `Busy`; the ledger asks again a few milliseconds
/// later): the time slice. Without it two tenants whose sets do not fit
/// together, calling in turn, move their whole sets at every call.
const SLICE: Duration = Duration::from_millis(20);

/// `cudaMemcpyHostToDevice`, `cudaMemcpyDeviceToHost`.
const TO_DEVICE: i32 = 1;
const TO_HOST: i32 = 2;
/// `cudaErrorNotReady`: a stream with work in flight.
const NOT_READY: i32 = 600;

static CURRENT: OnceLock<Arc<CudaResidency>> = OnceLock::new();

/// This process's CUDA residency, once started.
pub(super) fn current() -> Option<&'static Arc<CudaResidency>> {
    CURRENT.get()
}

/// What a call does to the tenant's allocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Touches no allocation (queries, streams, events, registrations; the
    /// allocator's own calls, which residency serves itself).
    Nothing,
    /// Reads or writes them where the call's own decoder says (copies,
    /// and library calls whose description names their outputs:
    /// [`CudaResidency::wrote`]).
    Named,
    /// Writes where its first argument points (a memset).
    FirstPointer,
    /// May write any of them (a launch, a library call, anything else).
    Any,
}

/// How a call of `func` uses device memory: named once here, for every
/// function of cuda.api and the libraries' descriptions (by name, so that
/// an entry point added there is `Any` until it is known to be harmless).
pub fn effect(func: u32) -> Effect {
    const NOTHING: &[&str] = &[
        "cudaGet",
        "cudaSetDevice",
        "cudaDeviceGet",
        "cudaDeviceSet",
        "cudaDeviceCan",
        "cudaDeviceSynchronize",
        "cudaDeviceEnablePeer",
        "cudaDeviceDisablePeer",
        "cudaStream",
        "cudaEvent",
        "cudaRuntimeGetVersion",
        "cudaDriverGetVersion",
        "cudaFunc",
        "cudaOccupancy",
        "__cudaRegister",
        "__cudaUnregister",
        "cudaPeekAtLastError",
        "cudaMemGetInfo",
        "cudaPointerGetAttributes",
        "cudaMalloc",
        "cudaFree",
        "cudaHost",
        "cudaProfiler",
        "cudaThreadExchange",
        "cudaLaunchHostFunc",
    ];
    const LIBRARY_NOTHING: &[&str] = &[
        "Create",
        "Create_v2",
        "Destroy",
        "Destroy_v2",
        "SetStream",
        "SetStream_v2",
        "GetVersion",
        "GetVersion_v2",
        "SetMathMode",
        "GetMathMode",
        "GetProperty",
        "CreateGenerator",
        "DestroyGenerator",
        "SetPseudoRandomGeneratorSeed",
        "_bufferSize",
    ];
    let name = Library::func_name(func);
    match Library::of(func) {
        Some(Library::Runtime) if NOTHING.iter().any(|p| name.starts_with(p)) => Effect::Nothing,
        Some(Library::Runtime) if name.starts_with("cudaMemset") => Effect::FirstPointer,
        Some(Library::Runtime) if name == "cudaMemcpy" || name == "cudaMemcpyAsync" => {
            Effect::Named
        }
        Some(_) if LIBRARY_NOTHING.iter().any(|s| name.ends_with(s)) => Effect::Nothing,
        // The description names what it writes (`writes=`), and its
        // decoder reports each.
        Some(lib) if lib.names_writes(func) => Effect::Named,
        _ => Effect::Any,
    }
}

/// Allocations below this share of the granularity are carved from
/// shared slabs (a slab per device, filled in order): NVIDIA's runtime
/// does the same under `cudaMalloc`, and a slab per allocation would hold
/// 2 MiB for every small buffer.
const SMALL: u64 = 4;
/// Where carved allocations start, as `cudaMalloc`'s do.
const ALIGN: u64 = 256;

/// A slab: an address range of the tenant's, reserved for its life, and
/// its physical memory while resident. What moves, and what the ledger
/// counts, is a slab.
struct Vm {
    /// Its bytes: a multiple of the driver's granularity.
    size: u64,
    device: i32,
    handle: Option<u64>,
    /// Allocations in it, and where the next carved one goes (a slab of
    /// one large allocation is full from the start).
    live: u32,
    next: u64,
}

struct State {
    objs: Objects,
    /// Slabs by start address, for finding the one a pointer is in.
    vms: BTreeMap<Key, Vm>,
    /// Each allocation's slab, by the allocation's address.
    allocs: rustc_hash::FxHashMap<u64, Key>,
    /// Per device, the slab small allocations are carved from now.
    open: rustc_hash::FxHashMap<i32, Key>,
    /// The tenant's streams (raw), asked whether they are idle.
    streams: Vec<usize>,
    store: Store,
}

impl State {
    /// The allocation `p` points into.
    fn containing(&self, p: u64) -> Option<Key> {
        let (&k, vm) = self.vms.range(..=p).next_back()?;
        (p < k.saturating_add(vm.size)).then_some(k)
    }

    /// `bytes` (aligned) from `device`'s open slab, if it has room.
    fn carve(&mut self, device: i32, bytes: u64) -> Option<u64> {
        let slab = *self.open.get(&device)?;
        let vm = self.vms.get_mut(&slab)?;
        if vm.next.checked_add(bytes)? > vm.size {
            return None;
        }
        let at = slab + vm.next;
        vm.next += bytes;
        vm.live += 1;
        self.allocs.insert(at, slab);
        Some(at)
    }

    /// Every slab, as a command that may use them all names them.
    fn all(&self) -> Vec<(Key, Access)> {
        self.vms.keys().map(|&k| (k, Access::Read)).collect()
    }

    fn evict_one(&mut self, vmm: &Vmm, key: Key) -> Result<bool, ResidencyError> {
        let started = Instant::now();
        let (size, device, handle) = match self.vms.get(&key) {
            Some(Vm {
                size,
                device,
                handle: Some(h),
                ..
            }) => (*size, *device, *h),
            _ => return Err(ResidencyError::NotPlaced(key)),
        };
        let _on = OnDevice::new(device);
        let policy = self.objs.policy();
        let save = self.objs.get(key).is_some_and(|o| o.needs_save(policy));
        if save {
            self.store.save_with(key, size, |at, chunk| {
                // SAFETY: `chunk` is host memory of its length; the source
                // is inside the slab (`at + len <= size`), resident, and
                // idle (the tenant's streams were asked).
                unsafe {
                    copy(
                        chunk.as_mut_ptr().cast(),
                        (key + at) as usize as *const c_void,
                        chunk.len(),
                        TO_HOST,
                    )
                }
            })?;
        }
        vmm.unback(key, size, handle)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        if let Some(vm) = self.vms.get_mut(&key) {
            vm.handle = None;
        }
        if let Err(e) = self
            .objs
            .evicted(key, save, started.elapsed().as_nanos() as u64)
        {
            log::error!("residency: {e}");
        }
        Ok(save)
    }

    fn restore_one(&mut self, vmm: &Vmm, key: Key) -> Result<(), ResidencyError> {
        let started = Instant::now();
        let Some(vm) = self.vms.get(&key) else {
            return Err(ResidencyError::NotPlaced(key));
        };
        if vm.handle.is_some() {
            return Ok(());
        }
        let (size, device) = (vm.size, vm.device);
        let _on = OnDevice::new(device);
        let handle = vmm
            .back(key, size, device)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        if let Some(vm) = self.vms.get_mut(&key) {
            vm.handle = Some(handle);
        }
        let filled = match self.objs.get(key).map(|o| o.backing) {
            Some(Backing::Stored) => self.store.load_with(key, size, |at, chunk| {
                // SAFETY: the destination is inside the slab, just backed
                // and used by nothing yet; `chunk` is host memory of its
                // length.
                unsafe {
                    copy(
                        (key + at) as usize as *mut c_void,
                        chunk.as_ptr().cast(),
                        chunk.len(),
                        TO_DEVICE,
                    )
                }
            }),
            // New physical memory holds anything: an allocation never
            // written since its last save is zeros again.
            Some(Backing::Zero) => {
                // SAFETY: the allocation's range, just backed.
                let s = unsafe { ffi::cudaMemset(key as usize as *mut c_void, 0, size as usize) };
                cuda_ok(s)
            }
            _ => Err(ResidencyError::NoBacking(key)),
        };
        if let Err(e) = filled {
            // Not resident after all: its memory goes again.
            let _ = vmm.unback(key, size, handle);
            if let Some(vm) = self.vms.get_mut(&key) {
                vm.handle = None;
            }
            return Err(e);
        }
        if let Err(e) = self.objs.restored(key, started.elapsed().as_nanos() as u64) {
            log::error!("residency: {e}");
        }
        Ok(())
    }
}

fn cuda_ok(s: i32) -> Result<(), ResidencyError> {
    if s == cudaSuccess {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("the CUDA runtime answered {s}")).into())
    }
}

/// One synchronous copy between host memory and a slab.
///
/// # Safety
/// One side is `n` bytes of host memory, the other `n` bytes of a
/// resident slab that no work in flight uses, as `kind` says.
unsafe fn copy(
    dst: *mut c_void,
    src: *const c_void,
    n: usize,
    kind: i32,
) -> Result<(), ResidencyError> {
    // SAFETY: this function's contract.
    cuda_ok(unsafe { ffi::cudaMemcpy(dst, src, n, kind) })
}

/// `device` current on this thread until the guard goes; then the
/// thread's own device again (on the serving thread, the tenant's). Since
/// CUDA 12 (the runtimes served) `cudaSetDevice` also makes the device's
/// primary context current, which the driver's calls need; the older
/// `cudaFree(NULL)` idiom is avoided, as it may wait for the device.
struct OnDevice(i32);

impl OnDevice {
    fn new(device: i32) -> OnDevice {
        let mut was = 0i32;
        // SAFETY: a valid out-pointer; then no pointers (an ordinal the
        // tenant's allocation was made on).
        unsafe {
            ffi::cudaGetDevice(&mut was);
            ffi::cudaSetDevice(device);
        }
        OnDevice(was)
    }
}

impl Drop for OnDevice {
    fn drop(&mut self) {
        // SAFETY: no pointers; the device this thread had.
        unsafe { ffi::cudaSetDevice(self.0) };
    }
}

/// A tenant's CUDA residency.
pub struct CudaResidency {
    engine: Engine,
    state: Mutex<State>,
    vmm: Vmm,
    /// Some allocation is not resident: the next call must look.
    holes: AtomicBool,
    /// Every resident allocation is marked dirty already.
    all_dirty: AtomicBool,
    /// When its slabs last came back, in nanoseconds from `born`.
    back_at: std::sync::atomic::AtomicU64,
    born: Instant,
}

impl CudaResidency {
    /// Starts residency for CUDA on `sock` (the listener's link, fd 4), with
    /// its store; the driver must have its virtual memory management calls.
    pub(super) fn start(
        config: &Config,
        sock: OwnedFd,
        cap: u64,
    ) -> Result<Arc<CudaResidency>, ResidencyError> {
        super::check_link(&sock)?;
        let vmm = vmm::driver().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no CUDA driver with virtual memory management (libcuda.so.1)",
            )
        })?;
        let store = engine::open_store(config, cap)?;
        let policy = engine::policy(config);
        let r = Arc::new(CudaResidency {
            engine: Engine::new(policy, Link::new(sock)),
            state: Mutex::new(State {
                objs: Objects::new(policy),
                vms: BTreeMap::new(),
                allocs: rustc_hash::FxHashMap::default(),
                open: rustc_hash::FxHashMap::default(),
                streams: Vec::new(),
                store,
            }),
            vmm,
            holes: AtomicBool::new(false),
            all_dirty: AtomicBool::new(false),
            back_at: std::sync::atomic::AtomicU64::new(0),
            born: Instant::now(),
        });
        // The first word, before anything of the client's runs: the
        // budget is the configuration's (`Config::validate`), so the size
        // is not asked of CUDA, which would start a context in every tenant.
        r.engine.link.send(&FromTenant::Hello { device_mem: 0 });
        let reader = r.clone();
        std::thread::Builder::new()
            .name("wh-residency".into())
            .spawn(move || {
                reader
                    .engine
                    .read_loop(|seq, bytes, force| reader.on_evict(seq, bytes, force))
            })?;
        let _ = CURRENT.set(r.clone());
        Ok(r)
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

    /// Serves `cudaMalloc` on `device`: carved from a slab with room, or
    /// a new slab (room from the ledger, an address range of the tenant's
    /// own for its life, memory under it). Returns the address.
    pub fn alloc(&self, size: u64, device: i32) -> Result<u64, i32> {
        let _on = OnDevice::new(device);
        let g = self
            .vmm
            .granularity(device)
            .map_err(|_| cudaErrorMemoryAllocation)?;
        let size = size.max(1);
        let small = size <= g / SMALL;
        let carved = size.next_multiple_of(ALIGN);
        if small {
            let mut st = self.state();
            if let Some(at) = st.carve(device, carved) {
                return Ok(at);
            }
        }
        let slab = if small {
            g
        } else {
            size.checked_next_multiple_of(g)
                .ok_or(cudaErrorMemoryAllocation)?
        };
        let at = self.new_slab(slab, g, device)?;
        let mut st = self.state();
        let Some(vm) = st.vms.get_mut(&at) else {
            return Err(cudaErrorUnknown);
        };
        vm.live = 1;
        vm.next = if small { carved } else { slab };
        if small {
            st.open.insert(device, at);
        }
        st.allocs.insert(at, at);
        Ok(at)
    }

    /// A slab of `size` bytes on `device`, resident and counted.
    fn new_slab(&self, size: u64, g: u64, device: i32) -> Result<u64, i32> {
        let a = self.engine.ask(|seq| FromTenant::Need {
            seq,
            bytes: size,
            restore: false,
            retry: false,
        });
        if a == Answer::No {
            return Err(cudaErrorMemoryAllocation);
        }
        let give_back = || {
            if a == Answer::Yes {
                self.engine.link.send(&FromTenant::Release { bytes: size });
            }
        };
        let Ok(at) = self.vmm.reserve(size, g) else {
            give_back();
            return Err(cudaErrorMemoryAllocation);
        };
        let handle = match self.vmm.back(at, size, device) {
            Ok(h) => h,
            Err(e) => {
                log::info!("residency: {e}");
                let _ = self.vmm.unreserve(at, size);
                give_back();
                return Err(cudaErrorMemoryAllocation);
            }
        };
        let mut st = self.state();
        if st.objs.insert(at, size, true, true).is_err() {
            drop(st);
            let _ = self.vmm.unback(at, size, handle);
            let _ = self.vmm.unreserve(at, size);
            give_back();
            return Err(cudaErrorUnknown);
        }
        st.vms.insert(
            at,
            Vm {
                size,
                device,
                handle: Some(handle),
                live: 0,
                next: 0,
            },
        );
        self.all_dirty.store(false, Ordering::Release);
        Ok(at)
    }

    /// Serves `cudaFree` of `at`, an allocation of [`CudaResidency::alloc`]'s:
    /// waits for the device as `cudaFree` does; a slab whose last
    /// allocation this was gives its memory, its range and its room back.
    pub fn free(&self, at: u64) -> Result<(), i32> {
        // SAFETY: no pointers.
        let s = unsafe { ffi::cudaDeviceSynchronize() };
        if s != cudaSuccess {
            return Err(s);
        }
        let mut st = self.state();
        let Some(slab) = st.allocs.remove(&at) else {
            return Err(wormhole_cuda_api::cudaErrorInvalidValue);
        };
        let empty = st.vms.get_mut(&slab).is_some_and(|vm| {
            vm.live = vm.live.saturating_sub(1);
            vm.live == 0
        });
        if !empty {
            return Ok(());
        }
        st.open.retain(|_, &mut k| k != slab);
        let Some(vm) = st.vms.remove(&slab) else {
            return Ok(());
        };
        let _on = OnDevice::new(vm.device);
        if let Some(h) = vm.handle {
            if let Err(e) = self.vmm.unback(slab, vm.size, h) {
                log::warn!("residency: freeing a slab: {e}");
            }
        }
        if let Err(e) = self.vmm.unreserve(slab, vm.size) {
            log::warn!("residency: freeing a slab: {e}");
        }
        st.store.free_piece(slab);
        let freed = st.objs.remove(slab).map_or(0, |r| r.resident);
        drop(st);
        if freed > 0 {
            self.engine.link.send(&FromTenant::Release { bytes: freed });
        }
        Ok(())
    }

    /// Whether `at` is one of residency's allocations (else the runtime's).
    pub fn owns(&self, at: u64) -> bool {
        self.state().allocs.contains_key(&at)
    }

    /// The tenant's streams changed: the ones to ask before evicting.
    pub fn set_streams(&self, streams: Vec<usize>) {
        self.state().streams = streams;
    }

    /// Before a call: the tenant's allocations resident if it may touch
    /// them. Fails with `cudaErrorMemoryAllocation` when the device could
    /// not make room for what must come back.
    #[inline]
    pub fn ready(&self, effect: Effect) -> Result<(), i32> {
        if effect == Effect::Nothing {
            return Ok(());
        }
        if self.engine.is_last() && !self.holes.load(Ordering::Acquire) {
            return Ok(());
        }
        self.make_resident()
    }

    /// After a call: what it may have changed is dirty.
    #[inline]
    pub fn after(&self, effect: Effect, first_pointer: Option<u64>) {
        match effect {
            Effect::Nothing | Effect::Named => {}
            Effect::FirstPointer => {
                if let Some(p) = first_pointer {
                    self.wrote(p);
                }
            }
            Effect::Any => {
                if !self.all_dirty.swap(true, Ordering::AcqRel) {
                    let mut st = self.state();
                    let keys: Vec<Key> = st.vms.keys().copied().collect();
                    for k in keys {
                        st.objs.mark_dirty(k);
                    }
                }
            }
        }
    }

    /// A copy or memset wrote into the allocation `p` points into.
    pub fn wrote(&self, p: u64) {
        let mut st = self.state();
        if let Some(k) = st.containing(p) {
            st.objs.mark_dirty(k);
        }
    }

    /// The slow path: a switch if another tenant used the device since,
    /// then room for and copies back of what was evicted (all of it: the
    /// tenant is the unit), as `local.rs`'s `make_resident`.
    fn make_resident(&self) -> Result<(), i32> {
        let switched = self.engine.switch_in();
        if switched {
            self.state().objs.switch_in();
        }
        let (list, first) = {
            let mut st = self.state();
            let list = st.all();
            let plan = st.objs.plan(&list, false);
            (list, plan)
        };
        let r = self.engine.bring_back(first.clone(), |plan| {
            let mut st = self.state();
            engine::restore_round(
                &mut *st,
                |s| &s.objs,
                &list,
                plan,
                |s, k| s.restore_one(&self.vmm, k),
            )
        });
        if switched || first.bytes > 0 {
            let now = self.born.elapsed().as_nanos() as u64;
            self.back_at.store(now.max(1), Ordering::Release);
        }
        let mut st = self.state();
        for &k in &first.pinned {
            st.objs.unpin(k);
        }
        if r.is_ok() {
            for &(k, a) in &list {
                st.objs.touch(k, a);
            }
            // Under the serve lock (held again): nothing was evicted since
            // the last round found every allocation resident.
            self.holes.store(false, Ordering::Release);
            // What came back is clean: the next call that may write
            // anything marks it again.
            self.all_dirty.store(false, Ordering::Release);
        }
        let c = st.objs.counters;
        drop(st);
        self.engine.link.send(&FromTenant::Stats(c));
        let pid = std::process::id();
        r.map(|_| ()).map_err(|short| {
            match short {
                Short::NoRoom(bytes) => {
                    log::info!("tenant {pid}: no room to restore {bytes} bytes: the call fails")
                }
                Short::Failed(e) => log::error!("tenant {pid}: restoring an allocation: {e}"),
                Short::KeptEvicted => log::info!(
                    "tenant {pid}: its allocations kept being evicted while it waited: the call fails"
                ),
            }
            cudaErrorMemoryAllocation
        })
    }

    /// Whether every stream of the tenant, and each device's legacy
    /// stream, has nothing in flight. Never blocks.
    fn idle(&self, st: &State) -> bool {
        let mut devices: Vec<i32> = st.vms.values().map(|v| v.device).collect();
        devices.sort_unstable();
        devices.dedup();
        for d in devices {
            let _on = OnDevice::new(d);
            // SAFETY: NULL is the current device's legacy stream.
            if unsafe { ffi::cudaStreamQuery(std::ptr::null_mut()) } == NOT_READY {
                return false;
            }
        }
        st.streams.iter().all(|&s| {
            // SAFETY: a stream of the tenant's table, alive: the serving
            // thread, which destroys streams, is between calls.
            let answer = unsafe { ffi::cudaStreamQuery(s as *mut c_void) };
            answer != NOT_READY
        })
    }

    /// Whether the tenant is inside its time slice (and not itself
    /// waiting for room, when holding on could only delay both).
    fn in_slice(&self) -> bool {
        let back = self.back_at.load(Ordering::Acquire);
        back > 0
            && !self.engine.waiting()
            && (self.born.elapsed().as_nanos() as u64).saturating_sub(back)
                < SLICE.as_nanos() as u64
    }

    fn on_evict(&self, seq: u32, bytes: u64, force: bool) {
        if self.in_slice() {
            self.engine.link.send(&FromTenant::Busy { seq });
            return;
        }
        let answer = self.engine.evict_turn(seq, || {
            let mut st = self.state();
            if !self.idle(&st) {
                return FromTenant::Busy { seq };
            }
            let victims = self.engine.victims(&st.objs, bytes, force);
            Engine::evicted(seq, victims, |v| {
                let saved = st.evict_one(&self.vmm, v.key)?;
                self.holes.store(true, Ordering::Release);
                Ok(saved)
            })
        });
        self.engine
            .stats_after(answer, || self.state().objs.counters);
    }

    /// One line for the tenant's report.
    pub(super) fn summary(&self) -> String {
        let st = self.state();
        self.engine.summary("CUDA, ", "slabs", &st.objs, &st.store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wormhole_cuda_api::{blas, func, rand};

    fn state() -> State {
        State {
            objs: Objects::new(wormhole_residency::Policy::Delay),
            vms: BTreeMap::new(),
            allocs: rustc_hash::FxHashMap::default(),
            open: rustc_hash::FxHashMap::default(),
            streams: Vec::new(),
            store: Store::open(None, 1 << 20).expect("store"),
        }
    }

    #[test]
    fn small_allocations_are_carved_in_order_and_found_by_any_pointer_inside() {
        let mut st = state();
        let slab = 0x7f00_0000_0000u64;
        st.vms.insert(
            slab,
            Vm {
                size: 2 << 20,
                device: 0,
                handle: Some(1),
                live: 1,
                next: 256,
            },
        );
        st.open.insert(0, slab);
        assert_eq!(st.carve(0, 512), Some(slab + 256));
        assert_eq!(st.carve(0, 256), Some(slab + 768));
        assert_eq!(st.carve(1, 256), None, "no open slab on device 1");
        assert_eq!(st.carve(0, 2 << 20), None, "past the slab's end");
        assert_eq!(st.vms[&slab].live, 3);
        assert_eq!(st.allocs.get(&(slab + 768)), Some(&slab));
        assert_eq!(st.containing(slab + 1000), Some(slab));
        assert_eq!(st.containing(slab + (2 << 20) - 1), Some(slab));
        assert_eq!(st.containing(slab + (2 << 20)), None, "one past the end");
        assert_eq!(st.containing(slab - 1), None);
        assert_eq!(st.all(), vec![(slab, Access::Read)]);
    }

    #[test]
    fn calls_are_sorted_by_what_they_may_touch() {
        for f in [
            func::cudaGetDeviceCount,
            func::cudaStreamSynchronize,
            func::cudaMalloc,
            func::cudaFree,
            func::__cudaRegisterFatBinary,
            blas::func::cublasCreate_v2,
            rand::func::curandCreateGenerator,
        ] {
            assert_eq!(effect(f), Effect::Nothing, "{}", Library::func_name(f));
        }
        // Memsets; copies, and library routines whose description names
        // their outputs (`writes=`).
        for f in [func::cudaMemset, func::cudaMemset2DAsync] {
            assert_eq!(effect(f), Effect::FirstPointer, "{}", Library::func_name(f));
        }
        for f in [
            func::cudaMemcpy,
            blas::func::cublasSgemm_v2,
            blas::func::cublasSaxpy_v2,
            blas::func::cublasSnrm2_v2,
        ] {
            assert_eq!(effect(f), Effect::Named, "{}", Library::func_name(f));
        }
        for f in [
            func::cudaLaunchKernel,
            func::cudaMemcpy2D,
            func::cudaMemcpyToSymbol,
            blas::func::cublasStrsm_v2,
            rand::func::curandGenerate,
        ] {
            assert_eq!(effect(f), Effect::Any, "{}", Library::func_name(f));
        }
    }
}
