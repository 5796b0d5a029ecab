package gpu

import (
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestAllocAlignment: small allocations share a 2 MiB chunk in 512 B
// steps; large ones get whole 2 MiB pages, 2 MiB-aligned; all fall in
// the GPU's window and are backed by its device memory.
func TestAllocAlignment(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, r.d, 1)
		b := r.alloc(p, r.d, 1000)
		c := r.alloc(p, r.d, 512)
		if a%LargePageSize != 0 || b != a+512 || c != b+1024 {
			t.Errorf("small allocations at %v %v %v: want a 2 MiB-aligned chunk, then +512, then +1024", a, b, c)
		}
		big := r.alloc(p, r.d, 3<<20)
		if big%LargePageSize != 0 || big == a {
			t.Errorf("large allocation at %v: want its own 2 MiB-aligned pages", big)
		}
		free, total := r.d.MemGetInfo()
		if used := total - free; used != LargePageSize+4<<20 {
			t.Errorf("used %d bytes, want one 2 MiB chunk + 4 MiB (3 MiB rounded to pages)", used)
		}
		for _, x := range []mem.GPUAddr{a, b, c, big} {
			if uint64(x) < r.d.vaBase || uint64(x) >= r.d.vaEnd {
				t.Errorf("%v outside the GPU's window [%#x, %#x)", x, r.d.vaBase, r.d.vaEnd)
			}
			_, phys, err := r.sys.Resolve(x, 1)
			if err != nil || len(phys) != 1 {
				t.Fatalf("Resolve(%v) = %v, %v", x, phys, err)
			}
			if dev, ok := r.m.Mem.DeviceOf(phys[0].Start); !ok || dev != "gpu0" {
				t.Errorf("%v is backed by %v, not gpu0's VRAM", x, phys[0].Start)
			}
		}
	})
}

// TestAllocCosts: one cuMemAlloc and one cuMemFree cost the host
// the 57 µs measured on the H200 machine (2026-11-21) together, as CPU
// time.
func TestAllocCosts(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, r.d, 2<<20)
		must(t, r.sys.Free(p, a))
		if p.Now() != 57*sim.Microsecond || p.CPUTime() != 57*sim.Microsecond {
			t.Errorf("alloc + free took %v (CPU %v), want 57us", p.Now(), p.CPUTime())
		}
	})
}

// TestOutOfMemory: a request beyond the VRAM left fails with
// ErrOutOfMemory and changes nothing; freeing makes room again.
func TestOutOfMemory(t *testing.T) {
	spec := preset(t, "h200-pcie")
	spec.GPUs[0].VRAM.V = 64 << 20
	r := newRig(t, spec, false)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, r.d, 48<<20)
		_, err := r.d.Alloc(p, 32<<20)
		mustErr(t, err, ErrOutOfMemory)
		if free, _ := r.d.MemGetInfo(); free != 16<<20 {
			t.Errorf("free %d after a failed allocation, want 16 MiB", free)
		}
		_, err = r.d.Alloc(p, 0)
		mustErr(t, err, ErrInvalidValue)
		must(t, r.sys.Free(p, a))
		if _, err := r.d.Alloc(p, 64<<20); err != nil {
			t.Errorf("all of VRAM after the free: %v", err)
		}
	})
}

// TestFreeAndBufferID: freeing and allocating again gives the same
// address (first fit, as the driver reuses VA) but a new buffer ID,
// which is how a registration cache notices (NVIDIA's "Developing a
// Linux Kernel Module using GPUDirect RDMA", "Buffer ID Tag Check").
// Inner addresses, second frees and host memory are refused.
func TestFreeAndBufferID(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		a, err := r.d.Alloc(p, 4<<20)
		must(t, err)
		before, err := r.sys.PointerAttributes(a.Addr + 100)
		must(t, err)
		must(t, r.sys.Free(p, a.Addr))
		if _, err := r.sys.PointerAttributes(a.Addr); err == nil {
			t.Error("attributes of freed memory")
		}
		mustErr(t, r.sys.Free(p, a.Addr), ErrInvalidValue)
		b, err := r.d.Alloc(p, 4<<20)
		must(t, err)
		after, _ := r.sys.PointerAttributes(b.Addr)
		if b.Addr != a.Addr || after.BufferID == before.BufferID || after.BufferID != b.BufferID {
			t.Errorf("realloc at %v id %d, was %v id %d: want the same address and a new id", b.Addr, after.BufferID, a.Addr, before.BufferID)
		}
		mustErr(t, r.sys.Free(p, b.Addr+512), ErrInvalidValue)
		host := r.hostBuf(1<<20, 0)
		mustErr(t, r.sys.Free(p, host), ErrInvalidValue)
	})
}

