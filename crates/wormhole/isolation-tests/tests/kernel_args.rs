//! Kernel arguments and launches the OpenCL library does not check, and
//! the memory a tenant's programs take (issue 34). PoCL 3.1 crashes the
//! tenant (SIGSEGV, or an assertion at the launch) on most of these when
//! they reach it; through Wormhole each must get an error code, with the
//! tenant alive (every case is followed by a launch whose result is read
//! back) and a neighbour served. Where native PoCL does not crash, the
//! codes are native's (compared line by line).

use std::process::Command;
use std::time::Duration;

use wormhole_isolation_tests::{compile_c, Neighbour, Server, Session};
use wormhole_opencl_api::{func, CL_INVALID_MEM_OBJECT, CL_SUCCESS};
use wormhole_server::harness::Frame;

/// clSetKernelArg of `kernel`'s argument `index` to the bytes of `value`
/// (by value, as for a scalar).
fn set_arg_bytes(kernel: u64, index: u32, value: &[u8]) -> Vec<u8> {
    Frame::new(func::clSetKernelArg)
        .h(kernel)
        .u32(index)
        .u64(value.len() as u64)
        .u8(1)
        .bytes(value)
        .done()
}

/// What `kernel_args args` prints through Wormhole, for a program from
/// source or from a binary alike: argument information and build options
/// as natively for a program built with options "" (the tenant built it
/// with `-cl-kernel-arg-info` added); every forged handle refused
/// (`CL_INVALID_MEM_OBJECT`, `CL_INVALID_SAMPLER`, `CL_INVALID_ARG_VALUE`
/// for an object of the wrong kind), the kernel's arguments unchanged
/// (each case's launch writes its own number, 105 + case), local memory
/// past the device's and work sizes past `size_t` refused at the launch
/// with the specification's codes, rectangles past the buffer with
/// `CL_INVALID_VALUE`; a buffer and an image released after they were set
/// are still there for the launch.
const EXPECTED: &[&str] = &[
    "arginfo: -19",
    "options: 0 '' 1",
    "global_raw: set -38 launch 0 value 105",
    "global_released: set -38 launch 0 value 106",
    "global_forged: set -38 launch 0 value 107",
    "global_sampler: set -38 launch 0 value 108",
    "constant_raw: set -38 launch 0 value 109",
    "constant_released: set -38 launch 0 value 110",
    "constant_forged: set -38 launch 0 value 111",
    "local_raw: set -50 launch 0 value 112",
    "local_huge: set 0 launch -5 value -1",
    "local_past_device: set 0 launch -5 value -1",
    "local_device: set 0 launch 0 value 115",
    "sampler_raw: set -41 launch 0 value 116",
    "sampler_released: set -41 launch 0 value 117",
    "sampler_buffer: set -41 launch 0 value 118",
    "image_raw: set -38 launch 0 value 119",
    "image_released: set -38 launch 0 value 120",
    "image_buffer: set -50 launch 0 value 121",
    "image_sampler: set -38 launch 0 value 122",
    "released_after_set: launch 0 finish 0",
    "dim0: launch -53",
    "dim4: launch -53",
    "size_max_cubed: launch -63",
    "items_past_size_t: launch -63",
    "offset_past_size_t: launch -56",
    "rect_read: -30",
    "rect_write: -30",
    "rect_copy: -30",
    "after: launch 0 value 12",
];

/// The cases native PoCL 3.1 survives and answers as the specification
/// says (measured; the others crash it, abort it, run for ever, or, for
/// `offset_past_size_t` and `sampler_buffer`, run where the specification
/// refuses).
const NATIVE_SAFE: &[&str] = &[
    "arginfo",
    "options",
    "local_raw",
    "local_device",
    "dim0",
    "dim4",
    "rect_read",
    "rect_write",
    "rect_copy",
];

