package iommu

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// AttachOptions say how a device uses its domain.
type AttachOptions struct {
	// PCI marks a PCI device: its IOVAs are tried below 4 GiB first
	// (iommu_dma_alloc_iova's SAC trick), unless ForceDAC
	// (iommu.forcedac=1).
	PCI, ForceDAC bool
	// CPU is the CPU whose IOVA cache the device's mappings use (the
	// model's threads carry no CPU yet).
	CPU int
}

// Translator is a device attached to a DMA domain: the DMA layer's
// dma.Mapper for it. Device accesses go through the unit's IOTLB and,
// on a miss, the domain's tables; mappings through the domain's IOVA
// allocator and tables (dma-iommu.c).
type Translator struct {
	dom *Domain
	dev *dma.Device
	opt AttachOptions
}

// Attach is iommu_attach_device plus iommu_setup_dma_ops: dev's DMA goes
// through dom from now on.
func Attach(dev *dma.Device, dom *Domain, opt AttachOptions) *Translator {
	t := &Translator{dom: dom, dev: dev, opt: opt}
	dev.SetTranslator(t)
	return t
}

// Domain is the domain the device is attached to.
func (t *Translator) Domain() *Domain { return t.dom }

// Name says which unit and domain translate.
func (t *Translator) Name() string {
	return fmt.Sprintf("iommu %s domain %d", t.dom.unit.name, t.dom.id)
}

// Granule is the IOVA granule.
func (t *Translator) Granule() uint64 { return Granule }

// ToBus is refused: a domain's bus addresses are IOVAs that Map
// allocates (the DMA layer calls Map for a Mapper).
func (t *Translator) ToBus(pa mem.PhysAddr, size uint64) (mem.DMAAddr, error) {
	return dma.MappingErrorAddr, fmt.Errorf("%s: bus address of %v+%d: IOVAs come from Map: %w", t.Name(), pa, size, syscall.EINVAL)
}

// Phys is iommu_iova_to_phys.
func (t *Translator) Phys(a mem.DMAAddr) (mem.PhysAddr, bool) { return t.dom.IOVAToPhys(a) }

// protOf is dma_info_to_prot: what the device may do in direction dir.
func protOf(dir dma.Direction) Prot {
	switch dir {
	case dma.ToDevice:
		return ProtRead
	case dma.FromDevice:
		return ProtWrite
	}
	return ProtRead | ProtWrite
}

// allocIOVA is iommu_dma_alloc_iova: below the device's mask, 32-bit
// addresses first for a PCI device unless ForceDAC.
func (t *Translator) allocIOVA(size uint64) (mem.DMAAddr, error) {
	limit := mem.DMAAddr(min(t.dev.Mask(), 1<<vaBits-1))
	if t.opt.PCI && !t.opt.ForceDAC && limit > 1<<32-1 {
		if a, err := t.dom.iovad.Alloc(t.opt.CPU, size, 1<<32-1); err == nil {
			return a, nil
		}
	}
	return t.dom.iovad.Alloc(t.opt.CPU, size, limit)
}

// Map is __iommu_dma_map: an IOVA for the granules pa's range covers,
// mapped with dir's permissions; the address returned keeps pa's offset
// into its granule.
func (t *Translator) Map(p *sim.Proc, pa mem.PhysAddr, size uint64, dir dma.Direction) (mem.DMAAddr, error) {
	off := uint64(pa) & (Granule - 1)
	n := (off + size + Granule - 1) &^ (Granule - 1)
	iova, err := t.allocIOVA(n)
	if err != nil {
		return dma.MappingErrorAddr, err
	}
	if err := t.dom.mapFor(iova, pa-mem.PhysAddr(off), n, protOf(dir), t.dev.Name(), p.Name()); err != nil {
		return dma.MappingErrorAddr, errors.Join(err, t.dom.iovad.Free(t.opt.CPU, iova, n))
	}
	return iova + mem.DMAAddr(off), nil
}

// MapSG maps ranges back to back in one IOVA range (iommu_map_sg).
func (t *Translator) MapSG(p *sim.Proc, ranges []mem.PhysRange, dir dma.Direction) (mem.DMAAddr, error) {
	var total uint64
	for _, r := range ranges {
		total += r.Size
	}
	iova, err := t.allocIOVA(total)
	if err != nil {
		return dma.MappingErrorAddr, err
	}
	a := iova
	for _, r := range ranges {
		if err := t.dom.mapFor(a, r.Start, r.Size, protOf(dir), t.dev.Name(), p.Name()); err != nil {
			// Undoing its own partial work, not a driver's unmap: no
			// device named.
			t.dom.unmapFast(iova, uint64(a-iova), "", p.Name())
			t.dom.unit.tlb.invalidateRange(t.dom.id, uint64(iova), uint64(a-iova))
			return dma.MappingErrorAddr, errors.Join(err, t.dom.iovad.Free(t.opt.CPU, iova, total))
		}
		a += mem.DMAAddr(r.Size)
	}
	return iova, nil
}

