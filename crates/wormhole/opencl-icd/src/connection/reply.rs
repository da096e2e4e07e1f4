//! A reply being unmarshalled ([`Reply`]): its status, the out-values it
//! carries, and the handles it returns made the application's objects.

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use wormhole_client::{copy_out, Held};
use wormhole_opencl_api::{info_handle, InfoHandle, Kind, CL_OUT_OF_RESOURCES, CL_SUCCESS};
use wormhole_wire::Decoder;

use super::{lost, Chan};
use crate::objects::{obj, object_for};

/// A reply being unmarshalled; still holds the channel.
pub struct Reply<'a> {
    pub(super) held: Held<parking_lot::MutexGuard<'a, Chan>>,
}

fn proto<T>(_: T) -> i32 {
    CL_OUT_OF_RESOURCES
}

impl Reply<'_> {
    pub fn status(&self) -> i32 {
        self.held.status
    }

    /// Records that queue `q` has nothing left to run now that this call
    /// returned: always (clFinish), or if the queue executes in order (a
    /// transfer the server made blocking). Nothing has been sent since.
    pub fn drained(&mut self, q: *mut c_void, always: bool) {
        if let Ok(Some(o)) = obj(q, Kind::Queue) {
            if always || o.in_order.load(Ordering::Relaxed) {
                self.held.guard.drained = Some((o.id, self.held.guard.epoch()));
            }
        }
    }

    /// Records, after a wait for `n` events at `list` succeeded, that the
    /// queue whose last command created the one event waited for has
    /// nothing left to run (it executes in order), if nothing but this wait
    /// was sent since that command.
    ///
    /// # Safety
    /// `list` is NULL or holds `n` handles.
    pub unsafe fn waited_for(&mut self, list: *const *mut c_void, n: usize) {
        if n != 1 || list.is_null() {
            return;
        }
        // SAFETY: `list` is non-NULL and `n == 1` (checked above), and it holds `n` handles (this
        // fn's contract, the wait's event_list), so one handle is readable.
        let Ok(Some(e)) = obj(unsafe { *list }, Kind::Event) else {
            return;
        };
        let now = self.held.guard.epoch();
        if let Some((q, ev, at)) = self.held.guard.last_enqueued {
            if ev == e.id && at + 1 == now {
                self.held.guard.drained = Some((q, now));
            }
        }
    }

    /// The call's status, or, if it succeeded, the failure of an earlier
    /// deferred call not yet reported (which is then reported).
    pub fn status_with_deferred(&mut self) -> i32 {
        self.held.status_with_deferred()
    }

    /// Receives the bulk bytes that follow this reply, into `dst`.
    pub fn recv_raw(&mut self, dst: &mut [u8]) -> Result<(), i32> {
        self.held.guard.recv_raw(dst).map_err(lost)
    }

    pub fn has_outputs(&self) -> bool {
        self.held.has_outputs
    }

    /// A decoder over the rest of the reply.
    pub fn dec(&mut self) -> Decoder<'_> {
        self.held.cur.rest()
    }

    fn with<T>(&mut self, f: impl FnOnce(&mut Decoder<'_>) -> Result<T, i32>) -> Result<T, i32> {
        self.held.cur.with(f)
    }

    pub fn opt_flag(&mut self) -> Result<bool, i32> {
        self.with(|d| d.bool().map_err(proto))
    }

    pub fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>, i32> {
        self.with(|d| d.opt_bytes().map(|o| o.map(|b| b.to_vec())).map_err(proto))
    }

    /// Like `out_bytes`, turning the ids in handle-bearing values into our
    /// objects.
    ///
    /// # Safety
    /// As for `out_bytes`; `first` is the call's first argument.
    pub unsafe fn out_info(
        &mut self,
        p: *mut c_void,
        cap: u64,
        func: u32,
        param: u32,
        first: *mut c_void,
    ) -> Result<(), i32> {
        let status = self.held.status;
        self.with(|d| {
            let Some(b) = d.opt_bytes().map_err(proto)? else {
                return Ok(());
            };
            if p.is_null() {
                return Ok(());
            }
            let handles = if status == CL_SUCCESS {
                info_handle(func, param)
            } else {
                None
            };
            let Some(handles) = handles else {
                // Plain data, the common case: no copy of our own.
                // SAFETY: `p` is non-NULL and holds `cap` writable bytes (this fn's contract, as
                // out_bytes': the info query's param_value and param_value_size); copy_out writes
                // at most `cap`.
                unsafe { copy_out(b, p, cap) };
                return Ok(());
            };
            let mut v = b.to_vec();
            match handles {
                InfoHandle::One(k) | InfoHandle::Array(k) => {
                    for c in v.chunks_exact_mut(8) {
                        let id = u64::from_le_bytes(c.try_into().map_err(proto)?);
                        c.copy_from_slice(&(object_for(id, k, 0) as usize).to_le_bytes());
                    }
                }
                InfoHandle::Custom => crate::custom::info(func, param, &mut v, first),
            }
            // SAFETY: as for the plain case: `p` holds `cap` writable bytes by the info query's
            // contract, and copy_out writes at most `cap` of `v`.
            unsafe { copy_out(&v, p, cap) };
            Ok(())
        })
    }

    wormhole_client::typed_outs!(proto, |id, kind| object_for(id, kind, 1));

    /// # Safety
    /// `p` is NULL or holds `cap` handle slots.
    pub unsafe fn out_handles(
        &mut self,
        p: *mut *mut c_void,
        cap: usize,
        kind: Kind,
    ) -> Result<(), i32> {
        let ids = self.with(|d| {
            if d.bool().map_err(proto)? {
                d.u64s().map_err(proto)
            } else {
                Ok(Vec::new())
            }
        })?;
        if p.is_null() {
            return Ok(());
        }
        // Kernels returned here are new and carry the application's reference.
        let refs = u32::from(kind == Kind::Kernel);
        for (i, id) in ids.into_iter().take(cap).enumerate() {
            // SAFETY: `p` is non-NULL and holds `cap` handle slots (this fn's contract, the query's
            // num_entries); `take(cap)` keeps `i < cap`.
            unsafe { *p.add(i) = object_for(id, kind, refs) };
        }
        Ok(())
    }

    pub fn adopt(&mut self, id: u64, kind: Kind) -> *mut c_void {
        object_for(id, kind, 1)
    }
}
