package nvp2p

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

func TestGetPagesArguments(t *testing.T) {
	tests := []struct {
		name   string
		off    uint64
		length uint64
		cb     FreeCallback
		want   error
	}{
		{"aligned", 0, 1 << 20, nop, nil},
		{"one page", 64 << 10, 64 << 10, nop, nil},
		{"unaligned address", 4 << 10, 64 << 10, nop, syscall.EINVAL},
		{"unaligned length", 0, 100 << 10, nop, syscall.EINVAL},
		{"zero length", 0, 0, nop, syscall.EINVAL},
		{"no callback", 0, 64 << 10, nil, syscall.EINVAL},
		{"beyond the allocation", 0, 4 << 20, nop, syscall.EINVAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "h200-pcie", false, nil)
			r.run(func(p *sim.Proc) {
				a := r.alloc(p, 2<<20)
				pt, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a+mem.GPUAddr(tc.off), tc.length, tc.cb, nil)
				if tc.want != nil {
					if !errors.Is(err, tc.want) || pt != nil {
						t.Fatalf("GetPages = %v, %v; want %v", pt, err, tc.want)
					}
					if ev := r.ops(OpGetPages); len(ev) != 1 || ev[0].Err == nil {
						t.Errorf("events %+v: want one refused get_pages", ev)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if pt.Entries() != int(tc.length/GPUPageSize) || pt.PageSize != PageSize64KB || pt.PageSize.Bytes() != 64<<10 || pt.Version != PageTableVersion {
					t.Errorf("table: %d entries, page size %v, version %#x", pt.Entries(), pt.PageSize, pt.Version)
				}
				bar := r.cu.System().Devices[0].BAR1()
				for i, pg := range pt.Pages {
					if !bar.Contains(pg.PhysicalAddress) {
						t.Errorf("page %d at %v: not in BAR1", i, pg.PhysicalAddress)
					}
					_, phys, _ := r.cu.System().Resolve(a+mem.GPUAddr(tc.off)+mem.GPUAddr(i)*GPUPageSize, 1)
					if v, ok := bar.Translate(pg.PhysicalAddress); !ok || v != phys[0].Start {
						t.Errorf("page %d: BAR1 → %v, %v; want VRAM %v", i, v, ok, phys[0].Start)
					}
				}
				bid, _ := r.ctx.PointerGetAttribute(7, a) // CU_POINTER_ATTRIBUTE_BUFFER_ID
				if pt.BufferID() != bid || bid == 0 {
					t.Errorf("buffer id %d, want %d", pt.BufferID(), bid)
				}
			})
		})
	}
}

// BAR1 of 16 MiB: 5056 KiB reserved, 176 pages left. Overlapping pins
// share pages; a pin past the free space is -ENOMEM and maps nothing.
func TestBARExhaustionAndSharing(t *testing.T) {
	r := newRig(t, "h200-pcie", false, func(s *platform.Spec) {
		s.GPUs[0].BAR1 = platform.P(platform.Bytes(16<<20), "test")
	})
	r.run(func(p *sim.Proc) {
		bar := r.cu.System().Devices[0].BAR1()
		free0 := bar.Info().Free
		if free0 != 16<<20-gpu.BAR1DriverReserved {
			t.Fatalf("free %d", free0)
		}
		a := r.alloc(p, 8<<20)
		b := r.alloc(p, 8<<20)
		pa, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a, 8<<20, nop, nil)
		if err != nil {
			t.Fatal(err)
		}
		used := bar.Info().Free
		if free0-used != 8<<20 {
			t.Errorf("one pin took %d bytes of BAR1, want 8 MiB", free0-used)
		}
		// The same range again, and an inner part: no new BAR1 space.
		pa2, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a, 8<<20, nop, nil)
		if err != nil {
			t.Fatal(err)
		}
		pa3, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a+1<<20, 1<<20, nop, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bar.Info().Free != used || pa2.Pages[0] != pa.Pages[0] || pa3.Pages[0] != pa.Pages[16] {
			t.Errorf("overlapping pins: free %d (want %d), pages %v %v %v", bar.Info().Free, used, pa.Pages[0], pa2.Pages[0], pa3.Pages[0])
		}
		_, err = r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, b, 8<<20, nop, nil)
		if !errors.Is(err, syscall.ENOMEM) {
			t.Fatalf("pin past BAR1: %v, want ENOMEM", err)
		}
		if bar.Info().Free != used {
			t.Errorf("a refused pin changed BAR1: free %d", bar.Info().Free)
		}
		// Shared pages stay until the last pin of them goes.
		for _, pt := range []*PageTable{pa, pa2} {
			if err := r.p2p.PutPages(p, 0, 0, a, pt); err != nil {
				t.Fatal(err)
			}
		}
		if bar.Info().Free != free0-1<<20 {
			t.Errorf("after two puts free %d, want %d (pa3's 1 MiB left)", bar.Info().Free, free0-1<<20)
		}
		if err := r.p2p.PutPages(p, 0, 0, a+1<<20, pa3); err != nil {
			t.Fatal(err)
		}
		if err := r.p2p.PutPages(p, 0, 0, a+1<<20, pa3); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("second put: %v, want EINVAL", err)
		}
		if bar.Info().Free != free0 {
			t.Errorf("free %d after every put, want %d", bar.Info().Free, free0)
		}
		if _, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, b, 8<<20, nop, nil); err != nil {
			t.Errorf("pin after the puts: %v", err)
		}
	})
}

