package dmabuf

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestLifecycle follows a system-heap buffer from allocation to
// release: a descriptor in the exporting process, SCM_RIGHTS to the
// importer (the same number sent as plain data is EBADF there),
// dma_buf_get, attach, map (the importer's own bus addresses: physical
// under dma-direct, IOVAs of its domain behind an IOMMU, where the
// scattered pages merge into one range), unmap, detach, put, the last
// close, and the release, once.
func TestLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		iommu bool
	}{{"dma-direct", false}, {"iommu", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", false)
			nic := r.dev("nic0")
			var tr interface {
				Phys(mem.DMAAddr) (mem.PhysAddr, bool)
			}
			if tc.iommu {
				tr = r.behindIOMMU(nic)
			}
			cam, isp := r.proc("camera"), r.proc("isp")
			const size = 64 << 10
			r.run(func(p *sim.Proc) {
				other, err := r.system.Allocate(p, cam, mem.PageSize, 0)
				must(t, err)
				fd, err := r.system.Allocate(p, cam, size, 0)
				must(t, err)
				if other != 3 || fd != 4 {
					t.Fatalf("fds %d, %d; want 3, 4", other, fd)
				}
				// The number as plain data: the importer has no fd 4.
				if _, err := r.l.Get(p, isp, fd); !errors.Is(err, syscall.EBADF) {
					t.Errorf("dma_buf_get of a number sent as data: %v, want EBADF", err)
				}
				if e := r.events[len(r.events)-1]; e.Op != OpGet || !e.Failed || e.Process != "isp" {
					t.Errorf("failed dma_buf_get reported as %+v", e)
				}
				ifd, err := cam.SendFD(isp, fd)
				must(t, err)
				b, err := r.l.Get(p, isp, ifd)
				must(t, err)
				if b.Refs() != 3 {
					t.Errorf("refs %d, want 3 (two descriptors and a get)", b.Refs())
				}
				pages := Pages(b)
				if len(pages) != size/mem.PageSize {
					t.Fatalf("%d pages, want %d scattered ones", len(pages), size/mem.PageSize)
				}
				a, err := b.Attach(p, nic, AttachOptions{})
				must(t, err)
				sgt, err := a.Map(p, dma.Bidirectional)
				must(t, err)
				if tc.iommu {
					if sgt.Nents != 1 || sgt.SGL[0].DMALength != size {
						t.Errorf("%d segments (first %d bytes), want one IOVA range of %d", sgt.Nents, sgt.SGL[0].DMALength, size)
					}
					for i, pg := range pages {
						iova := sgt.SGL[0].DMAAddress + mem.DMAAddr(i*mem.PageSize)
						if pa, ok := tr.Phys(iova); !ok || pa != pg.Start {
							t.Errorf("IOVA %v maps %v (%v), want page %v", iova, pa, ok, pg.Start)
						}
					}
					if mem.PhysAddr(sgt.SGL[0].DMAAddress) == pages[0].Start {
						t.Error("the IOVA is the physical address: not translated")
					}
				} else {
					if sgt.Nents != len(pages) {
						t.Errorf("%d segments, want %d (dma-direct does not merge)", sgt.Nents, len(pages))
					}
					for i, pg := range pages {
						if mem.PhysAddr(sgt.SGL[i].DMAAddress) != pg.Start {
							t.Errorf("segment %d at %v, want the page's physical address %v", i, sgt.SGL[i].DMAAddress, pg.Start)
						}
					}
				}
				if _, err := nic.Write(sgt.SGL[0].DMAAddress, mem.PageSize); err != nil {
					t.Errorf("device write through the mapping: %v", err)
				}
				if _, err := a.Map(p, dma.Bidirectional); !errors.Is(err, syscall.EBUSY) {
					t.Errorf("second map: %v, want EBUSY", err)
				}
				must(t, a.Unmap(p, sgt, dma.Bidirectional))
				if tc.iommu {
					if _, err := nic.Write(sgt.SGL[0].DMAAddress, mem.PageSize); err == nil {
						t.Error("device write after unmap went through the IOMMU")
					}
				}
				must(t, a.Detach(p))
				if _, err := a.Map(p, dma.Bidirectional); !errors.Is(err, syscall.EINVAL) {
					t.Errorf("map after detach: %v, want EINVAL", err)
				}
				must(t, cam.Close(p, fd))
				must(t, isp.Close(p, ifd))
				if b.Released() {
					t.Fatal("released while the importer holds a reference")
				}
				must(t, b.Put(p))
				if !b.Released() || b.Refs() != 0 {
					t.Fatalf("not released after the last reference (refs %d)", b.Refs())
				}
				if _, _, _, err := r.mem.Translate(b.Priv().(*heapBuffer).va, size); err == nil {
					t.Error("the buffer's pages are still mapped after release")
				}
				if err := isp.Close(p, ifd); !errors.Is(err, syscall.EBADF) {
					t.Errorf("second close: %v, want EBADF", err)
				}
			})
			if n := r.count(OpRelease); n != 1 {
				t.Errorf("%d releases, want 1", n)
			}
			var ops []Op
			for _, e := range r.events {
				if e.Buffer == "dmabuf:2" && e.Op != OpFenceWait {
					ops = append(ops, e.Op)
				}
			}
			want := []Op{OpExport, OpGet, OpAttach, OpMap, OpMap, OpUnmap, OpDetach, OpMap, OpPut, OpRelease}
			if !slices.Equal(ops, want) {
				t.Errorf("events %v, want %v", ops, want)
			}
		})
	}
}

