//! A small OpenCL application for the isolation tests. It uses only the
//! system's libOpenCL (so the ICD loader finds our ICD through
//! `OCL_ICD_VENDORS`), prints what it does on stdout, one line per step,
//! and exits non-zero on the first OpenCL error.
//!
//! ```text
//! wormhole-probe platforms      count and name the platforms
//! wormhole-probe alloc MIB      allocate MIB of buffers, then read them in a loop
//! wormhole-probe block          wait forever on a user event (until the server dies)
//! wormhole-probe idle SECS      set up a context and queue, then sleep
//! wormhole-probe map-image      map part of an image, write through it, read back
//! ```

use std::ffi::c_void;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

type Handle = *mut c_void;

#[link(name = "OpenCL")]
extern "C" {
    fn clGetPlatformIDs(n: u32, platforms: *mut Handle, num: *mut u32) -> i32;
    fn clGetPlatformInfo(p: Handle, param: u32, size: usize, v: *mut c_void, r: *mut usize) -> i32;
    fn clGetDeviceIDs(p: Handle, ty: u64, n: u32, devices: *mut Handle, num: *mut u32) -> i32;
    fn clCreateContext(
        props: *const isize,
        n: u32,
        devices: *const Handle,
        notify: *mut c_void,
        data: *mut c_void,
        err: *mut i32,
    ) -> Handle;
    fn clCreateCommandQueue(ctx: Handle, dev: Handle, props: u64, err: *mut i32) -> Handle;
    fn clCreateBuffer(
        ctx: Handle,
        flags: u64,
        size: usize,
        host: *mut c_void,
        err: *mut i32,
    ) -> Handle;
    fn clEnqueueWriteBuffer(
        q: Handle,
        b: Handle,
        blocking: u32,
        off: usize,
        size: usize,
        ptr: *const c_void,
        n: u32,
        wl: *const Handle,
        ev: *mut Handle,
    ) -> i32;
    fn clEnqueueReadBuffer(
        q: Handle,
        b: Handle,
        blocking: u32,
        off: usize,
        size: usize,
        ptr: *mut c_void,
        n: u32,
        wl: *const Handle,
        ev: *mut Handle,
    ) -> i32;
    fn clCreateUserEvent(ctx: Handle, err: *mut i32) -> Handle;
    fn clCreateImage2D(
        ctx: Handle,
        flags: u64,
        format: *const u32,
        w: usize,
        h: usize,
        row: usize,
        host: *mut c_void,
        err: *mut i32,
    ) -> Handle;
    fn clEnqueueMapImage(
        q: Handle,
        img: Handle,
        blocking: u32,
        flags: u64,
        origin: *const usize,
        region: *const usize,
        row: *mut usize,
        slice: *mut usize,
        n: u32,
        wl: *const Handle,
        ev: *mut Handle,
        err: *mut i32,
    ) -> *mut c_void;
    fn clEnqueueUnmapMemObject(
        q: Handle,
        mem: Handle,
        ptr: *mut c_void,
        n: u32,
        wl: *const Handle,
        ev: *mut Handle,
    ) -> i32;
    fn clFinish(q: Handle) -> i32;
    fn clWaitForEvents(n: u32, events: *const Handle) -> i32;
}

const CL_PLATFORM_NAME: u32 = 0x0902;
const CL_DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;
/// Buffers are allocated in chunks of this many MiB.
const CHUNK_MIB: usize = 16;

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn ok(what: &str, s: i32) -> Result<(), String> {
    if s == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed: {s}"))
    }
}

fn platforms() -> Result<Vec<Handle>, String> {
    let mut n = 0u32;
    // SAFETY: a count query: no array (0 entries, null), and `n` is a live
    // u32 for the count.
    let s = unsafe { clGetPlatformIDs(0, std::ptr::null_mut(), &mut n) };
    // -1001 (CL_PLATFORM_NOT_FOUND_KHR) is how the loader says "none".
    if s == -1001 || n == 0 {
        return Ok(Vec::new());
    }
    ok("clGetPlatformIDs", s)?;
    let mut v = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: `v` has room for the `n` handles asked for.
    ok("clGetPlatformIDs", unsafe {
        clGetPlatformIDs(n, v.as_mut_ptr(), std::ptr::null_mut())
    })?;
    Ok(v)
}

