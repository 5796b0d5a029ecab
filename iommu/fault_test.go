package iommu

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestFaultHandler: the domain's handler gets the domain, the device,
// the IOVA and IOMMU_FAULT_READ or _WRITE with its token; a handler
// that takes the fault silences the IOMMU driver's log line, one that
// returns -ENOSYS, or none, leaves it to the log, in each profile's
// format.
func TestFaultHandler(t *testing.T) {
	type call struct {
		dom   int
		dev   string
		iova  mem.DMAAddr
		flags FaultFlags
		token any
	}
	tests := []struct {
		name    string
		profile string
		handler bool // a handler is set; it returns ret
		ret     error
		write   bool
		perm    bool   // a write through a read-only mapping
		wantLog string // "" when handled
	}{
		{"vtd read, no handler", "vtd", false, nil, false, false,
			"DMAR: [DMA Read NO_PASID] Request device [nic0] fault addr 0x7000 [fault reason 0x06] PTE Read access is not set"},
		{"vtd write permission, no handler", "vtd", false, nil, true, true,
			"DMAR: [DMA Write NO_PASID] Request device [nic0] fault addr 0x1000 [fault reason 0x05] PTE Write access is not set"},
		{"handled", "vtd", true, nil, true, false, ""},
		{"handler says ENOSYS", "vtd", true, fmt.Errorf("not mine: %w", syscall.ENOSYS), true, false,
			"DMAR: [DMA Write NO_PASID] Request device [nic0] fault addr 0x7000 [fault reason 0x05] PTE Write access is not set"},
		{"handler fails otherwise", "vtd", true, syscall.EIO, false, false, ""},
		{"amd-vi write permission", "amd-vi", true, syscall.ENOSYS, true, true,
			"nic0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0001 address=0x1000 flags=0x0030]"},
		{"amd-vi read", "amd-vi", false, nil, false, false,
			"nic0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0001 address=0x7000 flags=0x0000]"},
		{"smmuv3 read", "smmuv3", false, nil, false, false,
			"arm-smmu-v3 dmar0: event: F_TRANSLATION client: nic0 sid: 0x0 ssid: 0x0 iova: 0x7000 ipa: 0x0 read"},
		{"smmuv3 write permission", "smmuv3", false, nil, true, true,
			"arm-smmu-v3 dmar0: event: F_PERMISSION client: nic0 sid: 0x0 ssid: 0x0 iova: 0x1000 ipa: 0x0 write"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prof, err := LookupProfile(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			r := newRig(t, Strict, prof.Params)
			dev, tr := r.attach("nic0", AttachOptions{})
			d := tr.Domain()
			buf := r.pages(4096)
			if err := d.Map(0x1000, buf, 4096, ProtRead); err != nil {
				t.Fatal(err)
			}
			var calls []call
			if tc.handler {
				d.SetFaultHandler(func(dom *Domain, dev string, iova mem.DMAAddr, flags FaultFlags, token any) error {
					calls = append(calls, call{dom.ID(), dev, iova, flags, token})
					return tc.ret
				}, "token")
			}
			iova := mem.DMAAddr(0x7000)
			if tc.perm {
				iova = 0x1000
			}
			if tc.write {
				_, err = dev.Write(iova, 64)
			} else {
				_, err = dev.Read(iova, 64)
			}
			want := ErrFault
			if tc.perm {
				want = ErrPermission
			}
			if !errors.Is(err, want) {
				t.Fatalf("access: %v, want %v", err, want)
			}
			flags := FaultRead
			if tc.write {
				flags = FaultWrite
			}
			if tc.handler {
				if len(calls) != 1 || calls[0] != (call{d.ID(), "nic0", iova, flags, "token"}) {
					t.Errorf("handler calls %+v, want one with domain %d, nic0, %v, %v, token", calls, d.ID(), iova, flags)
				}
			}
			var faults []Event
			for _, e := range r.events {
				if e.Op == OpFault {
					faults = append(faults, e)
				}
			}
			if len(faults) != 1 || faults[0].Log != tc.wantLog || faults[0].IOVA != iova || faults[0].Write != tc.write {
				t.Fatalf("fault events %+v, want one with log %q", faults, tc.wantLog)
			}
		})
	}
}

