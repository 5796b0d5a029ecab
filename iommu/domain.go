package iommu

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Prot is a mapping's permissions (IOMMU_READ, IOMMU_WRITE): what the
// device may do through it.
type Prot uint8

const (
	// ProtRead lets the device read memory (DMA_TO_DEVICE).
	ProtRead Prot = 1 << iota
	// ProtWrite lets the device write memory (DMA_FROM_DEVICE).
	ProtWrite
)

func (p Prot) String() string {
	s := []byte("--")
	if p&ProtRead != 0 {
		s[0] = 'r'
	}
	if p&ProtWrite != 0 {
		s[1] = 'w'
	}
	return string(s)
}

// The table format: 4 levels of 512 entries, 9 bits of IOVA each above
// the 12-bit page offset (48-bit IOVAs, VT-d's 4-level and the
// LPAE/SMMUv3 stage-1 format with a 4 KiB granule).
const (
	levels     = 4
	ptesPerTbl = 512
	// vaBits is the domain's IOVA width (aperture_end + 1 = 2^48).
	vaBits = 48
)

// levelShift is the IOVA shift of one entry at each level: level 0
// entries span 512 GiB, level 1 1 GiB, level 2 2 MiB, level 3 4 KiB.
var levelShift = [levels]uint{39, 30, 21, 12}

// Page sizes, largest first (domain->pgsize_bitmap: SZ_4K | SZ_2M | SZ_1G).
var pageSizes = [...]struct {
	size  uint64
	level int
}{{1 << 30, 1}, {1 << 21, 2}, {1 << 12, 3}}

// pte is one entry: a next-level table, or a leaf (prot != 0) mapping
// pa.
type pte struct {
	next *table
	pa   mem.PhysAddr
	prot Prot
}

// table is one page of entries; pa is the page of mem it occupies.
type table struct {
	pa   mem.PhysAddr
	used int
	e    [ptesPerTbl]pte
}

// Domain is struct iommu_domain of type DMA: a page table, the IOVA
// space dma-iommu allocates in (the domain's iova_cookie) and its flush
// queue.
type Domain struct {
	unit   *Unit
	id     int
	root   *table
	tables int
	iovad  *IOVADomain
	fq     flushQueue
	// attached are the devices attached to it (Attach), in order.
	attached []*Translator
	// handler and token are iommu_set_fault_handler's.
	handler FaultHandler
	token   any
	freed   bool
}

// NewDomain is iommu_domain_alloc on u: a domain with its root table.
func (u *Unit) NewDomain() (*Domain, error) {
	u.domains++
	d := &Domain{unit: u, id: u.domains, iovad: NewIOVADomain(u.params.CPUs)}
	root, err := d.newTable()
	if err != nil {
		return nil, fmt.Errorf("iommu_domain_alloc(%s): %w", u.name, err)
	}
	d.root = root
	return d, nil
}

// ID identifies the domain in the unit's IOTLB and events (the VT-d
// domain id, the SMMU ASID).
func (d *Domain) ID() int { return d.id }

// Unit is the IOMMU the domain belongs to.
func (d *Domain) Unit() *Unit { return d.unit }

// IOVAs is the domain's IOVA allocator.
func (d *Domain) IOVAs() *IOVADomain { return d.iovad }

// TablePages is how many 4 KiB pages of memory the domain's tables
// hold.
func (d *Domain) TablePages() int { return d.tables }

func (d *Domain) newTable() (*table, error) {
	pa, err := d.unit.mem.AllocPages(d.unit.node, mem.PageSize, mem.ZoneNormal)
	if err != nil {
		return nil, err
	}
	d.tables++
	return &table{pa: pa}, nil
}

// freeTable returns t and the tables below it to memory.
func (d *Domain) freeTable(t *table) error {
	var errs []error
	for i := range t.e {
		if t.e[i].next != nil {
			errs = append(errs, d.freeTable(t.e[i].next))
		}
	}
	d.tables--
	errs = append(errs, d.unit.mem.FreePages(t.pa, mem.PageSize))
	return errors.Join(errs...)
}

