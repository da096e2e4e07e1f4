//! Program builds, compilations and links on threads of their own
//! (`whBuildProgramStart`, `whCompileProgramStart`, `whLinkProgramStart`).
//!
//! A tenant serves its client with one thread, and a client process's
//! threads share one channel: a build run there (hundreds of milliseconds
//! to seconds of compiling) would hold every other thread's calls until it
//! ends, where natively they go on. So when the client asks, the build runs
//! on a thread of its own, and a user event the client waits on (with the
//! channel free) completes when it ends; `whBuildProgramResult` then gives
//! its status. A compilation (`clCompileProgram`) goes the same way, and a
//! link (`clLinkProgram`), whose result (`whLinkProgramResult`) is the
//! program it made.
//! OpenCL calls are thread-safe, and the build thread touches nothing of
//! the tenant's but [`Builds`].

#![allow(non_snake_case)]

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use wormhole_opencl_api::{
    CL_COMPLETE, CL_INVALID_EVENT, CL_INVALID_LINKER_OPTIONS, CL_INVALID_OPERATION,
    CL_INVALID_PROGRAM, CL_INVALID_VALUE, CL_SUCCESS,
};

use super::ffi;
use super::tenant::Tenant;

/// Builds one tenant runs at once on threads of their own; more run on the
/// tenant's thread, as before: a client cannot make the server start
/// threads without bound.
pub const MAX_BUILD_THREADS: usize = 4;

const CL_PROGRAM_CONTEXT: u32 = 0x1161;

/// How a job ended: its status and, for a link, the program it made
/// (0 for none), which holds the reference the library gave until the
/// result is taken.
#[derive(Clone, Copy)]
struct Outcome {
    status: i32,
    linked: usize,
}

/// A job's place in [`Builds::results`]: whether it links, and how it
/// ended (`None` before).
type Slot = (bool, Option<Outcome>);

/// One tenant's builds in flight and their results.
#[derive(Default)]
pub struct Builds {
    threads: AtomicUsize,
    /// By the user event that announces each job. Taken by
    /// `whBuildProgramResult` or `whLinkProgramResult`.
    results: Mutex<HashMap<usize, Slot>>,
}

impl Builds {
    fn results(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Slot>> {
        // A build thread that panicked left the map whole (one insert).
        self.results.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the outcome of the ended job `event` announced, if it is of
    /// the kind asked for (`link`): `Err` with `CL_INVALID_OPERATION`
    /// before it ended, `CL_INVALID_EVENT` for an event that announced no
    /// such job (or whose result was taken).
    fn take(&self, event: *mut c_void, link: bool) -> Result<Outcome, i32> {
        let mut results = self.results();
        match results.get(&(event as usize)) {
            Some(&(l, Some(o))) if l == link => {
                results.remove(&(event as usize));
                Ok(o)
            }
            Some(&(l, None)) if l == link => Err(CL_INVALID_OPERATION),
            _ => Err(CL_INVALID_EVENT),
        }
    }
}

impl Drop for Builds {
    fn drop(&mut self) {
        // Links whose programs the client never took.
        for (_, o) in self
            .results
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            if let Some(Outcome { linked, .. }) = *o {
                if linked != 0 {
                    // SAFETY: the reference the library gave the link,
                    // which nothing else holds.
                    unsafe { ffi::clReleaseProgram(linked as *mut c_void) };
                }
            }
        }
    }
}

/// A compilation's embedded headers: programs and the names they go by.
#[derive(Clone)]
struct Headers {
    programs: Vec<usize>,
    names: Option<Vec<CString>>,
}

/// What a job does, with the handles it holds a reference to each.
#[derive(Clone)]
enum Work {
    Build { program: usize },
    Compile { program: usize, headers: Headers },
    Link { context: usize, inputs: Vec<usize> },
}

impl Work {
    /// The programs the job holds (a link's context apart).
    fn programs(&self) -> impl Iterator<Item = usize> + '_ {
        let (first, rest): (Option<usize>, &[usize]) = match self {
            Work::Build { program } => (Some(*program), &[]),
            Work::Compile { program, headers } => (Some(*program), &headers.programs),
            Work::Link { inputs, .. } => (None, inputs),
        };
        first.into_iter().chain(rest.iter().copied())
    }

    fn links(&self) -> bool {
        matches!(self, Work::Link { .. })
    }
}

