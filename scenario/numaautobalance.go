package scenario

import (
	"fmt"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

func init() {
	register(&Scenario{
		Name:     "numa-autobalance",
		Summary:  "AutoNUMA undoing the first-touch pitfall over time: local share, pages migrated, migration cost and the workers' bandwidth, numa_balancing off and on",
		Platform: "2s-4gpu-pcie",
		Doc: `The first-touch pitfall, then automatic NUMA balancing fixing it. A process's
main thread (node 0) writes a buffer, so that every page is placed on node 0;
then worker threads bound to node 1's CPUs read their own slices of it, over
and over, in 16 MiB reads, for the duration. Each row is one interval of that
run: the bytes the workers read and their bandwidth, the share of those bytes
that were local, the NUMA hinting faults taken, the bytes migrated, the worker
time the faults and migrations cost, and the socket link's bytes (remote reads
and migration copies together).

  off  numa_balancing=0: the pages stay on node 0; every read is remote
  on   numa_balancing=1 with Linux's defaults: the scanner makes 256 MiB of
       the buffer PROT_NONE every scan period (1 s at first, from 1 s after
       the process starts), the workers' next reads fault, and each faulting
       page migrates to node 1 (first faults migrate at once; later, the
       two-stage filter asks for two faults in a row from the same node),
       the faulting thread paying the fault and the copy over the socket link

The scenario sets numa_balancing itself for each group of rows, whatever the
platform says. The scan period adapts as the kernel's does: it doubles after a
pass whose faults were all remote and private, then grows while they are
local and private.`,
		Params: []Param{
			{Name: "size", Kind: dmalab.ParamSize, Default: "1GiB", Max: 64 << 30, Help: "size of the buffer the main thread first-touches on node 0"},
			{Name: "workers", Kind: dmalab.ParamInt, Default: "1", Min: 1, Max: 64, Help: "worker threads, bound to node 1's first CPUs, each reading its own slice"},
			{Name: "duration", Kind: dmalab.ParamDuration, Default: "8s", Help: "how long the workers read, from the end of the initialisation"},
			{Name: "interval", Kind: dmalab.ParamDuration, Default: "500ms", Help: "the length of one row"},
			{Name: "balancing", Kind: dmalab.ParamList, Item: "setting", Values: []string{"off", "on"}, Default: "on,off", Help: "numa_balancing settings to run, in order: on, off"},
		},
		Run: runNUMAAutobalance,
	})
}

// abChunk is one read of a worker: large, so that the run's reads are
// few, and small against an interval.
const abChunk = 16 << 20

// abStats is what a phase's hook and threads counted so far.
type abStats struct {
	workers     map[string]bool
	bytes, near uint64 // the workers' bytes read, and those local
}

// abSample is the counters at one instant of a phase.
type abSample struct {
	at          sim.Time
	bytes, near uint64
	vm          kernel.VMStat
	faultTime   sim.Time
	link        float64
	onNode1     uint64
	period      sim.Time
}

func runNUMAAutobalance(c *Context) error {
	spec := c.Machine.Spec
	if len(spec.Nodes) < 2 {
		return usagef("platform %s has one NUMA node; numa-autobalance needs two", spec.Name)
	}
	size := (uint64(c.Size("size")) + mem.PageSize - 1) &^ (mem.PageSize - 1)
	workers := c.Int("workers")
	dur, iv := c.Duration("duration"), c.Duration("interval")
	if iv <= 0 || dur < iv {
		return usagef("--set interval=%s, duration=%s: want 0 < interval <= duration", c.Text("interval"), c.Text("duration"))
	}
	if dur/iv > 1000 {
		return usagef("--set interval=%s: %d rows per setting; at most 1000", c.Text("interval"), dur/iv)
	}
	cpus := c.Kernel.CPUsOfNode(1)
	if workers > len(cpus) {
		return usagef("--set workers=%d: node 1 of %s has %d CPUs", workers, spec.Name, len(cpus))
	}
	if limit := uint64(spec.Nodes[0].DRAM.V) / 2; size > limit {
		return usagef("--set size=%s: at most %s fits on node 0 here", c.Text("size"), report.FormatBytes(int64(limit)))
	}
	if size < uint64(workers)*mem.PageSize {
		return usagef("--set size=%s: less than a page per worker", c.Text("size"))
	}
	link := socketLink(c, 0, 1)
	st := &abStats{}
	c.Mem.Hooks.Hook(func(a *mem.Access) {
		if a.Kind != mem.CPURead || a.Err != nil || !st.workers[a.Proc] {
			return
		}
		st.bytes += a.Size
		if n, ok := c.Mem.NodeOf(a.Phys); ok && n == a.Node {
			st.near += a.Size
		}
	})
	wasOn, cfg := c.Kernel.NUMABalancing()
	var runErr error
	c.Machine.Engine.Spawn("numa-autobalance", func(d *sim.Proc) {
		for _, setting := range c.List("balancing") {
			c.Progressf("numa-autobalance: numa_balancing %s", setting)
			c.Kernel.SetNUMABalancing(setting == "on", cfg)
			if err := abPhase(c, d, st, link, setting, size, workers, cpus, dur, iv); err != nil {
				runErr = fmt.Errorf("numa_balancing %s: %w", setting, err)
				return
			}
		}
		c.Kernel.SetNUMABalancing(wasOn, cfg)
	})
	guardErr := c.RunEngine("size", "duration")
	if runErr != nil {
		return runErr
	}
	return guardErr
}

// socketLink is the fabric link of the first socket link between nodes
// a and b, nil when there is none.
func socketLink(c *Context, a, b int) *fabric.Link {
	path := c.Machine.Spec.SocketPath(a, b)
	if len(path) == 0 {
		return nil
	}
	name := c.Machine.Spec.SocketLinks[path[0]].Name
	for _, l := range c.Machine.Fabric.Links() {
		if l.Name() == name {
			return l
		}
	}
	return nil
}

// abPhase runs one setting: the process, its first touch, its workers
// and the sampler that makes a row per interval.
func abPhase(c *Context, d *sim.Proc, st *abStats, link *fabric.Link, setting string, size uint64, workers int, cpus []int, dur, iv sim.Time) error {
	k, m := c.Kernel, c.Mem
	p, err := k.NewProcess("app-"+setting, 0)
	if err != nil {
		return err
	}
	va, err := p.MmapAnon(size)
	if err != nil {
		return err
	}
	var ws []*sim.Proc
	var werr error
	st.workers = map[string]bool{}
	ready := d.Engine().NewNamedCompletion("first touch")
	done := d.Engine().NewNamedCompletion("workers joined")
	main := p.Spawn("main", func(t *sim.Proc) {
		m.Write(t, p.ThreadNode(t), va, size) // the pitfall: every page on node 0
		ready.Complete()
		t.Wait(done) // pthread_join: the process stays multi-threaded
	})
	d.Wait(ready)
	start := d.Now()
	end := start + dur
	slice := size / uint64(workers) &^ (mem.PageSize - 1)
	for w := range workers {
		name := fmt.Sprintf("worker%d", w)
		t := p.Spawn(name, func(t *sim.Proc) {
			base := va + mem.VirtAddr(uint64(w)*slice)
			for t.Now() < end {
				for off := uint64(0); off < slice && t.Now() < end; off += abChunk {
					if a := m.Read(t, p.ThreadNode(t), base+mem.VirtAddr(off), min(abChunk, slice-off)); a.Err != nil && werr == nil {
						werr = a.Err
					}
				}
			}
		})
		st.workers[t.Name()] = true
		if err := p.SetThreadAffinity(t, cpus[w]); err != nil {
			return err
		}
		ws = append(ws, t)
	}
	sample := func(at sim.Time) abSample {
		s := abSample{at: at, bytes: st.bytes, near: st.near, vm: k.VMStat(), period: p.NUMAScan().Period}
		for _, t := range ws {
			s.faultTime += p.TaskNUMA(t).FaultTime
		}
		if link != nil {
			ls := link.Stats()
			s.link = ls.Bytes[0] + ls.Bytes[1]
		}
		for off := uint64(0); off < size; off += mem.PageSize {
			if n, ok, _ := m.PageNode(va + mem.VirtAddr(off)); ok && n == 1 {
				s.onNode1++
			}
		}
		return s
	}
	prev := sample(start)
	first := prev
	var firstLocal sim.Time = -1
	var rows []report.Row
	for i := 1; start+sim.Time(i)*iv <= end; i++ {
		d.Sleep(start + sim.Time(i)*iv - d.Now())
		cur := sample(d.Now())
		row := abRow(setting, i, start, prev, cur, size, link)
		rows = append(rows, row)
		if firstLocal < 0 && cur.bytes > prev.bytes && cur.near-prev.near >= (cur.bytes-prev.bytes)*99/100 {
			firstLocal = prev.at - start
		}
		prev = cur
	}
	for _, t := range ws {
		d.Join(t)
	}
	done.Complete()
	d.Join(main)
	if werr != nil {
		return werr
	}
	c.Result.Results = append(c.Result.Results, rows...)
	c.Result.Summary = append(c.Result.Summary, abSummary(setting, first, prev, firstLocal, rows, size))
	return p.Exit(d)
}

// abRow is the row of the interval from a to b.
func abRow(setting string, step int, start sim.Time, a, b abSample, size uint64, link *fabric.Link) report.Row {
	secs := (b.at - a.at).Seconds()
	bytes := b.bytes - a.bytes
	local := 0.0
	if bytes > 0 {
		local = 100 * float64(b.near-a.near) / float64(bytes)
	}
	mode := "numa_balancing=0"
	if setting == "on" {
		mode = "numa_balancing=1"
	}
	pages := size / mem.PageSize
	migrated := b.vm.NumaPagesMigrated - a.vm.NumaPagesMigrated
	row := report.Row{
		Name:          fmt.Sprintf("%s %.2f-%.2f s", setting, (a.at - start).Seconds(), (b.at - start).Seconds()),
		Path:          "remote-first-touch",
		Direction:     "read",
		Mode:          mode,
		Step:          step,
		Bytes:         int64(bytes),
		Seconds:       secs,
		GBps:          float64(bytes) / secs / 1e9,
		Faults:        int64(b.vm.NumaHintFaults - a.vm.NumaHintFaults),
		MigratedBytes: int64(migrated * mem.PageSize),
		Note: fmt.Sprintf("%.2f-%.2f s: local %.1f %%, pages on node 1 %.1f %%, faults and migration %s of worker time, scan period %s",
			(a.at - start).Seconds(), (b.at - start).Seconds(), local, 100*float64(b.onNode1)/float64(pages), report.FormatSeconds((b.faultTime - a.faultTime).Seconds()), b.period),
	}
	if link != nil {
		row.Links = []report.LinkBytes{{Link: link.Name(), Bytes: int64(b.link - a.link)}}
	}
	return row
}

// abSummary is a setting's result in a sentence.
func abSummary(setting string, first, last abSample, firstLocal sim.Time, rows []report.Row, size uint64) string {
	bw0, bw1 := 0.0, 0.0
	if len(rows) > 0 {
		bw0, bw1 = rows[0].GBps, rows[len(rows)-1].GBps
	}
	mig := last.vm.NumaPagesMigrated - first.vm.NumaPagesMigrated
	conv := "never all local"
	if firstLocal >= 0 {
		conv = fmt.Sprintf("all local from %.2f s", firstLocal.Seconds())
	}
	return fmt.Sprintf("numa_balancing %s: workers' bandwidth %.2f GB/s in the first interval, %.2f GB/s in the last; %s; %d of %d pages migrated (%s), costing the workers %s in hinting faults and copies",
		setting, bw0, bw1, conv, mig, size/mem.PageSize, report.FormatBytes(int64(mig*mem.PageSize)), report.FormatSeconds((last.faultTime - first.faultTime).Seconds()))
}