// TestFaultLogReasons: an IOVA beyond the 48-bit aperture is VT-d's
// "Access beyond MGAW", and a translated request from a device without
// ATS is blocked as its context entry says.
func TestFaultLogReasons(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	dev, tr := r.attach("nic0", AttachOptions{})
	if _, err := dev.Read(1<<48, 8); !errors.Is(err, ErrFault) {
		t.Fatalf("read beyond the aperture: %v", err)
	}
	tr.Translated(func() {
		if _, err := dev.Write(0x1000, 8); !errors.Is(err, ErrTranslatedRequest) {
			t.Errorf("translated write without ATS: %v", err)
		}
	})
	var logs []string
	for _, e := range r.events {
		if e.Op == OpFault {
			logs = append(logs, e.Log)
		}
	}
	want := []string{"[fault reason 0x04] Access beyond MGAW", "[fault reason 0x0d] PCE for translation request specifies blocking"}
	if len(logs) != len(want) {
		t.Fatalf("logs %q", logs)
	}
	for i := range want {
		if !strings.Contains(logs[i], want[i]) {
			t.Errorf("log %q, want it to contain %q", logs[i], want[i])
		}
	}
}

// TestWalkCost: placed on 2s-4gpu-pcie, one table read costs the root
// complex's round trip to the tables' node and its DRAM latency; a walk
// costs one such read per level it reads, and the paging-structure
// caches cut a second walk in the same 2 MiB region to one read, where
// without them every walk reads all four.
func TestWalkCost(t *testing.T) {
	tests := []struct {
		name      string
		node      int // the tables' node
		walkCache [levels - 1]int
		read      sim.Time
		reads     []int // of each of the walks below
	}{
		// rc0 (node 0): 2 × 150 ns + node 0's 110 ns.
		{"local, caches", 0, DefaultWalkCache, 410 * sim.Nanosecond, []int{4, 1, 1, 2, 3}},
		// The tables on node 1: the socket link's 40 ns each way more.
		{"remote, caches", 1, DefaultWalkCache, 490 * sim.Nanosecond, []int{4, 1, 1, 2, 3}},
		{"local, no caches", 0, [levels - 1]int{}, 410 * sim.Nanosecond, []int{4, 4, 4, 4, 4}},
	}
	// Walks: a cold page, two more in its 2 MiB region, one in the next
	// 2 MiB region (the 1 GiB entry cached), one in the next 1 GiB.
	iovas := []mem.DMAAddr{1 << 30, 1<<30 + 0x1000, 1<<30 + 0x5000, 1<<30 + 2<<20, 2 << 30}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultParams()
			p.WalkCache = tc.walkCache
			r := newRig(t, Strict, p)
			u, err := NewUnit("dmar1", r.mem, r.m.Engine, tc.node, Strict, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := u.Place(r.m, "rc0"); err != nil {
				t.Fatal(err)
			}
			if u.WalkReadCost() != tc.read {
				t.Fatalf("one table read costs %v, want %v", u.WalkReadCost(), tc.read)
			}
			dom, err := u.NewDomain()
			if err != nil {
				t.Fatal(err)
			}
			dev, _ := r.dma.Device("nic0")
			tr := Attach(dev, dom, AttachOptions{})
			buf := r.pages(4096)
			for _, a := range iovas {
				if err := dom.Map(a, buf, 4096, ProtRead); err != nil {
					t.Fatal(err)
				}
			}
			for i, a := range iovas {
				_, cost, err := tr.ToPhys(nil, a, 8, false)
				if err != nil {
					t.Fatal(err)
				}
				if want := sim.Time(tc.reads[i]) * tc.read; cost != want {
					t.Errorf("walk %d at %v: %v, want %d reads = %v", i, a, cost, tc.reads[i], want)
				}
			}
		})
	}
	r := newRig(t, Strict, DefaultParams())
	if err := r.unit.Place(r.m, "nosuch"); !errors.Is(err, mem.ErrInvalid) {
		t.Errorf("Place at an unknown root complex: %v", err)
	}
}

// TestLazyFlushEmptiesWalkCache: a lazy flush is a domain-selective
// invalidation, which flushes the paging-structure caches too: the
// next miss walks from the root again.
func TestLazyFlushEmptiesWalkCache(t *testing.T) {
	r := newRig(t, Lazy, DefaultParams())
	dev, tr := r.attach("nic0", AttachOptions{PCI: true})
	bufs := [2]mem.PhysAddr{r.pages(4096), r.pages(4096)}
	var reads []uint64
	r.run(func(p *sim.Proc) {
		for i := range 2 {
			a := dev.MapPage(p, bufs[i], 0, 4096, dma.FromDevice)
			before := r.unit.Stats().WalkReads
			if _, err := dev.Write(a, 64); err != nil {
				t.Fatal(err)
			}
			reads = append(reads, r.unit.Stats().WalkReads-before)
			dev.UnmapPage(p, a, 4096, dma.FromDevice)
			tr.Domain().Flush(p)
		}
	})
	if len(reads) != 2 || reads[0] != 4 || reads[1] != 4 {
		t.Errorf("walk reads %v, want 4 then 4 (the flush emptied the caches)", reads)
	}
}