// TestReleaseOnce: the exporter's release runs once, when the last of
// the references goes — descriptors in two processes, a get, an mmap —
// whichever order they go in, exit included.
func TestReleaseOnce(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	a, b := r.proc("a"), r.proc("b")
	f := &fakeExporter{}
	r.run(func(p *sim.Proc) {
		buf, err := r.l.Export(p, ExportInfo{ExpName: "fake", Ops: f, Size: mem.PageSize})
		must(t, err)
		fd, err := buf.FD(a)
		must(t, err)
		if _, err := buf.FD(a); !errors.Is(err, syscall.EEXIST) {
			t.Errorf("second dma_buf_fd: %v, want EEXIST", err)
		}
		bfd, err := a.SendFD(b, fd)
		must(t, err)
		got, err := r.l.Get(p, b, bfd)
		must(t, err)
		if got != buf {
			t.Fatal("dma_buf_get found another buffer")
		}
		must(t, a.Exit(p))
		must(t, b.Close(p, bfd))
		if f.releases != 0 {
			t.Fatal("released while a get holds it")
		}
		must(t, buf.Put(p))
		if f.releases != 1 {
			t.Fatalf("%d releases, want 1", f.releases)
		}
		if err := buf.Put(p); err == nil {
			t.Error("put after release succeeded")
		}
		if _, err := buf.Attach(p, r.dev("nic0"), AttachOptions{}); !errors.Is(err, syscall.EBADF) {
			t.Errorf("attach after release: %v, want EBADF", err)
		}
	})
	if f.releases != 1 {
		t.Errorf("%d releases, want 1", f.releases)
	}
}

// TestGetErrors: dma_buf_get of a closed descriptor, of another kind of
// file, of a buffer of another layer.
func TestGetErrors(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	pr := r.proc("app")
	r.run(func(p *sim.Proc) {
		s := r.l.NewSyncFile("x", r.l.Stub())
		sfd, err := s.FD(pr)
		must(t, err)
		for _, c := range []struct {
			fd   int
			want error
		}{{sfd, ErrNotDMABuf}, {sfd + 1, syscall.EBADF}, {-1, syscall.EBADF}} {
			if _, err := r.l.Get(p, pr, c.fd); !errors.Is(err, c.want) {
				t.Errorf("dma_buf_get(%d): %v, want %v", c.fd, err, c.want)
			}
		}
		other := New(r.m.Engine)
		b, err := other.Export(p, ExportInfo{ExpName: "fake", Ops: &fakeExporter{}, Size: mem.PageSize})
		must(t, err)
		fd, err := b.FD(pr)
		must(t, err)
		if _, err := r.l.Get(p, pr, fd); !errors.Is(err, ErrNotDMABuf) {
			t.Errorf("dma_buf_get of another layer's buffer: %v", err)
		}
		if _, err := r.l.Export(p, ExportInfo{ExpName: "fake", Ops: &fakeExporter{}, Size: 100}); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("export of a partial page: %v, want EINVAL", err)
		}
	})
}

