//! Bad input from one tenant: forged and foreign handles, out-of-range
//! function ids and sizes, malformed frames, lying ring positions. Each gets
//! a `CL_INVALID_*` answer (or cuts that tenant off), while a second tenant
//! keeps getting correct answers throughout.

use std::os::fd::AsRawFd;
use std::time::Duration;

use wormhole_isolation_tests::{
    alive, create_buffer_frame, read_buffer_frame, Neighbour, RawClient, Server, Session,
    SESSION_BUFFER,
};
use wormhole_opencl_api::{
    func, CL_INVALID_COMMAND_QUEUE, CL_INVALID_CONTEXT, CL_INVALID_EVENT, CL_INVALID_MEM_OBJECT,
    CL_INVALID_OPERATION, CL_INVALID_PLATFORM, CL_INVALID_VALUE, CL_OUT_OF_HOST_MEMORY, CL_SUCCESS,
};
use wormhole_server::harness::{triple, Frame};
use wormhole_server::opencl::tenant::SERVER_ID_BASE;
use wormhole_transport::ring;

/// Tenant A's bad requests (on its queue `q`, buffer `buf` and context
/// `ctx`; `foreign` is B's buffer), each with the code it must get. A
/// table, one entry per case, so it stays one function.
#[allow(clippy::too_many_lines)]
fn bad_frames(q: u64, buf: u64, ctx: u64, foreign: u64) -> Vec<(&'static str, Vec<u8>, i32)> {
    vec![
        (
            "forged id",
            read_buffer_frame(q, 0xdead_beef, 0, 16),
            CL_INVALID_MEM_OBJECT,
        ),
        (
            "foreign id (B's buffer)",
            read_buffer_frame(q, foreign, 0, 16),
            CL_INVALID_MEM_OBJECT,
        ),
        (
            "forged server-range id",
            read_buffer_frame(q, SERVER_ID_BASE + 12345, 0, 16),
            CL_INVALID_MEM_OBJECT,
        ),
        (
            "queue id as a buffer",
            read_buffer_frame(q, q, 0, 16),
            CL_INVALID_MEM_OBJECT,
        ),
        (
            "buffer id as a queue",
            read_buffer_frame(buf, buf, 0, 16),
            CL_INVALID_COMMAND_QUEUE,
        ),
        (
            "NULL buffer",
            read_buffer_frame(q, 0, 0, 16),
            CL_INVALID_MEM_OBJECT,
        ),
        (
            "read past the end",
            read_buffer_frame(q, buf, 0, 2 * SESSION_BUFFER as u64),
            CL_INVALID_VALUE,
        ),
        (
            "offset 2^60",
            read_buffer_frame(q, buf, 1 << 60, 16),
            CL_INVALID_VALUE,
        ),
        // A size the server will not allocate is refused before the call.
        (
            "size 2^60",
            read_buffer_frame(q, buf, 0, 1 << 60),
            CL_OUT_OF_HOST_MEMORY,
        ),
        (
            "context as a platform",
            Frame::new(func::clGetPlatformInfo)
                .h(ctx)
                .info(0x0902, 64)
                .done(),
            CL_INVALID_PLATFORM,
        ),
        (
            "buffer id as a context",
            create_buffer_frame(buf, 50),
            CL_INVALID_CONTEXT,
        ),
        (
            "function id out of range",
            Frame::new(100_000).done(),
            CL_INVALID_OPERATION,
        ),
        (
            "function id u32::MAX",
            Frame::new(u32::MAX).done(),
            CL_INVALID_VALUE,
        ),
        ("empty frame", Vec::new(), CL_INVALID_VALUE),
        (
            "truncated frame",
            read_buffer_frame(q, buf, 0, 16)[..20].to_vec(),
            CL_INVALID_VALUE,
        ),
        (
            "trailing bytes",
            [read_buffer_frame(q, buf, 0, 16), vec![0; 5]].concat(),
            CL_INVALID_VALUE,
        ),
        (
            "write claiming 2^60 bytes with 16 sent",
            Frame::new(func::clEnqueueWriteBuffer)
                .h(q)
                .h(buf)
                .u32(1)
                .u64(0)
                .u64(1 << 60)
                .opt(Some(&[0; 16]))
                .no_events()
                .done(),
            CL_INVALID_VALUE,
        ),
        (
            "wait list shorter than its count",
            Frame::new(func::clWaitForEvents).u32(5).ids(&[]).done(),
            CL_INVALID_VALUE,
        ),
        (
            "NULL inside a wait list",
            Frame::new(func::clWaitForEvents).u32(1).ids(&[0]).done(),
            CL_INVALID_EVENT,
        ),
        (
            "list length prefix 2^61",
            Frame::new(func::clWaitForEvents)
                .u32(1)
                .u8(1)
                .u64(1 << 61)
                .done(),
            CL_INVALID_VALUE,
        ),
        (
            "new id already in use",
            create_buffer_frame(ctx, buf),
            CL_INVALID_VALUE,
        ),
        (
            "new id in the server's range",
            create_buffer_frame(ctx, SERVER_ID_BASE),
            CL_INVALID_VALUE,
        ),
        (
            "rectangle read past the end of the buffer",
            Frame::new(func::clEnqueueReadBufferRect)
                .h(q)
                .h(buf)
                .u32(1)
                .opt(Some(&triple(0, 4000, 0)))
                .opt(Some(&triple(0, 0, 0)))
                .opt(Some(&triple(64, 2, 1)))
                .u64(64)
                .u64(0)
                .u64(64)
                .u64(0)
                .b(true)
                .no_events()
                .done(),
            CL_INVALID_VALUE,
        ),
        (
            "unmap of a mapping never made",
            // Map id 99, no written-back bytes follow, then queue and buffer.
            Frame::new(func::clEnqueueUnmapMemObject)
                .u64(99)
                .b(false)
                .u64(0)
                .h(q)
                .h(buf)
                .no_events()
                .done(),
            CL_INVALID_VALUE,
        ),
    ]
}

