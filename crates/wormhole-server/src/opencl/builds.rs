//! Program builds on threads of their own (`whBuildProgramStart`).
//!
//! A tenant serves its client with one thread, and a client process's
//! threads share one channel: a build run there (hundreds of milliseconds
//! to seconds of compiling) would hold every other thread's calls until it
//! ends, where natively they go on. So when the client asks, the build runs
//! on a thread of its own, and a user event the client waits on (with the
//! channel free) completes when it ends; `whBuildProgramResult` then gives
//! its status. OpenCL calls are thread-safe, and the build thread touches
//! nothing of the tenant's but [`Builds`].

#![allow(non_snake_case)]

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use wormhole_opencl_api::{CL_INVALID_OPERATION, CL_INVALID_VALUE, CL_SUCCESS};

use super::ffi;
use super::tenant::Tenant;

/// Builds one tenant runs at once on threads of their own; more run on the
/// tenant's thread, as before: a client cannot make the server start
/// threads without bound.
pub const MAX_BUILD_THREADS: usize = 4;

const CL_COMPLETE: i32 = 0;
const CL_INVALID_EVENT: i32 = -58;
const CL_INVALID_PROGRAM: i32 = -44;
const CL_PROGRAM_CONTEXT: u32 = 0x1161;

/// One tenant's builds in flight and their results.
#[derive(Default)]
pub struct Builds {
    threads: AtomicUsize,
    /// By the user event that announces each build: its status once it
    /// ended (`None` before). Taken by `whBuildProgramResult`.
    results: Mutex<HashMap<usize, Option<i32>>>,
}

impl Builds {
    fn results(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Option<i32>>> {
        // A build thread that panicked left the map whole (one insert).
        self.results.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What one build needs, as plain values a thread can take.
#[derive(Clone)]
struct Job {
    program: usize,
    devices: Option<Vec<usize>>,
    options: Option<CString>,
    event: usize,
    builds: Arc<Builds>,
}

impl Job {
    /// Builds, records the status, completes the event, and drops the
    /// reference to the program taken for the build.
    fn run(self) {
        let program = self.program as *mut c_void;
        let devices: Option<Vec<*mut c_void>> = self
            .devices
            .as_ref()
            .map(|d| d.iter().map(|&p| p as *mut c_void).collect());
        let (n, list) = match &devices {
            Some(d) => (d.len() as u32, d.as_ptr()),
            None => (0, std::ptr::null()),
        };
        let options = self
            .options
            .as_ref()
            .map_or(std::ptr::null(), |o| o.as_ptr());
        // SAFETY: the program is retained until the end of this function;
        // `list` holds `n` device handles from the tenant's table (or is
        // NULL with 0); `options` is NULL or a C string that lives here. No
        // callback: the client calls its own when it has the result.
        let status = unsafe {
            ffi::clBuildProgram(
                program,
                n,
                list,
                options,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        self.builds.results().insert(self.event, Some(status));
        // SAFETY: the event and the program hold a reference of ours each,
        // taken for the build and dropped here. The event's own: once its
        // status is set, the client may release its reference at once,
        // while the library is still inside this call.
        unsafe {
            ffi::clSetUserEventStatus(self.event as *mut c_void, CL_COMPLETE);
            ffi::clReleaseEvent(self.event as *mut c_void);
            ffi::clReleaseProgram(program);
        }
    }
}

/// Starts building `program` and puts in `*event` a user event that
/// completes when the build has ended (at once if it ran here).
///
/// # Safety
/// `device_list` holds `num_devices` handles or is NULL; `options` is NULL
/// or a C string; `event` is the decoder's out-slot; handles come from the
/// tenant's table.
pub unsafe fn whBuildProgramStart(
    t: &mut Tenant,
    program: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    event: *mut *mut c_void,
) -> i32 {
    if event.is_null() || (num_devices == 0) != device_list.is_null() {
        return CL_INVALID_VALUE;
    }
    // SAFETY: a program handle from the table; the answer is one handle.
    let Some(context) =
        (unsafe { super::info_value::<usize>(ffi::clGetProgramInfo, program, CL_PROGRAM_CONTEXT) })
    else {
        return CL_INVALID_PROGRAM;
    };
    let mut err = CL_SUCCESS;
    // SAFETY: a context the library named; `err` is ours.
    let ev = unsafe { ffi::clCreateUserEvent(context as *mut c_void, &mut err) };
    if err != CL_SUCCESS || ev.is_null() {
        return if err != CL_SUCCESS {
            err
        } else {
            CL_INVALID_OPERATION
        };
    }
    // SAFETY: the caller's contract on `device_list` and `options`; the
    // program and the event are retained for the build, which releases
    // them.
    let job = unsafe {
        ffi::clRetainProgram(program);
        ffi::clRetainEvent(ev);
        Job {
            program: program as usize,
            devices: (!device_list.is_null()).then(|| {
                std::slice::from_raw_parts(device_list, num_devices as usize)
                    .iter()
                    .map(|&d| d as usize)
                    .collect()
            }),
            options: (!options.is_null()).then(|| CStr::from_ptr(options).to_owned()),
            event: ev as usize,
            builds: t.builds.clone(),
        }
    };
    t.builds.results().insert(ev as usize, None);
    let builds = &t.builds;
    let threaded = builds
        .threads
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_BUILD_THREADS).then_some(n + 1)
        })
        .is_ok();
    let spawned = threaded && {
        let (job, builds) = (job.clone(), builds.clone());
        std::thread::Builder::new()
            .name("wh-build".into())
            .spawn(move || {
                job.run();
                builds.threads.fetch_sub(1, Ordering::AcqRel);
            })
            .is_ok()
    };
    if !spawned {
        if threaded {
            builds.threads.fetch_sub(1, Ordering::AcqRel);
        }
        job.run();
    }
    // SAFETY: the decoder's out-slot.
    unsafe { *event = ev };
    CL_SUCCESS
}

/// The status of the build `event` announced, once it has ended:
/// `CL_INVALID_OPERATION` before, `CL_INVALID_EVENT` for an event that
/// announced no build (or whose result was taken).
///
/// # Safety
/// `event` is a handle from the tenant's table.
pub unsafe fn whBuildProgramResult(t: &mut Tenant, event: *mut c_void) -> i32 {
    let mut results = t.builds.results();
    match results.get(&(event as usize)) {
        Some(Some(s)) => {
            let s = *s;
            results.remove(&(event as usize));
            s
        }
        Some(None) => CL_INVALID_OPERATION,
        None => CL_INVALID_EVENT,
    }
}
