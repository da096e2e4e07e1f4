//! Reading the parts of /proc and /sys the rebalancer needs, under a root directory
//! (`/` on a live system, a fixture tree in tests).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cpuset::CpuSet;
use crate::RebalanceError;

fn read(path: &Path) -> Result<String, RebalanceError> {
    std::fs::read_to_string(path).map_err(|err| RebalanceError::Read {
        path: path.to_path_buf(),
        err,
    })
}

/// Parses /proc/stat text into per-CPU steal ticks (the 8th value of each `cpuN` line).
pub fn parse_steal(text: &str) -> Result<BTreeMap<u32, u64>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let mut f = line.split_ascii_whitespace();
        let Some(name) = f.next() else { continue };
        let Some(num) = name.strip_prefix("cpu") else {
            continue;
        };
        if num.is_empty() {
            continue; // the aggregate "cpu" line
        }
        let cpu: u32 = num
            .parse()
            .map_err(|_| format!("line {}: bad cpu name {name:?}", i + 1))?;
        // user nice system idle iowait irq softirq steal
        let steal = f
            .nth(7)
            .ok_or_else(|| format!("line {}: no steal column", i + 1))?;
        let steal: u64 = steal
            .parse()
            .map_err(|_| format!("line {}: bad steal value {steal:?}", i + 1))?;
        out.insert(cpu, steal);
    }
    if out.is_empty() {
        return Err("no cpuN lines".into());
    }
    Ok(out)
}

/// Per-CPU steal ticks from `<root>/proc/stat`.
pub fn read_steal(root: &Path) -> Result<BTreeMap<u32, u64>, RebalanceError> {
    let path = root.join("proc/stat");
    let text = read(&path)?;
    parse_steal(&text).map_err(|msg| RebalanceError::Parse { path, msg })
}

/// A NUMA node (under GiantVM: one host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Node number.
    pub id: u32,
    /// Its CPUs.
    pub cpus: CpuSet,
}

/// Nodes with CPUs from `<root>/sys/devices/system/node/nodeN/cpulist`, by id.
pub fn read_nodes(root: &Path) -> Result<Vec<Node>, RebalanceError> {
    let dir = root.join("sys/devices/system/node");
    let rd = std::fs::read_dir(&dir).map_err(|err| RebalanceError::Read {
        path: dir.clone(),
        err,
    })?;
    let mut nodes = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_prefix("node"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let path = e.path().join("cpulist");
        let text = read(&path)?;
        let cpus = CpuSet::parse_list(&text).map_err(|e| RebalanceError::Parse {
            path,
            msg: e.to_string(),
        })?;
        if !cpus.is_empty() {
            nodes.push(Node { id, cpus });
        }
    }
    nodes.sort_by_key(|n| n.id);
    Ok(nodes)
}

fn numeric_entries(dir: &Path) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Every (pid, tid) under `<root>/proc`; vanished processes are skipped.
pub fn list_threads(root: &Path) -> Vec<(u32, u32)> {
    let proc_dir = root.join("proc");
    let mut out = Vec::new();
    for pid in numeric_entries(&proc_dir) {
        for tid in numeric_entries(&proc_dir.join(pid.to_string()).join("task")) {
            out.push((pid, tid));
        }
    }
    out
}

/// Path of a thread's status file.
pub fn thread_status_path(root: &Path, pid: u32, tid: u32) -> PathBuf {
    root.join(format!("proc/{pid}/task/{tid}/status"))
}

/// Fields of a status file the rebalancer uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStatus {
    /// `Cpus_allowed_list`.
    pub cpus: CpuSet,
    /// `Kthread: 1` (Linux 6.1+ prints it).
    pub kthread: bool,
}

/// Parses the `Cpus_allowed_list` and `Kthread` lines of a status file.
pub fn parse_status(text: &str) -> Option<ThreadStatus> {
    let mut cpus = None;
    let mut kthread = false;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("Cpus_allowed_list:") {
            cpus = CpuSet::parse_list(v.trim()).ok();
        } else if let Some(v) = line.strip_prefix("Kthread:") {
            kthread = v.trim() == "1";
        }
    }
    cpus.map(|cpus| ThreadStatus { cpus, kthread })
}

/// IRQ numbers under `<root>/proc/irq`.
pub fn list_irqs(root: &Path) -> Vec<u32> {
    numeric_entries(&root.join("proc/irq"))
}

/// Path of an IRQ's affinity list file.
pub fn irq_affinity_path(root: &Path, irq: u32) -> PathBuf {
    root.join(format!("proc/irq/{irq}/smp_affinity_list"))
}

/// cpumask files of unbound workqueues: the global one and each WQ_SYSFS workqueue's.
pub fn list_workqueue_masks(root: &Path) -> Vec<PathBuf> {
    let dir = root.join("sys/devices/virtual/workqueue");
    let mut out = Vec::new();
    if dir.join("cpumask").is_file() {
        out.push(dir.join("cpumask"));
    }
    let mut subs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path().join("cpumask"))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    subs.sort();
    out.extend(subs);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn steal_columns() {
        let t = "cpu  1 2 3 4 5 6 7 800 0 0\ncpu0 1 2 3 4 5 6 7 300 0 0\ncpu1 1 2 3 4 5 6 7 500 0 0\nintr 1 2\n";
        let s = parse_steal(t).unwrap();
        assert_eq!(s.get(&0), Some(&300));
        assert_eq!(s.get(&1), Some(&500));
        assert!(parse_steal("cpu0 1 2 3\n")
            .unwrap_err()
            .contains("no steal column"));
        assert!(parse_steal("cpu0 1 2 3 4 5 6 7 x\n")
            .unwrap_err()
            .contains("bad steal"));
        assert!(parse_steal("intr 1\n").is_err());
    }

    #[test]
    fn status_fields() {
        let s = parse_status("Name:\tkworker\nKthread:\t1\nCpus_allowed_list:\t0-3\n").unwrap();
        assert!(s.kthread);
        assert_eq!(s.cpus.to_list(), "0-3");
        assert!(parse_status("Name: x\n").is_none());
    }
}