/// What one job needs, as plain values a thread can take. The options are
/// the application's with kernel-argument information asked for
/// (`programs.rs`).
#[derive(Clone)]
struct Job {
    work: Work,
    devices: Option<Vec<usize>>,
    options: Option<CString>,
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
    /// Runs the job, records how it ended, completes the event, and drops
    /// the references taken for the job.
    fn run(self) {
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
        let mut linked = 0;
        // SAFETY: the programs (and a link's context) are retained until
        // the end of this function; `list` holds the device handles from
        // the tenant's table (or is NULL with 0); `options` and the header
        // names are NULL or C strings that live here. No callback: the
        // client calls its own when it has the result.
        let status = unsafe {
            match &self.work {
                Work::Build { program } => {
                    super::retry::build_with_retry(*program as *mut c_void, || {
                        ffi::clBuildProgram(
                            *program as *mut c_void,
                            devices.len() as u32,
                            list,
                            options,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                        )
                    })
                }
                Work::Compile { program, headers } => {
                    let programs: Vec<*mut c_void> =
                        headers.programs.iter().map(|&p| p as *mut c_void).collect();
                    let names: Option<Vec<*const c_char>> = headers
                        .names
                        .as_ref()
                        .map(|n| n.iter().map(|c| c.as_ptr()).collect());
                    ffi::clCompileProgram(
                        *program as *mut c_void,
                        devices.len() as u32,
                        list,
                        options,
                        programs.len() as u32,
                        if programs.is_empty() {
                            std::ptr::null()
                        } else {
                            programs.as_ptr()
                        },
                        names.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                }
                Work::Link { context, inputs } => {
                    let programs: Vec<*mut c_void> =
                        inputs.iter().map(|&p| p as *mut c_void).collect();
                    let mut err = CL_SUCCESS;
                    let link = |options: *const c_char, err: &mut i32| {
                        ffi::clLinkProgram(
                            *context as *mut c_void,
                            devices.len() as u32,
                            list,
                            options,
                            programs.len() as u32,
                            programs.as_ptr(),
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            err,
                        ) as usize
                    };
                    linked = link(options, &mut err);
                    // As `programs::clLinkProgram`: a library that refuses
                    // the added option links with the application's alone.
                    if linked == 0 && err == CL_INVALID_LINKER_OPTIONS && self.options.is_some() {
                        let app = self
                            .options
                            .as_deref()
                            .and_then(super::programs::without_arg_info);
                        linked = link(
                            app.as_ref().map_or(std::ptr::null(), |o| o.as_ptr()),
                            &mut err,
                        );
                    }
                    err
                }
            }
        };
        let links = self.work.links();
        self.builds
            .results()
            .insert(self.event, (links, Some(Outcome { status, linked })));
        // SAFETY: the event, the programs and a link's context hold a
        // reference of ours each, taken for the job and dropped here. The
        // event's own: once its status is set, the client may release its
        // reference at once, while the library is still inside this call.
        unsafe {
            ffi::clSetUserEventStatus(self.event as *mut c_void, CL_COMPLETE);
            ffi::clReleaseEvent(self.event as *mut c_void);
            for p in self.work.programs() {
                ffi::clReleaseProgram(p as *mut c_void);
            }
            if let Work::Link { context, .. } = self.work {
                ffi::clReleaseContext(context as *mut c_void);
            }
        }
    }
}

/// A list of `n` handles from the decoder, NULL with 0.
///
/// # Safety
/// `list` is NULL or holds `n` handles.
unsafe fn list(list: *const *mut c_void, n: u32) -> Option<Vec<usize>> {
    // SAFETY: non-NULL here, so `list` is the decoder's vector of at least `n`
    // table handles (`Tenant::handles`, `check_count`).
    (!list.is_null()).then(|| unsafe {
        std::slice::from_raw_parts(list, n as usize)
            .iter()
            .map(|&d| d as usize)
            .collect()
    })
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
    let work = Work::Build {
        program: program as usize,
    };
    // SAFETY: `program` is a table handle, kind Program; `device_list` is the
    // decoder's (`Tenant::handles` refuses NULL and unknown ids, `check_count`
    // the count), `options` NULL or a CString (`tenant::cstr`), `event` NULL or
    // the decoder's slot (`out_new`): what `start` needs, and it refuses a NULL
    // `event`.
    unsafe { start(t, work, num_devices, device_list, options, event) }
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
    // SAFETY: `n` > 0 only with both lists non-NULL (checked above);
    // `input_headers` then holds at least `n` table handles, kind Program
    // (`check_count`), and `names` exactly `n` NUL-terminated strings
    // (`custom::header_names` refuses another count and interior NULs).
    let headers = unsafe {
        Headers {
            programs: list(input_headers, num_input_headers).unwrap_or_default(),
            names: (n > 0).then(|| {
                std::slice::from_raw_parts(names, n)
                    .iter()
                    .map(|&c| CStr::from_ptr(c).to_owned())
                    .collect()
            }),
        }
    };
    let work = Work::Compile {
        program: program as usize,
        headers,
    };
    // SAFETY: `program`, `device_list`, `options` and `event` as in
    // `whBuildProgramStart`, what `start` needs.
    unsafe { start(t, work, num_devices, device_list, options, event) }
}

/// [`whBuildProgramStart`] for `clLinkProgram`.
///
/// # Safety
/// As for [`whBuildProgramStart`], and `input_programs` holds
/// `num_input_programs` handles or is NULL.
#[allow(clippy::too_many_arguments)]
pub unsafe fn whLinkProgramStart(
    t: &mut Tenant,
    context: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    num_input_programs: u32,
    input_programs: *const *mut c_void,
    event: *mut *mut c_void,
) -> i32 {
    // The library's answer to a link of nothing, given before a thread
    // runs it.
    if num_input_programs == 0 || input_programs.is_null() {
        return CL_INVALID_VALUE;
    }
    let work = Work::Link {
        context: context as usize,
        // SAFETY: non-NULL (checked above), so the decoder's vector of at least
        // `num_input_programs` table handles, kind Program (`check_count`).
        inputs: unsafe { list(input_programs, num_input_programs) }.unwrap_or_default(),
    };
    // SAFETY: `context` is a table handle, kind Context; `device_list`,
    // `options` and `event` as in `whBuildProgramStart`, what `start` needs.
    unsafe { start(t, work, num_devices, device_list, options, event) }
}

/// Starts a job (see the module's text).
///
/// # Safety
/// As for [`whBuildProgramStart`]; `work`'s handles come from the tenant's
/// table.
unsafe fn start(
    t: &mut Tenant,
    work: Work,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    event: *mut *mut c_void,
) -> i32 {
    if event.is_null() || (num_devices == 0) != device_list.is_null() {
        return CL_INVALID_VALUE;
    }
    let context = match &work {
        Work::Link { context, .. } => *context,
        Work::Build { program } | Work::Compile { program, .. } => {
            // SAFETY: a program handle from the table; the answer is one
            // handle.
            match unsafe {
                super::info_value::<usize>(
                    ffi::clGetProgramInfo,
                    *program as *mut c_void,
                    CL_PROGRAM_CONTEXT,
                )
            } {
                Some(c) => c,
                None => return CL_INVALID_PROGRAM,
            }
        }
    };
    let mut err = CL_SUCCESS;
    // SAFETY: a context from the table or one the library named; `err` is
    // ours.
    let ev = unsafe { ffi::clCreateUserEvent(context as *mut c_void, &mut err) };
    if err != CL_SUCCESS || ev.is_null() {
        return if err != CL_SUCCESS {
            err
        } else {
            CL_INVALID_OPERATION
        };
    }
    // SAFETY: `device_list` is non-NULL only with `num_devices` > 0 (checked
    // above) and then holds that many table handles (`check_count`); `options`
    // is NULL or a CString (`tenant::cstr`). The programs and context (table
    // handles) and `ev` (just made) are retained for the job, which releases
    // them.
    let job = unsafe {
        for p in work.programs() {
            ffi::clRetainProgram(p as *mut c_void);
        }
        if let Work::Link { context, .. } = work {
            ffi::clRetainContext(context as *mut c_void);
        }
        ffi::clRetainEvent(ev);
        Job {
            devices: list(device_list, num_devices),
            options: super::programs::thread_options(t, options),
            event: ev as usize,
            builds: t.builds.clone(),
            work,
        }
    };
    t.builds
        .results()
        .insert(ev as usize, (job.work.links(), None));
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

/// The status of the build or compilation `event` announced, once it has
/// ended: `CL_INVALID_OPERATION` before, `CL_INVALID_EVENT` for an event
/// that announced no such job (or whose result was taken).
///
/// # Safety
/// `event` is a handle from the tenant's table.
pub unsafe fn whBuildProgramResult(t: &mut Tenant, event: *mut c_void) -> i32 {
    t.builds.take(event, false).map_or_else(|e| e, |o| o.status)
}

/// The program the link `event` announced made (its reference now the
/// client's), with its status in `*err`, as [`whBuildProgramResult`].
/// A program made by a link that failed is released here: the client
/// adopts programs of successful calls only, as for `clLinkProgram` itself.
///
/// # Safety
/// `event` is a handle from the tenant's table; `err` is the decoder's
/// errcode slot.
pub unsafe fn whLinkProgramResult(
    t: &mut Tenant,
    event: *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    let (status, mut linked) = match t.builds.take(event, true) {
        Ok(o) => (o.status, o.linked),
        Err(e) => (e, 0),
    };
    if status != CL_SUCCESS && linked != 0 {
        // SAFETY: the reference the library gave the link, ours alone.
        unsafe { ffi::clReleaseProgram(linked as *mut c_void) };
        linked = 0;
    }
    if !err.is_null() {
        // SAFETY: the decoder's slot.
        unsafe { *err = status };
    }
    linked as *mut c_void
}
