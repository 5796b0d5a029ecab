package dma

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestRxWrongDirectionReadsOldBytes is the proof that the direction
// flag matters, in payload mode on a non-coherent device (the Zynq's
// GEM). An rx buffer sits in a page right after a descriptor. Its old
// packet is in DRAM. While the device owns the buffer, the CPU reads the
// descriptor; the L2 prefetcher pulls the following lines, the rx
// buffer's old bytes, into the cache. The device then writes a new
// packet to DRAM, which does not touch the cache. Unmapped with
// DMA_FROM_DEVICE, the cache is invalidated again and the CPU reads the
// new packet; mapped and unmapped with DMA_TO_DEVICE, nothing is
// invalidated after the transfer and the CPU reads the old packet, which
// mem proves stale.
func TestRxWrongDirectionReadsOldBytes(t *testing.T) {
	const (
		desc = 32  // one line: the descriptor the CPU polls
		size = 256 // the rx buffer, 8 lines of 32 B
	)
	oldPkt, newPkt := fill("OLD packet ", size), fill("NEW packet ", size)
	for _, tc := range []struct {
		name      string
		dir       Direction
		want      []byte
		wantStale bool
	}{
		{"DMA_FROM_DEVICE (right)", FromDevice, newPkt, false},
		{"DMA_BIDIRECTIONAL (right, conservative)", Bidirectional, newPkt, false},
		{"DMA_TO_DEVICE (wrong)", ToDevice, oldPkt, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := zynq(t)
			// A stream prefetcher that runs a buffer's length ahead (the
			// preset's PL310 fetches 1 line ahead; deeper prefetchers
			// are common on later cores).
			spec.Nodes[0].Cache.Prefetch.V = size / 32
			r := newRig(t, spec, true)
			d := r.dev("gem0")
			page, err := r.mem.AllocPages(0, mem.PageSize, mem.ZoneNormal)
			if err != nil {
				t.Fatal(err)
			}
			descVA := r.mem.PhysToVirt(page)
			rx := descVA + desc
			r.run(func(p *sim.Proc) {
				// Packet 1, handled correctly: DRAM holds the old packet
				// and the CPU has read it.
				h := d.MapSingle(p, rx, size, FromDevice)
				if _, err := d.WriteBytes(h, oldPkt); err != nil {
					t.Fatal(err)
				}
				d.UnmapSingle(p, h, size, FromDevice)
				got := make([]byte, size)
				if a := r.mem.ReadBytes(p, 0, rx, got); a.Stale || !bytes.Equal(got, oldPkt) {
					t.Fatalf("packet 1: read %q (stale %v)", got[:16], a.Stale)
				}

				// Packet 2.
				h = d.MapSingle(p, rx, size, tc.dir)
				r.mem.Read(p, 0, descVA, desc) // prefetches the rx lines
				if _, present, _ := r.mem.CacheLine(0, r.pa(rx)); !present {
					t.Fatal("the prefetcher did not pull the rx buffer in: the test proves nothing")
				}
				if _, err := d.WriteBytes(h, newPkt); err != nil {
					t.Fatal(err)
				}
				d.UnmapSingle(p, h, size, tc.dir)
				a := r.mem.ReadBytes(p, 0, rx, got)
				if !bytes.Equal(got, tc.want) {
					t.Errorf("CPU read %q..., want %q...", got[:16], tc.want[:16])
				}
				if a.Stale != tc.wantStale {
					t.Errorf("mem says stale = %v, want %v", a.Stale, tc.wantStale)
				}
				if a.Stale && a.Got >= a.Want {
					t.Errorf("stale read got version %d, latest %d", a.Got, a.Want)
				}
			})
		})
	}
}

// TestTxWrongDirectionSendsOldBytes: the CPU writes a packet (dirty in
// the cache) and maps it. DMA_TO_DEVICE writes it back and the device
// reads it; DMA_FROM_DEVICE (wrong) invalidates, discarding the dirty
// packet, and the device reads what DRAM held before, proved stale.
func TestTxWrongDirectionSendsOldBytes(t *testing.T) {
	const size = 1500
	oldPkt, newPkt := fill("old frame ", size), fill("new frame ", size)
	for _, tc := range []struct {
		name      string
		dir       Direction
		want      []byte
		wantStale bool
	}{
		{"DMA_TO_DEVICE (right)", ToDevice, newPkt, false},
		{"DMA_BIDIRECTIONAL (right, conservative)", Bidirectional, newPkt, false},
		{"DMA_FROM_DEVICE (wrong)", FromDevice, oldPkt, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, zynq(t), true)
			d := r.dev("gem0")
			_, tx := r.kmalloc(2048)
			r.run(func(p *sim.Proc) {
				// Frame 1, sent correctly: DRAM holds it.
				r.mem.WriteBytes(p, 0, tx, oldPkt)
				h := d.MapSingle(p, tx, size, ToDevice)
				d.UnmapSingle(p, h, size, ToDevice)

				// Frame 2.
				r.mem.WriteBytes(p, 0, tx, newPkt)
				h = d.MapSingle(p, tx, size, tc.dir)
				got := make([]byte, size)
				a, err := d.ReadBytes(h, got)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, tc.want) {
					t.Errorf("device read %q..., want %q...", got[:16], tc.want[:16])
				}
				if a.Stale != tc.wantStale {
					t.Errorf("mem says stale = %v, want %v", a.Stale, tc.wantStale)
				}
				d.UnmapSingle(p, h, size, tc.dir)
			})
		})
	}
}

// pa is the physical address of a linear-map address.
func (r *rig) pa(va mem.VirtAddr) mem.PhysAddr {
	r.t.Helper()
	pa, err := r.mem.VirtToPhys(va)
	if err != nil {
		r.t.Fatal(err)
	}
	return pa
}
