//! The objects handed to the application. Every handle is an [`Obj`] whose
//! first field is the ICD dispatch table, as the loaders require; it
//! carries the id under which the server knows the object (the server
//! never sees our pointers), and what this side keeps of the object to
//! answer or batch calls that name it.

mod registry;

use std::ffi::c_void;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use wormhole_opencl_api::Kind;

pub use registry::{
    adopt_id, adopt_new, arg_object, obj, object_for, released, retained, ArgObject, Checked,
};

const MAGIC: u64 = u64::from_le_bytes(*b"WHOLEOBJ");

/// An OpenCL object as the application sees it.
#[repr(C)]
pub struct Obj {
    /// Must be first: the ICD loader calls through it.
    dispatch: *const c_void,
    magic: u64,
    pub id: u64,
    pub kind: Kind,
    refs: AtomicU32,
    /// For memory objects created with CL_MEM_USE_HOST_PTR: the
    /// application's pointer, which maps return into.
    pub host_ptr: AtomicUsize,
    /// A user event whose status the application has not set yet.
    pub user_pending: std::sync::atomic::AtomicBool,
    /// For buffers: whether the server keeps them in the shared arena, as
    /// learned from the first large transfer (see [`Placement`]).
    pub placement: std::sync::atomic::AtomicU8,
    /// Answers to queries that cannot change while the object lives.
    pub info: crate::info_cache::InfoCache,
    /// What this object contributes to a call's shape (0: its id). Buffers
    /// alike in context, flags and size share one, so that the first
    /// transfer to or launch with a fresh buffer is batched too.
    shape_key: AtomicU64,
    /// For queues: created to execute in order (and never changed since),
    /// so a command that completed had every earlier one complete first.
    pub in_order: std::sync::atomic::AtomicBool,
    /// For queues: created with CL_QUEUE_PROFILING_ENABLE, so its events'
    /// times are the device's to give (a marker is not answered here).
    pub profiling: std::sync::atomic::AtomicBool,
    /// For kernels: the arguments set so far (bit i: argument i).
    args_set: AtomicU64,
    /// For queues and buffers: the id of the context they were created in
    /// (0: not known here).
    pub created_in: AtomicU64,
    /// For memory objects created here (buffers, images; not sub-buffers):
    /// their flags, with [`FLAGS_KNOWN`].
    created_flags: AtomicU64,
    /// For buffers from clCreateBuffer: their size, counted as held by the
    /// application until its last release (`room`).
    pub counted: AtomicU64,
    /// For contexts: the least global memory of their devices (0: not
    /// asked yet; u64::MAX: not known), for `room`.
    pub mem_budget: AtomicU64,
    /// For events that stand for a command the client completes itself (a
    /// barrier behind a transfer or map gated on a user event): the
    /// command type the application's command has natively (0: none).
    pub stands_for: AtomicU32,
    /// For events: the status the server said it ended with
    /// (`event_state::NOT_ENDED` until then).
    pub ended: std::sync::atomic::AtomicI32,
}

/// Marks `Obj::created_flags` as set (no OpenCL memory flag uses the top bit).
const FLAGS_KNOWN: u64 = 1 << 63;

/// Where a buffer's storage lives, as far as this side knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Placement {
    Unknown = 0,
    /// In memory this process maps too: transfers are a local copy.
    Shared = 1,
    /// Only on the server: transfers stream through the channel.
    Server = 2,
}

/// An object's shape key made from what decides its calls' failures; the
/// top bit keeps a key apart from every id.
fn shape_of(v: impl Hash) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    v.hash(&mut h);
    h.finish() | 1 << 63
}

impl Obj {
    /// The application's references to this object (0: an object it never
    /// counted, such as a platform, or one seen only in a query's answer).
    pub fn app_refs(&self) -> u32 {
        self.refs.load(Ordering::Relaxed)
    }

    /// What can make a call that names this object fail, as far as the
    /// object goes: the object itself, or what a buffer was created as.
    pub fn shape_key(&self) -> u64 {
        match self.shape_key.load(Ordering::Relaxed) {
            0 => self.id,
            // Which arguments are set decides whether a launch can fail.
            k if self.kind == Kind::Kernel => shape_of((k, self.args_set.load(Ordering::Relaxed))),
            k => k,
        }
    }

    /// Makes calls that name this kernel shaped by what it was created
    /// from: kernels of one program and name take the same arguments and
    /// fail alike (CLBlast creates a kernel for every call it makes).
    pub fn shape_as_kernel_of(&self, program: u64, name: &[u8]) {
        self.shape_key
            .store(shape_of((0x4b45_524eu32, program, name)), Ordering::Relaxed);
    }

    /// Notes that a kernel's argument `index` was set; past the 64 this
    /// counts, the kernel is shaped as itself.
    pub fn arg_set(&self, index: u32) {
        match 1u64.checked_shl(index) {
            Some(bit) => {
                self.args_set.fetch_or(bit, Ordering::Relaxed);
            }
            None => self.shape_as_itself(),
        }
    }

