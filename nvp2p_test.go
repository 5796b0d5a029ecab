package dmalab

import (
	"testing"

	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/sim"
)

// System.NVP2P loads nvidia_p2p once; its events reach HookAll.
func TestSystemNVP2P(t *testing.T) {
	s, err := Boot("2s-4gpu-pcie", Options{})
	if err != nil {
		t.Fatal(err)
	}
	p2p, err := s.NVP2P()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.NVP2P(); again != p2p {
		t.Error("a second driver")
	}
	var got []string
	s.HookAll(func(e sim.Event) {
		if h := e.Head(); h.Component == "nvp2p" {
			got = append(got, e.(*nvp2p.Event).Call)
		}
	})
	cu, _ := s.CUDA()
	app, err := cu.NewProcess("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := app.PrimaryContext(0)
	if err != nil {
		t.Fatal(err)
	}
	s.Engine.Spawn("app", func(p *sim.Proc) {
		a, err := ctx.MemAlloc(p, 2<<20)
		if err != nil {
			t.Error(err)
			return
		}
		if !p2p.Acquire(a, 1<<20) || p2p.Acquire(a+4<<20, 1) {
			t.Error("acquire")
		}
		pt, err := p2p.GetPages(p, app.KernelProcess(), 0, 0, a, 1<<20, func(*sim.Proc, any) {}, nil)
		if err != nil {
			t.Error(err)
			return
		}
		if err := p2p.PutPages(p, 0, 0, a, pt); err != nil {
			t.Error(err)
		}
	})
	s.Engine.Run()
	if len(got) != 2 || got[0] != "nvidia_p2p_get_pages" || got[1] != "nvidia_p2p_put_pages" {
		t.Errorf("events through HookAll: %v", got)
	}
}
