/*
 * accelnet.p4: the forwarding pipeline accelnet programs (P4_16, v1model).
 *
 * Ingress order for a RoCEv2 packet:
 *   1. qos_classify  (exact DSCP)          -> traffic class (lossless RDMA queue)
 *   2. flow_pin      (exact src, dst, udp src port) -> egress port; counted per entry
 *   3. ipv4_lpm      (LPM dst) through ecmp_selector (FlowHash: CRC-32 over
 *                    the 5-tuple, the switch's seed, a finalizer; weighted
 *                    members: WCMP)  -> egress port
 * Egress rewrites a routed packet's MACs (port_macs) and decrements TTL.
 * punt_table sends link-discovery probes to the controller (packet-in);
 * packet-out from the controller goes straight to the port it names.
 * flow_sample samples 1 in N RoCEv2 packets arriving on the ports it lists
 * (a leaf's host-facing ports) and sends their flow key and length to the
 * controller as a flow_sample_t digest: how elephants nobody declared are
 * found. (p4c names a digest after its struct and numbers it itself; the
 * controller resolves it by name.)
 *
 * Latency probes: a RoCEv2 packet whose BTH opcode is PROBE_OPCODE (one of
 * the manufacturer-specific opcodes, which no NIC accepts) carries a
 * probe_t header and a stack of probe_hop_t records. The controller sends
 * it as a packet-out at one leaf, out of an uplink it chooses, with the
 * TTL that expires at the destination leaf; every switch's egress pushes
 * a record of what the packet met there (its egress port, the queue's
 * depth and the time the packet spent in it, and the time from ingress to
 * egress), and the switch where its TTL runs out punts it to the
 * controller instead of dropping it, as a router answers traceroute.
 * Between them, probes hash as RDMA traffic of the same addresses and
 * ports does: they take the paths and queues it takes.
 *
 * Every object's ID is pinned with @id using the P4Runtime prefixes
 * (actions 0x01, tables 0x02, controller headers 0x04, action profiles 0x11,
 * counters 0x12, direct counters 0x13). accelnet.p4info.txt and
 * accelnet.json are p4c-bm2-ss's output for this file (go generate).
 */
#include <core.p4>
#include <v1model.p4>

const bit<9>  CPU_PORT = 255;
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  PROTO_UDP = 17;
const bit<16> ROCEV2_UDP_PORT = 4791;
const bit<8>  PROBE_OPCODE = 0xCA;
#define PROBE_MAX_HOPS 8
const bit<8>  PROBE_HOP_BYTES = 14;

@controller_header("packet_in")
@id(0x04000001)
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
@id(0x04000002)
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

/* InfiniBand Base Transport Header, carried by RoCEv2 after UDP/4791. */
header bth_t {
    bit<8>  opcode;
    bit<1>  solicited;
    bit<1>  mig_req;
    bit<2>  pad_count;
    bit<4>  version;
    bit<16> partition_key;
    bit<8>  reserved0;
    bit<24> dest_qp;
    bit<1>  ack_req;
    bit<7>  reserved1;
    bit<24> psn;
}

/* A latency probe, after its BTH: the controller's ID for it and how
 * many probe_hop_t records follow (the last switch's first). */
header probe_t {
    bit<32> id;
    bit<8>  hop_count;
    bit<8>  _pad;
}

/* What one switch's egress saw of a probe. Times are the target's
 * timestamps' unit (BMv2: microseconds), the depth its queue's (BMv2:
 * packets). */
header probe_hop_t {
    bit<7>  _pad;
    bit<9>  egress_port;
    bit<32> enq_qdepth;
    bit<32> deq_timedelta;
    bit<32> hop_latency;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    udp_t        udp;
    bth_t        bth;
    probe_t      probe;
    probe_hop_t[PROBE_MAX_HOPS] probe_hops;
}

struct metadata_t {
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    bit<32> sample_one_in;
    bit<32> sample_draw;
    bit<32> hash_seed;
    bit<32> flow_hash;
    bit<8>  probe_hops_left;
}

/* One sampled RoCEv2 packet, as a digest. */
struct flow_sample_t {
    bit<9>  ingress_port;
    bit<32> ipv4_src;
    bit<32> ipv4_dst;
    bit<16> udp_src_port;
    bit<16> ip_len;
}

parser AccelParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t std_meta) {
    state start {
        transition select(std_meta.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            PROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.udp.dst_port) {
            ROCEV2_UDP_PORT: parse_bth;
            default: accept;
        }
    }
    state parse_bth {
        pkt.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            PROBE_OPCODE: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        pkt.extract(hdr.probe);
        meta.probe_hops_left = hdr.probe.hop_count;
        transition select(meta.probe_hops_left) {
            0: accept;
            default: parse_probe_hop;
        }
    }
    state parse_probe_hop {
        pkt.extract(hdr.probe_hops.next);
        meta.probe_hops_left = meta.probe_hops_left - 1;
        transition select(meta.probe_hops_left) {
            0: accept;
            default: parse_probe_hop;
        }
    }
}

control AccelVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

// The controls are AccelIngress and AccelEgress (v1model declares
// Ingress and Egress itself); every table, action, counter and selector
// keeps the name it is resolved by ("Ingress.flow_pin") through an
// absolute @name.
control AccelIngress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t std_meta) {

    @id(0x12000001)
    @name(".Ingress.port_rx_counter")
    counter(512, CounterType.packets_and_bytes) port_rx_counter;

    @id(0x13000001)
    @name(".Ingress.flow_pin_counter")
    direct_counter(CounterType.packets_and_bytes) flow_pin_counter;

    @id(0x01000001)
    @name(".Ingress.set_egress_port")
    action set_egress_port(bit<9> port) {
        std_meta.egress_spec = port;
    }

    @id(0x01000002)
    @name(".Ingress.drop")
    action drop() {
        mark_to_drop(std_meta);
    }

    @id(0x01000003)
    @name(".Ingress.nop")
    action nop() { }

    @id(0x01000004)
    @name(".Ingress.pin_egress_port")
    action pin_egress_port(bit<9> port) {
        std_meta.egress_spec = port;
    }

    @id(0x01000005)
    @name(".Ingress.set_traffic_class")
    action set_traffic_class(bit<3> tc) {
        std_meta.priority = tc;
    }

    @id(0x01000006)
    @name(".Ingress.send_to_cpu")
    action send_to_cpu() {
        std_meta.egress_spec = CPU_PORT;
    }

    @id(0x01000007)
    @name(".Ingress.sample")
    action sample(bit<32> one_in) {
        meta.sample_one_in = one_in;
    }

    @id(0x01000008)
    @name(".Ingress.set_hash_seed")
    action set_hash_seed(bit<32> seed) {
        meta.hash_seed = seed;
    }

    /* The switch's ECMP hash seed: its only entry is the default one,
     * which the controller sets (to the switch's device ID) so that
     * switches hash independently instead of polarizing. */
    @id(0x02000006)
    @name(".Ingress.hash_seed")
    table hash_seed {
        actions = {
            set_hash_seed;
        }
        default_action = set_hash_seed(0);
        size = 1;
    }

    @id(0x02000005)
    @name(".Ingress.flow_sample")
    table flow_sample {
        key = {
            std_meta.ingress_port : exact @name("ingress_port");
        }
        actions = {
            sample;
            @defaultonly nop;
        }
        const default_action = nop();
        size = 512;
    }

    @id(0x02000001)
    @name(".Ingress.flow_pin")
    table flow_pin {
        key = {
            hdr.ipv4.src_addr : exact @name("ipv4_src");
            hdr.ipv4.dst_addr : exact @name("ipv4_dst");
            meta.l4_src_port  : exact @name("udp_src_port");
        }
        actions = {
            pin_egress_port;
            @defaultonly nop;
        }
        const default_action = nop();
        counters = flow_pin_counter;
        size = 16384;
    }

    /* The selector takes meta.flow_hash as it is (identity): the hash
     * itself is computed in apply, so that it can mix in the switch's
     * seed non-linearly (see compute_flow_hash). A group's member is
     * flow_hash modulo the group's size, over its members in the order
     * the target keeps them (BMv2: by member handle; a member of weight
     * w is w handles). */
    @id(0x11000001)
    @max_group_size(64)
    @name(".Ingress.ecmp_selector")
    action_selector(HashAlgorithm.identity, 32w4096, 32w32) ecmp_selector;

    @id(0x02000002)
    @name(".Ingress.ipv4_lpm")
    table ipv4_lpm {
        key = {
            hdr.ipv4.dst_addr : lpm @name("ipv4_dst");
            meta.flow_hash    : selector;
        }
        actions = {
            set_egress_port;
            drop;
        }
        implementation = ecmp_selector;
        size = 4096;
    }

    /* FlowHash (pathcalc.FlowHash documents it; fabricsim computes the
     * same): CRC-32 over the IPv4 source and destination, protocol and
     * UDP ports, XOR the switch's seed, then MurmurHash3's 32-bit
     * finalizer. CRC is affine: with the seed only XORed in, every
     * switch's choice would be a fixed permutation of every other's and
     * paths would polarize; the finalizer makes switches with different
     * seeds choose independently. */
    @name(".Ingress.compute_flow_hash")
    @id(0x0100000b)
    action compute_flow_hash() {
        hash(meta.flow_hash, HashAlgorithm.crc32, 32w0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               meta.l4_src_port, meta.l4_dst_port },
             64w0x100000000);
        meta.flow_hash = meta.flow_hash ^ meta.hash_seed;
        meta.flow_hash = meta.flow_hash ^ (meta.flow_hash >> 16);
        meta.flow_hash = meta.flow_hash * 32w0x85ebca6b;
        meta.flow_hash = meta.flow_hash ^ (meta.flow_hash >> 13);
        meta.flow_hash = meta.flow_hash * 32w0xc2b2ae35;
        meta.flow_hash = meta.flow_hash ^ (meta.flow_hash >> 16);
    }

    @id(0x02000003)
    @name(".Ingress.qos_classify")
    table qos_classify {
        key = {
            hdr.ipv4.dscp : exact @name("dscp");
        }
        actions = {
            set_traffic_class;
            @defaultonly nop;
        }
        const default_action = nop();
        size = 64;
    }

    @id(0x02000004)
    @name(".Ingress.punt_table")
    table punt_table {
        key = {
            hdr.ethernet.ether_type : exact @name("ether_type");
        }
        actions = {
            send_to_cpu;
            @defaultonly nop;
        }
        const default_action = nop();
        size = 16;
    }

    apply {
        port_rx_counter.count((bit<32>) std_meta.ingress_port);
        if (hdr.packet_out.isValid()) {
            std_meta.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            return;
        }
        if (punt_table.apply().hit) {
            return;
        }
        if (!hdr.ipv4.isValid()) {
            mark_to_drop(std_meta);
            return;
        }
        if (hdr.ipv4.ttl <= 1) {
            if (hdr.probe.isValid()) {
                send_to_cpu(); /* a probe ends where its TTL does */
            } else {
                mark_to_drop(std_meta);
            }
            return;
        }
        qos_classify.apply();
        if (hdr.bth.isValid() && flow_sample.apply().hit && meta.sample_one_in > 0) {
            random(meta.sample_draw, 32w0, meta.sample_one_in - 1);
            if (meta.sample_draw == 0) {
                digest<flow_sample_t>(1, {std_meta.ingress_port, hdr.ipv4.src_addr,
                    hdr.ipv4.dst_addr, meta.l4_src_port, hdr.ipv4.total_len});
            }
        }
        if (!flow_pin.apply().hit) {
            hash_seed.apply();
            compute_flow_hash();
            /* A table implemented by an action selector has no default
             * action a target must honour (BMv2 ignores one): a miss is
             * dropped here. */
            if (!ipv4_lpm.apply().hit) {
                mark_to_drop(std_meta);
            }
        }
    }
}

