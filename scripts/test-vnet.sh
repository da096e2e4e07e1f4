#!/usr/bin/env bash
# Builds and tests vnet (vnet-core, vnet-api, vnetd, vnetctl). Installs what the tests need
# (iproute2, ping, ethtool) idempotently. Integration tests create their own network
# namespaces and need root; without root they report themselves as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v ip >/dev/null || need_pkgs+=(iproute2)
command -v ping >/dev/null || need_pkgs+=(iputils-ping)
command -v ethtool >/dev/null || need_pkgs+=(ethtool)
command -v sysctl >/dev/null || need_pkgs+=(procps)
# The kernel fast path (crates/vnet/vnetd/bpf) is compiled with clang against libbpf's headers;
# without them vnetd builds without it and its fast-path tests fail.
command -v clang >/dev/null || need_pkgs+=(clang)
[ -e /usr/include/bpf/bpf_helpers.h ] || need_pkgs+=(libbpf-dev)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y "${need_pkgs[@]}" >/dev/null 2>&1 || {
            apt-get update >/dev/null
            apt-get install -y "${need_pkgs[@]}" >/dev/null
        }
    else
        echo "warning: missing ${need_pkgs[*]} and not root: integration tests will skip" >&2
    fi
fi
if [ "$(id -u)" -eq 0 ] && [ ! -e /dev/net/tun ]; then
    mkdir -p /dev/net && mknod /dev/net/tun c 10 200 && chmod 0666 /dev/net/tun || true
fi

# vnetctl is driven by one integration test, so build it next to the test binaries.
cargo build -p vnetctl -p vnetd
cargo test -p vnet-core -p vnet-api -p vnetd -p vnetctl