// TestFreeWaitsForWork: cuMemFree waits for the GPU's work, so a kernel
// using the buffer finishes first, and OnFree hooks see the allocation
// before it goes.
func TestFreeWaitsForWork(t *testing.T) {
	r := h200(t)
	var hooked []Allocation
	r.sys.OnFree(func(p *sim.Proc, a Allocation) {
		if _, err := r.sys.PointerAttributes(a.Addr); err != nil {
			t.Errorf("OnFree: allocation already gone: %v", err)
		}
		hooked = append(hooked, a)
	})
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, r.d, 1<<20)
		k := Kernel{Name: "k", Accesses: []Access{{Addr: a, Size: 1 << 20}}, Compute: 100 * sim.Microsecond}
		must(t, r.d.DefaultStream().Launch(p, k))
		must(t, r.sys.Free(p, a))
		end := r.find("k").End
		if p.Now() != end+FreeCost {
			t.Errorf("free returned at %v, want the kernel's end %v + FreeCost", p.Now(), end)
		}
	})
	if len(hooked) != 1 || hooked[0].Type != MemoryDevice {
		t.Errorf("OnFree saw %v", hooked)
	}
}

// TestPointerAttributes covers each memory type, inner addresses, and
// addresses the map does not know.
func TestPointerAttributes(t *testing.T) {
	r := h200(t)
	host := r.hostBuf(1<<20, HostPortable)
	reg := r.hostBuf(1<<20, HostRegistered)
	r.run(func(p *sim.Proc) {
		dev := r.alloc(p, r.d, 8192)
		man, err := r.sys.AllocManaged(p, 3<<20)
		must(t, err)
		cases := []struct {
			name   string
			addr   mem.GPUAddr
			typ    MemoryType
			device int
			base   mem.GPUAddr
			mapped bool
		}{
			{"device inner", dev + 4000, MemoryDevice, 0, dev, true},
			{"host allocated", host + 5, MemoryHost, -1, host, true},
			{"host registered without DEVICEMAP", reg, MemoryHost, -1, reg, false},
			{"managed", man.Addr + (2 << 20), MemoryManaged, -1, man.Addr, true},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got, err := r.sys.PointerAttributes(c.addr)
				if err != nil {
					t.Fatal(err)
				}
				if got.Type != c.typ || got.Device != c.device || got.RangeStart != c.base || got.Mapped != c.mapped ||
					got.IsManaged != (c.typ == MemoryManaged) || got.BufferID == 0 {
					t.Errorf("got %+v", got)
				}
				if c.typ == MemoryHost && got.HostPointer != mem.VirtAddr(c.base) {
					t.Errorf("host pointer %v, want the same address (UVA)", got.HostPointer)
				}
			})
		}
		_, err = r.sys.PointerAttributes(dev + 8192)
		mustErr(t, err, ErrInvalidValue)
		must(t, r.sys.Free(p, man.Addr))
	})
}

// TestRegisterHost: overlapping registrations and unknown ranges are
// refused; unregistering runs the hooks and frees the range for another
// registration.
func TestRegisterHost(t *testing.T) {
	r := h200(t)
	pa, err := r.m.Mem.AllocPages(0, 1<<20, mem.ZoneNormal)
	must(t, err)
	va := r.m.Mem.PhysToVirt(pa)
	_, err = r.sys.RegisterHost(nil, va, 1<<20, 0)
	must(t, err)
	_, err = r.sys.RegisterHost(nil, va+4096, 4096, 0)
	mustErr(t, err, ErrHostMemoryAlreadyRegistered)
	_, err = r.sys.RegisterHost(nil, mem.VmallocStart, 4096, 0)
	mustErr(t, err, ErrInvalidValue)
	hooks := 0
	r.sys.OnFree(func(*sim.Proc, Allocation) { hooks++ })
	r.run(func(p *sim.Proc) {
		mustErr(t, r.sys.UnregisterHost(p, va+4096), ErrHostMemoryNotRegistered)
		must(t, r.sys.UnregisterHost(p, va))
	})
	if hooks != 1 {
		t.Errorf("%d OnFree calls, want 1", hooks)
	}
	if _, err := r.sys.RegisterHost(nil, va, 1<<20, 0); err != nil {
		t.Errorf("register again: %v", err)
	}
}

// TestDevicesHaveTheirOwnWindows: on a four-GPU machine each GPU's
// allocations are in its own window and say which GPU they are on.
func TestDevicesHaveTheirOwnWindows(t *testing.T) {
	r := newRig(t, preset(t, "2s-4gpu-pcie"), false)
	r.run(func(p *sim.Proc) {
		var last mem.GPUAddr
		for i, d := range r.sys.Devices {
			a := r.alloc(p, d, 1<<20)
			attr, err := r.sys.PointerAttributes(a)
			must(t, err)
			if attr.Device != i || a <= last {
				t.Errorf("GPU %d: allocation %v on device %d", i, a, attr.Device)
			}
			last = a
		}
	})
	if _, err := r.sys.Device(4); err == nil {
		t.Error("Device(4) on a four-GPU machine")
	}
}
