package gpu

import (
	"fmt"

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

// CopyKind is a copy's direction, as cudaMemcpyKind names it.
type CopyKind uint8

const (
	HostToDevice CopyKind = iota + 1
	DeviceToHost
	// DeviceToDevice copies within one GPU's VRAM.
	DeviceToDevice
	// PeerToPeer copies between two GPUs' VRAM (cuMemcpyPeerAsync).
	PeerToPeer
)

func (k CopyKind) String() string {
	switch k {
	case HostToDevice:
		return "h2d"
	case DeviceToHost:
		return "d2h"
	case DeviceToDevice:
		return "d2d"
	case PeerToPeer:
		return "p2p"
	}
	return fmt.Sprintf("CopyKind(%d)", int(k))
}

// CopyEngine is the copy engine the model gives copies of kind k: with
// three or more engines, host-to-device on the first, device-to-host on
// the second and copies between VRAMs on the third, so that the three
// run at once, as the H200's three async engines allow (CUDA assigns
// engines to streams in ways it does not document; this is assumed).
// With two, device copies share the first; with one, all share it and
// serialise. A copy engine runs one copy at a time, in FIFO order, so
// two streams copying in the same direction take turns.
func (d *Device) CopyEngine(k CopyKind) *machine.Engine {
	ce := d.GPU.CopyEngines
	i := 0
	switch k {
	case DeviceToHost:
		i = 1
	case DeviceToDevice, PeerToPeer:
		i = 2
	}
	if i >= len(ce) {
		i = 0
	}
	return ce[i]
}

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
	srcPhys, dstPhys := sb.physOf(src, size), db.physOf(dst, size)
	en := s.dev.CopyEngine(kind)
	name := fmt.Sprintf("memcpy %s %d", kind, size)
	o := &op{act: Activity{Kind: ActivityMemcpy, Name: name, Addr: dst, Src: src, Size: size, Copy: kind, Engine: en.Name}}
	o.run = func(w *sim.Proc) {
		data := s.dev.readPhys(srcPhys)
		_, err := sys.m.Copy(w, machine.CopyOp{Name: name, Engine: en, Src: from, Dst: to, Bytes: int64(size), Overhead: CopyStreamOverhead})
		if err != nil {
			panic(fmt.Sprintf("gpu: %s on %s: %v", name, s.name, err))
		}
		s.dev.writePhys(dstPhys, data)
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

// readPhys is the GPU reading ranges through mem: the versions, and the
// bytes in payload mode (nil otherwise).
func (d *Device) readPhys(ranges []mem.PhysRange) []byte {
	m := d.sys.m.Mem
	if !m.Payload() {
		for _, r := range ranges {
			m.DeviceRead(d.Name, d.coherent, r.Start, r.Size)
		}
		return nil
	}
	var n uint64
	for _, r := range ranges {
		n += r.Size
	}
	buf := make([]byte, n)
	off := uint64(0)
	for _, r := range ranges {
		m.DeviceReadBytes(d.Name, d.coherent, r.Start, buf[off:off+r.Size])
		off += r.Size
	}
	return buf
}

// writePhys is the GPU writing ranges: new versions, with data's bytes
// when it is not nil.
func (d *Device) writePhys(ranges []mem.PhysRange, data []byte) {
	m := d.sys.m.Mem
	off := uint64(0)
	for _, r := range ranges {
		if data == nil {
			m.DeviceWrite(d.Name, d.coherent, r.Start, r.Size)
		} else {
			m.DeviceWriteBytes(d.Name, d.coherent, r.Start, data[off:off+r.Size])
		}
		off += r.Size
	}
}
