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
	// ATS enables PCIe Address Translation Services for the device
	// (pci_enable_ats): it gets its own translation cache (ATC,
	// Params.ATCEntries), asks the unit for translations it misses and
	// then sends its requests translated. Linux enables ATS only for
	// trusted devices (pci_ats_supported refuses dev->untrusted, an
	// external-facing port's): a device with ATS may send translated
	// requests carrying any physical address, which the unit does not
	// check (Translated).
	ATS bool
	// ATSRoundTrip is a translation request's round trip over the
	// device's link; zero computes it from the machine the unit is
	// placed on (Unit.Place), or DefaultATSRoundTrip.
	ATSRoundTrip sim.Time
}

// Translator is a device attached to a DMA domain: the DMA layer's
// dma.Mapper for it. Device accesses go through the unit's IOTLB and,
// on a miss, the domain's tables; mappings through the domain's IOVA
// allocator and tables (dma-iommu.c).
type Translator struct {
	dom *Domain
	dev *dma.Device
	opt AttachOptions
	// atc is the device's ATS translation cache (nil without ATS);
	// rtt a translation request's round trip.
	atc *IOTLB
	rtt sim.Time
	// translated marks the device's requests, while Translated runs,
	// as ATS translated requests.
	translated bool
}

// Attach is iommu_attach_device plus iommu_setup_dma_ops: dev's DMA goes
// through dom from now on.
func Attach(dev *dma.Device, dom *Domain, opt AttachOptions) *Translator {
	t := &Translator{dom: dom, dev: dev, opt: opt}
	if opt.ATS {
		n := max(dom.unit.params.ATCEntries, 1)
		t.atc = newIOTLB(n, n)
		t.rtt = opt.ATSRoundTrip
		if t.rtt == 0 {
			t.rtt = dom.unit.atsRoundTrip(dev.Name())
		}
	}
	dom.attached = append(dom.attached, t)
	dev.SetTranslator(t)
	return t
}

// Detach is iommu_detach_device: the device leaves the domain for
// dma-direct (the model's stand-in for the default domain it returns
// to), its ATC dropped. Mappings made for it stay in the domain until
// unmapped.
func (t *Translator) Detach() {
	for i, x := range t.dom.attached {
		if x == t {
			t.dom.attached = append(t.dom.attached[:i], t.dom.attached[i+1:]...)
			break
		}
	}
	if t.atc != nil {
		t.atc.invalidateDomain(0)
	}
	if t.dev.Translator() == dma.Translator(t) {
		t.dev.SetTranslator(dma.Direct{})
	}
}

// ATS says whether the device was attached with ATS.
func (t *Translator) ATS() bool { return t.atc != nil }

// ATC is the device's ATS translation cache (nil without ATS).
func (t *Translator) ATC() *IOTLB { return t.atc }

// Translated runs fn with every request the device makes marked
// translated (the PCIe AT field 10b: the address is a physical address
// the device claims it got from a translation). With ATS the unit lets
// such requests through without looking at its tables, whatever they
// name: the trust ATS asks for (each is reported, OpTranslated).
// Without ATS it blocks them (ErrTranslatedRequest). A device model
// with ATS sends its ATC's translations this way implicitly; Translated
// is what a buggy or malicious device does on its own.
func (t *Translator) Translated(fn func()) {
	t.translated = true
	defer func() { t.translated = false }()
	fn()
}

// Domain is the domain the device is attached to.
func (t *Translator) Domain() *Domain { return t.dom }

// Name says which unit and domain translate.
func (t *Translator) Name() string {
	return fmt.Sprintf("iommu %s domain %d", t.dom.unit.name, t.dom.id)
}

// Granule is the IOVA granule.
func (t *Translator) Granule() uint64 { return Granule }

