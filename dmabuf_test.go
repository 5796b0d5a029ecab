package dmalab

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/sim"
)

// TestSystemDMABuf: the system has the DMA-BUF layer with the system
// and CMA heaps; a program allocates a frame, a non-coherent device
// imports it and the CPU brackets its access; HookAll hears the layer;
// the checker finds nothing wrong in the correct sequence; the frame is
// released when the program exits.
func TestSystemDMABuf(t *testing.T) {
	sys, err := Boot("zynq-7000", Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if got := sys.DMABuf().Heaps(); len(got) != 2 || got[0] != "system" || got[1] != "reserved" {
		t.Fatalf("heaps %v, want system and reserved", got)
	}
	ops := map[dmabuf.Op]int{}
	sys.HookAll(func(e sim.Event) {
		if d, ok := e.(*dmabuf.Event); ok {
			if d.Component != "dmabuf" {
				t.Errorf("dmabuf event from %q", d.Component)
			}
			ops[d.Op]++
		}
	})
	var buf *dmabuf.Buffer
	err = sys.Run("camera", func(p *Process) error {
		l := sys.DMABuf()
		heap, err := l.Heap("reserved")
		if err != nil {
			return err
		}
		fd, err := heap.Allocate(p.Thread, p.Process, 64<<10, 0)
		if err != nil {
			return err
		}
		if buf, err = l.Get(p.Thread, p.Process, fd); err != nil {
			return err
		}
		dev, err := sys.Device("axidma0")
		if err != nil {
			return err
		}
		a, err := buf.Attach(p.Thread, dev, dmabuf.AttachOptions{Contiguous: true})
		if err != nil {
			return err
		}
		sgt, err := a.Map(p.Thread, dma.Bidirectional)
		if err != nil {
			return err
		}
		if _, err := dev.Write(sgt.SGL[0].DMAAddress, 4096); err != nil {
			return err
		}
		if err := buf.Sync(p.Thread, dmabuf.SyncStart|dmabuf.SyncRead); err != nil {
			return err
		}
		va, err := buf.Vmap(p.Thread)
		if err != nil {
			return err
		}
		if acc := sys.Mem.Read(p.Thread, 0, va, 4096); acc.Stale {
			t.Error("the CPU read a stale frame after DMA_BUF_SYNC_START")
		}
		if err := buf.Vunmap(p.Thread, va); err != nil {
			return err
		}
		if err := buf.Sync(p.Thread, dmabuf.SyncEnd|dmabuf.SyncRead); err != nil {
			return err
		}
		if err := a.Unmap(p.Thread, sgt, dma.Bidirectional); err != nil {
			return err
		}
		if err := a.Detach(p.Thread); err != nil {
			return err
		}
		return buf.Put(p.Thread)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !buf.Released() {
		t.Error("the frame outlived the program's exit")
	}
	for _, op := range []dmabuf.Op{dmabuf.OpExport, dmabuf.OpAttach, dmabuf.OpMap, dmabuf.OpBeginCPU, dmabuf.OpEndCPU, dmabuf.OpRelease} {
		if ops[op] != 1 {
			t.Errorf("%d %v events, want 1 (saw %v)", ops[op], op, ops)
		}
	}
	if d := sys.Diagnostics(); len(d) != 0 {
		t.Errorf("a correct import got diagnostics: %v", d)
	}
	if _, err := sys.DMABuf().Heap("linux,cma"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("a heap the system lacks: %v", err)
	}
}