// Free is iommu_put_dma_cookie then iommu_domain_free: the flush
// queue's timer stopped and its IOVAs drained (one domain-wide
// invalidation, then every queued IOVA freed, as a flush does, paid by
// no thread), the domain's IOTLB and paging-structure cache entries
// dropped, and every table given back to memory. A domain a device is
// still attached to (Attach, and the device's translator still this
// domain's) is refused with EBUSY and left as it was: Linux frees a
// domain only after its devices have moved to another. The domain must
// not be used after.
func (d *Domain) Free() error {
	if d.freed {
		return fmt.Errorf("iommu_domain_free(%s domain %d): already freed: %w", d.unit.name, d.id, syscall.EINVAL)
	}
	var busy []string
	for _, t := range d.attached {
		if t.dev.Translator() == dma.Translator(t) {
			busy = append(busy, t.dev.Name())
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("iommu_domain_free(%s domain %d): devices %v still attached: %w", d.unit.name, d.id, busy, syscall.EBUSY)
	}
	if d.fq.armed {
		d.unit.eng.Cancel(d.fq.timer)
		d.fq.armed = false
	}
	d.flush(nil)
	err := d.freeTable(d.root)
	d.root = nil
	d.freed = true
	d.attached = nil
	d.unit.tlb.invalidateDomain(d.id)
	d.unit.psc.invalidateDomain(d.id)
	return err
}

func index(iova uint64, level int) int { return int(iova>>levelShift[level]) & (ptesPerTbl - 1) }

// Map is iommu_map: [iova, iova+size) translates to [pa, pa+size) with
// prot, in the largest pages alignment and length allow (iommu_pgsize).
// All three must be 4 KiB-aligned and prot not empty (EINVAL); the range
// must lie in the 48-bit aperture (ERANGE); any page of it already
// mapped fails the call with nothing changed (EEXIST).
func (d *Domain) Map(iova mem.DMAAddr, pa mem.PhysAddr, size uint64, prot Prot) error {
	return d.mapFor(iova, pa, size, prot, "", "")
}

// mapFor is Map on behalf of the DMA layer's mapping for device dev by
// process proc, which its event names (the checker's provenance).
func (d *Domain) mapFor(iova mem.DMAAddr, pa mem.PhysAddr, size uint64, prot Prot, dev, proc string) error {
	err := d.mapRange(uint64(iova), pa, size, prot)
	if err != nil {
		err = fmt.Errorf("iommu_map(%v, %v, %#x, %v): %w", iova, pa, size, prot, err)
	}
	if d.unit.Hooks.Active() {
		e := Event{Op: OpMap, Domain: d.id, Device: dev, IOVA: iova, Size: size, Phys: pa, Prot: prot}
		if err != nil {
			e.Warn = err.Error()
		}
		d.unit.emit(e, proc, sim.CauseCall)
	}
	return err
}

func (d *Domain) mapRange(iova uint64, pa mem.PhysAddr, size uint64, prot Prot) error {
	if size == 0 || (iova|uint64(pa)|size)&(Granule-1) != 0 || prot&(ProtRead|ProtWrite) == 0 || prot&^(ProtRead|ProtWrite) != 0 {
		return syscall.EINVAL
	}
	if iova+size < iova || iova+size > 1<<vaBits {
		return syscall.ERANGE
	}
	if d.anyMapped(d.root, 0, iova, iova+size) {
		return syscall.EEXIST
	}
	for done := uint64(0); done < size; {
		a, p, rem := iova+done, uint64(pa)+done, size-done
		for _, ps := range pageSizes {
			if ps.size <= rem && (a|p)&(ps.size-1) == 0 {
				if err := d.install(a, mem.PhysAddr(p), ps.level, prot); err != nil {
					d.unmapRange(iova, done)
					return err
				}
				done += ps.size
				break
			}
		}
	}
	return nil
}

// anyMapped reports whether a leaf of t (at level) overlaps [s, e).
func (d *Domain) anyMapped(t *table, level int, s, e uint64) bool {
	shift := levelShift[level]
	span := uint64(1) << shift
	for a := s; a < e; {
		next := (a &^ (span - 1)) + span
		x := &t.e[index(a, level)]
		if x.prot != 0 {
			return true
		}
		if x.next != nil && x.next.used > 0 && d.anyMapped(x.next, level+1, a, min(e, next)) {
			return true
		}
		if next == 0 {
			break
		}
		a = next
	}
	return false
}

// install sets the leaf at level for iova, making tables on the way. An
// empty table where the leaf goes is freed (a huge page replaces it).
func (d *Domain) install(iova uint64, pa mem.PhysAddr, level int, prot Prot) error {
	t := d.root
	for l := 0; l < level; l++ {
		x := &t.e[index(iova, l)]
		if x.next == nil {
			nt, err := d.newTable()
			if err != nil {
				return err
			}
			x.next = nt
			t.used++
		}
		t = x.next
	}
	x := &t.e[index(iova, level)]
	if x.next != nil {
		if err := d.freeTable(x.next); err != nil {
			return err
		}
		x.next = nil
		t.used--
		// The freed table may be cached as a walk's next step.
		d.unit.psc.invalidateDomain(d.id)
	}
	*x = pte{pa: pa, prot: prot}
	t.used++
	return nil
}

// leaf is the leaf mapping iova: its entry, table, level and the walk's
// table reads.
func (d *Domain) leaf(iova uint64) (x *pte, t *table, level, reads int) {
	t = d.root
	for l := 0; l < levels; l++ {
		reads++
		x = &t.e[index(iova, l)]
		if x.prot != 0 {
			return x, t, l, reads
		}
		if x.next == nil {
			return nil, nil, l, reads
		}
		t = x.next
	}
	return nil, nil, levels, reads
}

// IOVAToPhys is iommu_iova_to_phys: the physical address iova
// translates to, and false where nothing is mapped.
func (d *Domain) IOVAToPhys(iova mem.DMAAddr) (mem.PhysAddr, bool) {
	if uint64(iova) >= 1<<vaBits {
		return 0, false
	}
	x, _, level, _ := d.leaf(uint64(iova))
	if x == nil {
		return 0, false
	}
	return x.pa + mem.PhysAddr(uint64(iova)&(1<<levelShift[level]-1)), true
}

// Unmap is iommu_unmap: it removes the mappings from iova on, leaf by
// leaf, until size bytes are unmapped, and returns how many were. As
// Linux, it stops at the first page that is not mapped (an unmap of what
// is not mapped returns 0) and at a huge page the range starts inside
// of; a range smaller than the huge page it starts at unmaps the whole
// page. A misaligned call unmaps nothing. It then invalidates the range
// in the IOTLB (iommu_iotlb_sync). An incomplete unmap is reported with
// Warn.
func (d *Domain) Unmap(iova mem.DMAAddr, size uint64) uint64 {
	n := d.unmapFast(iova, size, "", "")
	d.unit.tlb.invalidateRange(d.id, uint64(iova), max(n, size))
	d.invalidateATCs(nil, uint64(iova), max(n, size))
	return n
}

// unmapFast is iommu_unmap_fast: the tables only, the IOTLB untouched.
// dev and proc, when the DMA layer unmaps, are the device and the
// process its event names.
func (d *Domain) unmapFast(iova mem.DMAAddr, size uint64, dev, proc string) uint64 {
	var n uint64
	warn := ""
	if size == 0 || (uint64(iova)|size)&(Granule-1) != 0 {
		warn = fmt.Sprintf("unaligned: iova %v size %#x min_pagesz 0x1000", iova, size)
	} else {
		n = d.unmapRange(uint64(iova), size)
		if n < size {
			warn = fmt.Sprintf("unmapped %#x of %#x bytes at %v: not mapped", n, size, iova)
		}
	}
	if d.unit.Hooks.Active() {
		d.unit.emit(Event{Op: OpUnmap, Domain: d.id, Device: dev, IOVA: iova, Size: size, Unmapped: n, Warn: warn}, proc, sim.CauseCall)
	}
	return n
}

func (d *Domain) unmapRange(iova, size uint64) uint64 {
	var n uint64
	for n < size {
		a := iova + n
		if a >= 1<<vaBits {
			break
		}
		x, t, level, _ := d.leaf(a)
		if x == nil || a&(1<<levelShift[level]-1) != 0 {
			break
		}
		*x = pte{}
		t.used--
		n += 1 << levelShift[level]
	}
	return n
}
