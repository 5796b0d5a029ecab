package mem

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// TestFastPathsMatchGeneral runs the same random accesses on two
// memories, one taking the fast paths (cacheRead's one walk and its
// short way for hits and whole missed runs, refill; cacheWrite's one
// assignment; the caches' lazy maps of lines, which cut and refill
// lines in place) and one the general path (Memory.general, plain maps
// of lines), and
// compares after every access what each returned and all of their state:
// every span of DRAM, latest and each cache (fill order included), the
// caches' byte counts, evictions and live fill records. The workloads
// mix a receive ring's pattern (buffers rewritten by a device, then read
// whole; descriptors written in part of a line) with random ranges, on
// caches large enough to keep everything and small enough to evict all
// the time, with and without a prefetcher.
func TestFastPathsMatchGeneral(t *testing.T) {
	tests := []struct {
		name     string
		capacity platform.Bytes
		pf       int
		ring     bool
		// coherent is the fraction of the steps, from the first, that
		// make only accesses that keep every copy coherent (cached,
		// coherent devices, no Invalidate): the fast memory does not
		// keep its latest writes until the first other one (latest.go).
		coherent float64
		// first is the first access of the other kind, after them:
		// 0 random, else 1 a non-coherent device write, 2 a
		// non-coherent device read, 3 an uncached read, 4 an uncached
		// write, 5 an Invalidate.
		first int
	}{
		{"ring, large cache, prefetch 1", 32 * miB, 1, true, 0, 0},
		{"ring, small cache, prefetch 2", 4 * kiB, 2, true, 0, 0},
		{"random, large cache, prefetch 1", 32 * miB, 1, false, 0, 0},
		{"random, tiny cache, prefetch 3", 1 * kiB, 3, false, 0, 0},
		{"random, small cache, no prefetch", 8 * kiB, 0, false, 0, 0},
		{"coherent ring, large cache, prefetch 1", 32 * miB, 1, true, 1, 0},
		{"coherent ring, small cache, prefetch 2", 4 * kiB, 2, true, 1, 0},
		{"coherent random, large cache, prefetch 1", 32 * miB, 1, false, 1, 0},
		{"coherent random, tiny cache, prefetch 3", 1 * kiB, 3, false, 1, 0},
		{"coherent ring, then not, prefetch 1", 32 * miB, 1, true, 0.5, 0},
		{"coherent random, then not, no prefetch", 8 * kiB, 0, false, 0.5, 0},
		{"coherent ring, then a device write", 32 * miB, 1, true, 0.5, 1},
		{"coherent ring, then a device read", 32 * miB, 1, true, 0.5, 2},
		{"coherent random, then an uncached read", 32 * miB, 1, false, 0.5, 3},
		{"coherent ring, then an uncached write", 4 * kiB, 2, true, 0.5, 4},
		{"coherent random, then an invalidate", 32 * miB, 0, false, 0.5, 5},
	}
	steps := 4000
	if testing.Short() {
		steps = 800
	}
	for ti, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(1*giB, 1*giB)
			for i := range spec.Nodes {
				spec.Nodes[i].Cache.Size.V = tc.capacity
				spec.Nodes[i].Cache.Prefetch.V = tc.pf
			}
			const window = 16 * PageSize
			var ms [2]*Memory
			var base PhysAddr
			var uc VirtAddr
			for k := range ms {
				ms[k] = newMem(t, spec, Options{Payload: true})
				ms[k].general = k == 1
				if ms[k].general {
					// The general path keeps its latest writes
					// from the start, as it always did.
					ms[k].keepLatest()
					// The general path's caches remove lines as a
					// plain map does, with no void spans.
					for _, c := range ms[k].caches {
						c.lines = spanMap[lineState]{}
					}
				}
				b, err := ms[k].AllocPages(0, window, ZoneNormal)
				if err != nil {
					t.Fatal(err)
				}
				u, err := ms[k].Remap(b, window, Uncached)
				if err != nil {
					t.Fatal(err)
				}
				base, uc = b, u
			}
			rnd := rand.New(rand.NewPCG(uint64(ti), 7))
			for step := range steps {
				s, e := fastRange(rnd, tc.ring, step, window)
				node := 0
				if rnd.IntN(5) == 0 {
					node = 1
				}
				cached := rnd.IntN(10) != 0
				op := rnd.IntN(12)
				if tc.ring {
					op = []int{0, 0, 0, 2, 2, 4, 5, 5, 5, 6, 7, 8}[rnd.IntN(12)]
				}
				coh := rnd.IntN(3) != 0
				dirtyFirst := false
				switch cut := int(tc.coherent * float64(steps)); {
				case step < cut:
					cached, coh = true, true
					if op == 7 {
						op = 8 // a flush, not an invalidate
					}
				case step == cut && tc.first > 0:
					cached, coh = tc.first > 4 || tc.first < 3, false
					op = []int{0, 5, 4, 0, 2, 7}[tc.first]
					// A read that bypasses the caches, of lines a
					// CPU has just written: stale.
					dirtyFirst = tc.first == 2 || tc.first == 3
				}
				d := rnd.IntN(window - (e - s) + 1)
				data := make([]byte, e-s)
				for i := range data {
					data[i] = byte(step + i)
				}
				var what string
				var res [2]string
				for k, m := range ms {
					pa := base + PhysAddr(s)
					size := uint64(e - s)
					va := m.PhysToVirt(pa)
					if dirtyFirst {
						m.Write(nil, node, va, size)
					}
					if !cached {
						va = uc + VirtAddr(s)
					}
					switch op {
					case 0, 1:
						what = fmt.Sprintf("read node %d [%d, %d) cached %v", node, s, e, cached)
						if step%2 == 0 {
							// Without bytes: the fast memory's
							// cpuRead takes its short way.
							res[k] = fmt.Sprintf("%+v", m.Read(nil, node, va, size))
							break
						}
						buf := make([]byte, size)
						a := m.ReadBytes(nil, node, va, buf)
						res[k] = fmt.Sprintf("%+v %x", a, buf)
					case 2, 3:
						what = fmt.Sprintf("write node %d [%d, %d) cached %v", node, s, e, cached)
						res[k] = fmt.Sprint(m.WriteBytes(nil, node, va, data))
					case 4:
						what = fmt.Sprintf("device read [%d, %d) coherent %v", s, e, coh)
						buf := make([]byte, size)
						a := m.DeviceReadBytes("dev", coh, pa, buf)
						res[k] = fmt.Sprintf("%+v %x", a, buf)
					case 5:
						what = fmt.Sprintf("device write [%d, %d) coherent %v", s, e, coh)
						res[k] = fmt.Sprint(m.DeviceWriteBytes("dev", coh, pa, data))
					case 6:
						what = fmt.Sprintf("clean [%d, %d)", s, e)
						m.Clean(nil, pa, size)
					case 7:
						what = fmt.Sprintf("invalidate [%d, %d)", s, e)
						m.Invalidate(nil, pa, size)
					case 8:
						what = fmt.Sprintf("flush [%d, %d)", s, e)
						m.Flush(nil, pa, size)
					default:
						what = fmt.Sprintf("copy node %d [%d, %d) to %d", node, s, e, d)
						m.CopyPhys(nil, node, base+PhysAddr(d), pa, size)
					}
				}
				if res[0] != res[1] {
					t.Fatalf("step %d %s: fast path gave %s, general %s", step, what, res[0], res[1])
				}
				if err := sameState(ms[0], ms[1]); err != nil {
					t.Fatalf("step %d %s: %v", step, what, err)
				}
				if err := ms[0].verifyCoherent(); err != nil {
					t.Fatalf("step %d %s: %v", step, what, err)
				}
				// The queries, around the access.
				for range 4 {
					pa := base + PhysAddr(max(s-64+rnd.IntN(e-s+128), 0))
					var q [2]string
					for k, m := range ms {
						v0, p0, d0 := m.CacheLine(0, pa)
						v1, p1, d1 := m.CacheLine(1, pa)
						q[k] = fmt.Sprint(m.Latest(pa), m.LatestIn(pa, 100), v0, p0, d0, v1, p1, d1)
					}
					if q[0] != q[1] {
						t.Fatalf("step %d %s: at %v, latest, cached: %s, general %s", step, what, pa, q[0], q[1])
					}
				}
			}
			for k, m := range ms {
				if err := m.verify(); err != nil {
					t.Fatalf("memory %d: %v", k, err)
				}
			}
			if keep := tc.coherent < 1; ms[0].keep != keep {
				t.Fatalf("fast memory keeps its latest writes: %v, want %v", ms[0].keep, keep)
			}
		})
	}
}

