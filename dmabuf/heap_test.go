package dmabuf

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestHeapContiguity: an importer that takes one DMA range (no
// scatter-gather) and sits behind no IOMMU gets EFAULT for a
// system-heap buffer (scattered pages) and maps a CMA-heap buffer (one
// physical run); behind an IOMMU the system heap's pages merge into one
// IOVA range and it maps too.
func TestHeapContiguity(t *testing.T) {
	const size = 64 << 10
	for _, tc := range []struct {
		name    string
		heap    string
		iommu   bool
		wantErr error
	}{
		{"system, no IOMMU", "system", false, syscall.EFAULT},
		{"CMA, no IOMMU", "reserved", false, nil},
		{"system, IOMMU", "system", true, nil},
		{"CMA, IOMMU", "reserved", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", false)
			dev := r.dev("nic0")
			if tc.iommu {
				r.behindIOMMU(dev)
			}
			h, err := r.l.Heap(tc.heap)
			must(t, err)
			r.run(func(p *sim.Proc) {
				b, err := h.Alloc(p, 0, size)
				must(t, err)
				if got, want := len(Pages(b)) == 1, h.Contiguous(); got != want {
					t.Errorf("%d physical runs; contiguous heap %v", len(Pages(b)), want)
				}
				a, err := b.Attach(p, dev, AttachOptions{Contiguous: true})
				must(t, err)
				sgt, err := a.Map(p, dma.ToDevice)
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
					t.Fatalf("map: %v, want %v", err, tc.wantErr)
				}
				if err != nil {
					if s, _ := a.Mapped(); s != nil {
						t.Error("a refused map stays mapped")
					}
					return
				}
				if ContiguousSize(sgt) != size || sgt.Nents != 1 {
					t.Errorf("%d segments, %d contiguous bytes; want 1, %d", sgt.Nents, ContiguousSize(sgt), size)
				}
				must(t, a.Unmap(p, sgt, dma.ToDevice))
			})
		})
	}
}

// TestCMAExhausted: the CMA area is limited; an allocation that finds no
// free run fails with ENOMEM, and memory freed by a release is reused.
func TestCMAExhausted(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	pr := r.proc("app")
	r.run(func(p *sim.Proc) {
		fd1, err := r.cma.Allocate(p, pr, 3<<20, 0)
		must(t, err)
		if _, err := r.cma.Allocate(p, pr, 2<<20, 0); !errors.Is(err, syscall.ENOMEM) {
			t.Fatalf("allocation beyond the area: %v, want ENOMEM", err)
		}
		fd2, err := r.cma.Allocate(p, pr, 1<<20, 0)
		must(t, err)
		b1, err := r.l.Get(p, pr, fd1)
		must(t, err)
		first := Pages(b1)[0].Start
		must(t, b1.Put(p))
		must(t, pr.Close(p, fd1))
		fd3, err := r.cma.Allocate(p, pr, 2<<20, 0)
		must(t, err)
		b3, err := r.l.Get(p, pr, fd3)
		must(t, err)
		if Pages(b3)[0].Start != first {
			t.Errorf("reused run at %v, want the freed one at %v", Pages(b3)[0].Start, first)
		}
		if Pages(b3)[0].Start%(1<<20) != 0 {
			t.Errorf("2 MiB allocation at %v: not aligned to 1 MiB (CMA_ALIGNMENT)", Pages(b3)[0].Start)
		}
		must(t, b3.Put(p))
		_ = fd2
	})
}

// TestHeapAllocateErrors: the ioctl's argument checks and an unknown
// heap.
func TestHeapAllocateErrors(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	pr := r.proc("app")
	if _, err := r.l.Heap("linux,cma"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("open of a missing heap: %v, want ENOENT", err)
	}
	if got := r.l.Heaps(); len(got) != 2 || got[0] != "system" || got[1] != "reserved" {
		t.Errorf("heaps %v", got)
	}
	if _, err := r.l.AddSystemHeap(r.mem); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("second system heap: %v, want EEXIST", err)
	}
	r.run(func(p *sim.Proc) {
		if _, err := r.system.Allocate(p, pr, 0, 0); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("len 0: %v, want EINVAL", err)
		}
		if _, err := r.system.Allocate(p, pr, mem.PageSize, 1); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("heap flags: %v, want EINVAL", err)
		}
		fd, err := r.system.Allocate(p, pr, 100, 0)
		must(t, err)
		b, err := r.l.Get(p, pr, fd)
		must(t, err)
		if b.Size() != mem.PageSize || b.ExpName() != "system" {
			t.Errorf("buffer of %d bytes from %s, want a page from system", b.Size(), b.ExpName())
		}
		must(t, b.Put(p))
	})
}

// TestHeapZeroes: a heap's allocation is written (zeroed) by the
// allocating thread, which pays for it.
func TestHeapZeroes(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", true)
	r.run(func(p *sim.Proc) {
		b, err := r.system.Alloc(p, 0, 16<<10)
		must(t, err)
		if p.CPUTime() == 0 {
			t.Error("zeroing cost nothing")
		}
		pg := Pages(b)[1].Start
		if r.mem.Latest(pg) == 0 {
			t.Error("no write recorded on the buffer's pages")
		}
	})
}
