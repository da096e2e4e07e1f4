//! The call/reply cycle the generated stubs and the hand-written entry
//! points drive: `Call` marshals a request while holding the channel,
//! `Reply` unmarshals the answer into the application's memory.

use std::ffi::c_void;

use wormhole_client::{Held, Link, LinkError, Sent, Shape};
use wormhole_cuda_api::{cudaErrorInsufficientDriver, cudaErrorInvalidValue, cudaSuccess, Kind};
use wormhole_wire::{Decoder, Encoder};

use crate::state::{adopt, conn, fresh_id, handle_id, note, tracker, NO_SERVER};

/// What this library's log lines start with.
const PREFIX: &str = "wormhole-cudart";

/// A call being marshalled; holds the channel.
pub struct Call<'a> {
    guard: parking_lot::MutexGuard<'a, Link>,
    pub enc: Encoder,
    shape: Shape,
}

/// A lost or misbehaving server looks like a machine without the driver.
fn lost(e: LinkError) -> i32 {
    wormhole_client::report_once(PREFIX, &e.to_string());
    note(NO_SERVER)
}

impl Call<'static> {
    pub fn begin(func: u32) -> Result<Call<'static>, i32> {
        let conn = conn().ok_or(NO_SERVER).map_err(note)?;
        let mut guard = conn.state.lock();
        let switched = crate::manual::devices::follow_thread_device(&mut guard).map_err(lost)?;
        if switched != cudaSuccess {
            return Err(note(switched));
        }
        let enc = guard.request(func).map_err(lost)?;
        Ok(Call {
            guard,
            enc,
            shape: Shape::new(func),
        })
    }

    /// A call whose one argument is a u64 (a size, an address, an id),
    /// made and its reply awaited.
    pub fn of_u64(func: u32, v: u64) -> Result<Reply<'static>, i32> {
        let mut c = Call::begin(func)?;
        c.enc.u64(v);
        c.finish()
    }
}

impl<'a> Call<'a> {
    /// Adds a value to the call's shape (what can make it fail).
    pub fn shape(&mut self, v: u64) {
        self.shape.add(v);
    }

    /// A C string (a device's bus id), NULL as none; its bytes are part of
    /// the call's shape.
    ///
    /// # Safety
    /// `p` is NULL or a NUL-terminated string.
    pub unsafe fn str(&mut self, p: *const std::ffi::c_char) {
        // SAFETY: `p` is NULL or NUL-terminated (this fn's contract), alive for the call.
        unsafe { wormhole_client::put_c_str(&mut self.enc, &mut self.shape, p) }
    }

    pub fn handle(&mut self, p: *mut c_void, kind: Kind) -> Result<(), i32> {
        let id = handle_id(p, kind).map_err(note)?;
        self.shape(id);
        self.enc.u64(id);
        Ok(())
    }

    /// A device address, checked against the allocation tracker (the whole
    /// range when `size` is given).
    pub fn devptr(&mut self, p: *mut c_void, size: Option<u64>) -> Result<(), i32> {
        let a = p as usize as u64;
        tracker()
            .check(a, size.unwrap_or(0))
            .map_err(|_| note(cudaErrorInvalidValue))?;
        self.shape(size.unwrap_or(0));
        self.enc.u64(a);
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or points to `size` readable bytes.
    pub unsafe fn in_bytes(&mut self, p: *const c_void, size: u64) {
        if p.is_null() {
            self.enc.opt_bytes(None);
        } else {
            // SAFETY: `p` is not NULL (checked above), so by this function's
            // contract it points to `size` readable bytes; the encoder copies
            // them before we return.
            let s = unsafe { std::slice::from_raw_parts(p as *const u8, size as usize) };
            self.enc.opt_bytes(Some(s));
            self.shape(s.len() as u64);
        }
    }

    /// A slot for a new handle returned through a pointer.
    pub fn out_new(&mut self, p: *mut *mut c_void) -> Option<u64> {
        wormhole_client::put_new_slot(&mut self.enc, !p.is_null(), fresh_id)
    }

    /// Sends the request and waits for the reply.
    pub fn finish(self) -> Result<Reply<'a>, i32> {
        let Call { guard, enc, .. } = self;
        let held = Held::exchange(guard, enc, None, PREFIX).map_err(lost)?;
        Ok(Reply { held })
    }

    /// Queues a call the description marks async (a launch, a memset): it
    /// stays in the ring until the next synchronising call, and cudaSuccess
    /// is returned. As in the OpenCL path, a call is deferred only once one
    /// of the same shape succeeded synchronously, so the first of a kind
    /// reports its own error as natively; a deferred failure is reported by
    /// the next synchronising call. WORMHOLE_SYNC=1 forwards every call
    /// synchronously.
    pub fn finish_async(self, wake: bool) -> Result<i32, i32> {
        self.finish_async_as(wake, |r| {
            let own = r.status();
            (own, note(r.status_with_deferred()))
        })
    }

    /// `finish_async`, with `status` to read a synchronous reply: the call's
    /// own status (which decides whether its shape may be deferred next
    /// time) and the one to return.
    pub fn finish_async_as(
        self,
        wake: bool,
        status: impl FnOnce(&mut Reply<'a>) -> (i32, i32),
    ) -> Result<i32, i32> {
        let Call { guard, enc, shape } = self;
        match Held::send(guard, enc, None, shape, false, wake, PREFIX).map_err(lost)? {
            Sent::Answered(held) => {
                let mut r = Reply { held };
                let (own, answer) = status(&mut r);
                r.held.learn(shape, own);
                Ok(answer)
            }
            Sent::Posted(_) => Ok(cudaSuccess),
        }
    }
}

/// A reply being unmarshalled; still holds the channel.
pub struct Reply<'a> {
    held: Held<parking_lot::MutexGuard<'a, Link>>,
}

fn proto<T>(_: T) -> i32 {
    note(cudaErrorInsufficientDriver)
}

impl Reply<'_> {
    /// The call's status (recorded as the last error).
    pub fn status(&self) -> i32 {
        note(self.held.status)
    }

    /// The call's status, not recorded as the runtime's last error (for
    /// cuBLAS and cuRAND, whose statuses are their own).
    pub fn raw_status(&self) -> i32 {
        self.held.status
    }

    /// The call's status, or, if it succeeded, the failure of an earlier
    /// deferred call not yet reported.
    pub fn status_with_deferred(&mut self) -> i32 {
        note(self.held.status_with_deferred())
    }

    /// Outputs are written only when the call succeeded: the native
    /// runtime leaves them untouched on failure.
    pub fn has_outputs(&self) -> bool {
        self.held.has_outputs && self.held.status == cudaSuccess
    }

    /// Runs `f` over the rest of the reply.
    pub fn with<T>(
        &mut self,
        f: impl FnOnce(&mut Decoder<'_>) -> Result<T, i32>,
    ) -> Result<T, i32> {
        self.held.cur.with(f)
    }

    wormhole_client::typed_outs!(proto, adopt);
}
