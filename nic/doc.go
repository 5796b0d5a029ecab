// Package nic models a network adapter and its driver on top of
// dmaengine: a wire that delivers and takes packets at the device's
// line rate, an rx ring and a tx ring, and a driver written by the DMA
// API's rules, so that it produces no diagnostic on any platform,
// coherent (x86 PCIe snooping) or not (Zynq-7000's GEM, an x86 NIC with
// No Snoop).
//
// Real counterparts: a NAPI driver's receive path (a ring of posted
// buffers mapped DMA_FROM_DEVICE, an interrupt that schedules a poll of
// at most NAPI_POLL_WEIGHT = 64 packets per round, dma_unmap_single or
// dma_sync_single_for_cpu before the stack reads a packet, the buffer
// mapped again or handed back with dma_sync_single_for_device, one tail
// write for the refilled batch), its ndo_start_xmit (a buffer written by
// the CPU, mapped DMA_TO_DEVICE, a descriptor, a doorbell) and its tx
// completion cleaning (unmap, free); DPDK's poll-mode drivers for the
// polling option; link-level flow control (InfiniBand credits, Ethernet
// PAUSE) for the lossless wire.
//
// # A received packet
//
//  1. The generator (hardware, not a CPU) puts packets on the wire back
//     to back: each is a flow of PacketSize bytes over the line's
//     receive direction, so packets arrive at the line rate.
//  2. Store and forward: the whole packet is in the NIC, which hands it
//     to the rx channel (dmaengine.Chan.Deliver). With the NIC's buffer
//     full, a lossless wire waits (the next packet starts only once
//     there is room) and a lossy one drops the packet.
//  3. The engine writes it, as a flow device → host, into the buffer of
//     the next posted descriptor (prefetched when the driver posted it),
//     then writes the status word and sends the MSI.
//  4. The handler (or the polling loop) reaps completed descriptors in
//     budgets; per packet: dma_unmap_single (or sync for the CPU), a CPU
//     read of the packet (Touch bytes of it) through the caches, a new
//     mapping (or a sync for the device) and a new descriptor for the
//     same buffer; then one doorbell for the batch.
//
// A packet's latency runs from its first byte on the wire to the driver
// having read it. Teardown terminates the engine (waiting for what it
// has under way), unmaps and frees every posted buffer and frees the
// ring.
//
// # A transmitted packet
//
// The driver kmallocs a buffer, writes the packet with the CPU, maps it
// DMA_TO_DEVICE (checked with dma_mapping_error), submits a descriptor
// and rings the doorbell. The engine reads the packet (a flow host →
// device) and hands it, in ring order, to the queue in front of the
// wire, which sends packets one at a time at the line rate and frees
// the NIC's buffer as each leaves; the engine reads ahead while that
// buffer has room. When the read is done the engine writes the status,
// and the completion (interrupt or polling) unmaps and frees the
// buffer. A packet's latency runs from the driver starting to prepare
// it to its last byte on the wire.
//
// # Payload
//
// In payload mode every packet starts with its sequence number (8 bytes,
// little-endian) followed by a pattern of it, and both ends check what
// they get: rx the bytes the driver read, tx the bytes that reached the
// wire (Stream.Verified, Stream.Corrupt). Without payload the model
// tracks versions only, and a stale CPU read still shows
// (Stream.Stale). Memory use does not grow with the bytes moved: the
// buffers are reused, latencies go to a fixed-size histogram.
//
// # Results
//
// Per direction: packets, bytes, drops, throughput over the stream,
// latency percentiles (p50, p99, max, mean; exact to 0.1%), the CPU time
// of the direction's driver process and interrupt handler from the link
// coming up to the last packet (setup and teardown left out) and per
// packet, interrupts and doorbells. Options.Cores accounts it per core.
package nic
