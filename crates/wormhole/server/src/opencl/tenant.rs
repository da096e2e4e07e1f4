//! One tenant's state: its handle table and the helpers the generated
//! decoders call. Nothing a client sends is trusted: ids are looked up in
//! this tenant's own table and checked for kind, sizes are bounded before
//! anything is allocated, and new ids must be fresh.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::args::ArgDecl;
pub use crate::handles::NewSlot;
use crate::handles::{Entry, HandleKind, HandleTable};
use crate::outbuf::OutBufs;

use wormhole_opencl_api::{
    info_handle, InfoHandle, Kind, CL_INVALID_VALUE, CL_OUT_OF_HOST_MEMORY, CL_SUCCESS,
};
use wormhole_transport::Notify;
use wormhole_wire::{Decoder, Encoder, WireError};

/// Ids at or above this are assigned by the server (objects the client first
/// learns of from a query); below it, by the client (objects it creates).
pub const SERVER_ID_BASE: u64 = 1 << 62;

const CL_DEVICE_PARENT_DEVICE: u32 = 0x1042;

/// A malformed request: reported as `CL_INVALID_VALUE`.
pub fn bad(_: WireError) -> i32 {
    CL_INVALID_VALUE
}

impl HandleKind for Kind {
    const BAD_REQUEST: i32 = CL_INVALID_VALUE;

    fn invalid(self) -> i32 {
        Kind::invalid(self)
    }
}

/// What the table keeps per OpenCL object, beside its kind and handle.
struct ObjectState {
    /// References the client holds through this id.
    refs: u32,
    /// Never removed (platforms, root devices, aliases we retained).
    pinned: bool,
    /// A memory object's or program's cost to the tenant's quota.
    charge: Option<super::quota::Held>,
}

/// Limits on what one request may make the server allocate.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_alloc: u64,
    pub max_handles: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_alloc: 4 << 30,
            max_handles: 1 << 20,
        }
    }
}

/// Most kernel-argument slots a tenant caches (2 bytes each).
const MAX_ARG_DECLS: usize = 1 << 16;
/// Arguments from this index on are asked for every time, never cached, so
/// that one kernel's entry stays small whatever it declares.
const MAX_CACHED_ARG_INDEX: u32 = 4096;

/// Kernel arguments' declarations, as the library reported them (see
/// `args.rs`), by real kernel and then by index: a kernel's entries go in
/// one step when the tenant drops the kernel, before the library can reuse
/// its address.
#[derive(Default)]
pub struct ArgDecls {
    /// Per kernel, by argument index: `None` where not asked yet.
    kernels: FxHashMap<usize, Vec<Option<ArgDecl>>>,
    /// Slots allocated over all kernels: what the bound counts, so that
    /// memory stays bounded however the indices are spread.
    slots: usize,
}

impl ArgDecls {
    /// The declaration cached for this argument, if it was asked for.
    #[inline]
    pub fn get(&self, kernel: *mut c_void, index: u32) -> Option<ArgDecl> {
        *self.kernels.get(&(kernel as usize))?.get(index as usize)?
    }

    /// Caches a declaration (bounded: a cache that would grow past
    /// `MAX_ARG_DECLS` slots starts again).
    pub fn insert(&mut self, kernel: *mut c_void, index: u32, d: ArgDecl) {
        if index >= MAX_CACHED_ARG_INDEX {
            return;
        }
        let need = index as usize + 1;
        let have = self.kernels.get(&(kernel as usize)).map_or(0, Vec::len);
        if need > have && self.slots + (need - have) > MAX_ARG_DECLS {
            self.clear();
        }
        let slots = self.kernels.entry(kernel as usize).or_default();
        if slots.len() < need {
            self.slots += need - slots.len();
            slots.resize(need, None);
        }
        slots[index as usize] = Some(d);
    }