// Unmap is __iommu_dma_unmap: the granules of [addr, addr+size) unmapped
// from the tables; then, in strict mode, the range invalidated in the
// IOTLB (p waits for it) and the IOVA freed; in lazy mode the IOVA
// queued until the next flush, its IOTLB entries still translating.
func (t *Translator) Unmap(p *sim.Proc, addr mem.DMAAddr, size uint64, dir dma.Direction) {
	off := uint64(addr) & (Granule - 1)
	iova, n := addr-mem.DMAAddr(off), (off+size+Granule-1)&^(Granule-1)
	u := t.dom.unit
	unmapped := t.dom.unmapFast(iova, n, t.dev.Name(), p.Name())
	if unmapped == 0 {
		// Nothing of it was mapped: no IOVA to give back (Linux WARNs
		// on the unmapped size and frees nothing it cannot find).
		return
	}
	if u.mode == Lazy {
		t.dom.queue(p, t.opt.CPU, iova, n)
		return
	}
	u.tlb.invalidateRange(t.dom.id, uint64(iova), n)
	p.Sleep(u.params.InvalidateCost)
	err := t.dom.iovad.Free(t.opt.CPU, iova, n)
	if u.Hooks.Active() {
		// As in lazy mode, an IOVA the allocator does not know is
		// Linux's silent free_iova of nothing, reported here.
		e := Event{Op: OpFlush, Domain: t.dom.id, IOVA: iova, Size: n, Entries: 1}
		if err != nil {
			e.Warn = err.Error()
		}
		u.emit(e, p.Name(), sim.CauseTranslate)
	}
}

// ToPhys is the device's access through the IOMMU: for each page of
// [a, a+size), the IOTLB (a hit costs HitCost) or, on a miss, a walk of
// the tables (WalkReadCost per level read) whose leaf is then cached.
// An unmapped page is ErrFault, a missing permission ErrPermission;
// then no range is returned and the access changes nothing. A hit on an
// entry whose mapping is gone (lazy mode, before the flush) still
// translates, and is reported as OpStaleHit.
func (t *Translator) ToPhys(out []mem.PhysRange, a mem.DMAAddr, size uint64, write bool) ([]mem.PhysRange, sim.Time, error) {
	n0 := len(out)
	u, d := t.dom.unit, t.dom
	need := ProtRead
	if write {
		need = ProtWrite
	}
	var cost sim.Time
	end := uint64(a) + size
	if size == 0 {
		end++
	}
	for cur := uint64(a); cur < end; {
		var pa mem.PhysAddr
		var prot Prot
		var shift uint
		if x := u.tlb.lookup(d.id, cur); x != nil {
			cost += u.params.HitCost
			pa, prot, shift = x.pa, x.prot, x.shift
			if lx, _, _, _ := d.leaf(cur); lx == nil || lx.pa != pa || lx.prot != prot {
				t.staleHit(cur, pa+mem.PhysAddr(cur&(1<<shift-1)), prot, write)
			}
		} else {
			if cur >= 1<<vaBits {
				return out[:n0], cost, t.fault(cur, write, ErrFault)
			}
			lx, _, level, reads := d.leaf(cur)
			cost += sim.Time(reads) * u.params.WalkReadCost
			if lx == nil {
				return out[:n0], cost, t.fault(cur, write, ErrFault)
			}
			pa, prot, shift = lx.pa, lx.prot, levelShift[level]
			u.tlb.insert(d.id, cur, shift, pa, prot)
		}
		if prot&need == 0 {
			return out[:n0], cost, t.fault(cur, write, ErrPermission)
		}
		pageEnd := (cur &^ (1<<shift - 1)) + 1<<shift
		stop := min(end, pageEnd)
		if size == 0 {
			stop = cur
		}
		start := pa + mem.PhysAddr(cur&(1<<shift-1))
		if k := len(out); k > n0 && out[k-1].Start+mem.PhysAddr(out[k-1].Size) == start {
			out[k-1].Size += stop - cur
		} else {
			out = append(out, mem.PhysRange{Start: start, Size: stop - cur})
		}
		if size == 0 {
			break
		}
		cur = pageEnd
	}
	return out, cost, nil
}

func (t *Translator) fault(iova uint64, write bool, why error) error {
	u := t.dom.unit
	u.stats.Faults++
	if u.Hooks.Active() {
		u.emit(Event{Op: OpFault, Domain: t.dom.id, Device: t.dev.Name(), IOVA: mem.DMAAddr(iova), Write: write, Reason: why}, "", sim.CauseFault)
	}
	// The DMA layer wraps it with the device and the access.
	return fmt.Errorf("%s at %v: %w", rwName(write), mem.DMAAddr(iova), why)
}

func (t *Translator) staleHit(iova uint64, pa mem.PhysAddr, prot Prot, write bool) {
	u := t.dom.unit
	u.stats.StaleHits++
	if u.Hooks.Active() {
		u.emit(Event{Op: OpStaleHit, Domain: t.dom.id, Device: t.dev.Name(), IOVA: mem.DMAAddr(iova), Phys: pa, Prot: prot, Write: write,
			Warn: "IOTLB entry of an unmapped IOVA (lazy invalidation)"}, "", sim.CauseAccess)
	}
}

func rwName(write bool) string {
	if write {
		return "write"
	}
	return "read"
}
