package iommucheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is 2s-4gpu-pcie with one IOMMU unit, nic0 behind a domain of it
// as a PCI device, and the pack on a checker watching the unit and the
// DMA layer.
type rig struct {
	t    *testing.T
	m    *machine.Machine
	x    *dma.DMA
	unit *iommu.Unit
	dom  *iommu.Domain
	nic  *dma.Device
	c    *check.Checker
	pack *Pack
}

func newRig(t *testing.T, mode iommu.Mode, watchDMA bool) *rig {
	t.Helper()
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	m, err := machine.NewWithOptions(spec, 1, machine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	x, err := dma.New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	u, err := iommu.NewUnit("dmar0", m.Mem, m.Engine, 0, mode, iommu.DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	dom, err := u.NewDomain()
	if err != nil {
		t.Fatal(err)
	}
	nic, err := x.Device("nic0")
	if err != nil {
		t.Fatal(err)
	}
	iommu.Attach(nic, dom, iommu.AttachOptions{PCI: true})
	r := &rig{t: t, m: m, x: x, unit: u, dom: dom, nic: nic, c: check.New(check.Options{})}
	p := Attach(r.c, u)
	if watchDMA {
		p.WatchDMA(x)
	}
	r.pack = p
	return r
}

// page is one page of memory for a buffer.
func (r *rig) page() mem.PhysAddr {
	r.t.Helper()
	pa, err := r.m.Mem.AllocPages(0, mem.PageSize, mem.ZoneNormal)
	if err != nil {
		r.t.Fatal(err)
	}
	return pa
}

// run runs body as the driver's process "drv", from 1 us on (so that a
// diagnostic's time is not zero), to the end of virtual time (a lazy
// domain's flush timer included).
func (r *rig) run(body func(p *sim.Proc)) {
	r.t.Helper()
	r.m.Engine.Spawn("drv", func(p *sim.Proc) {
		p.Sleep(sim.Microsecond)
		body(p)
	})
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked: %v", b)
	}
}

// must fails on an error where correct use expects none; the misuse
// steps ignore theirs (the IOMMU blocks, the checker records).
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// classCase is one class: a misuse and the correct use next to it.
type classCase struct {
	name, code string
	mode       iommu.Mode
	// origin starts the origin the diagnostic must have; msg are words
	// its message must hold (the reason).
	origin    string
	msg       []string
	bad, good func(t *testing.T, r *rig, p *sim.Proc)
}

func classCases() []classCase {
	return []classCase{
		{name: "use after unmap", code: IOMMUFault, mode: iommu.Strict,
			origin: "dma_map_page(nic0, pa:", msg: []string{"nic0 writes", "not mapped in dmar0 domain 1", "blocked", "unmapped by dma_unmap_page(nic0"},
			bad: func(t *testing.T, r *rig, p *sim.Proc) {
				a := r.nic.MapPage(p, r.page(), 0, 1500, dma.FromDevice)
				r.nic.MappingError(a)
				_, err := r.nic.Write(a, 1500)
				must(t, err)
				r.nic.UnmapPage(p, a, 1500, dma.FromDevice)
				r.nic.Write(a, 1500)
			},
			good: func(t *testing.T, r *rig, p *sim.Proc) {
				a := r.nic.MapPage(p, r.page(), 0, 1500, dma.FromDevice)
				r.nic.MappingError(a)
				_, err := r.nic.Write(a, 1500)
				must(t, err)
				r.nic.UnmapPage(p, a, 1500, dma.FromDevice)
			}},
		{name: "vfio never mapped", code: VFIOUnmapped, mode: iommu.Strict,
			origin: "VFIO_IOMMU_MAP_DMA(container1, vaddr va:",
			msg:    []string{"nic0, assigned to user space (container1 of udrv)", "writes dma:0x200000", "container1 never mapped", "blocked", "it has mapped dma:0x100000 +0x1000"},
			bad: func(t *testing.T, r *rig, p *sim.Proc) {
				r.userDriver(t, p)
				_, err := r.nic.Write(0x100000, 64)
				must(t, err)
				r.nic.Write(0x200000, 64)
			},
			good: func(t *testing.T, r *rig, p *sim.Proc) {
				r.userDriver(t, p)
				_, err := r.nic.Write(0x100000, 64)
				must(t, err)
			}},
		{name: "never mapped", code: IOMMUFault, mode: iommu.Strict,
			origin: "", msg: []string{"nic0 reads dma:0x1000,", "not mapped", "(no mapping there among the last unmaps"},
			bad: func(t *testing.T, r *rig, p *sim.Proc) {
				r.nic.Read(0x1000, 64)
			},
			good: func(t *testing.T, r *rig, p *sim.Proc) {
				a := r.nic.MapPage(p, r.page(), 0, 64, dma.ToDevice)
				r.nic.MappingError(a)
				_, err := r.nic.Read(a, 64)
				must(t, err)
				r.nic.UnmapPage(p, a, 64, dma.ToDevice)
			}},
		{name: "write through read-only", code: IOMMUPermission, mode: iommu.Strict,
			origin: "dma_map_page(nic0, pa:", msg: []string{"nic0 writes", "without write permission", "r- mapping"},
			bad: func(t *testing.T, r *rig, p *sim.Proc) {
				a := r.nic.MapPage(p, r.page(), 0, 1500, dma.ToDevice)
				r.nic.MappingError(a)
				r.nic.Write(a, 1500)
				r.nic.UnmapPage(p, a, 1500, dma.ToDevice)
			},
			good: func(t *testing.T, r *rig, p *sim.Proc) {
				a := r.nic.MapPage(p, r.page(), 0, 1500, dma.ToDevice)
				r.nic.MappingError(a)
				_, err := r.nic.Read(a, 1500)
				must(t, err)
				r.nic.UnmapPage(p, a, 1500, dma.ToDevice)
			}},
		{name: "read through write-only", code: IOMMUPermission, mode: iommu.Strict,
			origin: "dma_map_single(nic0, va:", msg: []string{"nic0 reads", "without read permission", "-w mapping"},
			bad: func(t *testing.T, r *rig, p *sim.Proc) {
				va := r.m.Mem.PhysToVirt(r.page())
				a := r.nic.MapSingle(p, va, 1500, dma.FromDevice)
				r.nic.MappingError(a)
				r.nic.Read(a, 64)
				r.nic.UnmapSingle(p, a, 1500, dma.FromDevice)
			},
			good: func(t *testing.T, r *rig, p *sim.Proc) {
				va := r.m.Mem.PhysToVirt(r.page())
				a := r.nic.MapSingle(p, va, 1500, dma.FromDevice)
				r.nic.MappingError(a)
				_, err := r.nic.Write(a, 1500)
				must(t, err)
				r.nic.UnmapSingle(p, a, 1500, dma.FromDevice)
			}},
		{name: "lazy window", code: IOMMUStaleIOTLB, mode: iommu.Lazy,
			origin: "dma_unmap_page(nic0, dma:", msg: []string{"nic0 writes", "stale IOTLB entry of dmar0 domain 1", "made by dma_map_page(nic0"},
			bad: func(t *testing.T, r *rig, p *sim.Proc) {
				a := r.nic.MapPage(p, r.page(), 0, 1500, dma.FromDevice)
				r.nic.MappingError(a)
				_, err := r.nic.Write(a, 1500)
				must(t, err)
				r.nic.UnmapPage(p, a, 1500, dma.FromDevice)
				p.Sleep(sim.Microsecond)
				r.nic.Write(a, 1500) // lands: the IOTLB still has it
			},
			good: func(t *testing.T, r *rig, p *sim.Proc) {
				// The same window, and a device that stops at the
				// unmap: lazy mode is correct for a correct driver.
				a := r.nic.MapPage(p, r.page(), 0, 1500, dma.FromDevice)
				r.nic.MappingError(a)
				_, err := r.nic.Write(a, 1500)
				must(t, err)
				r.nic.UnmapPage(p, a, 1500, dma.FromDevice)
				p.Sleep(sim.Microsecond)
				b := r.nic.MapPage(p, r.page(), 0, 1500, dma.FromDevice)
				r.nic.MappingError(b)
				_, err = r.nic.Write(b, 1500)
				must(t, err)
				r.nic.UnmapPage(p, b, 1500, dma.FromDevice)
			}},
		{name: "unbind with mappings", code: IOVALeak, mode: iommu.Lazy,
			origin: "dma_map_page(nic0, pa:", msg: []string{"driver unbound from nic0 with 2 IOVA mappings (8192 bytes", "dmar0 domain 1"},
			bad: func(t *testing.T, r *rig, p *sim.Proc) {
				a := r.nic.MapPage(p, r.page(), 0, 1500, dma.FromDevice)
				r.nic.MappingError(a)
				b := r.nic.MapPage(p, r.page(), 0, 4096, dma.ToDevice)
				r.nic.MappingError(b)
				r.nic.Unbind(p)
			},
			good: func(t *testing.T, r *rig, p *sim.Proc) {
				a := r.nic.MapPage(p, r.page(), 0, 1500, dma.FromDevice)
				r.nic.MappingError(a)
				b := r.nic.MapPage(p, r.page(), 0, 4096, dma.ToDevice)
				r.nic.MappingError(b)
				r.nic.UnmapPage(p, b, 4096, dma.ToDevice)
				r.nic.UnmapPage(p, a, 1500, dma.FromDevice)
				r.nic.Unbind(p)
			}},
	}
}

// TestClasses proves every class through a real domain and the DMA
// API: the misuse is reported once, with the device, the address, the
// reason, a time and a process, and the call that made (for a stale
// hit, removed) the mapping as origin; the correct use is not.
func TestClasses(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range classCases() {
		seen[tc.code] = true
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.mode, true)
			r.run(func(p *sim.Proc) { tc.bad(t, r, p) })
			ds := r.c.Diagnostics()
			if len(ds) != 1 || ds[0].Class != tc.code {
				t.Fatalf("misuse reported %v, want one %s", ds, tc.code)
			}
			d := ds[0]
			if d.Device != "nic0" || d.Proc == "" || d.Time == 0 || !strings.HasPrefix(d.Buffer, "dma:0x") || d.Severity != check.Error {
				t.Errorf("diagnostic lacks device, process, time, address or severity: %+v", d)
			}
			if tc.origin == "" && d.Origin != "" || !strings.HasPrefix(d.Origin, tc.origin) {
				t.Errorf("origin %q, want it to start with %q", d.Origin, tc.origin)
			}
			for _, w := range tc.msg {
				if !strings.Contains(d.Message, w) {
					t.Errorf("message %q lacks %q", d.Message, w)
				}
			}
			r = newRig(t, tc.mode, true)
			r.run(func(p *sim.Proc) { tc.good(t, r, p) })
			if ds := r.c.Diagnostics(); len(ds) != 0 {
				t.Errorf("correct use reported %v", ds)
			}
		})
	}
	for _, c := range Classes() {
		if !seen[c.Code] {
			t.Errorf("class %s has no test", c.Code)
		}
	}
}