    /// A clone's declarations are its source's.
    pub fn copy(&mut self, from: *mut c_void, to: *mut c_void) {
        let Some(slots) = self.kernels.get(&(from as usize)).cloned() else {
            return;
        };
        if self.slots + slots.len() > MAX_ARG_DECLS {
            return;
        }
        self.forget(to);
        self.slots += slots.len();
        self.kernels.insert(to as usize, slots);
    }

    /// Forgets a kernel's declarations.
    pub fn forget(&mut self, kernel: *mut c_void) {
        if let Some(slots) = self.kernels.remove(&(kernel as usize)) {
            self.slots -= slots.len();
        }
    }

    pub fn clear(&mut self) {
        self.kernels.clear();
        self.slots = 0;
    }

    /// Slots allocated.
    pub fn slots(&self) -> usize {
        self.slots
    }
}

/// A tenant's objects and its channel back for notifications.
pub struct Tenant {
    table: HandleTable<Kind, ObjectState>,
    next_server_id: u64,
    pub limits: Limits,
    /// The platforms this server exports, in order.
    pub platforms: Vec<*mut c_void>,
    pub notify: Option<Arc<dyn Notify>>,
    /// Live mappings: client-visible map id -> (mem, server pointer, bytes).
    pub mappings: HashMap<u64, super::maps::Mapping>,
    /// A bulk transfer to complete around the current reply.
    pub bulk: Option<super::bulk::Bulk>,
    /// Set when a request leaves the stream impossible to follow: the
    /// tenant is then cut off.
    pub broken: bool,
    /// Memory shared with the client for CPU devices' buffers (none over
    /// TCP, or when configured off).
    pub shared: Option<Arc<super::shared::SharedBuffers>>,
    /// The memory this tenant may hold in memory objects, when limited.
    pub memory: Option<Arc<crate::quota::Quota>>,
    /// Bytes of non-blocking writes' data kept until their commands ran
    /// (`transfers::clEnqueueWriteBuffer`).
    pub kept_writes: Arc<std::sync::atomic::AtomicU64>,
    /// Program builds on threads of their own (`builds.rs`).
    pub builds: Arc<super::builds::Builds>,
    out_bufs: OutBufs,
    /// Kernel arguments' declarations (see `ArgDecls`).
    pub arg_decls: ArgDecls,
    /// Header directories the client sent for its builds.
    pub includes: super::includes::IncludeDirs,
    /// What launches must be checked for (`launch.rs`).
    pub launches: super::launch::Launches,
    /// Objects kept alive as kernel arguments (`args.rs`).
    pub arg_objects: super::args::ArgObjects,
    /// The bytes of source or binaries of the program just made, for its
    /// charge (`programs::clCreateProgramWith*`; taken by `insert`).
    pub program_bytes: Option<u64>,
    /// Whether blocking waits may leave their reply to the completion of
    /// what they wait for (the channel can hold a reply back; `finish.rs`).
    pub replies_held: bool,
    /// What the last call's reply waits for, for the serve loop.
    pub reply_when: Option<super::finish::Wait>,
    /// Delay storing: this tenant's side of its device's ledger, when the
    /// server keeps one (`crate::residency`).
    pub residency: Option<Arc<crate::residency::Residency>>,
}

impl Tenant {
    pub fn new(
        platforms: Vec<*mut c_void>,
        limits: Limits,
        notify: Option<Arc<dyn Notify>>,
    ) -> Self {
        let mut t = Tenant {
            // Client ids below the server's; no bound on entries (the
            // library's own limits apply, as natively).
            table: HandleTable::new(1..=SERVER_ID_BASE - 1, usize::MAX),
            next_server_id: SERVER_ID_BASE,
            limits,
            platforms: Vec::new(),
            notify,
            mappings: HashMap::new(),
            bulk: None,
            broken: false,
            shared: None,
            memory: None,
            kept_writes: Arc::default(),
            builds: Arc::default(),
            out_bufs: OutBufs::default(),
            arg_decls: ArgDecls::default(),
            includes: Default::default(),
            launches: Default::default(),
            arg_objects: Default::default(),
            program_bytes: None,
            replies_held: false,
            reply_when: None,
            residency: None,
        };
        for &p in &platforms {
            t.id_for(Kind::Platform, p);
        }
        t.platforms = platforms;
        t
    }

