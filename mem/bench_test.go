package mem

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// The benchmarks time the model's own work per operation: accesses are
// made outside any process (nil), so no virtual time and no scheduling
// is in the number, except in BenchmarkStreaming64GiB, which runs as a
// process.

// benchSpec has a 32 MiB cache, so that repeated accesses hit.
func benchSpec() *platform.Spec {
	s := testSpec(1 * giB)
	s.Nodes[0].Cache.Size.V = 32 * miB
	return s
}

func BenchmarkRead(b *testing.B) {
	for _, size := range []uint64{64, 4 * kiB, 64 * kiB} {
		b.Run(sizeName(size), func(b *testing.B) {
			m := newMem(b, benchSpec(), Options{})
			_, va := buf(b, m, 0, size)
			m.Read(nil, 0, va, size)
			b.ReportAllocs()
			for b.Loop() {
				m.Read(nil, 0, va, size)
			}
		})
	}
}

func BenchmarkReadMiss(b *testing.B) {
	m := newMem(b, benchSpec(), Options{})
	pa, va := buf(b, m, 0, 4*kiB)
	b.ReportAllocs()
	for b.Loop() {
		m.Invalidate(nil, pa, 4*kiB)
		m.Read(nil, 0, va, 4*kiB)
	}
}

func BenchmarkWrite(b *testing.B) {
	for _, size := range []uint64{8, 4 * kiB, 64 * kiB} {
		b.Run(sizeName(size), func(b *testing.B) {
			m := newMem(b, benchSpec(), Options{})
			_, va := buf(b, m, 0, 64*kiB)
			b.ReportAllocs()
			for b.Loop() {
				m.Write(nil, 0, va+8, size)
			}
		})
	}
}

func BenchmarkDeviceWrite(b *testing.B) {
	for _, coherent := range []bool{false, true} {
		name := "noncoherent"
		if coherent {
			name = "coherent"
		}
		b.Run(name, func(b *testing.B) {
			m := newMem(b, benchSpec(), Options{})
			pa, va := buf(b, m, 0, 64*kiB)
			m.Read(nil, 0, va, 4*kiB)
			b.ReportAllocs()
			for b.Loop() {
				m.DeviceWrite("dev", coherent, pa, 64*kiB)
			}
		})
	}
}

func BenchmarkInvalidate(b *testing.B) {
	m := newMem(b, benchSpec(), Options{})
	pa, va := buf(b, m, 0, 64*kiB)
	b.ReportAllocs()
	for b.Loop() {
		m.Read(nil, 0, va+VirtAddr(64), 64)
		m.Invalidate(nil, pa, 64*kiB)
	}
}

// BenchmarkStreaming64GiB is TestStreaming64GiB's workload per
// iteration: 64 GiB from a non-coherent device through 256 buffers.
func BenchmarkStreaming64GiB(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		m := newMem(b, streamSpec(), Options{})
		var foot int
		inProc(m, func(p *sim.Proc) { foot, _ = stream(m, p, 1<<20) })
		b.ReportMetric(float64(foot), "spans")
		b.ReportMetric(heapMiB(), "heap-MiB")
		runtime.KeepAlive(m) // the heap measured holds the model
	}
}

func sizeName(n uint64) string {
	switch {
	case n >= kiB && n%kiB == 0:
		return itoa(n/kiB) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n uint64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// BenchmarkSpanMapRing is the interval map alone under a receive ring's
// pattern: 256 buffers of 1500 B, 2 KiB apart, each rewritten in turn
// with a new version, and an 8 B status written beside a descriptor
// ring of 16 B entries, as a NIC does per packet. One op is one packet:
// a buffer write, a status write and a read of each.
func BenchmarkSpanMapRing(b *testing.B) {
	const bufs, stride, size = 256, 2048, 1500
	const ring = 1 << 30
	var m spanMap[Version]
	v := Version(1)
	packet := func(i int) {
		s := uint64(i%bufs) * stride
		m.set(s, s+size, v)
		d := ring + uint64(i%bufs)*16
		m.set(d+8, d+16, v+1)
		v += 2
		m.get(s)
		m.get(d + 8)
	}
	for i := range 4 * bufs {
		packet(i)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		packet(i)
		i++
	}
}

// BenchmarkRxRing is the content model's part of a received packet on a
// NIC's ring (nic's BenchmarkRxPacket on 2s-4gpu-pcie: 64 B lines, a
// 105 MiB cache, a next-line prefetcher, a coherent device, a second
// node whose cache stays empty): the device writes a 1500 B buffer and
// its descriptor's 8 B status, the driver reposts a 32 B descriptor,
// polls the next status and reads the buffer. 256 buffers 2 KiB apart,
// 256 descriptors of 32 B. One op is one packet.
func BenchmarkRxRing(b *testing.B) { rxRing(b, 0, true) }

// BenchmarkRxRingEvicted is BenchmarkRxRing with other work between the
// device's writes and the driver's accesses, as in the receive path
// (the fabric, the engine, the event queue): a load of one word per
// 64 B line over the sub-benchmark's KiB kilobytes, a different part of
// a 2 MiB array each time, which pushes the content model's maps out of
// the CPU's first- and second-level caches in part or all. mem=false is
// the sweep alone; the content model's part of a packet is the
// difference in cpu-ns/op between the two: what its accesses cost when
// they find its maps out of the CPU's caches, as they do in the receive
// path.
func BenchmarkRxRingEvicted(b *testing.B) {
	for _, kib := range []int{0, 16, 64, 256} {
		for _, on := range []bool{true, false} {
			b.Run(fmt.Sprintf("KiB=%d/mem=%v", kib, on), func(b *testing.B) { rxRing(b, kib, on) })
		}
	}
}

// sweepSink keeps the sweep's loads from being optimized away.
var sweepSink uint64

func rxRing(b *testing.B, sweepKiB int, memOn bool) {
	const bufs, stride, size = 256, 2048, 1500
	spec := testSpec(1*giB, 1*giB)
	for i := range spec.Nodes {
		spec.Nodes[i].Cache.Size.V = 105 * miB
		spec.Nodes[i].Cache.Prefetch.V = 1
	}
	m := newMem(b, spec, Options{})
	bpa, bva := buf(b, m, 0, bufs*stride)
	dpa, dva := buf(b, m, 0, bufs*32)
	var junk []uint64
	if sweepKiB > 0 {
		junk = make([]uint64, 1<<18) // 2 MiB, a power of two words
	}
	words, at := sweepKiB*1024/8, 0
	packet := func(i int) {
		k := uint64(i % bufs)
		if memOn {
			m.DeviceWrite("nic", true, bpa+PhysAddr(k*stride), size)
			m.DeviceWrite("nic", true, dpa+PhysAddr(k*32+24), 8)
		}
		var x uint64
		for j := 0; j < words; j += 8 {
			x += junk[(at+j)&(len(junk)-1)]
		}
		at += words
		sweepSink += x
		if memOn {
			m.Write(nil, 0, dva+VirtAddr(k*32), 32)
			m.Read(nil, 0, dva+VirtAddr((k+1)%bufs*32+24), 8)
			m.Read(nil, 0, bva+VirtAddr(k*stride), size)
		}
	}
	for i := range 4 * bufs {
		packet(i)
	}
	i := 0
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		packet(i)
		i++
	}
	// On a shared machine ns/op counts other programs' turns too.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
