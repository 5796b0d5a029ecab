#!/usr/bin/env python3
"""pcie-config.py: Max_Payload_Size and Max_Read_Request_Size of every
NVIDIA device and its upstream bridges, read from PCI configuration space
in sysfs (root needed beyond the first 64 bytes). Needs no lspci."""
import glob
import os


def cap_offset(cfg, want):
    off = cfg[0x34] if len(cfg) > 0x34 else 0
    seen = set()
    while off and off not in seen and off + 1 < len(cfg):
        seen.add(off)
        if cfg[off] == want:
            return off
        off = cfg[off + 1]
    return None


def describe(path):
    with open(os.path.join(path, "config"), "rb") as f:
        cfg = f.read()
    pcie = cap_offset(cfg, 0x10)
    if pcie is None or len(cfg) < pcie + 0x14:
        return "no PCIe capability readable (%d bytes of config space)" % len(cfg)
    devcap = int.from_bytes(cfg[pcie + 4:pcie + 8], "little")
    devctl = int.from_bytes(cfg[pcie + 8:pcie + 10], "little")
    lnksta = int.from_bytes(cfg[pcie + 0x12:pcie + 0x14], "little")
    return "MaxPayload supported %d B, MaxPayload %d B, MaxReadReq %d B, link gen %d x%d" % (
        128 << (devcap & 7), 128 << ((devctl >> 5) & 7), 128 << ((devctl >> 12) & 7),
        lnksta & 0xF, (lnksta >> 4) & 0x3F)


for dev in sorted(glob.glob("/sys/bus/pci/devices/*")):
    with open(os.path.join(dev, "vendor")) as f:
        if f.read().strip() != "0x10de":
            continue
    real = os.path.realpath(dev)
    print(os.path.basename(dev), "(NVIDIA):", describe(dev))
    up = os.path.dirname(real)
    while os.path.exists(os.path.join(up, "config")):
        print("  upstream", os.path.basename(up) + ":", describe(up))
        up = os.path.dirname(up)
