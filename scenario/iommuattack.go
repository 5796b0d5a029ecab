package scenario

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

func init() {
	register(&Scenario{
		Name:     "iommu-attack",
		Summary:  "a malicious device issues random DMAs: with the IOMMU off it reads a kernel secret; strict mode stops every escape, lazy mode leaks only through stale IOTLB entries",
		Platform: "2s-4gpu-pcie",
		Doc: `A kernel secret (64 bytes the CPU wrote into a kmalloc'd buffer) sits in
memory. A correct driver runs the device's receive ring: page-pool pages
mapped DMA_FROM_DEVICE, a packet written into the oldest by the device,
then unmapped, read and mapped again, one every microsecond. Meanwhile the
device is malicious: every 100 ns it issues one DMA of random length (1 B
to 4 KiB) and direction (read or write) at a random bus address, drawn in
thirds from a window of "span" bytes of physical memory around the secret
(the physical layout of a kernel's slab is predictable), from the window of
"span" bytes below 4 GiB where dma-iommu hands out IOVAs to a PCI device,
and from the bus addresses the driver once gave it (it saw them in its
descriptors), at a random offset in their page.

Modes (each on a fresh IOMMU unit, in the order given):
  off     dma-direct: bus addresses are physical, nothing is checked;
  strict  the device attached to a domain that invalidates the IOTLB at
          every unmap (iommu.strict=1);
  lazy    the same with the flush queue (256 IOVAs or 10 ms per flush):
          until the flush an IOTLB entry of an unmapped page still
          translates (drivers/iommu/dma-iommu.c, IOVA_FQ_SIZE,
          IOVA_FQ_TIMEOUT).
  strict-ats, lazy-ats
          strict or lazy with the device trusted with PCIe ATS (not in
          the default list): it has its own translation cache, and the
          DMAs it aims at the physical window go out as ATS translated
          requests naming those physical addresses, which the IOMMU
          passes unchecked. Linux refuses ATS to untrusted devices
          (pci_ats_supported, dev->untrusted) for this reason.

Per mode (size is the span; time the attack's): the DMAs issued (ops), those refused (faults: an IOMMU fault, or
an address that is not memory), escapes (DMAs that reached memory outside
the pages mapped for the device at that moment, seen on the memory's
device accesses), the escapes through stale IOTLB entries, whether a read
covered the secret, and the 4 KiB pages outside the device's mappings
whose newest version changed during the attack (both windows compared page
by page before and after: the proof, by versions, that nothing was written
there). Expected: off escapes and, with enough DMAs, reads the secret;
strict has no escape and no changed line; lazy escapes only through stale
entries, in the flush window after each unmap; with ATS trusted the
IOMMU is on and the device escapes anyway, through its translated
requests.`,
		Params: []Param{
			{Name: "dmas", Kind: dmalab.ParamInt, Min: 1, Max: maxAttackDMAs, Default: "10000", Help: "DMAs the device issues per mode"},
			{Name: "modes", Kind: dmalab.ParamList, Values: []string{"off", "strict", "lazy", "strict-ats", "lazy-ats"}, Item: "mode", Default: "off,strict,lazy", Help: "IOMMU modes, in order"},
			{Name: "span", Kind: dmalab.ParamSize, Max: maxAttackSpan, Default: "1MiB", Help: "bytes of each window the device sprays (at least 64KiB)"},
			{Name: "device", Default: "", Help: "the malicious device (default: the platform's first NIC)"},
		},
		Run: runIOMMUAttack,
	})
}

// Bounds and shape of iommu-attack.
const (
	// maxAttackDMAs bounds the DMAs per mode (each is a few events).
	maxAttackDMAs = 1_000_000
	// maxAttackSpan bounds a window: both are compared page by page.
	maxAttackSpan = 64 << 20
	minAttackSpan = 64 << 10
	// attackRing is the driver's rx ring: page-pool pages.
	attackRing = 16
	// attackMaxLen is the longest DMA the device issues.
	attackMaxLen = 4096
	// secretSize is the secret's length.
	secretSize = 64
	// attackEvery and recycleEvery pace the device and the driver.
	attackEvery  = 100 * sim.Nanosecond
	recycleEvery = 1 * sim.Microsecond
	// rxPacket is the legitimate packet the device writes.
	rxPacket = 1500
)

// attackStats are one mode's counts.
type attackStats struct {
	dmas, faults, escapes, stale, changed int64
	secretRead                            bool
	took                                  sim.Time
}

