package mem

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// hookDigest is the SHA-256 of everything TestHooksSeeTheSame's workload
// reported to the hooks and returned, as main at eaa0488 produced it
// (before the Access was built on demand, the latest writes kept only
// when needed and a line's version 0 stood for DRAM's): what the hooks
// see, and what they read of the memory, must be the same.
const hookDigest = "c7261b65967e78206142f9848eede493b33bb09311e532738da5ef92723fefe0"

// TestHooksSeeTheSame makes random accesses of every kind, by a process
// and outside one, on two nodes: linear, vmalloc (several physical
// pieces), uncached and anonymous memory (faults that cost time),
// device accesses coherent and not, maintenance, copies, and failures
// (unmapped addresses, unknown nodes, ranges that are not memory, zero
// sizes); the first thousand keep every copy coherent. A hook records
// every Access it is given, in full, with the latest versions it reads
// there, and the test every value returned; their digest must equal
// hookDigest.
func TestHooksSeeTheSame(t *testing.T) {
	spec := testSpec(1*giB, 1*giB)
	for i := range spec.Nodes {
		spec.Nodes[i].Cache.Size.V = 16 * kiB
		spec.Nodes[i].Cache.Prefetch.V = 1
	}
	m := newMem(t, spec, Options{Payload: true})
	h := sha256.New()
	var fails, stale, fine int // the kinds of Access seen
	m.Hooks.Hook(func(a *Access) {
		fmt.Fprintf(h, "hook %+v\n", *a)
		if a.Err == nil {
			// A hook may inspect the memory inside the access.
			fmt.Fprintf(h, "latest %d %d\n", m.Latest(a.Phys), m.LatestIn(a.Phys, a.Size))
		}
		switch {
		case a.Err != nil:
			fails++
		case a.Stale:
			stale++
		default:
			fine++
		}
	})
	lin0, lva0 := buf(t, m, 0, 64*kiB)
	lin1, lva1 := buf(t, m, 1, 64*kiB)
	vva, err := m.Vmalloc(1, 64*kiB)
	if err != nil {
		t.Fatal(err)
	}
	uva, err := m.Remap(lin0, 16*kiB, Uncached)
	if err != nil {
		t.Fatal(err)
	}
	kva, err := m.Kmalloc(0, 200)
	if err != nil {
		t.Fatal(err)
	}
	m.SetFaultCost(700 * sim.Nanosecond)
	ava, err := m.MapAnon(256*kiB, func(_ VirtAddr, node int) (PhysAddr, error) {
		return m.AllocPages(max(node, 0), PageSize, ZoneNormal)
	})
	if err != nil {
		t.Fatal(err)
	}
	b0, n0 := m.NodeRange(0)
	end0 := m.PhysToVirt(b0) + VirtAddr(n0) - 2*kiB // reads across node 0's end
	vas := []VirtAddr{lva0, lva1, vva, uva, kva, 0x1234, lva0 + 64*kiB - 100, end0, ava}
	pas := []PhysAddr{lin0, lin1, lin1 + 64*kiB - 100, 0x7fff_ffff_f000}
	rnd := rand.New(rand.NewPCG(17, 5))
	// The first steps keep every copy coherent: no uncached mapping, no
	// non-coherent device, no Invalidate (the memory does not keep its
	// latest writes until the first other one).
	coherent := true
	step := func(p *sim.Proc) {
		node := rnd.IntN(3) - rnd.IntN(2) // -1 to 2: two bad nodes
		va := vas[rnd.IntN(len(vas))] + VirtAddr(rnd.IntN(4*kiB))
		if va >= ava && va < ava+256*kiB {
			va = ava + VirtAddr(rnd.IntN(250*kiB)) // pages to fault in
		}
		pa := pas[rnd.IntN(len(pas))] + PhysAddr(rnd.IntN(4*kiB))
		size := uint64(rnd.IntN(3000))
		if rnd.IntN(3) == 0 {
			size = uint64(rnd.IntN(40))
		}
		coh := rnd.IntN(3) != 0
		if coherent {
			if va >= uva && va < uva+16*kiB {
				va = lva0 + (va - uva)
			}
			coh = true
		}
		switch rnd.IntN(11) {
		case 0, 1:
			fmt.Fprintf(h, "read %+v\n", m.Read(p, node, va, size))
		case 2:
			b := make([]byte, size)
			fmt.Fprintf(h, "readbytes %+v %x\n", m.ReadBytes(p, node, va, b), b)
		case 3, 4:
			fmt.Fprintf(h, "write %d\n", m.Write(p, node, va, size))
		case 5:
			fmt.Fprintf(h, "writebytes %d\n", m.WriteBytes(p, node, va, make([]byte, size)))
		case 6:
			fmt.Fprintf(h, "devread %+v\n", m.DeviceRead("nic", coh, pa, size))
		case 7:
			fmt.Fprintf(h, "devwrite %d\n", m.DeviceWrite("nic", coh, pa, size))
		case 8:
			m.CopyPhys(p, max(node, 0), lin1+PhysAddr(rnd.IntN(8*kiB)), pa, size)
		case 9:
			m.Flush(p, pa, size)
		default:
			if rnd.IntN(4) == 0 && !coherent {
				m.Invalidate(p, pa, size)
			} else {
				m.Clean(p, pa, size)
			}
		}
	}
	for range 1000 {
		step(nil)
	}
	if m.keep {
		t.Fatal("the coherent steps kept the latest writes")
	}
	coherent = false
	for range 500 {
		step(nil)
	}
	inProc(m, func(p *sim.Proc) {
		for range 1500 {
			step(p)
		}
	})
	if fails < 100 || stale < 100 || fine < 1000 {
		t.Errorf("%d failed accesses, %d stale, %d others: the workload misses some", fails, stale, fine)
	}
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != hookDigest {
		t.Fatalf("digest %s, want %s", got, hookDigest)
	}
}
