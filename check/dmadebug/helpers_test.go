package dmadebug

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Synthetic events, shaped as package dma emits them.

const (
	nic   = "nic0"
	us    = sim.Microsecond
	bufA  = mem.DMAAddr(0x10000)
	physA = mem.PhysAddr(0x100000)
	sizeA = 1500
)

func vaOf(pa mem.PhysAddr) mem.VirtAddr { return mem.VirtAddr(0xffff888000000000 + uint64(pa)) }

// rig is a Pack on its own Checker, fed synthetic events: the tests ask
// both (Diagnostics, Count of the Checker; Active of the Pack).
type rig struct {
	*check.Checker
	*Pack
}

// newRig is a rig with the pack's options.
func newRig(opt Options) *rig {
	c := check.New(check.Options{})
	return &rig{c, New(c, opt)}
}

// observe and access feed one event by value.
func (r *rig) observe(ev dma.Event) { r.DMA(&ev) }
func (r *rig) access(a mem.Access)  { r.Access(&a) }

// steps is a sequence of dma.Event and mem.Access values.
type steps []any

// run feeds s to c, one microsecond apart, starting at 1us.
func run(c *rig, s steps) {
	for i, x := range s {
		t := sim.Time(i+1) * us
		switch v := x.(type) {
		case dma.Event:
			v.Time = t
			c.DMA(&v)
		case mem.Access:
			v.Time = t
			c.Access(&v)
		default:
			panic(fmt.Sprintf("step %d: %T", i, x))
		}
	}
}

func cat(parts ...steps) steps { return slices.Concat(parts...) }

func mapOf(kind dma.Kind, addr mem.DMAAddr, pa mem.PhysAddr, size uint64, dir dma.Direction) dma.Event {
	va := vaOf(pa)
	fn := map[dma.Kind]string{dma.KindSingle: "dma_map_single", dma.KindPage: "dma_map_page"}[kind]
	return dma.Event{Op: dma.OpMap, Kind: kind, Header: sim.Header{Proc: "rx"}, Device: nic, Addr: addr, Size: size, Dir: dir,
		CPUAddr: va, Phys: pa, Class: dma.MemLinear,
		Call: fmt.Sprintf("%s(%s, %v, %d, %s)", fn, nic, va, size, dirName(dir))}
}

func mapSingle(addr mem.DMAAddr, pa mem.PhysAddr, size uint64, dir dma.Direction) dma.Event {
	return mapOf(dma.KindSingle, addr, pa, size, dir)
}

func checked(addr mem.DMAAddr) dma.Event {
	return dma.Event{Op: dma.OpMappingError, Header: sim.Header{Proc: "rx"}, Device: nic, Addr: addr,
		Call: fmt.Sprintf("dma_mapping_error(%s, %v)", nic, addr)}
}

func unmapOf(kind dma.Kind, addr mem.DMAAddr, size uint64, dir dma.Direction) dma.Event {
	return dma.Event{Op: dma.OpUnmap, Kind: kind, Header: sim.Header{Proc: "rx"}, Device: nic, Addr: addr, Size: size, Dir: dir,
		Call: fmt.Sprintf("dma_unmap_%s(%s, %v, %d, %s)", kindName(kind), nic, addr, size, dirName(dir))}
}

func unmapSingle(addr mem.DMAAddr, size uint64, dir dma.Direction) dma.Event {
	return unmapOf(dma.KindSingle, addr, size, dir)
}

// mapped is a checked dma_map_single of buffer A; unmapped its unmap.
func mapped(dir dma.Direction) steps {
	return steps{mapSingle(bufA, physA, sizeA, dir), checked(bufA)}
}

func unmapped(dir dma.Direction) steps { return steps{unmapSingle(bufA, sizeA, dir)} }

func syncOf(toCPU bool, addr mem.DMAAddr, size uint64, dir dma.Direction) dma.Event {
	op, fn := dma.OpSyncForDevice, "dma_sync_single_for_device"
	if toCPU {
		op, fn = dma.OpSyncForCPU, "dma_sync_single_for_cpu"
	}
	return dma.Event{Op: op, Kind: dma.KindSingle, Header: sim.Header{Proc: "rx"}, Device: nic, Addr: addr, Size: size, Dir: dir,
		Call: fmt.Sprintf("%s(%s, %v, %d, %s)", fn, nic, addr, size, dirName(dir))}
}

