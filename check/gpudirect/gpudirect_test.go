package gpudirect_test

import (
	"errors"
	"maps"
	"strings"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/check/gpudirect"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// translating is an IOMMU domain's stand-in: not dma-direct.
type translating struct{ dma.Direct }

func (translating) Name() string { return "iommu domain" }

const page = nvp2p.GPUPageSize

// syncCopy writes n fresh bytes into buf with a synchronous cuMemcpy
// from pinned host memory.
func syncCopy(r *rig, p *sim.Proc, buf mem.GPUAddr, n uint64) {
	r.t.Helper()
	host, err := r.ctx.MemAllocHost(p, n)
	if err != nil {
		r.t.Fatal(err)
	}
	r.m.Mem.WriteBytes(p, 0, host, []byte(strings.Repeat("N", int(n))))
	if err := r.ctx.Memcpy(p, buf, mem.GPUAddr(host), n); err != nil {
		r.t.Fatal(err)
	}
}

// Each class: a case where the misuse is reported (exactly the counts
// wanted, with the message and origin it needs) and one where correct
// use is not.
func TestClasses(t *testing.T) {
	type tc struct {
		name    string
		preset  string
		edit    func(*platform.Spec)
		blocked bool
		body    func(r *rig, p *sim.Proc)
		want    map[string]int
		// msg is in the first diagnostic's text when set.
		msg string
	}
	cases := []tc{
		{name: "put-pages-in-callback", want: map[string]int{gpudirect.PutPagesInCallback: 1}, msg: "made by nvidia_p2p_get_pages",
			body: func(r *rig, p *sim.Proc) {
				buf := r.alloc(p, 2<<20)
				var pt *nvp2p.PageTable
				pt, _ = r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, buf, page, func(t *sim.Proc, _ any) {
					if err := r.p2p.PutPages(t, 0, 0, pt.Addr(), pt); !errors.Is(err, syscall.EDEADLK) {
						r.t.Errorf("put_pages in the callback: %v", err)
					}
					_ = r.p2p.FreePageTable(t, pt)
				}, nil)
				_ = r.ctx.MemFree(p, buf)
			}},
		{name: "free-table-in-callback", body: func(r *rig, p *sim.Proc) {
			buf := r.alloc(p, 2<<20)
			r.pin(p, buf, page)
			_ = r.ctx.MemFree(p, buf)
		}},
		{name: "callback-deadlock", blocked: true, want: map[string]int{gpudirect.CallbackBlocks: 1}, msg: "never returned",
			body: func(r *rig, p *sim.Proc) {
				// The freeing thread holds the driver's lock (a
				// completion it signals once cuMemFree returns); the
				// callback, in that thread, waits for it.
				lock := p.Engine().NewNamedCompletion("drv lock")
				buf := r.alloc(p, 2<<20)
				var pt *nvp2p.PageTable
				pt, _ = r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, buf, page, func(t *sim.Proc, _ any) {
					t.Wait(lock)
					_ = r.p2p.FreePageTable(t, pt)
				}, nil)
				_ = r.ctx.MemFree(p, buf)
				lock.Complete()
			}},
		{name: "callback-sleeps", want: map[string]int{gpudirect.CallbackBlocks: 1}, msg: "held the freeing thread",
			body: func(r *rig, p *sim.Proc) {
				buf := r.alloc(p, 2<<20)
				var pt *nvp2p.PageTable
				pt, _ = r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, buf, page, func(t *sim.Proc, _ any) {
					t.Sleep(sim.Millisecond)
					_ = r.p2p.FreePageTable(t, pt)
				}, nil)
				_ = r.ctx.MemFree(p, buf)
			}},
		{name: "pin-unaligned", want: map[string]int{gpudirect.PinUnaligned: 1}, msg: "64 KiB",
			body: func(r *rig, p *sim.Proc) {
				buf := r.alloc(p, 2<<20)
				if _, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, buf+4096, page, func(*sim.Proc, any) {}, nil); !errors.Is(err, syscall.EINVAL) {
					r.t.Errorf("unaligned pin: %v", err)
				}
			}},
		{name: "pin-aligned", body: func(r *rig, p *sim.Proc) {
			buf := r.alloc(p, 2<<20)
			pt, m := r.pin(p, buf+page, 2*page)
			r.unpin(p, pt, m)
		}},
		{name: "bar1-exhausted", want: map[string]int{gpudirect.BAR1Exhausted: 1}, msg: "BAR1 exhausted",
			edit: func(s *platform.Spec) { s.GPUs[0].BAR1 = platform.P(platform.Bytes(16<<20), "test") },
			body: func(r *rig, p *sim.Proc) {
				a, b := r.alloc(p, 8<<20), r.alloc(p, 8<<20)
				pt, m := r.pin(p, a, 8<<20)
				if _, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, b, 8<<20, func(*sim.Proc, any) {}, nil); !errors.Is(err, syscall.ENOMEM) {
					r.t.Errorf("pin past BAR1: %v", err)
				}
				r.unpin(p, pt, m)
			}},
		{name: "bar1-room",
			edit: func(s *platform.Spec) { s.GPUs[0].BAR1 = platform.P(platform.Bytes(16<<20), "test") },
			body: func(r *rig, p *sim.Proc) {
				a, b := r.alloc(p, 8<<20), r.alloc(p, 8<<20)
				pt, m := r.pin(p, a, 8<<20)
				r.unpin(p, pt, m)
				pt, m = r.pin(p, b, 8<<20)
				r.unpin(p, pt, m)
			}},
		{name: "token-0-other-process", want: map[string]int{gpudirect.TokenNotOwner: 1}, msg: "process other",
			body: func(r *rig, p *sim.Proc) {
				buf := r.alloc(p, 2<<20)
				if _, err := r.p2p.GetPages(p, r.other.KernelProcess(), 0, 0, buf, page, func(*sim.Proc, any) {}, nil); !errors.Is(err, syscall.EINVAL) {
					r.t.Errorf("token-0 pin from another process: %v", err)
				}
			}},
		{name: "tokens-other-process", body: func(r *rig, p *sim.Proc) {
			buf := r.alloc(p, 2<<20)
			tok, va, err := r.p2p.Tokens(buf)
			if err != nil {
				r.t.Fatal(err)
			}
			pt, err := r.p2p.GetPages(p, r.other.KernelProcess(), tok, va, buf, page, func(*sim.Proc, any) {}, nil)
			if err != nil {
				r.t.Fatal(err)
			}
			_ = r.p2p.PutPages(p, tok, va, buf, pt)
		}},
		{name: "pin-left-at-exit", want: map[string]int{gpudirect.PinLeak: 1}, msg: "process other exited holding",
			body: func(r *rig, p *sim.Proc) {
				// other's driver pins app's memory with its tokens and
				// other exits: app's memory lives on, and so does the pin.
				buf := r.alloc(p, 2<<20)
				tok, va, _ := r.p2p.Tokens(buf)
				if _, err := r.p2p.GetPages(p, r.other.KernelProcess(), tok, va, buf, page, func(*sim.Proc, any) {}, nil); err != nil {
					r.t.Fatal(err)
				}
				if err := r.other.KernelProcess().Exit(p); err != nil {
					r.t.Fatal(err)
				}
			}},
		{name: "pin-revoked-at-owner-exit", body: func(r *rig, p *sim.Proc) {
			// The driver takes the pin back through its callback.
			r.pin(p, r.alloc(p, 2<<20), page)
			if err := r.app.KernelProcess().Exit(p); err != nil {
				r.t.Fatal(err)
			}
		}},
		{name: "read-before-visible", want: map[string]int{gpudirect.ReadBeforeVisible: 1}, msg: "SYNC_MEMOPS",
			body: func(r *rig, p *sim.Proc) {
				buf := r.alloc(p, 2<<20)
				pt, m := r.pin(p, buf, page)
				syncCopy(r, p, buf, page)
				// The read the pack reports got the old bytes; the one
				// after the window, which it does not, the new ones.
				if got := r.peer(p, m.DMAAddresses[0], page, false).Data; got[0] == 'N' {
					r.t.Errorf("read in the window got the new bytes")
				}
				p.Sleep(2 * nvp2p.MemopsWindow)
				if got := r.peer(p, m.DMAAddresses[0], page, false).Data; got[0] != 'N' {
					r.t.Errorf("read after the window got %q", got[:1])
				}
				r.unpin(p, pt, m)
			}},
		{name: "read-with-sync-memops", body: func(r *rig, p *sim.Proc) {
			buf := r.alloc(p, 2<<20)
			if err := r.ctx.PointerSetAttribute(cuda.PointerAttributeSyncMemops, 1, buf); err != nil {
				r.t.Fatal(err)
			}
			pt, m := r.pin(p, buf, page)
			syncCopy(r, p, buf, page)
			r.peer(p, m.DMAAddresses[0], page, false)
			r.unpin(p, pt, m)
		}},
		{name: "write-during-kernel", want: map[string]int{gpudirect.WriteDuringKernel: 1}, msg: "while kernel scale runs",
			body: func(r *rig, p *sim.Proc) {
				buf := r.alloc(p, 2<<20)
				pt, m := r.pin(p, buf, 2*page)
				k := gpu.Kernel{Name: "scale", Compute: sim.Millisecond, Accesses: []gpu.Access{{Addr: buf, Size: 2 * page, Write: true}}}
				if err := r.ctx.LaunchKernel(p, k, nil); err != nil {
					r.t.Fatal(err)
				}
				r.peer(p, m.DMAAddresses[1], page, true)
				if err := r.ctx.Synchronize(p); err != nil {
					r.t.Fatal(err)
				}
				r.unpin(p, pt, m)
			}},
		{name: "write-during-kernel-shared-page", want: map[string]int{gpudirect.WriteDuringKernel: 1}, msg: "while kernel scale runs",
			body: func(r *rig, p *sim.Proc) {
				// Two pins share the BAR1 pages; the first is put, the
				// write goes through the second's.
				buf := r.alloc(p, 2<<20)
				pt1, m1 := r.pin(p, buf, 2*page)
				pt2, m2 := r.pin(p, buf, 2*page)
				r.unpin(p, pt1, m1)
				k := gpu.Kernel{Name: "scale", Compute: sim.Millisecond, Accesses: []gpu.Access{{Addr: buf + page, Size: page}}}
				if err := r.ctx.LaunchKernel(p, k, nil); err != nil {
					r.t.Fatal(err)
				}
				r.peer(p, m2.DMAAddresses[1], page, true)
				if err := r.ctx.Synchronize(p); err != nil {
					r.t.Fatal(err)
				}
				r.unpin(p, pt2, m2)
			}},
		{name: "write-after-synchronize", body: func(r *rig, p *sim.Proc) {
			buf := r.alloc(p, 2<<20)
			pt, m := r.pin(p, buf, 2*page)
			k := gpu.Kernel{Name: "scale", Compute: sim.Millisecond, Accesses: []gpu.Access{{Addr: buf, Size: 2 * page, Write: true}}}
			if err := r.ctx.LaunchKernel(p, k, nil); err != nil {
				r.t.Fatal(err)
			}
			if err := r.ctx.Synchronize(p); err != nil {
				r.t.Fatal(err)
			}
			r.peer(p, m.DMAAddresses[1], page, true)
			r.unpin(p, pt, m)
		}},
		{name: "write-beside-kernel-elsewhere", body: func(r *rig, p *sim.Proc) {
			// The kernel uses another buffer: the write races nothing.
			buf, other := r.alloc(p, 2<<20), r.alloc(p, 2<<20)
			pt, m := r.pin(p, buf, 2*page)
			k := gpu.Kernel{Name: "scale", Compute: sim.Millisecond, Accesses: []gpu.Access{{Addr: other, Size: 2 * page, Write: true}}}
			if err := r.ctx.LaunchKernel(p, k, nil); err != nil {
				r.t.Fatal(err)
			}
			r.peer(p, m.DMAAddresses[1], page, true)
			if err := r.ctx.Synchronize(p); err != nil {
				r.t.Fatal(err)
			}
			r.unpin(p, pt, m)
		}},
		{name: "iommu-translating", want: map[string]int{gpudirect.IOMMUTranslating: 1}, msg: "passthrough",
			body: func(r *rig, p *sim.Proc) {
				buf := r.alloc(p, 2<<20)
				pt, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, buf, page, func(*sim.Proc, any) {}, nil)
				if err != nil {
					r.t.Fatal(err)
				}
				r.dev("nic0").SetTranslator(translating{})
				if _, err := r.p2p.DMAMapPages(p, r.dev("nic0"), pt); !errors.Is(err, nvp2p.ENOTSUPP) {
					r.t.Errorf("dma_map_pages behind a translating IOMMU: %v", err)
				}
				_ = r.p2p.PutPages(p, 0, 0, buf, pt)
			}},
		{name: "iommu-passthrough", body: func(r *rig, p *sim.Proc) {
			buf := r.alloc(p, 2<<20)
			pt, m := r.pin(p, buf, page)
			r.unpin(p, pt, m)
		}},
		{name: "pin-held-at-end", want: map[string]int{gpudirect.PinLeak: 1}, msg: "still held at the end",
			body: func(r *rig, p *sim.Proc) {
				r.pin(p, r.alloc(p, 2<<20), page)
			}},
		{name: "persistent-pin-freed", want: map[string]int{gpudirect.PinLeak: 1}, msg: "persistent pin",
			body: func(r *rig, p *sim.Proc) {
				buf := r.alloc(p, 2<<20)
				if _, err := r.p2p.GetPagesPersistent(p, r.app.KernelProcess(), buf, page, nvp2p.FlagsDefault); err != nil {
					r.t.Fatal(err)
				}
				_ = r.ctx.MemFree(p, buf)
			}},
		{name: "persistent-pin-put", body: func(r *rig, p *sim.Proc) {
			buf := r.alloc(p, 2<<20)
			pt, err := r.p2p.GetPagesPersistent(p, r.app.KernelProcess(), buf, page, nvp2p.FlagsDefault)
			if err != nil {
				r.t.Fatal(err)
			}
			if err := r.p2p.PutPagesPersistent(p, buf, pt, 0); err != nil {
				r.t.Fatal(err)
			}
			_ = r.ctx.MemFree(p, buf)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			preset := c.preset
			if preset == "" {
				preset = "2s-4gpu-pcie"
			}
			r := newRig(t, preset, c.edit)
			r.run(c.blocked, func(p *sim.Proc) { c.body(r, p) })
			want := c.want
			if want == nil {
				want = map[string]int{}
			}
			if got := r.counts(); !maps.Equal(got, want) {
				t.Errorf("counts %v, want %v; diagnostics:\n%v", got, want, r.chk.Diagnostics())
			}
			if d := r.chk.Diagnostics(); c.msg != "" && (len(d) == 0 || !strings.Contains(d[0].String(), c.msg)) {
				t.Errorf("first diagnostic lacks %q: %v", c.msg, d)
			}
		})
	}
}
