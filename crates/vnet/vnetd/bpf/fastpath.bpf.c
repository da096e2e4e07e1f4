// SPDX-License-Identifier: Apache-2.0
/*
 * vnetd's kernel fast path: a second-level cache of the switch's routing decisions.
 *
 * vnetd decides every new flow in user space (anti-spoofing, VNET/P's ranked rules, fan-out,
 * learning). When a decision is a single interface or an IPv4 VXLAN link, it stores it in
 * `flows`, keyed like the route cache by (ingress endpoint, source MAC, destination MAC).
 * These two tc programs then forward the flow's later frames without leaving the kernel:
 *
 *   vnet_tx  on a TAP's egress (frames the guest sends): to another TAP's ingress, or
 *            VXLAN-encapsulated (RFC 7348) onto the underlay, GSO frames kept whole;
 *   vnet_rx  on the underlay's ingress: VXLAN from a known link, decapsulated to a TAP.
 *
 * Anything they do not recognise, or whose key has no entry, they pass on unchanged: it
 * reaches vnetd's user-space path, which is the reference for every decision. vnetd removes
 * an entry as soon as a rule change would decide its key differently.
 *
 * Every helper used here is open to programs under any licence (none is GPL-only).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

/* Kept in step with fastpath.rs (FlowKey, FlowValue, Endpoint, LinkKey). */
struct flow_key {
	__u32 ep;      /* vnet endpoint the frame came from */
	__u8 src[6];
	__u8 dst[6];
};

#define TO_TAP 1
#define TO_LINK 2

struct flow_value {
	__u32 kind;       /* TO_TAP or TO_LINK */
	__u32 ifindex;    /* TO_TAP: the TAP; TO_LINK: the underlay device towards the peer */
	__u32 local_ip;   /* TO_LINK: outer source address (network order) */
	__u32 remote_ip;  /* TO_LINK: outer destination (network order) */
	__u32 vni;        /* TO_LINK: host order */
	__u16 port;       /* TO_LINK: peer's UDP port (network order) */
	__u16 pad;
	__u64 frames;     /* wire frames forwarded (a GSO frame counts its segments) */
	__u64 bytes;
};

struct endpoint {
	__u32 ep;
};

struct link_key {
	__u32 remote_ip;  /* network order */
	__u32 vni;        /* host order */
};

/* A hash map NAME from KEY to VALUE of at most MAX entries: each table vnetd fills. */
#define HASH_MAP(name, max, key_type, value_type) \
	struct { \
		__uint(type, BPF_MAP_TYPE_HASH); \
		__uint(max_entries, max); \
		__type(key, key_type); \
		__type(value, value_type); \
	} name SEC(".maps")

HASH_MAP(flows, 16384, struct flow_key, struct flow_value);
/* Keyed by the TAP's ifindex. */
HASH_MAP(taps, 1024, __u32, struct endpoint);
HASH_MAP(links, 4096, struct link_key, struct endpoint);
/* The VXLAN port vnetd listens on (network order), keyed by each local IPv4 address it
 * listens on (network order); vnet_rx takes only datagrams to one of them. */
HASH_MAP(locals, 64, __u32, __u16);

/* Outer IPv4 + UDP + VXLAN, then the inner Ethernet header: what vnet_tx inserts after
 * the frame's own Ethernet header (which becomes the outer one). */
struct encap {
	struct iphdr ip;
	struct udphdr udp;
	__be32 vx_flags;
	__be32 vx_vni;
	struct ethhdr inner;
} __attribute__((packed));

#define ENCAP_LEN ((int)sizeof(struct encap)) /* 50 */
#define VXLAN_I 0x08000000
/* Source ports for the flow hash, as RFC 7348 recommends (the dynamic range). */
#define SPORT_MIN 49152
#define SPORT_RANGE 16384

/* Not in every distribution's linux/bpf.h yet (the first two: Linux 6.3). */
#define ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7)
#define ADJ_ROOM_DECAP_L3_IPV6 (1ULL << 8)
#define ADJ_ROOM_DECAP_L4_UDP (1ULL << 10)

/* Not ours: the next tc program or, after the last, the stack (and so vnetd). */
#define PASS TC_ACT_UNSPEC

static __always_inline int is_ip(__be16 proto)
{
	return proto == bpf_htons(ETH_P_IP) || proto == bpf_htons(ETH_P_IPV6);
}

/* Counts a frame of `len` bytes as vnetd's user-space path does: a GSO frame once per
 * wire segment, its bytes once. */
static __always_inline void count(struct flow_value *v, struct __sk_buff *skb, __u32 len)
{
	__u32 segs = skb->gso_segs;

	__sync_fetch_and_add(&v->frames, segs ? segs : 1);
	__sync_fetch_and_add(&v->bytes, len);
}

