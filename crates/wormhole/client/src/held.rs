//! A call's answer read with the channel still held, and the choice both
//! clients make between waiting for an answer and leaving a call in the
//! ring. Both APIs report success as status 0.

use std::ops::DerefMut;

use wormhole_wire::Encoder;

use crate::{log, Cursor, Link, LinkError, Shape};

/// What an API's lock guards: the [`Link`], perhaps with state of its own.
pub trait HoldsLink {
    fn link(&mut self) -> &mut Link;
}

impl HoldsLink for Link {
    fn link(&mut self) -> &mut Link {
        self
    }
}

/// A reply being unmarshalled, still holding the channel through `G`, the
/// API's lock guard; its buffer goes back to the link when dropped.
pub struct Held<G>
where
    G: DerefMut,
    G::Target: HoldsLink,
{
    pub guard: G,
    pub cur: Cursor,
    pub status: i32,
    pub has_outputs: bool,
}

impl<G> Drop for Held<G>
where
    G: DerefMut,
    G::Target: HoldsLink,
{
    fn drop(&mut self) {
        self.guard.link().recycle(&mut self.cur);
    }
}

/// Defines the output methods an API's generated stubs call, in its `impl`
/// of its reply type, a struct whose field `held` is a [`Held`]:
/// `out_bytes`, `out_u32`, `out_i32`, `out_u64` and `out_usize` read the
/// next output and store it where the application asked (read all the same
/// at NULL), a malformed reply being `$proto`'s status; `out_new` makes a
/// returned handle with `$adopt` (id, the API's `Kind`).
#[macro_export]
macro_rules! typed_outs {
    ($proto:path, $adopt:expr) => {
        /// # Safety
        /// `p` is NULL or holds `cap` bytes.
        pub unsafe fn out_bytes(&mut self, p: *mut c_void, cap: u64) -> Result<(), i32> {
            // SAFETY: `out_bytes` needs `p` NULL or `cap` writable bytes,
            // which is this function's contract; it copies at most `cap`.
            unsafe { self.held.cur.out_bytes(p, cap) }.map_err($proto)
        }

        /// Stores the handle made for `id` at `p`, if the call asked for
        /// one, `p` is not NULL and `status` is success.
        ///
        /// # Safety
        /// `p` is NULL or a writable handle slot.
        pub unsafe fn out_new(
            &mut self,
            id: Option<u64>,
            p: *mut *mut c_void,
            kind: Kind,
            status: i32,
        ) {
            if let (Some(id), false, 0) = (id, p.is_null(), status) {
                // SAFETY: `p` is not NULL (checked above), so by this
                // function's contract it is a writable handle slot.
                unsafe { *p = $adopt(id, kind) };
            }
        }

        $crate::typed_outs!(@one $proto, out_u32, u32);
        $crate::typed_outs!(@one $proto, out_i32, i32);
        $crate::typed_outs!(@one $proto, out_u64, u64);
        $crate::typed_outs!(@one $proto, out_usize, usize);
    };
    (@one $proto:path, $name:ident, $t:ident) => {
        /// # Safety
        /// `p` is NULL or a writable value of its type.
        // An API's description may have no argument of some of the types.
        #[allow(dead_code)]
        pub unsafe fn $name(&mut self, p: *mut $t) -> Result<(), i32> {
            // SAFETY: `out` writes only through a non-NULL `p`, which this
            // function's contract makes a writable value of its type.
            unsafe { self.held.cur.out(p, |d| d.$t()) }.map_err($proto)
        }
    };
}

/// How a call went: answered, or left in the ring (the guard still held).
pub enum Sent<G>
where
    G: DerefMut,
    G::Target: HoldsLink,
{
    Answered(Held<G>),
    Posted(G),
}

impl<G> Held<G>
where
    G: DerefMut,
    G::Target: HoldsLink,
{
    /// Sends the request (and `raw`, streamed after it) and waits for the
    /// reply; a deferred call's failure the reply brings is logged under
    /// `prefix`, the API's.
    pub fn exchange(
        mut guard: G,
        enc: Encoder,
        raw: Option<&[u8]>,
        prefix: &str,
    ) -> Result<Self, LinkError> {
        let a = guard.link().exchange(enc, raw)?;
        if let Some(d) = a.deferred_news {
            log(prefix, &format!("a deferred call failed with {d}"));
        }
        Ok(Held {
            guard,
            cur: a.cursor,
            status: a.status,
            has_outputs: a.has_outputs,
        })
    }

    /// Sends a call that needs no answer: it waits for one all the same
    /// when `must_answer`, or while no call of its shape has succeeded
    /// synchronously (see [`Link::deferrable`]); otherwise it is posted,
    /// with `wake` as for [`Link::post`].
    pub fn send(
        mut guard: G,
        enc: Encoder,
        raw: Option<&[u8]>,
        shape: Shape,
        must_answer: bool,
        wake: bool,
        prefix: &str,
    ) -> Result<Sent<G>, LinkError> {
        if must_answer || !guard.link().deferrable(shape) {
            return Self::exchange(guard, enc, raw, prefix).map(Sent::Answered);
        }
        guard.link().post(enc, raw, wake)?;
        Ok(Sent::Posted(guard))
    }

    /// Records that the call of `shape` succeeded when `own`, its status,
    /// says so: later calls of that shape may be deferred.
    pub fn learn(&mut self, shape: Shape, own: i32) {
        if own == 0 {
            self.guard.link().succeeded(shape);
        }
    }

    /// The call's status, or, if it succeeded, the failure of an earlier
    /// deferred call not yet reported (which is then reported).
    pub fn status_with_deferred(&mut self) -> i32 {
        if self.status == 0 {
            let d = self.guard.link().take_deferred();
            if d != 0 {
                return d;
            }
        }
        self.status
    }
}