fn platform_name(p: Handle) -> String {
    let mut buf = [0u8; 256];
    let mut len = 0usize;
    // SAFETY: `p` came from clGetPlatformIDs; `buf` is writable for the
    // `buf.len()` bytes passed, and `len` is a live out-parameter.
    let s = unsafe {
        clGetPlatformInfo(
            p,
            CL_PLATFORM_NAME,
            buf.len(),
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if s != 0 {
        return format!("<error {s}>");
    }
    String::from_utf8_lossy(&buf[..len.saturating_sub(1).min(buf.len())]).into_owned()
}

/// Context and queue on the first device of the first platform.
fn setup() -> Result<(Handle, Handle), String> {
    let p = *platforms()?.first().ok_or("no platform")?;
    let mut dev = std::ptr::null_mut();
    // SAFETY: `p` came from clGetPlatformIDs; `dev` is room for the one
    // device asked for, and the count pointer may be null.
    ok("clGetDeviceIDs", unsafe {
        clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &mut dev, std::ptr::null_mut())
    })?;
    let mut err = 0;
    // SAFETY: one valid device, no properties or callback.
    let ctx = unsafe {
        clCreateContext(
            std::ptr::null(),
            1,
            &dev,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut err,
        )
    };
    ok("clCreateContext", err)?;
    // SAFETY: `ctx` was just created on `dev` (checked); `err` is a live
    // out-parameter.
    let q = unsafe { clCreateCommandQueue(ctx, dev, 0, &mut err) };
    ok("clCreateCommandQueue", err)?;
    Ok((ctx, q))
}

fn alloc(mib: usize) -> Result<(), String> {
    let (ctx, q) = setup()?;
    let chunk = CHUNK_MIB << 20;
    let data = vec![0x5Au8; chunk];
    let mut bufs = Vec::new();
    for _ in 0..mib.div_ceil(CHUNK_MIB) {
        let mut err = 0;
        // SAFETY: a valid context; no host pointer.
        let b = unsafe { clCreateBuffer(ctx, 1, chunk, std::ptr::null_mut(), &mut err) };
        ok("clCreateBuffer", err)?;
        // Writing makes the server really hold the memory.
        // SAFETY: `data` holds `chunk` bytes.
        ok("clEnqueueWriteBuffer", unsafe {
            clEnqueueWriteBuffer(
                q,
                b,
                1,
                0,
                chunk,
                data.as_ptr().cast(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        })?;
        bufs.push(b);
    }
    say(&format!("allocated {mib} MiB"));
    let mut back = vec![0u8; chunk];
    let mut i = 0usize;
    // Calls back to back, so that a kill lands in the middle of one.
    loop {
        let b = bufs[i % bufs.len()];
        // SAFETY: `back` holds `chunk` bytes.
        ok("clEnqueueReadBuffer", unsafe {
            clEnqueueReadBuffer(
                q,
                b,
                1,
                0,
                chunk,
                back.as_mut_ptr().cast(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        })?;
        i += 1;
        if i == 1 {
            say("reading");
        }
    }
}

fn block() -> Result<(), String> {
    let (ctx, _q) = setup()?;
    let mut err = 0;
    // SAFETY: `ctx` comes from setup (checked); `err` is a live
    // out-parameter.
    let ev = unsafe { clCreateUserEvent(ctx, &mut err) };
    ok("clCreateUserEvent", err)?;
    say("blocking");
    let t = Instant::now();
    // SAFETY: one valid event. Nobody completes it: only the server's end
    // can end this wait.
    let s = unsafe { clWaitForEvents(1, &ev) };
    say(&format!(
        "clWaitForEvents returned {s} after {} ms",
        t.elapsed().as_millis()
    ));
    if s == 0 {
        return Err("a wait on an unsignalled event succeeded".into());
    }
    Ok(())
}

/// Maps `region` at `origin` of an image; returns the pointer and row pitch.
fn map(
    q: Handle,
    img: Handle,
    flags: u64,
    o: [usize; 3],
    r: [usize; 3],
) -> Result<(*mut u8, usize), String> {
    let (mut row, mut slice, mut err) = (0usize, 0usize, 0i32);
    // SAFETY: valid objects; origin and region are 3 size_t each.
    let p = unsafe {
        clEnqueueMapImage(
            q,
            img,
            1,
            flags,
            o.as_ptr(),
            r.as_ptr(),
            &mut row,
            &mut slice,
            0,
            std::ptr::null(),
            std::ptr::null_mut(),
            &mut err,
        )
    };
    ok("clEnqueueMapImage", err)?;
    Ok((p.cast(), row))
}

fn unmap(q: Handle, img: Handle, p: *mut u8) -> Result<(), String> {
    // SAFETY: `p` is what clEnqueueMapImage returned for `img` on `q`
    // (callers pass map's result), not unmapped before.
    ok("clEnqueueUnmapMemObject", unsafe {
        clEnqueueUnmapMemObject(q, img, p.cast(), 0, std::ptr::null(), std::ptr::null_mut())
    })?;
    // SAFETY: `q` is the caller's live queue, from setup.
    ok("clFinish", unsafe { clFinish(q) })
}

/// Maps a region of a 2D image, checks and changes it through the mapping,
/// then maps the whole image: a mapping must carry exactly its region.
fn map_image() -> Result<(), String> {
    let (ctx, q) = setup()?;
    const W: usize = 16;
    let format: [u32; 2] = [0x10B5, 0x10D2]; // RGBA, UNORM_INT8
    let mut data: Vec<u8> = (0..W * W * 4).map(|i| (i % 251) as u8).collect();
    let mut err = 0;
    // SAFETY: a valid context and format; `data` covers the image
    // (CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR).
    let img = unsafe {
        clCreateImage2D(
            ctx,
            1 | 0x20,
            format.as_ptr(),
            W,
            W,
            0,
            data.as_mut_ptr().cast(),
            &mut err,
        )
    };
    ok("clCreateImage2D", err)?;
    let (o, r) = ([2usize, 3, 0], [4usize, 5, 1]);
    let (p, row) = map(q, img, 3, o, r)?;
    let mut want = data.clone();
    for y in 0..r[1] {
        for x in 0..r[0] * 4 {
            let at = (o[1] + y) * W * 4 + o[0] * 4 + x;
            // SAFETY: inside the mapped region, rows `row` bytes apart; the
            // mapping is readable and writable.
            unsafe {
                let b = p.add(y * row + x);
                if *b != data[at] {
                    return Err(format!("mapped byte ({x},{y}) differs"));
                }
                *b = 0xEE;
            }
            want[at] = 0xEE;
        }
    }
    unmap(q, img, p)?;
    let (p, row) = map(q, img, 1, [0, 0, 0], [W, W, 1])?;
    for y in 0..W {
        for x in 0..W * 4 {
            // SAFETY: inside the mapped image, rows `row` bytes apart.
            if unsafe { *p.add(y * row + x) } != want[y * W * 4 + x] {
                return Err(format!(
                    "byte ({x},{y}) after unmap is not what was written"
                ));
            }
        }
    }
    unmap(q, img, p)?;
    say("map-image ok");
    Ok(())
}

fn idle(secs: u64) -> Result<(), String> {
    let _objects = setup()?;
    say("ready");
    std::thread::sleep(Duration::from_secs(secs));
    Ok(())
}

fn run(args: &[String]) -> Result<(), String> {
    let num = |i: usize| -> Result<u64, String> {
        args.get(i)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| "expected a number".to_string())
    };
    match args.first().map(String::as_str) {
        Some("platforms") => {
            let t = Instant::now();
            let ps = platforms()?;
            say(&format!(
                "platforms {} in {} ms",
                ps.len(),
                t.elapsed().as_millis()
            ));
            for p in ps {
                say(&format!("platform {}", platform_name(p)));
            }
            Ok(())
        }
        Some("alloc") => alloc(num(1)? as usize),
        Some("block") => block(),
        Some("idle") => idle(num(1)?),
        Some("map-image") => map_image(),
        _ => Err("usage: wormhole-probe platforms | alloc MIB | block | idle SECS".into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say(&format!("error: {e}"));
            ExitCode::FAILURE
        }
    }
}