static __always_inline __u16 ip_csum(const void *ip)
{
	__u32 sum = 0;
	const __u16 *w = ip;

#pragma unroll
	for (int i = 0; i < (int)sizeof(struct iphdr) / 2; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

SEC("classifier")
int vnet_tx(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end || !is_ip(eth->h_proto))
		return PASS;
	__u32 ifindex = skb->ifindex;
	struct endpoint *tap = bpf_map_lookup_elem(&taps, &ifindex);
	if (!tap)
		return PASS;
	struct flow_key k = { .ep = tap->ep };
	__builtin_memcpy(k.src, eth->h_source, 6);
	__builtin_memcpy(k.dst, eth->h_dest, 6);
	struct flow_value *v = bpf_map_lookup_elem(&flows, &k);
	if (!v)
		return PASS;
	if (v->kind == TO_TAP) {
		count(v, skb, skb->len);
		return bpf_redirect(v->ifindex, BPF_F_INGRESS);
	}
	if (v->kind != TO_LINK)
		return PASS;

	struct encap h = {};
	__builtin_memcpy(&h.inner, eth, sizeof(h.inner));
	__u32 inner_len = skb->len;
	/* The outer IP header counts everything after the outer Ethernet header. */
	__u32 ip_len = inner_len + ENCAP_LEN - sizeof(struct ethhdr);
	if (ip_len > 0xffff)
		return PASS;
	h.ip.version = 4;
	h.ip.ihl = 5;
	h.ip.ttl = 64;
	/* RFC 7348: VTEPs must not fragment. The TAP's MTU leaves room for these 50 bytes. */
	h.ip.frag_off = bpf_htons(0x4000 /* DF */);
	h.ip.protocol = IPPROTO_UDP;
	h.ip.tot_len = bpf_htons(ip_len);
	h.ip.saddr = v->local_ip;
	h.ip.daddr = v->remote_ip;
	h.ip.check = ip_csum((void *)&h.ip);
	__u32 hash = bpf_get_hash_recalc(skb);
	h.udp.source = bpf_htons(SPORT_MIN + (__u16)(((__u64)hash * SPORT_RANGE) >> 32));
	h.udp.dest = v->port;
	h.udp.len = bpf_htons(ip_len - sizeof(struct iphdr));
	h.vx_flags = bpf_htonl(VXLAN_I);
	h.vx_vni = bpf_htonl(v->vni << 8);

	/* Room after the Ethernet header; the flags tell GSO that the frame is now an
	 * Ethernet-in-UDP tunnel, so the underlay device (or the peer's stack) segments it
	 * like a kernel VXLAN device's. The segment size stays: the TAP's MTU already leaves
	 * room for the encapsulation. */
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 |
		      BPF_F_ADJ_ROOM_ENCAP_L4_UDP | BPF_F_ADJ_ROOM_ENCAP_L2_ETH |
		      BPF_F_ADJ_ROOM_ENCAP_L2(sizeof(struct ethhdr));
	if (bpf_skb_adjust_room(skb, ENCAP_LEN, BPF_ADJ_ROOM_MAC, flags))
		return PASS;
	if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr), &h, sizeof(h), 0))
		return TC_ACT_SHOT;
	__be16 ipv4 = bpf_htons(ETH_P_IP);
	if (bpf_skb_store_bytes(skb, offsetof(struct ethhdr, h_proto), &ipv4, 2, 0))
		return TC_ACT_SHOT;
	count(v, skb, inner_len);
	/* The neighbour subsystem fills in the outer MACs (resolving ARP if it must). */
	return bpf_redirect_neigh(v->ifindex, NULL, 0, 0);
}

SEC("classifier")
int vnet_rx(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct encap *h = (void *)(eth + 1);

	if ((void *)(h + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return PASS;
	if (skb->pkt_type != 0 /* PACKET_HOST */)
		return PASS;
	if (h->ip.version != 4 || h->ip.ihl != 5 || h->ip.protocol != IPPROTO_UDP ||
	    (h->ip.frag_off & bpf_htons(0x3fff)))
		return PASS;
	__u32 daddr = h->ip.daddr;
	__u16 *port = bpf_map_lookup_elem(&locals, &daddr);
	if (!port || h->udp.dest != *port)
		return PASS;
	if (!(h->vx_flags & bpf_htonl(VXLAN_I)) || !is_ip(h->inner.h_proto))
		return PASS;
	/* The IP layer would have checked this; a corrupt header goes that way. */
	if (ip_csum((void *)&h->ip) != 0)
		return PASS;
	struct link_key lk = {
		.remote_ip = h->ip.saddr,
		.vni = bpf_ntohl(h->vx_vni) >> 8,
	};
	struct endpoint *link = bpf_map_lookup_elem(&links, &lk);
	if (!link)
		return PASS;
	struct flow_key k = { .ep = link->ep };
	__builtin_memcpy(k.src, h->inner.h_source, 6);
	__builtin_memcpy(k.dst, h->inner.h_dest, 6);
	struct flow_value *v = bpf_map_lookup_elem(&flows, &k);
	if (!v || v->kind != TO_TAP)
		return PASS;

	struct ethhdr inner;
	__builtin_memcpy(&inner, &h->inner, sizeof(inner));
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO |
		      (inner.h_proto == bpf_htons(ETH_P_IP) ? ADJ_ROOM_DECAP_L3_IPV4
							    : ADJ_ROOM_DECAP_L3_IPV6);
	/* A GSO frame (a peer's whole TSO frame, over a veth) also drops its UDP-tunnel GSO
	 * state where the kernel knows how; older kernels refuse the flag, and the frame keeps
	 * it, which the guest's stack ignores when it receives the frame. */
	if (bpf_skb_adjust_room(skb, -ENCAP_LEN, BPF_ADJ_ROOM_MAC, flags | ADJ_ROOM_DECAP_L4_UDP) &&
	    bpf_skb_adjust_room(skb, -ENCAP_LEN, BPF_ADJ_ROOM_MAC, flags))
		return PASS;
	if (bpf_skb_store_bytes(skb, 0, &inner, sizeof(inner), 0))
		return TC_ACT_SHOT;
	/* The outer UDP checksum, if the NIC verified it, says nothing of the inner one. */
	bpf_csum_level(skb, BPF_CSUM_LEVEL_DEC);
	count(v, skb, skb->len);
	return bpf_redirect(v->ifindex, BPF_F_INGRESS);
}

char LICENSE[] SEC("license") = "Apache-2.0";
