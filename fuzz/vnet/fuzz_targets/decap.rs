//! Receive path: a (GRO) train of UDP payloads is cut into VXLAN datagrams, decapsulated,
//! coalesced and routed exactly as vnetd does it. Nothing may panic; merged frames must be
//! the concatenation of their members.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vnet_core::frame::EthHeader;
use vnet_core::gro;
use vnet_core::route::{MacMatch, RouteSpec, SourceMatch};
use vnet_core::switch::{EndpointKind, Switch};
use vnet_core::vxlan;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let seg = usize::from(u16::from_le_bytes([data[0], data[1]])).max(1);
    let verify: Vec<bool> = (0..64).map(|i| data[2] >> (i % 8) & 1 == 1).collect();
    let mut frames = Vec::new();
    for chunk in data[3..].chunks(seg) {
        if let Ok((_vni, inner)) = vxlan::decode(chunk) {
            frames.push(inner);
        }
    }
    let mut runs = Vec::new();
    gro::coalesce(&frames, &verify, &mut runs);
    let mut sw = Switch::new();
    let (Ok(link), Ok(tap)) = (
        sw.add_endpoint("l", EndpointKind::Link { vni: 1 }),
        sw.add_endpoint("t", EndpointKind::Interface { mac: "02:00:00:00:00:01".parse().unwrap() }),
    ) else {
        return;
    };
    let spec = RouteSpec { name: None, src: MacMatch::Any, dst: MacMatch::Any, source: SourceMatch::Any, dest: tap };
    let _ = sw.add_route(spec);
    let mut covered = 0;
    for run in &runs {
        assert_eq!(run.start, covered);
        covered += run.count;
        if let Some(m) = &run.merged {
            assert!(run.count > 1);
            assert_eq!(m.payloads.len(), run.count);
            let total: usize = m.payloads.iter().map(|(a, b)| b - a).sum();
            assert!(m.header.len() + total <= 65_535 + 18);
        }
        if let Ok(eth) = EthHeader::parse(frames[run.start]) {
            let _ = sw.forward(link, &eth, run.count as u64, 0);
        }
    }
    assert_eq!(covered, frames.len());
});