// attackRig is what the modes share: the device, the secret, the ring's
// pages and the windows.
type attackRig struct {
	c       *Context
	dev     *dma.Device
	secret  mem.PhysAddr
	ring    []mem.PhysAddr
	windows [2]mem.PhysAddr // starts of the physical and the IOVA window
	span    uint64

	// mapped holds the ring pages mapped for the device now; attacking
	// marks the device's own DMAs, whose memory accesses the hook judges.
	mapped    map[mem.PhysAddr]bool
	attacking bool
	escaped   bool
	st        *attackStats
}

func runIOMMUAttack(c *Context) error {
	span := uint64(c.Size("span"))
	if span < minAttackSpan {
		return usagef("--set span=%s: want at least 64KiB", c.Text("span"))
	}
	dev, err := pickDevice(c, c.Value("device"))
	if err != nil {
		return err
	}
	m := c.Mem
	node := dev.Node()
	va, err := m.Kmalloc(node, secretSize)
	if err != nil {
		return fmt.Errorf("iommu-attack: kmalloc of the secret: %w", err)
	}
	_, secret, _ := m.Classify(va)
	r := &attackRig{c: c, dev: dev, secret: secret, span: span, mapped: map[mem.PhysAddr]bool{}}
	base, size := m.NodeRange(node)
	if span > size {
		return usagef("--set span=%s: node %d of platform %s has only %s", c.Text("span"), node, c.Machine.Spec.Name, report.FormatBytes(int64(size)))
	}
	w := secret &^ mem.PhysAddr(span-1)
	w = max(w, base)
	w = min(w, base+mem.PhysAddr(size-span))
	r.windows = [2]mem.PhysAddr{w, mem.PhysAddr(1<<32 - span)}
	for range attackRing {
		pa, err := m.AllocPages(node, mem.PageSize, mem.ZoneNormal)
		if err != nil {
			return fmt.Errorf("iommu-attack: rx page: %w", err)
		}
		r.ring = append(r.ring, pa)
	}
	m.Hooks.Hook(r.judge)

	var runErr error
	var rows []attackStats
	modes := c.List("modes")
	c.Engine.Spawn("setup", func(p *sim.Proc) {
		m.Write(p, node, va, secretSize)
		for _, mode := range modes {
			st, err := r.run(p, mode)
			if err != nil {
				runErr = err
				return
			}
			rows = append(rows, st)
		}
	})
	if err := errors.Join(c.RunEngine("dmas"), runErr); err != nil {
		return err
	}
	for i, st := range rows {
		c.Result.Results = append(c.Result.Results, report.Row{
			Name: fmt.Sprintf("%s %s", dev.Name(), modes[i]), Path: modes[i], Direction: "attack",
			Bytes: int64(span), Ops: st.dmas, Seconds: st.took.Seconds(), Faults: st.faults,
			Escapes: st.escapes, StaleEscapes: st.stale, SecretRead: st.secretRead, Changed: st.changed,
		})
	}
	return nil
}

