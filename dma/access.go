package dma

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// The device side. Read, Write, ReadBytes and WriteBytes are what the
// device's DMA does at bus addresses, at no cost in time: translate them
// through the device's Translator (the physical address under
// dma-direct, which for a bounced mapping is the swiotlb slot, not the
// caller's buffer), then read or write memory with the device's
// coherency (mem.DeviceRead / DeviceWrite). Each access is reported
// (OpDeviceAccess) before it happens; whether the range was mapped, and
// for which direction, is the checker's to decide. Moving bytes over the
// fabric is Transfer's, which translates and reports the same way.

// Read is the device reading [addr, addr+size). An address beyond the
// device's mask, that does not translate, or that is not RAM is an error
// wrapping mem.ErrBadAddr (on real hardware an unsupported request, a
// master abort or an IOMMU fault).
func (d *Device) Read(addr mem.DMAAddr, size uint64) (mem.Access, error) {
	r, err := d.accessNow(addr, size, false)
	if err != nil {
		return mem.Access{}, err
	}
	var a mem.Access
	for i, pr := range r {
		x := d.dma.mem.DeviceRead(d.name, d.coherent, pr.Start, pr.Size)
		if i == 0 {
			a = x
		}
	}
	return a, nil
}

// Write is the device writing [addr, addr+size).
func (d *Device) Write(addr mem.DMAAddr, size uint64) (mem.Version, error) {
	if d.directRAM(addr, size) {
		// What access gives under Direct when it has nothing to report
		// and the range is RAM: the range itself. A DMA engine's
		// status word takes this way, once a packet.
		return d.dma.mem.DeviceWrite(d.name, d.coherent, mem.PhysAddr(addr), size), nil
	}
	r, err := d.accessNow(addr, size, true)
	if err != nil {
		return 0, err
	}
	var v mem.Version
	for _, pr := range r {
		v = d.dma.mem.DeviceWrite(d.name, d.coherent, pr.Start, pr.Size)
	}
	return v, nil
}

// ReadBytes is Read into buf (payload mode).
func (d *Device) ReadBytes(addr mem.DMAAddr, buf []byte) (mem.Access, error) {
	r, err := d.accessNow(addr, uint64(len(buf)), false)
	if err != nil {
		return mem.Access{}, err
	}
	var a mem.Access
	off := uint64(0)
	for i, pr := range r {
		x := d.dma.mem.DeviceReadBytes(d.name, d.coherent, pr.Start, buf[off:off+pr.Size])
		if i == 0 {
			a = x
		}
		off += pr.Size
	}
	return a, nil
}

// WriteBytes is Write of data (payload mode).
func (d *Device) WriteBytes(addr mem.DMAAddr, data []byte) (mem.Version, error) {
	r, err := d.accessNow(addr, uint64(len(data)), true)
	if err != nil {
		return 0, err
	}
	var v mem.Version
	off := uint64(0)
	for _, pr := range r {
		v = d.dma.mem.DeviceWriteBytes(d.name, d.coherent, pr.Start, data[off:off+pr.Size])
		off += pr.Size
	}
	return v, nil
}

// accessNow translates an access made at once (its translation cost, if
// any, is the caller's to pay: Transfer pays it).
func (d *Device) accessNow(addr mem.DMAAddr, size uint64, write bool) ([]mem.PhysRange, error) {
	r, _, err := d.access(d.scratch[:0], addr, size, write, false)
	d.scratch = r[:0]
	return r, err
}

// xlat is what translating an access costs its master: lead, before its
// first byte may move, and overlap, the translation of its later pages
// that runs while bytes move (already divided among the translator's
// ways).
type xlat struct{ lead, overlap sim.Time }

func (c xlat) add(o xlat) xlat { return xlat{c.lead + o.lead, c.overlap + o.overlap} }

// translateAccess translates [addr, addr+size): through a Pipeline, the first page
// as the lead and the rest overlapped; else all as the lead.
func (d *Device) translateAccess(out []mem.PhysRange, addr mem.DMAAddr, size uint64, write bool) ([]mem.PhysRange, xlat, error) {
	if d.direct {
		// Direct.ToPhys, which is no Pipeline.
		return append(out, mem.PhysRange{Start: mem.PhysAddr(addr), Size: size}), xlat{}, nil
	}
	pl, ok := d.tr.(Pipeline)
	first := mem.PageSize - uint64(addr)%mem.PageSize
	if !ok || size <= first {
		out, c, err := d.tr.ToPhys(out, addr, size, write)
		return out, xlat{lead: c}, err
	}
	n := len(out)
	out, lead, err := d.tr.ToPhys(out, addr, first, write)
	if err != nil {
		return out, xlat{lead: lead}, err
	}
	k := len(out)
	out, rest, err := d.tr.ToPhys(out, addr+mem.DMAAddr(first), size-first, write)
	if len(out) > k && k > n && out[k-1].Start+mem.PhysAddr(out[k-1].Size) == out[k].Start {
		out[k-1].Size += out[k].Size
		out = append(out[:k], out[k+1:]...)
	}
	return out, xlat{lead: lead, overlap: rest / sim.Time(pl.Ways())}, err
}