// TestAttachRefused: an exporter that refuses a device fails the attach
// and keeps no attachment.
func TestAttachRefused(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	f := &fakeExporter{refuse: syscall.EOPNOTSUPP}
	r.run(func(p *sim.Proc) {
		b, err := r.l.Export(p, ExportInfo{ExpName: "fake", Ops: f, Size: mem.PageSize})
		must(t, err)
		if _, err := b.Attach(p, r.dev("nic0"), AttachOptions{}); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Errorf("attach: %v, want the exporter's EOPNOTSUPP", err)
		}
		if len(b.Attachments()) != 0 {
			t.Error("a refused attach left an attachment")
		}
	})
}

// TestMmap: mmap of the buffer's file adds a VMA named after it that
// holds a reference; the last close leaves the buffer alive until the
// munmap, or until exit closes the mapping.
func TestMmap(t *testing.T) {
	for _, exit := range []bool{false, true} {
		name := "munmap"
		if exit {
			name = "exit"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", false)
			pr := r.proc("app")
			r.run(func(p *sim.Proc) {
				fd, err := r.cma.Allocate(p, pr, 8<<10, 0)
				must(t, err)
				b, err := r.l.Get(p, pr, fd)
				must(t, err)
				must(t, b.Put(p))
				va, err := b.Mmap(p, pr)
				must(t, err)
				v, ok := pr.MM.Find(va)
				if !ok || v.Name != b.FileName() || v.Size != b.Size() || v.File != kernel.File(b) {
					t.Fatalf("VMA %+v, want the buffer's", v)
				}
				r.mem.Write(p, 0, va, 64)
				must(t, pr.Close(p, fd))
				if b.Released() {
					t.Fatal("released while mapped")
				}
				if exit {
					must(t, pr.Exit(p))
				} else {
					must(t, b.Munmap(p, pr, va))
				}
				if !b.Released() {
					t.Error("not released when the mapping went")
				}
			})
		})
	}
}

// TestVmap: vmaps share one address until the last vunmap.
func TestVmap(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	r.run(func(p *sim.Proc) {
		b, err := r.cma.Alloc(p, 0, mem.PageSize)
		must(t, err)
		v1, err := b.Vmap(p)
		must(t, err)
		v2, err := b.Vmap(p)
		must(t, err)
		if v1 != v2 || v1 != r.mem.PhysToVirt(Pages(b)[0].Start) {
			t.Errorf("vmaps %v, %v; want the pages' linear address", v1, v2)
		}
		must(t, b.Vunmap(p, v1))
		must(t, b.Vunmap(p, v2))
		if err := b.Vunmap(p, v1); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("third vunmap: %v, want EINVAL", err)
		}
	})
}

// TestReleaseWhileAttached: an importer that drops its reference while
// attached and mapped lets the buffer go; the release still runs once,
// and its event says what was left (what Linux WARNs about).
func TestReleaseWhileAttached(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	pr := r.proc("app")
	r.run(func(p *sim.Proc) {
		fd, err := r.system.Allocate(p, pr, mem.PageSize, 0)
		must(t, err)
		b, err := r.l.Get(p, pr, fd)
		must(t, err)
		a, err := b.Attach(p, r.dev("nic0"), AttachOptions{})
		must(t, err)
		_, err = a.Map(p, dma.ToDevice)
		must(t, err)
		must(t, b.Put(p))
		must(t, pr.Close(p, fd))
		if !b.Released() {
			t.Fatal("not released")
		}
	})
	var warn string
	for _, e := range r.events {
		if e.Op == OpRelease {
			warn = e.Warn
		}
	}
	if warn != "released with 1 attachment(s), 1 mapped" {
		t.Errorf("release warns %q", warn)
	}
}