// run is one mode: the device behind its translation, the driver and
// the attacker until the attacker's DMAs are done, then the proof by
// versions and the device back on dma-direct.
func (r *attackRig) run(p *sim.Proc, mode string) (_ attackStats, retErr error) {
	c, dev := r.c, r.dev
	var unit *iommu.Unit
	var tr *iommu.Translator
	ats := strings.HasSuffix(mode, "-ats")
	if mode != "off" {
		im := iommu.Strict
		if strings.HasPrefix(mode, "lazy") {
			im = iommu.Lazy
		}
		var err error
		unit, err = iommu.NewUnit("dmar-"+mode, c.Mem, c.Engine, dev.Node(), im, iommu.DefaultParams())
		if err != nil {
			return attackStats{}, err
		}
		// The system's hooks and, under "dmalab check", the IOMMU
		// rule pack watch the unit.
		c.AttachIOMMU(unit)
		dom, err := unit.NewDomain()
		if err != nil {
			return attackStats{}, err
		}
		tr = iommu.Attach(dev, dom, iommu.AttachOptions{PCI: true, ATS: ats})
		defer func() {
			// The flush queue is emptied before the domain goes, as
			// iommu_put_dma_cookie does.
			dom.Flush(p)
			dev.SetTranslator(dma.Direct{})
			if err := dom.Free(); err != nil && retErr == nil {
				retErr = err
			}
		}()
	}
	st := attackStats{}
	r.st = &st
	before := r.versions()

	// The driver: the ring mapped, then one packet per tick received,
	// unmapped, read and the page mapped again.
	addr := make([]mem.DMAAddr, len(r.ring))
	var given []mem.DMAAddr
	mapPage := func(p *sim.Proc, i int) error {
		// The page counts as mapped from the start of the map call to
		// the end of the unmap call: the device may reach it while the
		// call still does its cache maintenance.
		r.mapped[r.ring[i]] = true
		a := dev.MapPage(p, r.ring[i], 0, mem.PageSize, dma.FromDevice)
		if dev.MappingError(a) {
			delete(r.mapped, r.ring[i])
			return fmt.Errorf("iommu-attack %s: dma_map_page of rx page %d failed", mode, i)
		}
		addr[i] = a
		given = append(given, a)
		return nil
	}
	for i := range r.ring {
		if err := mapPage(p, i); err != nil {
			return st, err
		}
	}
	finished := false
	var drvErr error
	driver := c.Engine.Spawn(dev.Name()+"-driver", func(p *sim.Proc) {
		for k := 0; !finished; k++ {
			i := k % len(r.ring)
			if _, err := dev.Write(addr[i], rxPacket); err != nil {
				drvErr = fmt.Errorf("iommu-attack %s: the device's packet: %w", mode, err)
				break
			}
			dev.UnmapPage(p, addr[i], mem.PageSize, dma.FromDevice)
			delete(r.mapped, r.ring[i])
			c.Mem.Read(p, dev.Node(), c.Mem.PhysToVirt(r.ring[i]), rxPacket)
			if err := mapPage(p, i); err != nil {
				drvErr = err
				break
			}
			p.Sleep(recycleEvery)
		}
	})
	rng := c.Engine.Rand()
	t0 := p.Now()
	for range c.Int("dmas") {
		p.Sleep(attackEvery)
		var a mem.DMAAddr
		translated := false
		switch rng.IntN(3) {
		case 0, 1:
			wi := rng.IntN(2)
			a = mem.DMAAddr(r.windows[wi]) + mem.DMAAddr(rng.Uint64N(r.span))
			// With ATS the physical window's addresses go out as
			// translated requests.
			translated = ats && wi == 0
		default:
			g := given[rng.IntN(len(given))]
			a = g&^(mem.PageSize-1) + mem.DMAAddr(rng.Uint64N(mem.PageSize))
		}
		n := 1 + rng.Uint64N(attackMaxLen)
		write := rng.IntN(2) == 0
		stale0 := uint64(0)
		if unit != nil {
			stale0 = unit.Stats().StaleHits
		}
		r.attacking, r.escaped = true, false
		var err error
		access := func() {
			if write {
				_, err = dev.Write(a, n)
			} else {
				_, err = dev.Read(a, n)
			}
		}
		if translated {
			tr.Translated(access)
		} else {
			access()
		}
		r.attacking = false
		st.dmas++
		switch {
		case err != nil:
			st.faults++
		case r.escaped:
			st.escapes++
			if unit != nil && unit.Stats().StaleHits > stale0 {
				st.stale++
			}
		}
	}
	st.took = p.Now() - t0
	finished = true
	p.Join(driver)
	if drvErr != nil {
		return st, drvErr
	}
	for i := range r.ring {
		dev.UnmapPage(p, addr[i], mem.PageSize, dma.FromDevice)
		delete(r.mapped, r.ring[i])
	}
	after := r.versions()
	for k, v := range before {
		if after[k] != v {
			st.changed++
		}
	}
	return st, nil
}

// judge sees every memory access: one of the attacker's that reaches
// memory outside the pages mapped for it now is an escape, and a read
// over the secret reads it.
func (r *attackRig) judge(a *mem.Access) {
	if !r.attacking || a.Err != nil || (a.Kind != mem.DeviceRead && a.Kind != mem.DeviceWrite) {
		return
	}
	end := a.Phys + mem.PhysAddr(a.Size)
	for pg := a.Phys &^ (mem.PageSize - 1); pg < end; pg += mem.PageSize {
		if !r.mapped[pg] {
			r.escaped = true
		}
	}
	if a.Kind == mem.DeviceRead && a.Phys < r.secret+secretSize && r.secret < end {
		r.st.secretRead = true
	}
}

// versions is the newest version written to each page of both windows
// outside the ring's pages: what the device may not change.
func (r *attackRig) versions() map[mem.PhysAddr]mem.Version {
	ring := map[mem.PhysAddr]bool{}
	for _, pa := range r.ring {
		ring[pa] = true
	}
	out := map[mem.PhysAddr]mem.Version{}
	for _, w := range r.windows {
		for pa := w; pa < w+mem.PhysAddr(r.span); pa += mem.PageSize {
			if _, ok := r.c.Mem.NodeOf(pa); ok && !ring[pa] {
				out[pa] = r.c.Mem.LatestIn(pa, mem.PageSize)
			}
		}
	}
	return out
}
