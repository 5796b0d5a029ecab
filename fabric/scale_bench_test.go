package fabric

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dmalab/dmalab/sim"
)

// Capacities of the scale workload, the same in the SimGrid program that
// runs it side by side (docs/measurements/2026-11-25-scale-fabric.md):
// 10 GB/s from an endpoint to its switch, 40 GB/s from a switch to the
// core, both full duplex (SimGrid's SPLITDUPLEX), no latency, so that
// SimGrid's CM02 model (whose sharing penalty is the route latency) and
// this fabric solve the same plain max-min problem.
const (
	scaleEdgeBW = 10e9
	scaleUpBW   = 40e9
)

// starTopo is endpoints under switches under one core: perSwitch
// endpoints on each of switches switches.
func starTopo(eng *sim.Engine, switches, perSwitch int) (*Fabric, []*Node) {
	fab := New(eng, Factors{})
	core := fab.Node("core")
	var eps []*Node
	for s := range switches {
		sw := fab.Node(fmt.Sprint("sw", s))
		fab.Connect(fmt.Sprint("up", s), sw, core, scaleUpBW, 0, FullDuplex)
		for e := range perSwitch {
			ep := fab.Node(fmt.Sprint("ep", s*perSwitch+e))
			fab.Connect(fmt.Sprint("edge", s*perSwitch+e), ep, sw, scaleEdgeBW, 0, FullDuplex)
			eps = append(eps, ep)
		}
	}
	return fab, eps
}

// splitmix64 is the draw of the closed loop, so that a SimGrid program of
// the same workload (docs/measurements/2026-11-25-scale-fabric.md) draws
// the same flows whatever order the slots run in.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// closedLoop keeps n flows running: slot s runs per flows one after the
// other, its k-th drawn by splitmix64(s×1000003+k) (a pair of distinct
// endpoints, a size uniform in [1, 10] MB), each started when the one
// before it ends.
type closedLoop struct {
	fab    *Fabric
	eps    []*Node
	routes []Route // by from*len(eps)+to
	per    int
	ended  int
}

func newClosedLoop(fab *Fabric, eps []*Node) *closedLoop {
	c := &closedLoop{fab: fab, eps: eps, routes: make([]Route, len(eps)*len(eps))}
	// Destination by destination, so that each search from one serves
	// every source.
	for j, b := range eps {
		for i, a := range eps {
			if i != j {
				r, err := fab.Route(a, b)
				if err != nil {
					panic(err)
				}
				c.routes[i*len(eps)+j] = r
			}
		}
	}
	return c
}

func (c *closedLoop) start(s, k int) {
	if k == c.per {
		return
	}
	n := uint64(len(c.eps))
	x := splitmix64(uint64(s)*1000003 + uint64(k))
	from := x % n
	to := (from + 1 + (x>>16)%(n-1)) % n
	size := int64(1000000 + (x>>32)%9000001)
	fl := c.fab.Start("f", c.routes[from*n+to], size)
	fl.Done().OnComplete(func() {
		c.ended++
		c.start(s, k+1)
	})
}

// run starts n slots of total/n flows each and runs them to the end.
func (c *closedLoop) run(n, total int) {
	c.per = total / n
	for s := range n {
		c.start(s, 0)
	}
	c.fab.Engine().Run()
}

// BenchmarkClosedLoop is the SimGrid comparison workload: endpoints under
// switches under a core, n concurrent flows in a closed loop, 10 × n
// flows in all per iteration (20,000 however many run at once). flows/s is flows completed
// per second of wall time, flows/cpu-s per CPU second of the process;
// events/s the engine's events per second.
func BenchmarkClosedLoop(b *testing.B) {
	for _, topo := range []struct {
		name                string
		switches, perSwitch int
	}{{"16ep-4sw", 4, 4}, {"256ep-16sw", 16, 16}} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/flows=%d", topo.name, n), func(b *testing.B) {
				const total = 20000
				var ended int
				var events uint64
				var simEnd sim.Time
				var cpu time.Duration
				b.ReportAllocs()
				for b.Loop() {
					// The topology and its routes are set-up, not load.
					b.StopTimer()
					eng := sim.New(1)
					fab, eps := starTopo(eng, topo.switches, topo.perSwitch)
					c := newClosedLoop(fab, eps)
					b.StartTimer()
					cpu0 := cpuTime()
					c.run(n, total)
					cpu += cpuTime() - cpu0
					if c.ended != total {
						b.Fatalf("%d flows ended, want %d", c.ended, total)
					}
					ended += c.ended
					events += eng.Fired()
					simEnd = eng.Now()
					eng.Close()
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(ended)/sec, "flows/s")
				b.ReportMetric(float64(events)/sec, "events/s")
				// Per CPU second of the process (user and system, the
				// garbage collector's included): what compares with
				// SimGrid's on a machine whose cores are shared.
				b.ReportMetric(float64(ended)/cpu.Seconds(), "flows/cpu-s")
				// The simulated end, to compare with SimGrid's clock.
				b.ReportMetric(simEnd.Seconds(), "sim-s")
			})
		}
	}
}

// BenchmarkRecompute4000Links measures one recompute with 4,000 loaded
// links: 2,000 pairs of nodes, each joined by its own full-duplex link
// and a shared link to a hub, one long flow per pair over both. In
// "components" every pair is its own component; in "one-component" every
// flow also crosses one backbone that never saturates, which joins them
// all. Each iteration starts and ends one short flow: two recomputes.
func BenchmarkRecompute4000Links(b *testing.B) {
	for _, joined := range []bool{false, true} {
		name := "components"
		if joined {
			name = "one-component"
		}
		b.Run(name, func(b *testing.B) { benchRecompute(b, joined) })
	}
}

func benchRecompute(b *testing.B, joined bool) {
	eng := sim.New(1)
	fab := New(eng, Factors{})
	hub := fab.Node("hub")
	bb := fab.Connect("backbone", hub, fab.Node("far"), 1e18, 0, FullDuplex)
	var probes []Route
	for i := range 2000 {
		a, c := fab.Node(fmt.Sprint("a", i)), fab.Node(fmt.Sprint("c", i))
		l := fab.Connect(fmt.Sprint("p", i), a, c, float64(1+i%7)*1e9, 0, FullDuplex)
		u := fab.Connect(fmt.Sprint("u", i), a, hub, float64(1+i%5)*4e9, 0, Shared)
		r := Route{Hops: []Hop{{Link: l, Dir: AtoB}, {Link: u, Dir: AtoB}}}
		if joined {
			r.Hops = append(r.Hops, Hop{Link: bb, Dir: AtoB})
		}
		fab.Start(fmt.Sprint("bg", i), r, 1e15)
		if i%10 == 0 {
			probes = append(probes, r)
		}
	}
	eng.RunUntil(1 * us)
	if fab.Active() != 2000 {
		b.Fatalf("%d active", fab.Active())
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		fl := fab.Start("probe", probes[i%len(probes)], 1e6)
		i++
		for !fl.Done().Done() {
			eng.Step()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*i), "ns/recompute")
	eng.Close()
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
