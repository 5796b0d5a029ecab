package uvm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// pageEnv is testEnv told which pages move (PageEnv).
type pageEnv struct {
	*testEnv
	pages []string
}

func (v *pageEnv) MovePages(p *sim.Proc, from, to Processor, block Addr, mask PageMask) {
	v.pages = append(v.pages, fmt.Sprintf("%v->%v %#x pages %d-%d (%d)", from, to, uint64(block), mask.First(), mask.Pages()[mask.Count()-1], mask.Count()))
	v.Move(p, from, to, int64(mask.Count())*PageSize)
}

// TestPageEnv: an Env with MovePages is told, for every migration, the
// VA block and the pages that move, in place of Move's byte count; the
// moves and their times are those Move gives.
func TestPageEnv(t *testing.T) {
	base := &testEnv{e: sim.New(1), moveT: perMicro64K}
	env := &pageEnv{testEnv: base}
	d, err := New(env, oneGPU(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	a := mustAlloc(t, d, 2*BlockSize)
	var took sim.Time
	run(t, base, func(p *sim.Proc) {
		// Populate the second block's first 64 KiB on the CPU, then
		// prefetch both blocks to the GPU and the first page back.
		ok(t)(d.CPUAccess(p, a.Base+BlockSize, 64<<10, true))
		t0 := p.Now()
		must(t, d.Prefetch(p, a.Base, 2*BlockSize, GPU(0)))
		took = p.Now() - t0
		must(t, d.Prefetch(p, a.Base+BlockSize, PageSize, CPU))
	})
	want := []string{
		fmt.Sprintf("cpu->gpu0 %#x pages 0-15 (16)", uint64(a.Base+BlockSize)),
		fmt.Sprintf("gpu0->cpu %#x pages 0-0 (1)", uint64(a.Base+BlockSize)),
	}
	if !slices.Equal(env.pages, want) {
		t.Errorf("MovePages calls %q, want %q", env.pages, want)
	}
	if wantMoves := []string{"cpu->gpu0 65536", "gpu0->cpu 4096"}; !slices.Equal(base.moves, wantMoves) {
		t.Errorf("moves %v, want %v", base.moves, wantMoves)
	}
	if took <= 0 {
		t.Errorf("prefetch took %v", took)
	}
}