// access reports the access and translates it, appending its physical
// ranges to out; it returns the translation's cost.
func (d *Device) access(out []mem.PhysRange, addr mem.DMAAddr, size uint64, write, pinned bool) ([]mem.PhysRange, xlat, error) {
	if d.directRAM(addr, size) {
		// What accessAll gives under Direct when it has nothing to
		// report and the range is RAM: the range itself, at no cost.
		// Every transfer's spans and device access of a NIC's rings
		// take this way.
		return append(out, mem.PhysRange{Start: mem.PhysAddr(addr), Size: size}), xlat{}, nil
	}
	return d.accessAll(out, addr, size, write, pinned)
}

// directRAM says whether an access to [addr, addr+size) is, under
// Direct with nothing observing, its own physical range in RAM within
// the device's mask: what accessAll would give for it, with nothing to
// report and no translation cost. Peer windows do not matter here:
// resolvePeers leaves a range that is RAM as it is (a window is a BAR,
// PCIe address space that RAM never holds), and every machine with a
// GPU has its BAR1 windows.
func (d *Device) directRAM(addr mem.DMAAddr, size uint64) bool {
	return d.direct && !d.dma.observed() && d.capable(addr, size) && d.dma.isRAM(mem.PhysAddr(addr), size)
}

// accessAll is access the whole way: the mask, the translator, RAM or
// peer memory, the event.
func (d *Device) accessAll(out []mem.PhysRange, addr mem.DMAAddr, size uint64, write, pinned bool) ([]mem.PhysRange, xlat, error) {
	n := len(out)
	var cost xlat
	var err error
	if !d.capable(addr, size) {
		err = fmt.Errorf("%s: DMA %s of %v+%d: beyond the device's mask %#x: %w", d.name, rw(write), addr, size, d.mask, mem.ErrBadAddr)
	} else {
		out, cost, err = d.translateAccess(out, addr, size, write)
		if err != nil {
			err = fmt.Errorf("%s: DMA %s of %v+%d: %s: %w", d.name, rw(write), addr, size, d.tr.Name(), err)
		}
	}
	if err == nil && len(d.dma.peers) == 0 {
		for _, r := range out[n:] {
			if !d.dma.isRAM(r.Start, r.Size) {
				err = fmt.Errorf("%s: DMA %s of %v+%d: %v is not RAM: %w", d.name, rw(write), addr, size, r.Start, mem.ErrBadAddr)
				break
			}
		}
	} else if err == nil {
		// Peer windows: what is not RAM may be another agent's memory.
		var bad mem.PhysAddr
		var perr error
		if out, bad, perr = d.dma.resolvePeers(out, n); perr != nil {
			if errors.Is(perr, errNotPeer) {
				err = fmt.Errorf("%s: DMA %s of %v+%d: %v is not RAM: %w", d.name, rw(write), addr, size, bad, mem.ErrBadAddr)
			} else {
				err = fmt.Errorf("%s: DMA %s of %v+%d: peer memory at %v: %w", d.name, rw(write), addr, size, bad, perr)
			}
		}
	}
	if d.dma.observed() {
		pa := mem.PhysAddr(addr)
		if len(out) > n {
			pa = out[n].Start
		}
		e := &d.dma.ev
		*e = Event{
			Op: OpDeviceAccess, Header: sim.Header{Time: d.dma.eng.Now()}, Device: d.name,
			Addr: addr, Size: size, Phys: pa, Write: write, Pinned: pinned || d.userDMA, Failed: err != nil,
			Bounced: d.dma.tlb.contains(pa),
			Call:    d.dma.call.begin("device_"+rw(write), d.name).hex("dma:", uint64(addr)).dec(size).end(),
		}
		if err != nil {
			e.Warn = err.Error()
		}
		d.dma.fire()
	}
	if err != nil {
		return out[:n], cost, err
	}
	return out, cost, nil
}

func rw(write bool) string {
	if write {
		return "write"
	}
	return "read"
}