// fastRange is an access's range in [0, window): in a ring, mostly a
// 1500 B buffer (2 KiB apart) or 8 to 32 B of a descriptor of 32 B after
// the buffers; otherwise random, at times line-aligned.
func fastRange(rnd *rand.Rand, ring bool, step, window int) (int, int) {
	if ring {
		const bufs, stride = 24, 2048
		if rnd.IntN(3) > 0 {
			s := (step + rnd.IntN(3)) % bufs * stride
			return s, s + 1500 - rnd.IntN(2)*700
		}
		desc := bufs*stride + rnd.IntN(64)*32
		if rnd.IntN(2) == 0 {
			return desc, desc + 32
		}
		return desc + 24, desc + 32
	}
	s := rnd.IntN(window)
	e := s + 1 + rnd.IntN(min(window-s, 3000))
	if rnd.IntN(4) == 0 {
		s, e = s&^63, min((e+63)&^63, window)
	}
	return s, e
}

// sameState says where a and b's content state differs, nil when it does
// not.
func sameState(a, b *Memory) error {
	if !slices.Equal(a.dram.spans(), b.dram.spans()) {
		return fmt.Errorf("DRAM differs: %v, general %v", a.dram.spans(), b.dram.spans())
	}
	if la, lb := latestMap(a).spans(), latestMap(b).spans(); !slices.Equal(la, lb) {
		return fmt.Errorf("latest differs: %v, general %v", la, lb)
	}
	for i := range a.caches {
		ca, cb := a.caches[i], b.caches[i]
		fa, fb := liveFills(ca), liveFills(cb)
		if la, lb := ranked(linesMap(a, ca).spans(), fa), ranked(linesMap(b, cb).spans(), fb); !slices.Equal(la, lb) {
			return fmt.Errorf("cache %d differs: %v, general %v", i, la, lb)
		}
		if ca.used != cb.used || ca.evictions != cb.evictions {
			return fmt.Errorf("cache %d: used %d, evictions %d; general %d, %d",
				i, ca.used, ca.evictions, cb.used, cb.evictions)
		}
		for k := range fa {
			fa[k].seq = 0
		}
		for k := range fb {
			fb[k].seq = 0
		}
		if !slices.Equal(fa, fb) {
			return fmt.Errorf("cache %d fills %v, general %v", i, fa, fb)
		}
	}
	return nil
}

