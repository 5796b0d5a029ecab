package iommu

import (
	"errors"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestATSHitMissInvalidate: a device with ATS misses its ATC once (a
// translation request: the link's round trip and the unit's walk), then
// hits it at no cost without asking the unit; a strict unmap invalidates
// the ATC too (one ATS invalidation round, paid by the unmapping
// thread), so the next access faults. In lazy mode the ATC keeps the
// entry until the flush: the access through it is reported stale, and
// after the flush it faults.
func TestATSHitMissInvalidate(t *testing.T) {
	const rtt = 500 * sim.Nanosecond
	for _, mode := range []Mode{Strict, Lazy} {
		t.Run(mode.String(), func(t *testing.T) {
			r := newRig(t, mode, DefaultParams())
			dev, tr := r.attach("nic0", AttachOptions{PCI: true, ATS: true, ATSRoundTrip: rtt})
			p := DefaultParams()
			buf := r.pages(4096)
			r.run(func(pr *sim.Proc) {
				a := dev.MapPage(pr, buf, 0, 4096, dma.ToDevice)
				_, miss, err := tr.ToPhys(nil, a, 64, false)
				if err != nil {
					t.Fatal(err)
				}
				if want := rtt + 4*p.WalkReadCost; miss != want {
					t.Errorf("ATC miss costs %v, want %v", miss, want)
				}
				tlb := r.unit.IOTLB().Stats()
				got, hit, err := tr.ToPhys(nil, a+64, 64, false)
				if err != nil || len(got) != 1 || got[0].Start != buf+64 {
					t.Fatalf("ATC hit: %v, %v", got, err)
				}
				if hit != 0 || r.unit.IOTLB().Stats() != tlb {
					t.Errorf("ATC hit cost %v and touched the IOTLB (%+v → %+v)", hit, tlb, r.unit.IOTLB().Stats())
				}
				if st := r.unit.Stats(); st.ATSRequests != 1 {
					t.Errorf("%d translation requests, want 1", st.ATSRequests)
				}
				t0 := pr.Now()
				dev.UnmapPage(pr, a, 4096, dma.ToDevice)
				took := pr.Now() - t0
				if mode == Strict {
					if want := p.InvalidateCost + p.ATSInvalidateCost; took != want {
						t.Errorf("strict unmap took %v, want %v (IOTLB and ATS invalidations)", took, want)
					}
					if _, err := dev.Read(a, 64); !errors.Is(err, ErrFault) {
						t.Errorf("read after a strict unmap: %v, want a fault", err)
					}
					return
				}
				if took != 0 {
					t.Errorf("lazy unmap took %v", took)
				}
				if _, err := dev.Read(a, 64); err != nil {
					t.Errorf("read through the stale ATC entry: %v", err)
				}
				tr.Domain().Flush(pr)
				if _, err := dev.Read(a, 64); !errors.Is(err, ErrFault) {
					t.Errorf("read after the flush: %v, want a fault", err)
				}
			})
			inval, stale := r.count(OpATSInvalidate), 0
			for _, e := range r.events {
				if e.Op == OpStaleHit && e.ATC {
					stale++
				}
			}
			if inval != 1 || (mode == Lazy) != (stale == 1) {
				t.Errorf("%d ATS invalidations, %d stale ATC hits", inval, stale)
			}
		})
	}
}

// TestATSTranslatedRequest: a device trusted with ATS may send a
// translated request naming any physical address, and the unit lets it
// through: its write lands in memory never mapped for it (the escape
// Linux avoids by refusing ATS to untrusted devices). Without ATS the
// same request is blocked and no version moves.
func TestATSTranslatedRequest(t *testing.T) {
	for _, ats := range []bool{false, true} {
		name := map[bool]string{false: "no ats", true: "ats"}[ats]
		t.Run(name, func(t *testing.T) {
			r := newRig(t, Strict, DefaultParams())
			dev, tr := r.attach("nic0", AttachOptions{PCI: true, ATS: ats})
			secret := r.pages(4096)
			v0 := r.mem.Latest(secret)
			var err error
			tr.Translated(func() { _, err = dev.Write(mem.DMAAddr(secret), 64) })
			// The device's ordinary requests are translated again after.
			if _, err := dev.Write(mem.DMAAddr(secret), 64); !errors.Is(err, ErrFault) {
				t.Errorf("untranslated write to the physical address: %v, want a fault", err)
			}
			changed := r.mem.Latest(secret) != v0
			if ats {
				if err != nil || !changed || r.unit.Stats().Translated != 1 || r.count(OpTranslated) != 1 {
					t.Errorf("translated write with ATS: err %v, changed %v, stats %+v", err, changed, r.unit.Stats())
				}
				return
			}
			if !errors.Is(err, ErrTranslatedRequest) || changed {
				t.Errorf("translated write without ATS: err %v, changed %v", err, changed)
			}
		})
	}
}

// TestATSRoundTripFromMachine: placed on 2s-4gpu-pcie, nic0's
// translation request crosses its link, switch sw0 and sw0's link to
// rc0, both ways: 2 × (100 + 115 + 100) ns.
func TestATSRoundTripFromMachine(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	if rc, ok := RootComplexOf(r.m.Spec, "nic0"); !ok || rc != "rc0" {
		t.Fatalf("RootComplexOf(nic0) = %q, %v", rc, ok)
	}
	if err := r.unit.Place(r.m, "rc0"); err != nil {
		t.Fatal(err)
	}
	if got, want := r.unit.atsRoundTrip("nic0"), 630*sim.Nanosecond; got != want {
		t.Errorf("round trip %v, want %v", got, want)
	}
	if got := r.unit.atsRoundTrip("gpu9"); got != DefaultATSRoundTrip {
		t.Errorf("unknown device: %v", got)
	}
}
