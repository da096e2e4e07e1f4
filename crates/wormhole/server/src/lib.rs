//! Wormhole's server: it owns the accelerator and runs forwarded calls.
//!
//! * [`listen`]: the main process, which accepts clients on a Unix socket
//!   (and TCP when configured) and starts a tenant process for each;
//! * [`serve`]: a tenant process, which greets its client with a shared-memory
//!   region and then runs the client's calls as they arrive, sleeping on a
//!   futex in between;
//! * [`opencl`]: the OpenCL backend, whose decoders are generated from the
//!   API description, and each tenant's state;
//! * [`cuda`]: the CUDA runtime backend, generated the same way from
//!   `cuda.api`, which opens libcudart at run time;
//! * [`handles`]: a tenant's table of ids to the library's handles, which
//!   both backends keep;
//! * [`harness`]: the tenant's request path without I/O, for the fuzzer;
//! * [`outbuf`]: output buffers reused from call to call;
//! * [`quota`]: the memory a tenant may hold at once;
//! * [`residency`]: delay storing, a device's memory shared by more
//!   tenants than it holds (the listener's ledger, each tenant's side);
//! * [`report`]: what the listener and each tenant log on `SIGUSR1`.
//!
//! One server exports OpenCL, CUDA or both (`opencl`, `cuda` settings).

pub mod config;
pub mod confinement;
pub mod cuda;
pub mod halting;
pub mod handles;
pub mod harness;
pub mod listen;
pub mod opencl;
pub mod outbuf;
pub mod quota;
pub mod report;
pub mod residency;
pub mod serve;