// ranked is lines with each line's fill seq replaced by the rank of its
// fill among fills (the live fill records, in order). trim numbers the
// records anew when it drops some, keeping their order, at times that
// depend on how many spans the map holds, which the lines' versions
// kept as DRAM's change (latest.go): the order is what is seen.
func ranked(lines []span[lineState], fills []fillRec) []span[lineState] {
	rank := map[uint64]uint64{}
	for k, r := range fills {
		rank[r.seq] = uint64(k) + 1
	}
	for k, l := range lines {
		lines[k].v = newLine(l.v.ver, rank[l.v.seq()], l.v.dirty())
	}
	return lines
}

// liveFills is c's fill records with a line present.
func liveFills(c *cache) []fillRec {
	var out []fillRec
	for _, r := range c.fifo[c.head:] {
		if r.live > 0 {
			out = append(out, r)
		}
	}
	return out
}

// TestReadByProcMatchesGeneral has a process read through the linear
// map, at virtual times that its reads advance, on a memory that takes
// cpuRead's short way (no bytes, no hook, the latest writes not kept)
// and on one that takes the general path: the Accesses returned (the
// time and the process's name among them) and the time taken must be
// the same. Its copies tell CopyTime whether their source was all in
// the cache (cacheRead's answer, the short way's too): that must be
// the same as well.
func TestReadByProcMatchesGeneral(t *testing.T) {
	spec := testSpec(1*giB, 1*giB)
	var got [2][]string
	for k := range got {
		m := newMem(t, spec, Options{CopyTime: func(p *sim.Proc, node, src, dst int, bytes uint64, cached bool) {
			got[k] = append(got[k], fmt.Sprintf("copy node %d from %d to %d, %d B, cached %v", node, src, dst, bytes, cached))
			p.Sleep(sim.Time(bytes))
		}})
		if k == 1 {
			m.general = true
			m.keepLatest()
			for _, c := range m.caches {
				c.lines = spanMap[lineState]{}
			}
		}
		pa, va := buf(t, m, 0, 64*kiB)
		_, va1 := buf(t, m, 1, 64*kiB)
		rnd := rand.New(rand.NewPCG(3, 9))
		took := inProc(m, func(p *sim.Proc) {
			for i := range 300 {
				node := rnd.IntN(2)
				off := uint64(rnd.IntN(60 * kiB))
				size := uint64(1 + rnd.IntN(3000))
				from := va
				if rnd.IntN(3) == 0 {
					from = va1
				}
				switch rnd.IntN(5) {
				case 4:
					src, err := m.VirtToPhys(from + VirtAddr(off))
					if err != nil {
						panic(err)
					}
					m.CopyPhys(p, node, pa+PhysAddr(60*kiB-off%(4*kiB)), src, min(size, 4*kiB))
				case 0:
					m.Write(p, node, from+VirtAddr(off), size)
				case 1:
					m.DeviceWrite("nic", true, pa+PhysAddr(off), size)
				default:
					a := m.Read(p, node, from+VirtAddr(off), size)
					got[k] = append(got[k], fmt.Sprintf("%d %+v", i, a))
				}
			}
		})
		got[k] = append(got[k], fmt.Sprint("took ", took))
		if k == 0 && m.keep {
			t.Fatal("the fast memory keeps its latest writes")
		}
	}
	if !slices.Equal(got[0], got[1]) {
		for i := range min(len(got[0]), len(got[1])) {
			if got[0][i] != got[1][i] {
				t.Fatalf("read %s, general %s", got[0][i], got[1][i])
			}
		}
		t.Fatalf("%d reads, general %d", len(got[0]), len(got[1]))
	}
	if len(got[0]) < 100 || got[0][len(got[0])-1] == "took 0" {
		t.Fatalf("too few reads or no time taken: %v", got[0][len(got[0])-1])
	}
}