// TestIOTLBIndexSpreads: 2 MiB entries of consecutive pages fill every
// set evenly, as do 4 KiB pages 64 KiB apart (the first pages of
// size-aligned 64 KiB IOVAs), and so 64 huge pages stay cached in a
// 64-entry IOTLB.
func TestIOTLBIndexSpreads(t *testing.T) {
	tlb := newIOTLB(DefaultIOTLBEntries, DefaultIOTLBWays)
	for _, tc := range []struct {
		name   string
		stride uint64 // in page numbers of the entries' size
	}{{"2MiB pages", 1}, {"4KiB pages 64KiB apart", 16}, {"4KiB pages 1MiB apart", 256}} {
		per := map[int]int{}
		for i := range uint64(64) {
			per[tlb.setIndex(1, 512+i*tc.stride)]++
		}
		if len(per) != tlb.sets {
			t.Errorf("%s: %d of %d sets used: %v", tc.name, len(per), tlb.sets, per)
		}
		for s, n := range per {
			if n > 2*DefaultIOTLBWays {
				t.Errorf("%s: set %d gets %d entries", tc.name, s, n)
			}
		}
	}

	r := newRig(t, Strict, DefaultParams())
	_, tr := r.attach("nic0", AttachOptions{})
	pa := r.pages(2 << 20)
	for i := range uint64(64) {
		if err := tr.Domain().Map(mem.DMAAddr(1<<30+i<<21), pa, 2<<20, ProtRead); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		for i := range uint64(64) {
			if _, _, err := tr.ToPhys(nil, mem.DMAAddr(1<<30+i<<21+0x1000), 8, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := r.unit.IOTLB().Stats(); st.Misses != 64 || st.Hits != 64 {
		t.Errorf("two passes over 64 huge pages: %d misses, %d hits; want 64 and 64", st.Misses, st.Hits)
	}
}

// TestDomainFree: Free refuses a domain with a device attached; once it
// is detached, Free drains the flush queue (every queued IOVA freed),
// stops its timer and gives every table page back.
func TestDomainFree(t *testing.T) {
	r := newRig(t, Lazy, DefaultParams())
	buf := r.pages(4096)
	free0, above0 := r.mem.NodeFree(0)
	dev, tr := r.attach("nic0", AttachOptions{PCI: true})
	d := tr.Domain()
	r.m.Engine.Spawn("drv", func(p *sim.Proc) {
		for range 3 {
			a := dev.MapPage(p, buf, 0, 4096, dma.FromDevice)
			dev.UnmapPage(p, a, 4096, dma.FromDevice)
		}
		if d.Pending() != 3 {
			t.Errorf("pending %d, want 3", d.Pending())
		}
		tables := d.TablePages()
		if err := d.Free(); !errors.Is(err, syscall.EBUSY) || !strings.Contains(err.Error(), "nic0") {
			t.Errorf("Free with nic0 attached: %v, want EBUSY naming it", err)
		}
		if d.Pending() != 3 || d.TablePages() != tables {
			t.Errorf("a refused Free changed the domain: pending %d, tables %d", d.Pending(), d.TablePages())
		}
		tr.Detach()
		if _, ok := dev.Translator().(dma.Direct); !ok {
			t.Errorf("after Detach the device translates with %v", dev.Translator().Name())
		}
		if err := d.Free(); err != nil {
			t.Fatal(err)
		}
		if d.Pending() != 0 || d.TablePages() != 0 {
			t.Errorf("after Free: pending %d, tables %d", d.Pending(), d.TablePages())
		}
		if st := d.IOVAs().Stats(); st.Frees != 3 {
			t.Errorf("IOVAs freed %d, want 3", st.Frees)
		}
		if err := d.Free(); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("second Free: %v", err)
		}
	})
	r.m.Engine.Run()
	// The flush queue's timer was stopped: nothing ran at 10 ms.
	if now := r.m.Engine.Now(); now >= DefaultFlushTimeout {
		t.Errorf("the engine ran to %v: the flush timer still fired", now)
	}
	if free, above := r.mem.NodeFree(0); free != free0 || above != above0 {
		t.Errorf("node 0 free %d/%d, before the domain's tables %d/%d", free, above, free0, above0)
	}
	if n := r.count(OpFlush); n != 1 {
		t.Errorf("%d flushes, want the one of Free", n)
	}
}
