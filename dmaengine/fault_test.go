package dmaengine_test

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestIOMMUFaults: behind an IOMMU the engine sees what PCIe hardware
// sees. A read the IOMMU blocks gets an error completion: the
// descriptor completes with StatusError, which the driver reaps, and a
// copy writes nothing. A write the IOMMU blocks is posted and dropped:
// the descriptor completes without error and the memory keeps its
// bytes. Nothing aborts the run; the unit records each fault.
func TestIOMMUFaults(t *testing.T) {
	const size = 4096
	unmapped := mem.DMAAddr(0x100000) // an IOVA never mapped
	tests := []struct {
		name string
		kind dmaengine.Kind
		// srcDir and dstDir map the source and destination buffers (0:
		// use the unmapped IOVA instead).
		srcDir, dstDir        dma.Direction
		wantErr               bool
		wantReadF, wantWriteF uint64
		dstChanges            bool
	}{
		{name: "copy from an unmapped source", kind: dmaengine.MemToMem, dstDir: dma.FromDevice, wantErr: true, wantReadF: 1},
		{name: "copy into a read-only destination", kind: dmaengine.MemToMem, srcDir: dma.ToDevice, dstDir: dma.ToDevice, wantWriteF: 1},
		{name: "copy between good mappings", kind: dmaengine.MemToMem, srcDir: dma.ToDevice, dstDir: dma.FromDevice, dstChanges: true},
		{name: "receive into a read-only buffer", kind: dmaengine.DevToMem, dstDir: dma.ToDevice, wantWriteF: 1},
		{name: "transmit from an unmapped buffer", kind: dmaengine.MemToDev, wantErr: true, wantReadF: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", "nic0", true)
			unit, err := iommu.NewUnit("dmar0", r.mem, r.m.Engine, 0, iommu.Strict, iommu.DefaultParams())
			if err != nil {
				t.Fatal(err)
			}
			dom, err := unit.NewDomain()
			if err != nil {
				t.Fatal(err)
			}
			iommu.Attach(r.ctl.Device(), dom, iommu.AttachOptions{PCI: true})
			var readF, writeF uint64
			unit.Hooks.Hook(func(e *iommu.Event) {
				if e.Op == iommu.OpFault && e.Write {
					writeF++
				} else if e.Op == iommu.OpFault {
					readF++
				}
			})
			var done dmaengine.Completed
			var got, want []byte
			var onData []dmaengine.Completed
			r.m.Engine.Spawn("driver", func(p *sim.Proc) {
				ch, err := r.ctl.NewChan(p, dmaengine.Config{Kind: tc.kind, OnData: func(c dmaengine.Completed, _ []byte) {
					onData = append(onData, c)
				}})
				if err != nil {
					t.Fatal(err)
				}
				ch.RequestIRQ(nil)
				src, dst := unmapped, unmapped
				var sb, db buffer
				if tc.srcDir != 0 {
					sb = r.mapBuffer(t, p, size, tc.srcDir, pattern(size, 1))
					src = sb.addr
				}
				old := pattern(size, 2)
				if tc.dstDir != 0 {
					db = r.mapBuffer(t, p, size, tc.dstDir, old)
					dst = db.addr
				}
				c, err := ch.Submit(p, dmaengine.Descriptor{Src: src, Dst: dst, Len: size, Flags: dmaengine.FlagIRQ})
				if err != nil {
					t.Fatal(err)
				}
				ch.IssuePending(p)
				if tc.kind == dmaengine.DevToMem {
					ch.Deliver(size, p.Now(), pattern(size, 3))
				}
				ch.Wait(p, c)
				done, _ = ch.Lookup(c)
				if st := ch.Stats(); (st.Errors == 1) != tc.wantErr {
					t.Errorf("channel errors %d", st.Errors)
				}
				if tc.srcDir != 0 {
					r.unmap(t, p, sb)
				}
				if tc.dstDir != 0 {
					got = r.unmap(t, p, db)
					want = old
					if tc.dstChanges {
						want = pattern(size, 1)
					}
				}
				ch.FreeIRQ(p)
				ch.Terminate(p)
				if err := ch.Close(p); err != nil {
					t.Error(err)
				}
			})
			r.m.Engine.Run()
			if b := r.m.Engine.Blocked(); len(b) > 0 {
				t.Fatalf("blocked: %v", b)
			}
			if !done.Status.Done || done.Status.Error != tc.wantErr {
				t.Errorf("status %+v, want done with error %v", done.Status, tc.wantErr)
			}
			if readF != tc.wantReadF || writeF != tc.wantWriteF {
				t.Errorf("faults: %d reads, %d writes; want %d and %d", readF, writeF, tc.wantReadF, tc.wantWriteF)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("destination changed: %v (want %v)", !bytes.Equal(got, pattern(size, 2)), tc.dstChanges)
			}
			if tc.kind == dmaengine.MemToDev && (len(onData) != 1 || !onData[0].Status.Error) {
				t.Errorf("the device got %+v, want one completion with an error", onData)
			}
		})
	}
}