    /// Makes calls that name this buffer shaped by how it was created: the
    /// context, flags and size decide what a transfer or argument with it
    /// can fail on (range, host access, context), not which buffer it is.
    pub fn shape_as_created(&self, context: u64, flags: u64, size: usize) {
        self.shape_key.store(
            shape_of((0x4255_4646u32, context, flags, size)),
            Ordering::Relaxed,
        );
    }

    /// Makes calls that name this program shaped by its latest build (or
    /// compilation): a kernel name or argument that one build has, the
    /// next, with other options or a failure, may not, so what succeeded
    /// before tells nothing about it. Kernels take the program's shape
    /// ([`Obj::shape_as_kernel_of`]).
    pub fn shape_as_new_build(&self) {
        static BUILDS: AtomicU64 = AtomicU64::new(0);
        let n = BUILDS.fetch_add(1, Ordering::Relaxed);
        self.shape_key
            .store(shape_of((0x4255_494cu32, self.id, n)), Ordering::Relaxed);
    }

    /// Back to the object itself as its shape: a buffer with sub-buffers
    /// overlaps them, which its twins do not (a copy between it and one of
    /// them can fail where theirs cannot).
    pub fn shape_as_itself(&self) {
        self.shape_key.store(0, Ordering::Relaxed);
    }

    /// Notes a buffer's flags as clCreateBuffer made it.
    pub fn set_created_flags(&self, flags: u64) {
        self.created_flags
            .store(flags | FLAGS_KNOWN, Ordering::Relaxed);
    }

    /// A memory object's flags, if it was created here (see the field).
    pub fn created_flags(&self) -> Option<u64> {
        let f = self.created_flags.load(Ordering::Relaxed);
        (f & FLAGS_KNOWN != 0).then_some(f & !FLAGS_KNOWN)
    }

    pub fn placement(&self) -> Placement {
        match self.placement.load(Ordering::Relaxed) {
            1 => Placement::Shared,
            2 => Placement::Server,
            _ => Placement::Unknown,
        }
    }

    pub fn set_placement(&self, p: Placement) {
        self.placement.store(p as u8, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh object of `kind` under `id` (ids from 1 << 44 up are this
    /// module's: the registry is one for the whole test process).
    fn fresh(id: u64, kind: Kind) -> &'static Obj {
        let p = object_for((1 << 44) + id, kind, 1);
        match obj(p, kind) {
            Ok(Some(o)) => o,
            _ => panic!("a fresh object is live"),
        }
    }

    #[test]
    fn buffers_created_alike_share_a_shape_that_no_id_can_equal() {
        let [a, b, c] = [1, 2, 3].map(|i| fresh(i, Kind::Mem));
        assert_eq!(a.shape_key(), a.id, "a fresh object is shaped as itself");
        a.shape_as_created(7, 1, 4096);
        b.shape_as_created(7, 1, 4096);
        c.shape_as_created(7, 1, 8192);
        assert_eq!(a.shape_key(), b.shape_key());
        assert_ne!(a.shape_key(), c.shape_key(), "the size decides failures");
        b.shape_as_created(8, 1, 4096);
        assert_ne!(a.shape_key(), b.shape_key(), "so does the context");
        assert_eq!(
            a.shape_key() >> 63,
            1,
            "the top bit keeps it apart from ids"
        );
        // A buffer that gained sub-buffers is itself again.
        a.shape_as_itself();
        assert_eq!(a.shape_key(), a.id);
    }

    #[test]
    fn kernels_are_shaped_by_program_name_and_arguments_set() {
        let [k1, k2, k3] = [10, 11, 12].map(|i| fresh(i, Kind::Kernel));
        k1.shape_as_kernel_of(5, b"gemm");
        k2.shape_as_kernel_of(5, b"gemm");
        k3.shape_as_kernel_of(5, b"axpy");
        assert_eq!(k1.shape_key(), k2.shape_key());
        assert_ne!(k1.shape_key(), k3.shape_key());
        k1.arg_set(0);
        assert_ne!(k1.shape_key(), k2.shape_key(), "set arguments differ");
        k2.arg_set(0);
        assert_eq!(k1.shape_key(), k2.shape_key());
        // Past the 64 arguments counted, the kernel is shaped as itself.
        k1.arg_set(64);
        assert_eq!(k1.shape_key(), k1.id);
    }

    #[test]
    fn every_build_gives_a_program_a_new_shape() {
        let p = fresh(20, Kind::Program);
        p.shape_as_new_build();
        let first = p.shape_key();
        p.shape_as_new_build();
        assert_ne!(first, p.shape_key());
        assert_ne!(p.shape_key(), p.id);
    }

    #[test]
    fn created_flags_and_placement_are_known_only_once_set() {
        let m = fresh(30, Kind::Mem);
        assert_eq!(m.created_flags(), None);
        // Flags 0 (CL_MEM_READ_WRITE by default) are known flags too.
        m.set_created_flags(0);
        assert_eq!(m.created_flags(), Some(0));
        m.set_created_flags(1 << 9);
        assert_eq!(m.created_flags(), Some(1 << 9));
        assert_eq!(m.placement(), Placement::Unknown);
        m.set_placement(Placement::Server);
        assert_eq!(m.placement(), Placement::Server);
        m.set_placement(Placement::Shared);
        assert_eq!(m.placement(), Placement::Shared);
    }
}