    /// Number of live entries (for tests and leak checks).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    crate::handles::handle_decoders!(table, Kind);

    /// Whether `raw` is an object of `kind` that this tenant holds an id
    /// for: a value the library will take as a handle must be one.
    pub fn holds(&self, kind: Kind, raw: *mut c_void) -> bool {
        self.table.id_of(kind, raw as usize).is_some()
    }

    /// An optional array of handles, all of `kind`.
    /// An optional list of handles of `kind`; a NULL or unknown entry is
    /// refused with `bad_entry` (the call's code for it: a wait list's is
    /// CL_INVALID_EVENT_WAIT_LIST).
    pub fn handles(
        &mut self,
        d: &mut Decoder<'_>,
        kind: Kind,
        bad_entry: i32,
    ) -> Result<Option<Vec<*mut c_void>>, i32> {
        if !d.bool().map_err(bad)? {
            return Ok(None);
        }
        // No NULL inside a list of handles (a wait list, a device list).
        let ids = d.u64s().map_err(bad)?;
        ids.into_iter()
            .map(|id| match id {
                0 => Err(bad_entry),
                _ => self.lookup(id, kind).map_err(|_| bad_entry),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// A fresh client-chosen id for an object about to be created.
    pub fn new_id(&mut self, d: &mut Decoder<'_>) -> Result<u64, i32> {
        self.table.new_id(d)
    }

    /// Records a newly created object under the client's id; a memory
    /// object or program past the tenant's quota is released instead and
    /// refused.
    pub fn insert(&mut self, id: u64, kind: Kind, raw: *mut c_void) -> Result<(), i32> {
        use super::quota::{charge, charge_program, Held};
        if raw.is_null() {
            return Ok(());
        }
        // Taken whatever the quota, so that it never outlives its program.
        let program_bytes = self.program_bytes.take();
        let charge = match (kind, &self.memory) {
            // SAFETY: the library just made `raw` for this call, whose
            // reference is the only one so far.
            (Kind::Mem, Some(q)) => unsafe { charge(q, raw) }?.map(Held::Mem),
            (Kind::Program, Some(q)) => {
                let bytes = program_bytes.unwrap_or(0);
                // SAFETY: the library just made `raw` for this call, whose
                // reference is the only one so far.
                let c = unsafe { charge_program(q, raw, bytes) }?;
                Some(Held::Program(c))
            }
            _ => None,
        };
        if let (Kind::Mem, Some(r)) = (kind, &self.residency) {
            if let Err(code) = r.created(raw) {
                // SAFETY: the library made `raw` for this call, whose
                // reference is the only one (the charge, if any, comes
                // back from its destructor callback).
                unsafe { super::release_real(Kind::Mem, raw) };
                return Err(code);
            }
        }
        let state = ObjectState {
            refs: 1,
            pinned: false,
            charge,
        };
        self.table.insert(id, kind, raw as usize, state);
        if let (Kind::Mem, Some(sb)) = (kind, &self.shared) {
            sb.publish(raw, id);
        }
        Ok(())
    }

    /// The id under which the client knows `raw`, creating a server id (and
    /// keeping the object alive) when the client has none.
    pub fn id_for(&mut self, kind: Kind, raw: *mut c_void) -> u64 {
        if raw.is_null() {
            return 0;
        }
        if let Some(id) = self.table.id_of(kind, raw as usize) {
            return id;
        }
        let id = self.next_server_id;
        self.next_server_id += 1;
        // Platforms and devices from queries are not reference counted by
        // the application; anything else is retained so that the raw handle
        // cannot be freed and reused while this alias exists.
        if !matches!(kind, Kind::Platform | Kind::Device) {
            super::retain_real(kind, raw);
        }
        let state = ObjectState {
            refs: 0,
            pinned: true,
            charge: None,
        };
        self.table.insert(id, kind, raw as usize, state);
        id
    }

    pub fn retained(&mut self, id: u64, _kind: Kind) {
        if let Some(entry) = self.table.get_mut(id) {
            entry.extra.refs = entry.extra.refs.saturating_add(1);
        }
    }

    /// Refuses a release the client holds no reference for. Ids the server
    /// assigned for objects seen in query results carry no client reference
    /// (the application does not own those), so releasing them more times
    /// than they were retained would free an object its parent still uses.
    /// Root devices are the exception: releasing one is a no-op.
    pub fn check_release(&self, id: u64, kind: Kind) -> Result<(), i32> {
        match self.table.get(id, kind) {
            Some(entry) if entry.extra.refs > 0 => Ok(()),
            Some(entry) if kind == Kind::Device => {
                let mut parent: usize = 0;
                // SAFETY: a device from our table; `parent` is a cl_device_id.
                let s = unsafe {
                    super::ffi::clGetDeviceInfo(
                        entry.raw as *mut c_void,
                        CL_DEVICE_PARENT_DEVICE,
                        std::mem::size_of::<usize>(),
                        &mut parent as *mut usize as *mut c_void,
                        std::ptr::null_mut(),
                    )
                };
                if s == CL_SUCCESS && parent == 0 {
                    Ok(())
                } else {
                    Err(kind.invalid())
                }
            }
            _ => Err(kind.invalid()),
        }
    }

    /// Drops the entry when the client's last reference goes: the id is
    /// then invalid for this tenant, as the handle is for the application.
    pub fn released(&mut self, id: u64, _kind: Kind) {
        let gone = match self.table.get_mut(id) {
            Some(entry) => {
                entry.extra.refs = entry.extra.refs.saturating_sub(1);
                entry.extra.refs == 0 && !entry.extra.pinned
            }
            None => false,
        };
        if gone {
            if let Some(entry) = self.table.remove(id) {
                if entry.kind == Kind::Kernel {
                    let kernel = entry.raw as *mut c_void;
                    self.arg_decls.forget(kernel);
                    if let Some(residency) = &self.residency {
                        residency.kernel_gone(kernel);
                    }
                    self.launches.forget(kernel);
                    self.arg_objects.forget(kernel);
                }
                if let Some(charge) = entry.extra.charge {
                    charge.let_go();
                }
            }
        }
    }

    /// Drops every reference this tenant holds: the client's (`refs`) and
    /// the one taken for a server-assigned alias. A tenant process simply
    /// exits instead; the in-process harness needs runs to be independent.
    pub fn release_all(&mut self) {
        self.mappings.clear();
        self.arg_decls.clear();
        self.launches.clear();
        self.arg_objects.clear();
        // Dependents first, so that no object outlives what it was made from
        // inside this loop (the library counts references either way).
        let order = |k: Kind| match k {
            Kind::Event => 0,
            Kind::Kernel => 1,
            Kind::Sampler => 2,
            Kind::Program => 3,
            Kind::Mem => 4,
            Kind::Queue => 5,
            Kind::Context => 6,
            Kind::Device => 7,
            Kind::Platform => 8,
        };
        let mut entries: Vec<Entry<Kind, ObjectState>> = self.table.drain().collect();
        entries.sort_by_key(|entry| (order(entry.kind), entry.raw));
        for entry in entries {
            let server_ref =
                entry.extra.pinned && !matches!(entry.kind, Kind::Platform | Kind::Device);
            for _ in 0..entry.extra.refs + u32::from(server_ref) {
                // SAFETY: the entry's raw handle is live while the tenant
                // holds references on it, and these are exactly those.
                unsafe { super::release_real(entry.kind, entry.raw as *mut c_void) };
            }
        }
    }

    /// A buffer for a call to write into, bounded by the tenant's limits.
    pub fn out_buf(&mut self, present: bool, size: u64) -> Result<Option<Vec<u8>>, i32> {
        if !present {
            return Ok(None);
        }
        self.out_bufs
            .take(size, self.limits.max_alloc)
            .map(Some)
            .map_err(|_| CL_OUT_OF_HOST_MEMORY)
    }

    /// Returns a buffer from [`Tenant::out_buf`] once its call is encoded.
    pub fn give_back(&mut self, v: Option<Vec<u8>>) {
        self.out_bufs.give_back(v);
    }

    pub fn out_handles(
        &mut self,
        present: bool,
        count: u64,
    ) -> Result<Option<Vec<*mut c_void>>, i32> {
        if !present {
            return Ok(None);
        }
        if count > self.limits.max_handles {
            return Err(CL_OUT_OF_HOST_MEMORY);
        }
        Ok(Some(vec![std::ptr::null_mut(); count as usize]))
    }

    /// Encodes the handles a call returned, as ids.
    pub fn encode_handles(
        &mut self,
        e: &mut Encoder,
        v: Option<&[*mut c_void]>,
        kind: Kind,
        status: i32,
    ) {
        match v {
            Some(v) if status == CL_SUCCESS => {
                let ids: Vec<u64> = v
                    .iter()
                    .take_while(|p| !p.is_null())
                    .map(|&p| {
                        // Handles returned in an array are new references
                        // the application owns (kernels, sub-devices).
                        let id = self.id_for(kind, p);
                        self.retained(id, kind);
                        id
                    })
                    .collect();
                e.bool(true);
                e.u64s(&ids);
            }
            _ => e.bool(false),
        }
    }

    pub fn commit_new(&mut self, slot: &mut NewSlot, kind: Kind, status: i32) {
        if let Some((id, raw)) = slot.committed(status == CL_SUCCESS) {
            let _ = self.insert(id, kind, raw);
        }
    }

    /// Encodes an info value, rewriting the handles in it as ids.
    pub fn info_out(
        &mut self,
        e: &mut Encoder,
        v: Option<&mut [u8]>,
        func: u32,
        param: u32,
        status: i32,
    ) -> Result<(), i32> {
        let Some(v) = v else {
            e.opt_bytes(None);
            return Ok(());
        };
        if status == CL_SUCCESS {
            match info_handle(func, param) {
                Some(InfoHandle::One(k)) | Some(InfoHandle::Array(k)) => {
                    for chunk in v.chunks_exact_mut(8) {
                        let raw =
                            usize::from_le_bytes(chunk.try_into().map_err(|_| CL_INVALID_VALUE)?);
                        let id = self.id_for(k, raw as *mut c_void);
                        chunk.copy_from_slice(&id.to_le_bytes());
                    }
                }
                Some(InfoHandle::Custom) => super::custom::info(self, func, param, v),
                None => {}
            }
        }
        e.opt_bytes(Some(v));
        Ok(())
    }

    pub fn callback(
        &mut self,
        d: &mut Decoder<'_>,
        kind: wormhole_opencl_api::CallbackKind,
    ) -> Result<super::callbacks::CallbackArg, i32> {
        super::callbacks::decode(self, d, kind)
    }
}

/// A zeroed buffer of `size` bytes, or `CL_OUT_OF_HOST_MEMORY` when that is
/// over `max` or memory is short (never an abort).
pub fn alloc_zeroed(size: u64, max: u64) -> Result<Vec<u8>, i32> {
    let mut v = Vec::new();
    crate::outbuf::fill_zeroed(&mut v, size, max).map_err(|_| CL_OUT_OF_HOST_MEMORY)?;
    Ok(v)
}

/// Checks that an array holds at least the count the call will read. An
/// absent (NULL) array with a count is refused with `absent` (the API's
/// code for that call) rather than handed to a library that may read it.
pub fn check_count<T>(v: Option<&[T]>, count: u64, absent: i32) -> Result<(), i32> {
    match v {
        Some(v) if (v.len() as u64) < count => Err(CL_INVALID_VALUE),
        None if count > 0 => Err(absent),
        _ => Ok(()),
    }
}

/// Checks that bytes sent for a host buffer cover what the call will read.
pub fn check_len(v: Option<&[u8]>, size: u64) -> Result<(), i32> {
    match v {
        Some(v) if (v.len() as u64) < size => Err(CL_INVALID_VALUE),
        _ => Ok(()),
    }
}

/// A string argument; interior NULs are refused.
pub fn cstr(b: Option<&[u8]>) -> Result<Option<CString>, i32> {
    b.map(|b| CString::new(b).map_err(|_| CL_INVALID_VALUE))
        .transpose()
}

pub fn opt_cstr(s: &Option<CString>) -> *const std::ffi::c_char {
    s.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
}

pub fn opt_ptr(b: Option<&[u8]>) -> *const c_void {
    b.map_or(std::ptr::null(), |b| b.as_ptr().cast())
}

pub fn opt_mut_ptr(b: &mut Option<Vec<u8>>) -> *mut c_void {
    b.as_mut()
        .map_or(std::ptr::null_mut(), |v| v.as_mut_ptr().cast())
}

pub fn opt_vec_ptr(v: &Option<Vec<*mut c_void>>) -> *const *mut c_void {
    v.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
}

pub fn opt_mut_vec_ptr(v: &mut Option<Vec<*mut c_void>>) -> *mut *mut c_void {
    v.as_mut().map_or(std::ptr::null_mut(), |v| v.as_mut_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wormhole_opencl_api::{CL_INVALID_CONTEXT, CL_INVALID_MEM_OBJECT};

    fn enc_u64(v: u64) -> Vec<u8> {
        let mut e = Encoder::new();
        e.u64(v);
        e.into_vec()
    }

    #[test]
    fn handles_are_typed_and_per_table() {
        let mut t = Tenant::new(Vec::new(), Limits::default(), None);
        let raw = 0x1000 as *mut c_void;
        t.insert(7, Kind::Mem, raw).expect("insert");
        assert_eq!(t.lookup(7, Kind::Mem), Ok(raw));
        assert_eq!(
            t.lookup(7, Kind::Context),
            Err(CL_INVALID_CONTEXT),
            "wrong kind"
        );
        assert_eq!(
            t.lookup(8, Kind::Mem),
            Err(CL_INVALID_MEM_OBJECT),
            "unknown id"
        );
        assert_eq!(
            t.lookup(0, Kind::Mem),
            Ok(std::ptr::null_mut()),
            "0 is NULL"
        );
        // Another tenant's table knows nothing of this id.
        let other = Tenant::new(Vec::new(), Limits::default(), None);
        assert_eq!(other.lookup(7, Kind::Mem), Err(CL_INVALID_MEM_OBJECT));
    }

    #[test]
    fn new_ids_must_be_fresh_and_in_the_client_range() {
        let mut t = Tenant::new(Vec::new(), Limits::default(), None);
        t.insert(5, Kind::Event, 0x10 as *mut c_void)
            .expect("insert");
        for bad_id in [0, 5, SERVER_ID_BASE, u64::MAX] {
            let b = enc_u64(bad_id);
            assert_eq!(
                t.new_id(&mut Decoder::new(&b)),
                Err(CL_INVALID_VALUE),
                "id {bad_id}"
            );
        }
        let b = enc_u64(6);
        assert_eq!(t.new_id(&mut Decoder::new(&b)), Ok(6));
    }

    #[test]
    fn last_release_invalidates_the_id() {
        let mut t = Tenant::new(Vec::new(), Limits::default(), None);
        t.insert(3, Kind::Mem, 0x20 as *mut c_void).expect("insert");
        t.retained(3, Kind::Mem);
        t.released(3, Kind::Mem);
        assert!(t.lookup(3, Kind::Mem).is_ok(), "one reference left");
        t.released(3, Kind::Mem);
        assert_eq!(t.lookup(3, Kind::Mem), Err(CL_INVALID_MEM_OBJECT));
        assert!(t.is_empty());
    }

    /// A kernel's cached argument declarations go with the tenant's last
    /// reference to it: the library may give a new kernel its address.
    #[test]
    fn a_released_kernel_forgets_its_argument_declarations() {
        let mut t = Tenant::new(Vec::new(), Limits::default(), None);
        let (k1, k2) = (0x40 as *mut c_void, 0x80 as *mut c_void);
        t.insert(5, Kind::Kernel, k1).expect("insert");
        t.insert(6, Kind::Kernel, k2).expect("insert");
        t.arg_decls.insert(k1, 0, ArgDecl::Local);
        t.arg_decls.insert(k1, 1, ArgDecl::Opaque);
        t.arg_decls.insert(k2, 0, ArgDecl::Plain);
        t.retained(5, Kind::Kernel);
        t.released(5, Kind::Kernel);
        assert_eq!(t.arg_decls.slots(), 3, "one reference left: kept");
        t.released(5, Kind::Kernel);
        assert_eq!(t.arg_decls.slots(), 1, "only the other kernel's stays");
        assert!(t.arg_decls.get(k2, 0).is_some());
        assert!(t.arg_decls.get(k1, 0).is_none());
    }

    /// The cache stays bounded whatever a client asks about: indices past
    /// the limit are not kept, a slot asked twice is one slot, and a cache
    /// that would outgrow its bound starts again.
    #[test]
    fn argument_declarations_are_bounded() {
        let mut c = ArgDecls::default();
        let k = 0x40 as *mut c_void;
        c.insert(k, MAX_CACHED_ARG_INDEX, ArgDecl::Plain);
        assert!(c.get(k, MAX_CACHED_ARG_INDEX).is_none());
        assert_eq!(c.slots(), 0);
        c.insert(k, 3, ArgDecl::Plain);
        c.insert(k, 3, ArgDecl::Local);
        assert_eq!(c.slots(), 4);
        assert_eq!(c.get(k, 3), Some(ArgDecl::Local));
        assert!(
            c.get(k, 2).is_none(),
            "a slot below one asked for is not known"
        );
        // Kernels with only a high index each: the bound is on memory.
        let high = MAX_CACHED_ARG_INDEX - 1;
        for i in 0..MAX_ARG_DECLS / MAX_CACHED_ARG_INDEX as usize + 2 {
            c.insert((0x1000 + i * 8) as *mut c_void, high, ArgDecl::Opaque);
            assert!(c.slots() <= MAX_ARG_DECLS);
        }
        assert!(c.get(k, 3).is_none(), "a full cache started again");
    }

    #[test]
    fn sizes_are_bounded_before_allocating() {
        let mut t = Tenant::new(
            Vec::new(),
            Limits {
                max_alloc: 1024,
                max_handles: 4,
            },
            None,
        );
        assert_eq!(t.out_buf(true, 2048), Err(CL_OUT_OF_HOST_MEMORY));
        assert_eq!(
            t.out_buf(true, 16).expect("small").map(|v| v.len()),
            Some(16)
        );
        assert_eq!(t.out_buf(false, u64::MAX), Ok(None));
        assert!(t.out_handles(true, 5).is_err());
        assert_eq!(
            check_count(Some(&[1, 2][..]), 3, -57),
            Err(CL_INVALID_VALUE)
        );
        assert_eq!(check_count::<u8>(None, 1, -57), Err(-57));
        assert_eq!(check_len(Some(&[0u8; 4][..]), 5), Err(CL_INVALID_VALUE));
        assert_eq!(check_len(None, 5), Ok(()));
        assert_eq!(cstr(Some(b"a\0b")), Err(CL_INVALID_VALUE));
    }
}
