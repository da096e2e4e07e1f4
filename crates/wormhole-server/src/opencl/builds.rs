//! Program builds and compilations on threads of their own
//! (`whBuildProgramStart`, `whCompileProgramStart`).
//!
//! A tenant serves its client with one thread, and a client process's
//! threads share one channel: a build run there (hundreds of milliseconds
//! to seconds of compiling) would hold every other thread's calls until it
//! ends, where natively they go on. So when the client asks, the build runs
//! on a thread of its own, and a user event the client waits on (with the
//! channel free) completes when it ends; `whBuildProgramResult` then gives
//! its status. A compilation (`clCompileProgram`) goes the same way.
//! OpenCL calls are thread-safe, and the build thread touches nothing of
//! the tenant's but [`Builds`].

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

/// A compilation's embedded headers: programs and the names they go by.
#[derive(Clone)]
struct Headers {
    programs: Vec<usize>,
    names: Option<Vec<CString>>,
}

/// What one build needs, as plain values a thread can take.
#[derive(Clone)]
struct Job {
    program: usize,
    devices: Option<Vec<usize>>,
    options: Option<CString>,
    /// Some: a compilation (`clCompileProgram`) with these headers.
    compile: Option<Headers>,
    event: usize,
    builds: Arc<Builds>,
}

/// Handles as the library takes them, or NULL for none.
fn handles(v: &Option<Vec<usize>>) -> (Vec<*mut c_void>, bool) {
    match v {
        Some(v) => (v.iter().map(|&p| p as *mut c_void).collect(), true),
        None => (Vec::new(), false),
    }
}

impl Job {
    /// Builds or compiles, records the status, completes the event, and
    /// drops the references taken for the job.
    fn run(self) {
        let program = self.program as *mut c_void;
        let (devices, some) = handles(&self.devices);
        let list = if some {
            devices.as_ptr()
        } else {
            std::ptr::null()
        };
        let options = self
            .options
            .as_ref()
            .map_or(std::ptr::null(), |o| o.as_ptr());
        // SAFETY: the program (and a compilation's headers) are retained
        // until the end of this function; `list` holds the device handles
        // from the tenant's table (or is NULL with 0); `options` and the
        // header names are NULL or C strings that live here. No callback:
        // the client calls its own when it has the result.
        let status = unsafe {
            match &self.compile {
                None => ffi::clBuildProgram(
                    program,
                    devices.len() as u32,
                    list,
                    options,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                ),
                Some(h) => {
                    let headers: Vec<*mut c_void> =
                        h.programs.iter().map(|&p| p as *mut c_void).collect();
                    let names: Option<Vec<*const c_char>> = h
                        .names
                        .as_ref()
                        .map(|n| n.iter().map(|c| c.as_ptr()).collect());
                    ffi::clCompileProgram(
                        program,
                        devices.len() as u32,
                        list,
                        options,
                        headers.len() as u32,
                        if headers.is_empty() {
                            std::ptr::null()
                        } else {
                            headers.as_ptr()
                        },
                        names.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                }
            }
        };
        self.builds.results().insert(self.event, Some(status));
        // SAFETY: the event, the program and the headers hold a reference
        // of ours each, taken for the job and dropped here. The event's
        // own: once its status is set, the client may release its reference
        // at once, while the library is still inside this call.
        unsafe {
            ffi::clSetUserEventStatus(self.event as *mut c_void, CL_COMPLETE);
            ffi::clReleaseEvent(self.event as *mut c_void);
            ffi::clReleaseProgram(program);
            for &h in self.compile.iter().flat_map(|h| &h.programs) {
                ffi::clReleaseProgram(h as *mut c_void);
            }
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
    // SAFETY: the caller's contract.
    unsafe { start(t, program, num_devices, device_list, options, None, event) }
}

/// [`whBuildProgramStart`] for `clCompileProgram`.
///
/// # Safety
/// As for [`whBuildProgramStart`], and `input_headers` holds
/// `num_input_headers` handles and `names` as many C strings, or either is
/// NULL.
#[allow(clippy::too_many_arguments)]
pub unsafe fn whCompileProgramStart(
    t: &mut Tenant,
    program: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    num_input_headers: u32,
    input_headers: *const *mut c_void,
    names: *const *const c_char,
    event: *mut *mut c_void,
) -> i32 {
    if (num_input_headers == 0) != input_headers.is_null()
        || (num_input_headers == 0) != names.is_null()
    {
        return CL_INVALID_VALUE;
    }
    let n = num_input_headers as usize;
    let headers = if n == 0 {
        Headers {
            programs: Vec::new(),
            names: None,
        }
    } else {
        // SAFETY: the caller's contract: `n` handles and `n` C strings.
        unsafe {
            Headers {
                programs: std::slice::from_raw_parts(input_headers, n)
                    .iter()
                    .map(|&p| p as usize)
                    .collect(),
                names: Some(
                    std::slice::from_raw_parts(names, n)
                        .iter()
                        .map(|&c| CStr::from_ptr(c).to_owned())
                        .collect(),
                ),
            }
        }
    };
    // SAFETY: the caller's contract.
    unsafe {
        start(
            t,
            program,
            num_devices,
            device_list,
            options,
            Some(headers),
            event,
        )
    }
}

/// Starts a job (see the module's text).
///
/// # Safety
/// As for [`whBuildProgramStart`]; `compile`'s programs come from the
/// tenant's table.
unsafe fn start(
    t: &mut Tenant,
    program: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    compile: Option<Headers>,
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
    // programs and the event are retained for the job, which releases
    // them.
    let job = unsafe {
        ffi::clRetainProgram(program);
        for &h in compile.iter().flat_map(|h| &h.programs) {
            ffi::clRetainProgram(h as *mut c_void);
        }
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
            compile,
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
