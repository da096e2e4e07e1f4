//! CPU time of other processes, from /proc: how the runner charges a
//! tenant (server) process for the work it did for a client.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// CPU time of a process so far, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTimes {
    pub user_s: f64,
    pub sys_s: f64,
    /// Time on a CPU from the scheduler (nanosecond resolution; user+sys).
    pub run_s: f64,
}

impl CpuTimes {
    pub fn since(self, before: CpuTimes) -> CpuTimes {
        CpuTimes {
            user_s: self.user_s - before.user_s,
            sys_s: self.sys_s - before.sys_s,
            run_s: self.run_s - before.run_s,
        }
    }
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Parses the fields after the command name of a /proc/PID/stat line:
/// (state, ppid, utime, stime) with utime and stime in ticks.
pub fn parse_stat(line: &str) -> Option<(char, i32, u64, u64)> {
    // The command name may hold spaces and parentheses: split at the last ')'.
    let rest = &line[line.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest: state(0) ppid(1) ... utime(11) stime(12)
    Some((
        f.first()?.chars().next()?,
        f.get(1)?.parse().ok()?,
        f.get(11)?.parse().ok()?,
        f.get(12)?.parse().ok()?,
    ))
}

/// The CPU times of process `pid`, summed over its threads; `None` if it is
/// gone.
pub fn cpu_times(pid: i32) -> Option<CpuTimes> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, _, ut, st) = parse_stat(&stat)?;
    let hz = ticks_per_second();
    // schedstat: run time in ns, wait time, timeslices; for the whole
    // process, sum the threads'.
    let mut run_ns = 0u64;
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for e in rd.flatten() {
            if let Ok(s) = std::fs::read_to_string(e.path().join("schedstat")) {
                run_ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Some(CpuTimes {
        user_s: ut as f64 / hz,
        sys_s: st as f64 / hz,
        run_s: run_ns as f64 * 1e-9,
    })
}

/// Live children of `parent` whose command line contains `needle`.
pub fn children(parent: i32, needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let dir = Path::new("/proc").join(pid.to_string());
        let Some((state, ppid, _, _)) = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .as_deref()
            .and_then(parse_stat)
        else {
            continue;
        };
        if ppid != parent || state == 'Z' {
            continue;
        }
        let cmd = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd)
            .replace('\0', " ")
            .contains(needle)
        {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_spaces_and_parens() {
        let l = "123 (a b) c)) S 1 2 3 4 5 6 7 8 9 10 250 30 0 0";
        assert_eq!(parse_stat(l), Some(('S', 1, 250, 30)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn own_process_has_cpu_times_and_children_are_found() {
        let me = std::process::id() as i32;
        let t = cpu_times(me).expect("self");
        assert!(t.run_s > 0.0);
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        // The child may still be between fork and exec when spawn returns on
        // some kernels: look again for a bounded while.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        let mut kids = children(me, "sleep 5");
        while kids.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            kids = children(me, "sleep 5");
        }
        child.kill().ok();
        child.wait().ok();
        assert_eq!(kids, vec![child.id() as i32]);
    }
}
