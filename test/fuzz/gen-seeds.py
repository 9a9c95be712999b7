#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Writes the seed corpus of the fuzz targets (test/fuzz/corpus/<target>/):
# one well-formed input per message kind, so the fuzzer starts past the
# magic and type checks. The files are committed; run this again only when
# a wire format changes. Layouts: src/ud/ud_iface.h, src/iface/conn.h,
# src/rc/rc_wire.h (little-endian hosts).
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(here, 'corpus', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


# ud_zv: GRH (40 bytes) + ud_hdr + body (fuzz_ud_packet.cc tries each input
# with and without the GRH).
GRH = bytes(40)
UD_MAGIC = 0x5a55
DEV = struct.pack('<BH16s', 1, 0, bytes([0xfe, 0x80] + [0] * 6 + list(range(8))))


def ud_hdr(dest, ack_dest, psn, ack_psn, typ, am_id):
    return struct.pack('<IIHHBBH', dest, ack_dest, psn, ack_psn, typ, am_id, UD_MAGIC)


write('ud_packet', 'data', GRH + ud_hdr(0x00100001, 0, 7, 0, 1, 3) + b'payload!')
write('ud_packet', 'data_piggyback', GRH + ud_hdr(0x00100001, 0x00200002, 8, 5, 1, 31) + b'x')
write('ud_packet', 'ack', GRH + ud_hdr(0x00200002, 0, 0, 65535, 2, 0))
write('ud_packet', 'nak', GRH + ud_hdr(0x00200002, 0, 0, 12, 3, 0))
write('ud_packet', 'creq', GRH + ud_hdr(0, 0, 0, 0, 4, 0) + struct.pack('<I', 0x00200002) + DEV)
write('ud_packet', 'crep', GRH + ud_hdr(0x00200002, 0, 0, 0, 5, 0) + struct.pack('<I', 0x00100001))
write('ud_packet', 'disc', GRH + ud_hdr(0x00100001, 0, 9, 0, 6, 0) + struct.pack('<I', 0x00200002))
write('ud_packet', 'probe', GRH + ud_hdr(0x00200002, 0, 0, 0, 7, 0) + struct.pack('<I', 0x00100001))
write('ud_packet', 'rebind', GRH + ud_hdr(0x00200002, 0, 0, 41, 9, 0) + struct.pack('<I', 0x00300001))
write('ud_packet', 'alive', GRH + ud_hdr(0x00100001, 0, 0, 0, 8, 0) + struct.pack('<I', 0x00200002))
# uc_zv: the same header without GRH.
write('ud_packet', 'uc_data', ud_hdr(0x00100001, 0, 7, 0, 1, 3) + b'payload!')
write('ud_packet', 'uc_ack', ud_hdr(0x00200002, 0, 0, 65535, 2, 0))

# Connection handshake: one byte choosing the receiver's transport
# (bit 0: 0 RC, 1 UC), then conn_msg.
CONN_MAGIC = 0x5a56434e
IBV_QPT_RC, IBV_QPT_UC = 2, 3


def conn_msg(typ, transport, conn_id, qpn, ud_qpn):
    return struct.pack('<IBBHQII', CONN_MAGIC, typ, transport, 0, conn_id, qpn, ud_qpn) + DEV


write('conn_msg', 'rc_req', b'\x00' + conn_msg(1, IBV_QPT_RC, 1, 0x11, 0x22))
write('conn_msg', 'rc_rep', b'\x00' + conn_msg(2, IBV_QPT_RC, 1, 0x33, 0x44))
write('conn_msg', 'uc_disc', b'\x01' + conn_msg(3, IBV_QPT_UC, 2, 0, 0x22))

# rc_zv AM immediate data (big-endian on the wire): ids 0, 5, 31, and two
# a sender never produces.
write('rc_am', 'ids', b''.join(struct.pack('>I', v) for v in (0, 5, 31, 32, 0x01000005)))

# Reliability state machine: settings, then the three scripts (fuzz_rel.cc).
settings = bytes([0x40, 0x00, 0x00, 10, 4, 0x10, 0x00, 8, 5])
sender = bytes([0xf0, 0xff]) + bytes([0, 0, 0, 2, 0, 2, 0, 3, 0, 4, 200, 5, 0x40, 0x00, 6, 7])
receiver = bytes([0xfe, 0xff]) + bytes([0, 0, 0, 16, 0, 22, 3, 2, 50, 0, 1, 0x34, 0x12, 5])
wire = bytes([0xfd, 0xff]) + bytes([0, 0, 0, 1, 0, 0, 1, 1, 2, 3, 1, 4, 0, 0, 5, 1, 10])
write('rel', 'basic', settings + sender + receiver + wire)
write('rel', 'small_window', bytes([0x02, 0x00, 0x01]) + settings[3:] + sender + receiver + wire)