#[test]
fn forged_handles_and_sizes_get_invalid_codes_while_a_neighbour_is_served() {
    let server = Server::start().expect("server");
    let mut b = Neighbour::open(&server.socket).expect("tenant B");
    b.ok();
    // B makes an object under an id that A never uses.
    let foreign = 777;
    b.make_buffer(foreign);

    let mut a = Session::open(&server.socket).expect("tenant A");
    let (q, buf, ctx) = (a.queue, a.buffer, a.context);
    let cases = bad_frames(q, buf, ctx, foreign);
    for (what, frame, want) in &cases {
        let got = a.client.status(frame).expect(what);
        assert_eq!(got, *want, "{what}");
        b.ok();
    }
    // A is still served normally after all that.
    assert!(a.round_trip(9).expect("A after bad input"));
    // Releases must match references: the second release of A's buffer,
    // and any release of an id the server assigned (an alias the client
    // holds no reference on), are refused rather than passed on.
    let release = Frame::new(func::clReleaseMemObject).h(buf).done();
    assert_eq!(a.client.status(&release).expect("release"), CL_SUCCESS);
    assert_eq!(
        a.client.status(&release).expect("release again"),
        CL_INVALID_MEM_OBJECT
    );
    b.ok();
}

/// The release of an alias must not drop the references the library's own
/// objects hold: here a context released by the client but kept alive by
/// its queue, then named again through a query.
#[test]
fn releasing_an_alias_cannot_free_what_others_use() {
    let server = Server::start().expect("server");
    let mut a = Session::open(&server.socket).expect("tenant");
    let release_ctx = |id| Frame::new(func::clReleaseContext).h(id).done();
    assert_eq!(
        a.client.status(&release_ctx(a.context)).expect("release"),
        CL_SUCCESS
    );
    // The buffer's context now has no client id: the query names it anew.
    let alias = a
        .info_u64(func::clGetMemObjectInfo, a.buffer, 0x1106)
        .expect("CL_MEM_CONTEXT");
    assert!(
        alias >= SERVER_ID_BASE,
        "expected a server-assigned id, got {alias}"
    );
    for _ in 0..3 {
        let s = a.client.status(&release_ctx(alias)).expect("release alias");
        assert_eq!(s, CL_INVALID_CONTEXT);
    }
    // The queue and buffer (and so their context) still work.
    assert!(a.round_trip(3).expect("after alias releases"));
}

