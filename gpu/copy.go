package gpu

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// CopyStreamOverhead is the GPU-side cost of one copy in a stream,
// before its route's latency and its bytes: the copy engine fetching the
// method from the push buffer, setting up, and signalling the
// semaphore. Calibrated: `dmalab probe` ce_copy on the H200 (measured
// here 2026-11-21) queued 4 KiB device-to-host cuMemcpyAsync calls back
// to back behind a spin kernel at 2.230 GB/s, 1.837 µs a copy; minus the
// model's route latency (DRAM 110 ns + root complex 150 ns + link
// 100 ns) and 4 KiB at 55.5 GB/s (0.074 µs) leaves 1.40 µs.
// Host-to-device copies measured 0.47 µs more a copy: a DMA read waits a
// round trip for its first completion, which the model does not have
// (docs/measurements/2026-11-21-h200-summary.md).
//
// Predictions it gives for other sizes (ce_copy, same run): 64 KiB d2h
// 22.3 GB/s (measured 21.73), 1 MiB 50.8 (49.92).
const CopyStreamOverhead = 1400 * sim.Nanosecond

// CopyKind is a copy's direction (machine.CopyKind).
type CopyKind = machine.CopyKind

// The copy kinds, as cudaMemcpyKind names them.
const (
	HostToDevice   = machine.HostToDevice
	DeviceToHost   = machine.DeviceToHost
	DeviceToDevice = machine.DeviceToDevice
	PeerToPeer     = machine.PeerToPeer
)

// CopyEngine is the copy engine of copies of kind k
// (machine.GPU.CopyEngine, where the choice is made).
func (d *Device) CopyEngine(k CopyKind) *machine.Engine { return d.GPU.CopyEngine(k) }

// Memcpy is cuMemcpyAsync with unified addresses (cudaMemcpyDefault):
// size bytes from src to dst, each inside one allocation, pinned host
// memory or device memory of any GPU. It runs in stream order on the
// copy engine of the stream's GPU for its direction (CopyEngine), as
// one flow over the machine's route, costing CopyStreamOverhead before
// the route's latency and the bytes: machine.Copy, so the machine's
// observers (the tracer) see it. The source is read when the copy
// starts and the destination written when its last byte lands, through
// mem as the GPU's DMA (in payload mode with the bytes).
//
// Pageable memory is not in the map (ErrInvalidValue): the façade
// stages it through pinned buffers, as the driver does. Copies of
// managed memory and host-to-host copies are ErrNotSupported. The host
// pays EnqueueCost; a zero size enqueues nothing.
func (s *Stream) Memcpy(p *sim.Proc, dst, src mem.GPUAddr, size uint64) error {
	if err := s.check(p, "cuMemcpyAsync"); err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	sys := s.dev.sys
	sb, err := sys.resolve(src, size)
	if err != nil {
		return fmt.Errorf("gpu: cuMemcpyAsync source: %w", err)
	}
	db, err := sys.resolve(dst, size)
	if err != nil {
		return fmt.Errorf("gpu: cuMemcpyAsync destination: %w", err)
	}
	var kind CopyKind
	switch st, dt := sb.a.Type, db.a.Type; {
	case st == MemoryManaged || dt == MemoryManaged:
		return fmt.Errorf("gpu: cuMemcpyAsync %v → %v: managed memory: %w", src, dst, ErrNotSupported)
	case st == MemoryHost && dt == MemoryHost:
		return fmt.Errorf("gpu: cuMemcpyAsync %v → %v: host to host: %w", src, dst, ErrNotSupported)
	case st == MemoryHost:
		kind = HostToDevice
	case dt == MemoryHost:
		kind = DeviceToHost
	case sb.dev == db.dev:
		kind = DeviceToDevice
	default:
		kind = PeerToPeer
	}
	from, err := sys.endpoint(sb)
	if err != nil {
		return err
	}
	to, err := sys.endpoint(db)
	if err != nil {
		return err
	}
	if _, err := sys.m.Route(from, to); err != nil {
		return fmt.Errorf("gpu: cuMemcpyAsync %v → %v: %w", src, dst, err)
	}
	t := &dma.Transfer{
		Name: fmt.Sprintf("memcpy %s %d", kind, size), Engine: s.dev.CopyEngine(kind), Src: from, Dst: to,
		Bytes: int64(size), Overhead: CopyStreamOverhead,
		Read: s.dev.spans(sb, src, size), Write: s.dev.spans(db, dst, size),
	}
	o := &op{act: Activity{Kind: ActivityMemcpy, Name: t.Name, Addr: dst, Src: src, Size: size, Copy: kind, Engine: t.Engine.Name}}
	o.run = func(w *sim.Proc) {
		if _, err := s.dev.dma.Transfer(w, t); err != nil {
			panic(fmt.Sprintf("gpu: %s on %s: %v", t.Name, s.name, err))
		}
	}
	s.enqueue(p, o)
	return nil
}

// endpoint is where b's bytes are on the machine: a GPU's VRAM, or the
// DRAM of the node holding host memory's first byte (a buffer spread
// over nodes is taken as all on that node).
func (s *System) endpoint(b *buffer) (machine.Endpoint, error) {
	if b.dev != nil {
		return b.dev.GPU.Memory(), nil
	}
	n, _ := s.m.Mem.NodeOf(b.phys[0].Start)
	return s.m.HostMemory(n)
}

// spans is [addr, addr+size) of b as the GPU's DMA addresses it
// (Spans).
func (d *Device) spans(b *buffer, addr mem.GPUAddr, size uint64) []dma.Span {
	return d.Spans(b.physOf(addr, size), b.dev != nil)
}

// Spans is memory as the GPU's DMA addresses it: device memory (vram:
// its own, or a peer's over NVLink or PCIe) by physical address (Local:
// the BAR mapping of a peer's memory is not modelled); pinned host
// memory by the bus address the driver's mapping gave it (PinnedSpan):
// under dma-direct the physical address, behind an IOMMU the IOVA of
// the GPU's mapping of it (RegisterHost). An integrated GPU reaches its
// node's DRAM through its own MMU: Local.
func (d *Device) Spans(ranges []mem.PhysRange, vram bool) []dma.Span {
	out := make([]dma.Span, 0, len(ranges))
	mp := d.mapper()
	for _, r := range ranges {
		switch {
		case vram || d.integrated:
			out = append(out, dma.LocalSpan(r.Start, r.Size))
		case mp != nil:
			out = d.hostSpans(out, r)
		default:
			bus, err := d.dma.Translator().ToBus(r.Start, r.Size)
			if err != nil {
				bus = mem.DMAAddr(r.Start)
			}
			out = append(out, dma.PinnedSpan(bus, r.Size))
		}
	}
	return out
}

// DMA is the GPU as a bus master of the DMA layer.
func (d *Device) DMA() *dma.Device { return d.dma }

// access is the memory effect of a kernel's loads (read) or stores of
// spans, at no cost in time: the kernel's flows carry the bytes.
func (d *Device) access(spans []dma.Span, write bool) {
	if write {
		d.dma.Effect(nil, spans, nil)
	} else {
		d.dma.Effect(spans, nil, nil)
	}
}