// TestOrigins: the mapping a diagnostic concerns is named by the call
// that made it, whichever of the DMA API's families did (for a stale
// hit, the call that removed it); without the DMA layer watched, by the
// domain's own calls.
func TestOrigins(t *testing.T) {
	tests := []struct {
		name     string
		watchDMA bool
		mode     iommu.Mode
		// use maps, unmaps, and accesses what was mapped after its
		// unmap.
		use        func(r *rig, p *sim.Proc) mem.DMAAddr
		code       string
		origin     string
		msgHas     string
		sameOrigin bool
	}{
		{name: "sg merged", watchDMA: true, mode: iommu.Strict, code: IOMMUFault,
			use: func(r *rig, p *sim.Proc) mem.DMAAddr {
				sgl := make([]dma.Scatterlist, 3)
				for i := range sgl {
					sgl[i].SetPage(r.page(), 4096, 0)
				}
				n := r.nic.MapSG(p, sgl, len(sgl), dma.ToDevice)
				a := sgl[0].DMAAddress
				r.nic.UnmapSG(p, sgl[:n], len(sgl), dma.ToDevice)
				return a + 4096
			},
			origin: "dma_map_sg(nic0,", msgHas: "unmapped by dma_unmap_sg(nic0,"},
		{name: "coherent", watchDMA: true, mode: iommu.Strict, code: IOMMUFault,
			use: func(r *rig, p *sim.Proc) mem.DMAAddr {
				va, h, err := r.nic.AllocCoherent(p, 8192)
				if err != nil {
					r.t.Fatal(err)
				}
				r.nic.FreeCoherent(p, 8192, va, h)
				return h
			},
			origin: "dma_alloc_coherent(nic0, 8192)", msgHas: "unmapped by dma_free_coherent(nic0,"},
		{name: "resource", watchDMA: true, mode: iommu.Lazy, code: IOMMUStaleIOTLB,
			use: func(r *rig, p *sim.Proc) mem.DMAAddr {
				a := r.nic.MapResource(p, r.page(), 4096, dma.FromDevice)
				r.nic.Write(a, 64)
				r.nic.UnmapResource(p, a, 4096, dma.FromDevice)
				return a
			},
			origin: "dma_unmap_resource(nic0,", msgHas: "made by dma_map_resource(nic0,"},
		{name: "domain calls", watchDMA: false, mode: iommu.Strict, code: IOMMUFault,
			use: func(r *rig, p *sim.Proc) mem.DMAAddr {
				a := r.nic.MapPage(p, r.page(), 0, 4096, dma.ToDevice)
				r.nic.UnmapPage(p, a, 4096, dma.ToDevice)
				return a
			},
			origin: "iommu_map(dmar0 domain 1, dma:", msgHas: "unmapped by iommu_unmap(dmar0 domain 1, dma:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.mode, tc.watchDMA)
			r.run(func(p *sim.Proc) {
				a := tc.use(r, p)
				r.nic.Read(a, 64)
			})
			var got []check.Diagnostic
			for _, d := range r.c.Diagnostics() {
				if d.Class == tc.code {
					got = append(got, d)
				}
			}
			if len(got) != 1 {
				t.Fatalf("diagnostics %v, want one %s", r.c.Diagnostics(), tc.code)
			}
			if !strings.HasPrefix(got[0].Origin, tc.origin) || !strings.Contains(got[0].Origin, " by drv") {
				t.Errorf("origin %q, want %q... by drv", got[0].Origin, tc.origin)
			}
			if !strings.Contains(got[0].Message, tc.msgHas) {
				t.Errorf("message %q lacks %q", got[0].Message, tc.msgHas)
			}
		})
	}
}

