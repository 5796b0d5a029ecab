package cuda

import (
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestPointerAttributes: what cuPointerGetAttribute answers for each kind
// of memory, and BUFFER_ID changing on free and re-allocation at the
// same address (907 → 913 seen on the H200 machine, 2026-11-21).
func TestPointerAttributes(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		dv, err := r.ctx.MemAlloc(p, 1<<20)
		must(t, err)
		h, err := r.ctx.MemAllocHost(p, 4096)
		must(t, err)
		mg, err := r.ctx.MemAllocManaged(p, 4096, MemAttachGlobal)
		must(t, err)
		pg, err := r.pr.Malloc(4096)
		must(t, err)
		get := func(attr PointerAttribute, a mem.GPUAddr) uint64 {
			t.Helper()
			v, err := r.ctx.PointerGetAttribute(attr, a)
			if err != nil {
				t.Fatalf("attribute %d of %v: %v", attr, a, err)
			}
			return v
		}
		for _, c := range []struct {
			name       string
			addr       mem.GPUAddr
			typ, man   uint64
			start, sz  uint64
			ordinalDev uint64
		}{
			{"device", dv + 100, MemoryTypeDevice, 0, uint64(dv), 1 << 20, 0},
			{"host", mem.GPUAddr(h), MemoryTypeHost, 0, uint64(h), 4096, 0},
			{"managed", mg, MemoryTypeDevice, 1, uint64(mg), 4096, 0},
		} {
			if got := get(PointerAttributeMemoryType, c.addr); got != c.typ {
				t.Errorf("%s: MEMORY_TYPE %d, want %d", c.name, got, c.typ)
			}
			if got := get(PointerAttributeIsManaged, c.addr); got != c.man {
				t.Errorf("%s: IS_MANAGED %d, want %d", c.name, got, c.man)
			}
			if got := get(PointerAttributeRangeStartAddr, c.addr); got != c.start {
				t.Errorf("%s: RANGE_START %#x, want %#x", c.name, got, c.start)
			}
			if got := get(PointerAttributeRangeSize, c.addr); got != c.sz {
				t.Errorf("%s: RANGE_SIZE %#x, want %#x", c.name, got, c.sz)
			}
			if got := get(PointerAttributeContext, c.addr); got != uint64(r.ctx.ID()) {
				t.Errorf("%s: CONTEXT %d, want %d", c.name, got, r.ctx.ID())
			}
			if got := get(PointerAttributeDeviceOrdinal, c.addr); got != c.ordinalDev {
				t.Errorf("%s: DEVICE_ORDINAL %d", c.name, got)
			}
		}
		if get(PointerAttributeHostPointer, mem.GPUAddr(h)) != uint64(h) || get(PointerAttributeDevicePointer, mem.GPUAddr(h)) != uint64(h) {
			t.Error("UVA: host memory's device pointer is its host pointer")
		}
		_, err = r.ctx.PointerGetAttribute(PointerAttributeHostPointer, dv)
		wantResult(t, err, ErrorInvalidValue)
		_, err = r.ctx.PointerGetAttribute(PointerAttributeMemoryType, mem.GPUAddr(pg))
		wantResult(t, err, ErrorInvalidValue)
		_, err = r.ctx.PointerGetAttribute(PointerAttribute(5), dv)
		wantResult(t, err, ErrorInvalidValue)

		// SYNC_MEMOPS: off, set, read back; only on device memory.
		if get(PointerAttributeSyncMemops, dv) != 0 {
			t.Error("SYNC_MEMOPS set at allocation")
		}
		must(t, r.ctx.PointerSetAttribute(PointerAttributeSyncMemops, 1, dv))
		if get(PointerAttributeSyncMemops, dv) != 1 {
			t.Error("SYNC_MEMOPS not set")
		}
		wantResult(t, r.ctx.PointerSetAttribute(PointerAttributeSyncMemops, 1, mem.GPUAddr(h)), ErrorInvalidValue)
		wantResult(t, r.ctx.PointerSetAttribute(PointerAttributeBufferID, 1, dv), ErrorInvalidValue)

		// BUFFER_ID: a new one after free and re-allocation at the same
		// address.
		id := get(PointerAttributeBufferID, dv)
		must(t, r.ctx.MemFree(p, dv))
		_, err = r.ctx.PointerGetAttribute(PointerAttributeBufferID, dv)
		wantResult(t, err, ErrorInvalidValue)
		dv2, err := r.ctx.MemAlloc(p, 1<<20)
		must(t, err)
		if dv2 != dv {
			t.Fatalf("re-allocation at %v, not %v", dv2, dv)
		}
		if id2 := get(PointerAttributeBufferID, dv2); id2 == id {
			t.Errorf("BUFFER_ID %d unchanged after free and re-allocation", id)
		}
		if get(PointerAttributeSyncMemops, dv2) != 0 {
			t.Error("SYNC_MEMOPS survived the free")
		}
	})
}
