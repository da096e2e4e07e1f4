//! Wormhole's benchmark suite (issue 3): raw handoff primitives, the
//! in-process marshalling cost, a runner that measures native and remoted
//! OpenCL side by side, and the report it writes (with what each missed goal
//! lacks and why). Benchmarks, not tests:
//! nothing here asserts a speed.

pub mod marshal;
pub mod misses;
pub mod native;
pub mod pingpong;
pub mod proc;
pub mod procstat;
pub mod report;
pub mod residency_hooks;
pub mod runner;
pub mod stats;