// TestPermissionOfDirectMapping: a mapping made with iommu_map directly
// (no device named) is found for a permission fault, and its leak is
// not the device's at unbind.
func TestPermissionOfDirectMapping(t *testing.T) {
	r := newRig(t, iommu.Strict, true)
	r.run(func(p *sim.Proc) {
		must(t, r.dom.Map(0x200000, r.page(), 4096, iommu.ProtRead))
		r.nic.Write(0x200000+100, 8)
		r.nic.Unbind(p)
	})
	ds := r.c.Diagnostics()
	if len(ds) != 1 || ds[0].Class != IOMMUPermission || !strings.HasPrefix(ds[0].Origin, "iommu_map(dmar0 domain 1, dma:0x200000,") {
		t.Fatalf("diagnostics %v, want one iommu-permission made by iommu_map", ds)
	}
	if ds[0].Proc != "nic0" || ds[0].Buffer != "dma:0x200064" {
		t.Errorf("process %q, buffer %q; want the device and the faulting address", ds[0].Proc, ds[0].Buffer)
	}
}

// TestWithDMADebug: both packs on one checker; a correct driver through
// the domain reports nothing, and a use after unmap is both packs'
// finding: the driver's (device-access-unmapped) and the IOMMU's.
func TestWithDMADebug(t *testing.T) {
	for _, bug := range []bool{false, true} {
		r := newRig(t, iommu.Strict, true)
		dmadebug.Attach(r.c, r.x, r.m.Mem, dmadebug.Options{})
		r.run(func(p *sim.Proc) {
			a := r.nic.MapPage(p, r.page(), 0, 1500, dma.FromDevice)
			r.nic.MappingError(a)
			_, err := r.nic.Write(a, 1500)
			must(t, err)
			r.nic.UnmapPage(p, a, 1500, dma.FromDevice)
			if bug {
				r.nic.Write(a, 1500)
			}
			r.nic.Unbind(p)
		})
		var got []string
		for _, d := range r.c.Diagnostics() {
			got = append(got, d.Class)
		}
		want := []string(nil)
		if bug {
			want = []string{IOMMUFault, dmadebug.DeviceAccessUnmapped}
		}
		if !slices.Equal(got, want) {
			t.Errorf("bug %v: diagnostics %v, want %v", bug, got, want)
		}
	}
}

