package dma

import (
	"errors"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
)

// testWindow is a peer window for tests: [lo, lo+size) of PCIe address
// space with the memory at to behind it, as a GPU's BAR1 has VRAM.
type testWindow struct {
	lo   mem.PhysAddr
	size uint64
	to   mem.PhysAddr
	ep   machine.Endpoint
}

func (w testWindow) Name() string { return "test window" }

func (w testWindow) Contains(pa mem.PhysAddr) bool { return pa >= w.lo && uint64(pa-w.lo) < w.size }

func (w testWindow) Resolve(out []mem.PhysRange, pa mem.PhysAddr, size uint64) ([]mem.PhysRange, error) {
	if !w.Contains(pa) || uint64(pa-w.lo)+size > w.size {
		return out, errors.New("beyond the window")
	}
	return append(out, mem.PhysRange{Start: w.to + (pa - w.lo), Size: size}), nil
}

func (w testWindow) Endpoint() machine.Endpoint { return w.ep }