func allocCoherent(addr mem.DMAAddr, pa mem.PhysAddr, size uint64) dma.Event {
	return dma.Event{Op: dma.OpAllocCoherent, Kind: dma.KindCoherent, Header: sim.Header{Proc: "probe"}, Device: nic,
		Addr: addr, Size: size, Dir: dma.Bidirectional, CPUAddr: vaOf(pa), Phys: pa, Class: dma.MemLinear,
		Call: fmt.Sprintf("dma_alloc_coherent(%s, %d, &handle, GFP_KERNEL)", nic, size)}
}

func freeCoherent(addr mem.DMAAddr, va mem.VirtAddr, size uint64) dma.Event {
	return dma.Event{Op: dma.OpFreeCoherent, Kind: dma.KindCoherent, Header: sim.Header{Proc: "remove"}, Device: nic,
		Addr: addr, Size: size, CPUAddr: va,
		Call: fmt.Sprintf("dma_free_coherent(%s, %d, %v, %v)", nic, size, va, addr)}
}

func sgEvent(op dma.Op, nents int, segs []dma.Segment, dir dma.Direction, call string) dma.Event {
	return dma.Event{Op: op, Kind: dma.KindSG, Header: sim.Header{Proc: "blk"}, Device: nic, Addr: segs[0].Addr, Size: segs[0].Len,
		Dir: dir, Phys: segs[0].Phys, Class: dma.MemLinear, SG: segs, NEnts: nents, Mapped: len(segs),
		Call: fmt.Sprintf("%s(%s, sgl, %d, %s)", call, nic, nents, dirName(dir))}
}

func mapSG(nents int, segs []dma.Segment, dir dma.Direction) dma.Event {
	return sgEvent(dma.OpMap, nents, segs, dir, "dma_map_sg")
}

func unmapSG(nents int, segs []dma.Segment, dir dma.Direction) dma.Event {
	return sgEvent(dma.OpUnmap, nents, segs, dir, "dma_unmap_sg")
}

func syncSG(toCPU bool, nents int, segs []dma.Segment, dir dma.Direction) dma.Event {
	if toCPU {
		return sgEvent(dma.OpSyncForCPU, nents, segs, dir, "dma_sync_sg_for_cpu")
	}
	return sgEvent(dma.OpSyncForDevice, nents, segs, dir, "dma_sync_sg_for_device")
}

// twoSegs is a 4-entry list that dma_map_sg coalesced into 2 segments.
var twoSegs = []dma.Segment{
	{Phys: 0x200000, Addr: 0x80000, Len: 8192},
	{Phys: 0x300000, Addr: 0x90000, Len: 8192},
}

func mapResource(addr mem.DMAAddr, pa mem.PhysAddr, size uint64, class dma.MemClass) dma.Event {
	return dma.Event{Op: dma.OpMap, Kind: dma.KindResource, Header: sim.Header{Proc: "p2p"}, Device: nic, Addr: addr, Size: size,
		Dir: dma.Bidirectional, Phys: pa, Class: class,
		Call: fmt.Sprintf("dma_map_resource(%s, %v, %d, DMA_BIDIRECTIONAL, 0)", nic, pa, size)}
}

func deviceAccess(addr mem.DMAAddr, size uint64, write bool) dma.Event {
	return dma.Event{Op: dma.OpDeviceAccess, Device: nic, Addr: addr, Size: size, Write: write}
}

func unbind() dma.Event {
	return dma.Event{Op: dma.OpUnbind, Header: sim.Header{Proc: "rmmod"}, Device: nic, Call: "device_release_driver(" + nic + ")"}
}

func cpuRead(pa mem.PhysAddr, size uint64) mem.Access {
	return mem.Access{Kind: mem.CPURead, Header: sim.Header{Proc: "rx"}, Phys: pa, Size: size}
}

func cpuWrite(pa mem.PhysAddr, size uint64) mem.Access {
	return mem.Access{Kind: mem.CPUWrite, Header: sim.Header{Proc: "tx"}, Phys: pa, Size: size}
}

func staleCPURead(pa mem.PhysAddr, size uint64, got, want mem.Version) mem.Access {
	a := cpuRead(pa, size)
	a.Stale, a.StaleAt, a.Got, a.Want = true, pa, got, want
	return a
}

// codes is the set of classes c reported, sorted.
func codes(c *rig) []string {
	var out []string
	for _, d := range c.Diagnostics() {
		if !slices.Contains(out, d.Class) {
			out = append(out, d.Class)
		}
	}
	slices.Sort(out)
	return out
}

func first(c *rig, code string) (check.Diagnostic, bool) {
	for _, d := range c.Diagnostics() {
		if d.Class == code {
			return d, true
		}
	}
	return check.Diagnostic{}, false
}