/// A raw client of `server`, and the tenant the server started for it.
fn raw_tenant(server: &Server) -> (RawClient, i32) {
    let before = server.tenants();
    let a = RawClient::connect(&server.socket).expect("client");
    let tenant = server
        .new_tenant(&before, Duration::from_secs(5))
        .expect("tenant");
    (a, tenant)
}

/// Protocol violations below the frame level cut the offending tenant off;
/// the tenant process exits and the neighbour is untouched.
#[test]
fn transport_violations_cut_the_tenant_off() {
    let server = Server::start().expect("server");
    let mut b = Neighbour::open(&server.socket).expect("neighbour");
    b.ok();

    // 1. A frame length over the server's limit.
    let (mut a, tenant) = raw_tenant(&server);
    let huge = u64::MAX.to_le_bytes();
    // Write the raw length prefix with no frame behind it: the channel's
    // own send would refuse nothing, so go one level down.
    ring_write(&a, &huge);
    assert!(
        a.cut_off_within(Duration::from_secs(5)),
        "oversized frame not cut off"
    );
    wait_gone(tenant);
    b.ok();

    // 2. A lying ring record: its header claims more than the ring holds.
    let (mut a, tenant) = raw_tenant(&server);
    let map = Mapping::new(&a);
    map.store_u64(RING_DATA, ring::record_header(u32::MAX));
    map.wake_request_ring();
    assert!(
        a.cut_off_within(Duration::from_secs(5)),
        "lying record header not cut off"
    );
    wait_gone(tenant);
    b.ok();

    // 3. Shrinking the shared memory under the server (which would make its
    // reads fault): the region is sealed, so the client cannot.
    let a = RawClient::connect(&server.socket).expect("client");
    // SAFETY: ftruncate on a descriptor we own.
    let r = unsafe { libc::ftruncate(a.region_fd.as_raw_fd(), 0) };
    assert_eq!(r, -1, "a client could shrink the shared region");
    b.ok();
}

/// A second mapping of a client's shared region, for writing what a
/// hostile client would write into the ring headers.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(c: &RawClient) -> Self {
        let len = c.layout.total().expect("layout");
        // SAFETY: a fresh shared mapping of a file we hold; unmapped on drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                c.region_fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        Mapping {
            ptr: ptr.cast(),
            len,
        }
    }

    fn store_u64(&self, offset: usize, v: u64) {
        assert!(offset + 8 <= self.len);
        // SAFETY: in bounds and 8-aligned (ring headers are page-aligned).
        unsafe {
            (*(self.ptr.add(offset) as *const std::sync::atomic::AtomicU64))
                .store(v, std::sync::atomic::Ordering::SeqCst)
        };
    }

    /// Bumps the request ring's data sequence and wakes its futex, as a
    /// producer does after publishing.
    fn wake_request_ring(&self) {
        assert!(ring::DATA_SEQ_OFFSET + 4 <= self.len);
        // SAFETY: in bounds (above) and 4-aligned (a field of the header).
        let seq = unsafe {
            &*(self.ptr.add(ring::DATA_SEQ_OFFSET) as *const std::sync::atomic::AtomicU32)
        };
        seq.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: FUTEX_WAKE on a shared word; no memory is written.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                seq as *const _ as *const u32,
                libc::FUTEX_WAKE,
                i32::MAX,
                std::ptr::null::<libc::timespec>(),
                std::ptr::null::<u32>(),
                0,
            )
        };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the range mapped in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The request ring's data area follows its header page.
const RING_DATA: usize = ring::HEADER_BYTES;

/// Writes bytes into the request ring as one record, as its producer would.
fn ring_write(c: &RawClient, bytes: &[u8]) {
    let map = Mapping::new(c);
    assert!(RING_DATA + 8 + bytes.len() <= map.len);
    // SAFETY: in bounds (above); the record's payload follows its header word.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), map.ptr.add(RING_DATA + 8), bytes.len())
    };
    let len = u32::try_from(bytes.len()).expect("a short test record");
    map.store_u64(RING_DATA, ring::record_header(len));
    map.wake_request_ring();
}

fn wait_gone(pid: i32) {
    for _ in 0..500 {
        if !alive(pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("tenant {pid} still running after a protocol violation");
}