// Ways is how many translations of one access the unit serves at once
// (Params.Walkers): the DMA layer overlaps an access's later pages with
// its movement, as a device with many outstanding requests sees.
func (t *Translator) Ways() int { return max(1, t.dom.unit.params.Walkers) }

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
			t.dom.invalidateATCs(nil, uint64(iova), uint64(a-iova))
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
	t.dom.invalidateATCs(p, uint64(iova), n)
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
// the tables from below the deepest level the paging-structure caches
// hold (one table read, WalkReadCost or the placed machine's, per level
// read), whose leaf is then cached. A device with ATS looks in its own
// ATC first: a hit costs nothing at the IOMMU and is not checked there;
// a miss is a translation request (the link's round trip, then the
// IOTLB or walk as above) whose answer the ATC keeps. An unmapped page
// is ErrFault, a missing permission ErrPermission; then no range is
// returned and the access changes nothing. A hit on an entry whose
// mapping is gone (lazy mode, before the flush) still translates, and
// is reported as OpStaleHit.
func (t *Translator) ToPhys(out []mem.PhysRange, a mem.DMAAddr, size uint64, write bool) ([]mem.PhysRange, sim.Time, error) {
	if t.translated {
		return t.translatedRequest(out, a, size, write)
	}
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
		if x := t.atcLookup(cur); x != nil {
			pa, prot, shift = x.pa, x.prot, x.shift
			if lx, _, _, _ := d.leaf(cur); lx == nil || lx.pa != pa || lx.prot != prot {
				t.staleHit(cur, pa+mem.PhysAddr(cur&(1<<shift-1)), prot, write, true)
			}
		} else {
			if t.atc != nil {
				u.stats.ATSRequests++
				cost += t.rtt
			}
			var c sim.Time
			var err error
			pa, prot, shift, c, err = t.iommuTranslate(cur, write)
			cost += c
			if err != nil {
				return out[:n0], cost, err
			}
			if t.atc != nil {
				t.atc.insert(0, cur, shift, pa, prot)
			}
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

// atcLookup is the device's ATC lookup, nil without ATS or on a miss.
func (t *Translator) atcLookup(iova uint64) *tlbEntry {
	if t.atc == nil {
		return nil
	}
	return t.atc.lookup(0, iova)
}

// iommuTranslate is the unit's translation of the page at cur: the
// IOTLB, else a walk. It returns the leaf's address, permissions and
// size, and the cost.
func (t *Translator) iommuTranslate(cur uint64, write bool) (mem.PhysAddr, Prot, uint, sim.Time, error) {
	u, d := t.dom.unit, t.dom
	if x := u.tlb.lookup(d.id, cur); x != nil {
		pa, prot, shift := x.pa, x.prot, x.shift
		if lx, _, _, _ := d.leaf(cur); lx == nil || lx.pa != pa || lx.prot != prot {
			t.staleHit(cur, pa+mem.PhysAddr(cur&(1<<shift-1)), prot, write, false)
		}
		return pa, prot, shift, u.params.HitCost, nil
	}
	if cur >= 1<<vaBits {
		return 0, 0, 0, 0, t.fault(cur, write, ErrFault)
	}
	start := u.psc.start(d.id, cur)
	lx, _, level, _ := d.leaf(cur)
	reads := max(level-start+1, 1)
	u.stats.Walks++
	u.stats.WalkReads += uint64(reads)
	cost := sim.Time(reads) * u.walkRead
	// The non-leaf entries the walk went through are cached: those
	// above the leaf, or above the level where the walk found nothing.
	u.psc.fill(d.id, cur, start, level)
	if lx == nil {
		return 0, 0, 0, cost, t.fault(cur, write, ErrFault)
	}
	shift := levelShift[level]
	u.tlb.insert(d.id, cur, shift, lx.pa, lx.prot)
	return lx.pa, lx.prot, shift, cost, nil
}

// translatedRequest is an ATS translated request at physical address
// a: let through unchecked for a device with ATS, blocked otherwise.
func (t *Translator) translatedRequest(out []mem.PhysRange, a mem.DMAAddr, size uint64, write bool) ([]mem.PhysRange, sim.Time, error) {
	u := t.dom.unit
	if t.atc == nil {
		return out, 0, t.fault(uint64(a), write, ErrTranslatedRequest)
	}
	u.stats.Translated++
	if u.Hooks.Active() {
		u.emit(Event{Op: OpTranslated, Domain: t.dom.id, Device: t.dev.Name(), IOVA: a, Size: size, Phys: mem.PhysAddr(a), Write: write, Translated: true,
			Warn: "ATS translated request: not checked against the domain's tables"}, "", sim.CauseAccess)
	}
	return append(out, mem.PhysRange{Start: mem.PhysAddr(a), Size: size}), 0, nil
}

func (t *Translator) staleHit(iova uint64, pa mem.PhysAddr, prot Prot, write, atc bool) {
	u := t.dom.unit
	u.stats.StaleHits++
	if u.Hooks.Active() {
		warn := "IOTLB entry of an unmapped IOVA (lazy invalidation)"
		if atc {
			warn = "ATC entry of an unmapped IOVA (lazy invalidation)"
		}
		u.emit(Event{Op: OpStaleHit, Domain: t.dom.id, Device: t.dev.Name(), IOVA: mem.DMAAddr(iova), Phys: pa, Prot: prot, Write: write,
			ATC: atc, Warn: warn}, "", sim.CauseAccess)
	}
}

func rwName(write bool) string {
	if write {
		return "write"
	}
	return "read"
}