// With token 0 only the owning process may pin (rm_p2p_get_pages looks
// the address up in the current process); the tokens the owner hands
// out let another process's driver call pin it.
func TestTokens(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 2<<20)
		other := r.other.KernelProcess()
		if _, err := r.p2p.GetPages(p, other, 0, 0, a, 64<<10, nop, nil); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("token 0 from another process: %v, want EINVAL", err)
		}
		tok, va, err := r.p2p.Tokens(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.p2p.GetPages(p, other, tok+1, va, a, 64<<10, nop, nil); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("wrong token: %v, want EINVAL", err)
		}
		if _, err := r.p2p.GetPages(p, other, tok, va, a, 64<<10, nop, nil); err != nil {
			t.Errorf("the owner's tokens from another process: %v", err)
		}
		if _, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a, 64<<10, nop, nil); err != nil {
			t.Errorf("token 0 from the owner: %v", err)
		}
	})
}

func TestFreeCallback(t *testing.T) {
	for _, how := range []string{"cuMemFree", "exit"} {
		t.Run(how, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", false, nil)
			r.run(func(p *sim.Proc) {
				a := r.alloc(p, 2<<20)
				bar := r.cu.System().Devices[0].BAR1()
				free0 := bar.Info().Free
				var pt *PageTable
				calls := 0
				var err error
				pt, err = r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a, 2<<20, r.freeing(&pt, &calls), nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.p2p.DMAMapPages(p, r.dev("nic0"), pt); err != nil {
					t.Fatal(err)
				}
				if how == "exit" {
					err = r.app.KernelProcess().Exit(p)
				} else {
					err = r.ctx.MemFree(p, a)
				}
				if err != nil {
					t.Fatal(err)
				}
				if calls != 1 || !pt.Revoked() || pt.Live() || bar.Info().Free != free0 {
					t.Fatalf("callback %d times, revoked %v, BAR1 free %d (want %d)", calls, pt.Revoked(), bar.Info().Free, free0)
				}
				ret := r.ops(OpCallbackReturned)
				if len(ret) != 1 || !ret[0].FreedTable {
					t.Errorf("callback events %+v: want one that freed the table", ret)
				}
				if fp := r.ops(OpFreePageTable); len(fp) != 1 || !fp[0].InCallback {
					t.Errorf("free_page_table events %+v", fp)
				}
				// The driver unlinked it: put_pages afterwards is 0.
				if err := r.p2p.PutPages(p, 0, 0, a, pt); err != nil {
					t.Errorf("put_pages after the callback: %v", err)
				}
			})
		})
	}
}

// put_pages from inside the free callback deadlocks on the hardware:
// the model refuses it (EDEADLK) and reports it for the checker.
func TestPutPagesInCallback(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 2<<20)
		var pt *PageTable
		var got error
		var err error
		pt, err = r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a, 64<<10, func(t *sim.Proc, _ any) {
			got = r.p2p.PutPages(t, 0, 0, a, pt)
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.ctx.MemFree(p, a); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(got, syscall.EDEADLK) {
			t.Errorf("put_pages in the callback: %v, want EDEADLK", got)
		}
		put := r.ops(OpPutPages)
		if len(put) != 1 || !put[0].InCallback || put[0].Err == nil {
			t.Errorf("put events %+v", put)
		}
		if ret := r.ops(OpCallbackReturned); len(ret) != 1 || ret[0].FreedTable {
			t.Errorf("callback events %+v: want one that did not free the table", ret)
		}
		if !pt.Revoked() {
			t.Error("table not revoked")
		}
	})
}

func TestPersistent(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 2<<20)
		bar := r.cu.System().Devices[0].BAR1()
		free0 := bar.Info().Free
		if _, err := r.p2p.GetPagesPersistent(p, r.app.KernelProcess(), a+4096, 64<<10, 0); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("unaligned persistent: %v", err)
		}
		pt, err := r.p2p.GetPagesPersistent(p, r.app.KernelProcess(), a, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !pt.Persistent() || pt.Entries() != 16 || bar.Info().Free != free0-1<<20 {
			t.Errorf("persistent table: %v %d, free %d", pt.Persistent(), pt.Entries(), bar.Info().Free)
		}
		if err := r.p2p.PutPages(p, 0, 0, a, pt); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("put_pages of a persistent table: %v", err)
		}
		if err := r.p2p.PutPagesPersistent(p, a, pt, 1); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("put_pages_persistent with flags: %v", err)
		}
		// Freeing persistently pinned memory calls nothing back: it is
		// reported, and the pin stays.
		if err := r.ctx.MemFree(p, a); err != nil {
			t.Fatal(err)
		}
		if len(r.ops(OpFreedWhilePinned)) != 1 || !pt.Live() || len(r.ops(OpFreeCallback)) != 0 {
			t.Errorf("free under a persistent pin: events %+v, live %v", r.ev, pt.Live())
		}
		if err := r.p2p.PutPagesPersistent(p, a, pt, 0); err != nil {
			t.Fatal(err)
		}
		if bar.Info().Free != free0 {
			t.Errorf("free %d after put, want %d", bar.Info().Free, free0)
		}
	})
}
