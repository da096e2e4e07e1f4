# Sourced by the benchmark scripts: how long an idle vCPU of a KVM guest
# polls before it halts (the haltpoll cpuidle driver's guest_halt_poll_ns),
# which decides what a cross-CPU wake-up costs, set for one run and put back.

HALT_POLL_PARAM=/sys/module/haltpoll/parameters/guest_halt_poll_ns
HALT_POLL_OLD=

# halt_poll_set NS: poll up to NS ns from now on (root, haltpoll guests only).
halt_poll_set() {
    [ -w "$HALT_POLL_PARAM" ] || { echo "cannot set $HALT_POLL_PARAM (not a haltpoll guest, or not root)" >&2; return 1; }
    HALT_POLL_OLD=$(cat "$HALT_POLL_PARAM")
    echo "$1" > "$HALT_POLL_PARAM"
}

# halt_poll_restore: puts back what halt_poll_set found (for an EXIT trap).
halt_poll_restore() {
    if [ -n "$HALT_POLL_OLD" ]; then
        echo "$HALT_POLL_OLD" > "$HALT_POLL_PARAM"
    fi
}

# halt_poll_describe: the cpuidle driver and, where there is one, the setting.
halt_poll_describe() {
    local d
    d=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown)
    if [ -r "$HALT_POLL_PARAM" ]; then
        echo "$d, guest_halt_poll_ns = $(cat "$HALT_POLL_PARAM")"
    else
        echo "$d"
    fi
}