// TestClassList: the pack's classes, in the order `dmalab check
// --classes` prints them after the other packs'.
func TestClassList(t *testing.T) {
	var got []string
	for _, c := range Classes() {
		got = append(got, c.Code)
	}
	want := []string{IOMMUFault, IOMMUPermission, IOMMUStaleIOTLB, IOVALeak, VFIOUnmapped}
	if !slices.Equal(got, want) {
		t.Errorf("classes %v, want %v", got, want)
	}
	all := check.Classes()
	if !slices.Equal(all[len(all)-len(want):], Classes()) {
		t.Error("the pack's classes are not the last of the registry's")
	}
}

// TestStaleOncePerAccess: an access across four pages of one unmapped
// mapping is one finding, not four; a second access later is another.
func TestStaleOncePerAccess(t *testing.T) {
	r := newRig(t, iommu.Lazy, true)
	r.run(func(p *sim.Proc) {
		buf, err := r.m.Mem.AllocPagesAligned(0, 4*mem.PageSize, 4*mem.PageSize, mem.ZoneNormal)
		must(t, err)
		a := r.nic.MapPage(p, buf, 0, 4*mem.PageSize, dma.FromDevice)
		r.nic.MappingError(a)
		_, err = r.nic.Write(a, 4*mem.PageSize)
		must(t, err)
		r.nic.UnmapPage(p, a, 4*mem.PageSize, dma.FromDevice)
		r.nic.Write(a, 4*mem.PageSize)
		p.Sleep(sim.Microsecond)
		r.nic.Write(a, 4*mem.PageSize)
	})
	if st := r.unit.Stats().StaleHits; st != 8 {
		t.Fatalf("%d stale hits, want 8 (4 pages, twice)", st)
	}
	if n := r.c.Count(IOMMUStaleIOTLB); n != 2 {
		t.Errorf("%d diagnostics, want 2: %v", n, r.c.Diagnostics())
	}
}