fn run_lines(cmd: &mut Command) -> Vec<String> {
    let out = cmd.output().expect("run kernel_args");
    assert!(
        out.status.success(),
        "kernel_args failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The cases through a real application (the ICD): raw addresses,
/// released and forged handles, objects of the wrong kind, on a program
/// built without options and on one loaded from a binary.
#[test]
fn forged_kernel_arguments_and_unbounded_launches_are_refused_with_the_tenant_alive() {
    let prog = compile_c("kernel_args").expect("compile kernel_args.c");
    let server = Server::start().expect("server");
    let mut b = Neighbour::open(&server.socket).expect("neighbour");
    b.ok();
    for from in ["src", "bin"] {
        let mut cmd = Command::new(&prog.bin);
        cmd.args(["args", from]);
        server.client_env(&mut cmd);
        let got = run_lines(&mut cmd);
        assert_eq!(got, EXPECTED, "through Wormhole, program from {from}");
        b.ok();

        let mut native = Command::new(&prog.bin);
        native.args(["args", from]).args(NATIVE_SAFE);
        native
            .env_remove("OCL_ICD_VENDORS")
            .env_remove("WORMHOLE_SERVER");
        let native = run_lines(&mut native);
        let ours: Vec<&String> = got
            .iter()
            .filter(|l| NATIVE_SAFE.iter().any(|c| l.starts_with(&format!("{c}:"))))
            .collect();
        // Native's lines bar the last ("after"), whose case number is the
        // same either way.
        assert_eq!(
            ours,
            native[..native.len() - 1].iter().collect::<Vec<_>>(),
            "native PoCL, program from {from}"
        );
    }
    assert!(
        !server.log().contains("panicked"),
        "server log: {}",
        server.log()
    );
}

/// A raw-protocol client names, as a buffer argument, ids it does not hold:
/// made up, the neighbour's, its own released one; and raw bytes. Each is
/// `CL_INVALID_MEM_OBJECT`; the kernel then runs with the argument it had.
#[test]
fn kernel_argument_ids_not_held_are_refused() {
    let server = Server::start().expect("server");
    let mut b = Neighbour::open(&server.socket).expect("neighbour");
    let neighbours = 777;
    b.make_buffer(neighbours);
    let mut a = Session::open(&server.socket).expect("tenant A");
    let src = b"__kernel void k(__global int *a, int s) { a[0] = s; }";
    let (program, kernel, gone) = (a.fresh(), a.fresh(), a.fresh());
    let calls = [
        Frame::new(func::clCreateProgramWithSource)
            .h(a.context)
            .u32(1)
            .b(true)
            .u32(1)
            .bytes(src)
            .u64(program)
            .done(),
        // No options, no callback.
        Frame::new(func::clBuildProgram)
            .h(program)
            .u32(0)
            .b(false)
            .opt(None)
            .b(false)
            .b(false)
            .done(),
        Frame::new(func::clCreateKernel)
            .h(program)
            .opt(Some(b"k"))
            .u64(kernel)
            .done(),
        Frame::new(func::clCreateBuffer)
            .h(a.context)
            .u64(1)
            .u64(64)
            .u8(0)
            .u64(gone)
            .done(),
        Frame::new(func::clReleaseMemObject).h(gone).done(),
    ];
    for (i, f) in calls.iter().enumerate() {
        assert_eq!(a.client.status(f).expect("setup"), CL_SUCCESS, "setup {i}");
    }
    let set_handle = |id: u64| {
        Frame::new(func::clSetKernelArg)
            .h(kernel)
            .u32(0)
            .u64(8)
            .u8(2)
            .u8(0)
            .h(id)
            .done()
    };
    let set_int = set_arg_bytes(kernel, 1, &42i32.to_le_bytes());
    let launch = Frame::new(func::clEnqueueNDRangeKernel)
        .h(a.queue)
        .h(kernel)
        .u32(1)
        .opt(None)
        .opt(Some(&1u64.to_le_bytes()))
        .opt(None)
        .no_events()
        .done();
    assert_eq!(a.client.status(&set_handle(a.buffer)).expect("set"), 0);
    assert_eq!(a.client.status(&set_int).expect("set"), 0);
    let raw = set_arg_bytes(kernel, 0, &0xdea_dbee_f000_u64.to_le_bytes());
    for (what, f) in [
        ("made-up id", set_handle(0xdead)),
        ("the neighbour's buffer", set_handle(neighbours)),
        ("a released buffer", set_handle(gone)),
        ("a server-range id", set_handle(1 << 62)),
        ("raw bytes", raw),
    ] {
        assert_eq!(
            a.client.status(&f).expect("set"),
            CL_INVALID_MEM_OBJECT,
            "{what}"
        );
        assert_eq!(a.client.status(&launch).expect("launch"), 0, "{what}");
        let r = a.client.call(&a.read_frame(0, 4)).expect("read");
        let mut d = r.outputs();
        assert_eq!(
            d.opt_bytes().expect("bytes"),
            Some(&42i32.to_le_bytes()[..]),
            "{what}: the kernel ran with the buffer it had"
        );
        b.ok();
    }
}

/// Program sources count against `tenant_memory` from their creation
/// until the client's last release: under 64 MiB, programs of 16 MiB of
/// source fit four at a time, the rest get `CL_OUT_OF_HOST_MEMORY`, and a
/// release makes room. Before, 8 sources of 256 MiB were all made under a
/// 1 GiB quota (the tenant at 2.33 GiB).
#[test]
fn program_sources_count_against_the_tenants_memory() {
    let prog = compile_c("kernel_args").expect("compile kernel_args.c");
    let server = Server::start_with(&["--tenant-memory", "64M"]).expect("server");
    let mut b = Neighbour::open(&server.socket).expect("neighbour");
    let mut cmd = Command::new(&prog.bin);
    cmd.args(["quota", "8", "16"]);
    server.client_env(&mut cmd);
    let got = run_lines(&mut cmd);
    let mut want: Vec<String> = (0..8)
        .map(|i| format!("program {i}: {}", if i < 4 { 0 } else { -6 }))
        .collect();
    want.push("after a release: 0".into());
    assert_eq!(got, want);
    b.ok();
}

/// `tenant_memory` is on by default, at the size of the largest device the
/// tenant exports, and 0 turns it off: what a tenant says when asked for a
/// report (SIGUSR1).
#[test]
fn tenant_memory_is_the_devices_size_by_default() {
    for (args, want) in [
        (&[][..], None),
        (&["--tenant-memory", "0"][..], Some("memory not counted")),
    ] {
        let server = Server::start_with(args).expect("server");
        let before = server.tenants();
        let mut a = Session::open(&server.socket).expect("tenant");
        let tenant = server
            .new_tenant(&before, Duration::from_secs(10))
            .expect("tenant process");
        // The device's global memory, as the tenant describes it.
        let global = a
            .info_u64(func::clGetDeviceInfo, a.device, 0x101F)
            .expect("CL_DEVICE_GLOBAL_MEM_SIZE");
        let want = want.map_or(format!(" of {global} bytes"), str::to_owned);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(tenant),
            nix::sys::signal::Signal::SIGUSR1,
        )
        .expect("signal");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !server.log().contains(&want) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            server.log().contains(&want),
            "{args:?}: wanted {want:?} in the log:\n{}",
            server.log()
        );
        assert!(a.round_trip(1).expect("call"), "still served");
    }
}