control AccelEgress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t std_meta) {

    @id(0x12000002)
    @name(".Egress.port_tx_counter")
    counter(512, CounterType.packets_and_bytes) port_tx_counter;

    @id(0x0100000a)
    @name(".Egress.nop")
    action nop() { }

    /* A routed hop's Ethernet header: the egress port's own MAC as the
     * source, and as the destination the MAC of whatever the port is
     * cabled to (the next switch's port, or the host's NIC). */
    @id(0x01000009)
    @name(".Egress.rewrite_macs")
    action rewrite_macs(bit<48> src_mac, bit<48> dst_mac) {
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
    }

    @id(0x02000007)
    @name(".Egress.port_macs")
    table port_macs {
        key = {
            std_meta.egress_port : exact @name("egress_port");
        }
        actions = {
            rewrite_macs;
            @defaultonly nop;
        }
        const default_action = nop();
        size = 512;
    }

    apply {
        port_tx_counter.count((bit<32>) std_meta.egress_port);
        if (std_meta.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = std_meta.ingress_port;
        } else if (hdr.ipv4.isValid()) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            port_macs.apply();
            if (hdr.probe.isValid() && hdr.probe.hop_count < PROBE_MAX_HOPS) {
                hdr.probe_hops.push_front(1);
                hdr.probe_hops[0].setValid();
                hdr.probe_hops[0]._pad = 0;
                hdr.probe_hops[0].egress_port = std_meta.egress_port;
                hdr.probe_hops[0].enq_qdepth = (bit<32>) std_meta.enq_qdepth;
                hdr.probe_hops[0].deq_timedelta = std_meta.deq_timedelta;
                hdr.probe_hops[0].hop_latency =
                    (bit<32>) (std_meta.egress_global_timestamp - std_meta.ingress_global_timestamp);
                hdr.probe.hop_count = hdr.probe.hop_count + 1;
                hdr.ipv4.total_len = hdr.ipv4.total_len + (bit<16>) PROBE_HOP_BYTES;
                hdr.udp.len = hdr.udp.len + (bit<16>) PROBE_HOP_BYTES;
            }
        }
    }
}

control AccelComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control AccelDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.bth);
        pkt.emit(hdr.probe);
        pkt.emit(hdr.probe_hops);
    }
}

V1Switch(AccelParser(), AccelVerifyChecksum(), AccelIngress(), AccelEgress(),
         AccelComputeChecksum(), AccelDeparser()) main;
