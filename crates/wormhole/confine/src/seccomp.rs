//! The tenant's system-call filter: a deny list (a driver's needs are wide
//! and vary by vendor and version, so an allow list would break drivers we
//! cannot test), of the calls that reach other processes or change the
//! system: tracing and cross-process memory, signals to anyone but itself,
//! new namespaces, mounts, BPF, modules, keys, io_uring (whose operations
//! seccomp cannot see). Refused calls fail with `EPERM`; `clone3`, whose
//! flags a filter cannot read, with `ENOSYS`, so that the C library falls
//! back to `clone`, whose flags it can.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::ConfineError;

/// Refused outright.
const DENIED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_getfd,
    libc::SYS_pidfd_send_signal,
    libc::SYS_tkill,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_vhangup,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// Signals whose first argument names the target process: refused unless
/// it is this one (glibc's `raise` and `abort` use `tgkill(getpid(), ..)`).
const SIGNALS: &[i64] = &[
    libc::SYS_kill,
    libc::SYS_tgkill,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
];

/// `clone` flags that make namespaces.
const NEW_NAMESPACES: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME
];

fn arch() -> Result<TargetArch, ConfineError> {
    std::env::consts::ARCH
        .try_into()
        .map_err(|e| ConfineError::sys("seccomp", std::io::Error::other(format!("{e:?}"))))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, ConfineError> {
    SeccompRule::new(conditions)
        .map_err(|e| ConfineError::sys("seccomp", std::io::Error::other(e.to_string())))
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, ConfineError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
        .map_err(|e| ConfineError::sys("seccomp", std::io::Error::other(e.to_string())))
}

/// The filter refusing the calls above with `EPERM`, for a process whose
/// id (in its own pid namespace) is `pid`.
pub(crate) fn deny_list(pid: u32) -> Result<BpfProgram, ConfineError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &call in DENIED {
        rules.insert(call, vec![]);
    }
    for &call in SIGNALS {
        // pid_t is 32 bits; compared as a sign-extended 64-bit value would
        // make kill(-1) look unlike any pid, which is what we want anyway.
        let c = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, pid.into())
            .map_err(|e| ConfineError::sys("seccomp", std::io::Error::other(e.to_string())))?;
        rules.insert(call, vec![rule(vec![c])?]);
    }
    let clone_rules = NEW_NAMESPACES
        .iter()
        .map(|&f| rule(vec![condition(0, SeccompCmpOp::MaskedEq(f), f)?]))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    compile(rules, SeccompAction::Errno(libc::EPERM as u32))
}

/// `clone3` answered `ENOSYS`.
fn no_clone3() -> Result<BpfProgram, ConfineError> {
    let mut rules = BTreeMap::new();
    rules.insert(libc::SYS_clone3, vec![]);
    compile(rules, SeccompAction::Errno(libc::ENOSYS as u32))
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    on_match: SeccompAction,
) -> Result<BpfProgram, ConfineError> {
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, on_match, arch()?)
        .map_err(|e| ConfineError::sys("seccomp", std::io::Error::other(e.to_string())))?;
    filter.try_into().map_err(|e: seccompiler::BackendError| {
        ConfineError::sys("seccomp", std::io::Error::other(e.to_string()))
    })
}

/// Installs both filters on the calling thread (and what it starts later).
pub(crate) fn install() -> Result<String, ConfineError> {
    let apply = |p: &BpfProgram| {
        seccompiler::apply_filter(p)
            .map_err(|e| ConfineError::sys("seccomp", std::io::Error::other(e.to_string())))
    };
    apply(&deny_list(std::process::id())?)?;
    apply(&no_clone3()?)?;
    Ok(format!(
        "seccomp ({} calls refused, signals only to itself, no new namespaces)",
        DENIED.len()
    ))
}
