package mem

import (
	"bytes"
	"testing"
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// TestPayloadToDevice: bytes the CPU wrote reach a non-coherent device
// only after a clean (dma_map_single(DMA_TO_DEVICE)); before, the device
// reads the old bytes DRAM holds.
func TestPayloadToDevice(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{Payload: true})
	pa, va := buf(t, m, 0, PageSize)
	old := pattern(1500, 1)
	m.DeviceWriteBytes("nic0", false, pa, old) // DRAM holds old
	m.Invalidate(nil, pa, 1500)
	fresh := pattern(1500, 100)
	m.WriteBytes(nil, 0, va, fresh)
	got := make([]byte, 1500)
	a := m.DeviceReadBytes("nic0", false, pa, got)
	if !a.Stale || !bytes.Equal(got, old) {
		t.Errorf("before clean: stale %v, bytes new %v", a.Stale, bytes.Equal(got, fresh))
	}
	a = m.DeviceReadBytes("nic0", true, pa, got)
	if a.Stale || !bytes.Equal(got, fresh) {
		t.Errorf("coherent: stale %v, bytes new %v", a.Stale, bytes.Equal(got, fresh))
	}
	m.Clean(nil, pa, 1500)
	a = m.DeviceReadBytes("nic0", false, pa, got)
	if a.Stale || !bytes.Equal(got, fresh) {
		t.Errorf("after clean: stale %v, bytes new %v", a.Stale, bytes.Equal(got, fresh))
	}
}

// TestPayloadFromDevice: a CPU that reads without invalidating after a
// non-coherent device wrote gets the bytes its cache kept.
func TestPayloadFromDevice(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{Payload: true})
	pa, va := buf(t, m, 0, PageSize)
	old := pattern(256, 3)
	m.WriteBytes(nil, 0, va, old)
	m.Flush(nil, pa, 256)
	m.ReadBytes(nil, 0, va, make([]byte, 256)) // cached again, clean
	fresh := pattern(200, 50)
	m.DeviceWriteBytes("cam0", false, pa+28, fresh)
	got := make([]byte, 256)
	a := m.ReadBytes(nil, 0, va, got)
	if !a.Stale || a.StaleAt != pa+28 || !bytes.Equal(got, old) {
		t.Errorf("without invalidate: stale %v at %v, old bytes %v", a.Stale, a.StaleAt, bytes.Equal(got, old))
	}
	m.Invalidate(nil, pa, 256)
	a = m.ReadBytes(nil, 0, va, got)
	want := append(append(append([]byte(nil), old[:28]...), fresh...), old[228:]...)
	if a.Stale || !bytes.Equal(got, want) {
		t.Errorf("after invalidate: stale %v, bytes right %v", a.Stale, bytes.Equal(got, want))
	}
}

func TestPayloadVmallocAndCopy(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{Payload: true})
	vm, _ := m.Vmalloc(0, 3*PageSize)
	data := pattern(2*PageSize+100, 9)
	m.WriteBytes(nil, 0, vm+50, data)
	got := make([]byte, len(data))
	if a := m.ReadBytes(nil, 0, vm+50, got); a.Stale || !bytes.Equal(got, data) {
		t.Fatalf("vmalloc round trip: stale %v, equal %v", a.Stale, bytes.Equal(got, data))
	}
	// Each page's bytes are in its own physical page.
	segs, _, _, _ := m.Translate(vm+PageSize, PageSize)
	page := make([]byte, PageSize)
	m.DeviceReadBytes("dev", true, segs[0].Start, page)
	if !bytes.Equal(page, data[PageSize-50:2*PageSize-50]) {
		t.Error("second page's bytes")
	}
	// CopyPhys carries the bytes (a bounce).
	dst, dva := buf(t, m, 0, PageSize)
	m.CopyPhys(nil, 0, dst+8, segs[0].Start, 100)
	got = make([]byte, 108)
	m.ReadBytes(nil, 0, dva, got)
	if !bytes.Equal(got[:8], make([]byte, 8)) || !bytes.Equal(got[8:], page[:100]) {
		t.Errorf("copied bytes %v", got[:16])
	}
	// A write without bytes reads as zeros.
	m.Write(nil, 0, dva+8, 4)
	m.ReadBytes(nil, 0, dva, got)
	if !bytes.Equal(got[8:12], make([]byte, 4)) || got[12] != page[4] {
		t.Errorf("bytes of a write without data: %v", got[8:13])
	}
}

func TestNoPayloadReadsZeros(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	pa, va := buf(t, m, 0, PageSize)
	v := m.WriteBytes(nil, 0, va, pattern(64, 1))
	got := pattern(64, 2)
	a := m.ReadBytes(nil, 0, va, got)
	if !bytes.Equal(got, make([]byte, 64)) || a.Stale || m.Latest(pa) != v {
		t.Errorf("without payload: bytes %v, stale %v", got[:4], a.Stale)
	}
	if m.Payload() || len(m.journal) != 0 {
		t.Error("journal kept without payload")
	}
}
