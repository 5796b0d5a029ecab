package numa

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dmalab/dmalab/hw/topo"
	"github.com/dmalab/dmalab/numactl"
)

// ErrBadOptions is wrapped by every error about Options.
var ErrBadOptions = errors.New("numa: bad options")

// Limits and defaults of Options.
const (
	LineSize = 64 // bytes per pointer-chase element: one cache line
	PageSize = 4096

	MinBuffer     = 1 << 20
	MaxBuffer     = 64 << 30
	DefaultBuffer = 256 << 20
	// DefaultLoads is the dependent loads per latency sample: about
	// 0.1 s at 100 ns a load.
	DefaultLoads = 1 << 20
	// DefaultPasses is the reads of the whole buffer per bandwidth sample.
	DefaultPasses = 4
	// DefaultTouchPages is the pages of each first-touch check.
	DefaultTouchPages = 1024
	// placementPages bounds the pages move_pages is asked about per buffer.
	placementPages = 1024
)

// Options control Run. The zero value probes this machine with the
// defaults.
type Options struct {
	// Root is the tree whose sys/devices/system/node describes the nodes
	// ("/" for this machine; a copy for tests). The measurements always
	// run on this machine.
	Root string
	// BufferBytes is the size of each memory node's buffer: the pointer
	// chase's span and the bandwidth threads' data. It should be well
	// beyond the last-level cache; Run notes when it is not.
	BufferBytes int64
	// Loads per latency sample, Passes over the buffer per bandwidth
	// sample, Samples per measurement (at least 3; one more runs first,
	// untimed, as a warm-up).
	Loads, Passes, Samples int
	// Threads caps the bandwidth threads per CPU node (0: one per
	// allowed CPU of the node).
	Threads int
	// TouchPages is the pages of each first-touch check.
	TouchPages int
	// Nodes restricts the probe to these node IDs (nil: every node).
	Nodes []int
	// Progress, when not nil, gets one line per measurement.
	Progress io.Writer
	// Seed seeds the pointer chase's permutation (0: a fixed seed).
	Seed uint64
}

func (o Options) withDefaults() (Options, error) {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.BufferBytes == 0 {
		o.BufferBytes = DefaultBuffer
	}
	if o.Loads == 0 {
		o.Loads = DefaultLoads
	}
	if o.Passes == 0 {
		o.Passes = DefaultPasses
	}
	if o.Samples == 0 {
		o.Samples = 3
	}
	if o.TouchPages == 0 {
		o.TouchPages = DefaultTouchPages
	}
	if o.Seed == 0 {
		o.Seed = 0x5eed
	}
	var errs []error
	if o.BufferBytes < MinBuffer || o.BufferBytes > MaxBuffer {
		errs = append(errs, fmt.Errorf("buffer %d bytes: want %d..%d", o.BufferBytes, MinBuffer, MaxBuffer))
	}
	if o.Loads < 1 || o.Loads > 1<<30 {
		errs = append(errs, fmt.Errorf("loads %d: want 1..%d", o.Loads, 1<<30))
	}
	if o.Passes < 1 || o.Passes > 1000 {
		errs = append(errs, fmt.Errorf("passes %d: want 1..1000", o.Passes))
	}
	if o.Samples < 3 || o.Samples > 1000 {
		errs = append(errs, fmt.Errorf("samples %d: want 3..1000", o.Samples))
	}
	if o.Threads < 0 || o.TouchPages < 1 || o.TouchPages > 1<<20 {
		errs = append(errs, fmt.Errorf("threads %d, touch pages %d: want threads >= 0 and 1..%d pages", o.Threads, o.TouchPages, 1<<20))
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	// Whole pages, so that every page of the buffer is in the chase.
	o.BufferBytes = o.BufferBytes / PageSize * PageSize
	return o, nil
}

// Run probes this machine's NUMA nodes. It fails only on bad options or
// a root it cannot read; what the kernel refuses is in Report.Notes and
// the rest is still measured. Cancelling ctx stops between measurements
// and returns what was measured with ctx's error.
func Run(ctx context.Context, opts Options) (*Report, error) {
	return run(ctx, opts, linuxSys())
}

func run(ctx context.Context, opts Options, k sys) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	t, err := topo.ReadNUMA(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("numa probe: %w", err)
	}
	p := &prober{ctx: ctx, o: opts, k: k, rep: &Report{
		Schema: Schema, Started: time.Now().UTC(), NUMABalancing: t.NUMABalancing,
		Options: ReportOpts{BufferBytes: opts.BufferBytes, Loads: opts.Loads, Passes: opts.Passes,
			Samples: opts.Samples, Threads: opts.Threads, TouchPages: opts.TouchPages},
		Latency: []Pair{}, Bandwidth: []Pair{}, Placement: []Placement{}, FirstTouch: []FirstTouch{}, Notes: []string{},
	}}
	p.rep.Notes = append(p.rep.Notes, t.Warnings...)
	p.allowed, err = k.allowed()
	if err != nil {
		p.note("%v: every CPU of the nodes taken as allowed", err)
	}
	p.nodes = t.Nodes
	if len(p.nodes) == 0 {
		p.note("no NUMA nodes under %s: the machine taken as one node 0", filepath.Join(opts.Root, "sys/devices/system/node"))
		p.nodes = []topo.Node{{ID: 0, CPUList: numactl.Ranges(p.allowed), CPUs: len(p.allowed)}}
	}
	if opts.Nodes != nil {
		var keep []topo.Node
		for _, n := range p.nodes {
			if slices.Contains(opts.Nodes, n.ID) {
				keep = append(keep, n)
			}
		}
		for _, id := range opts.Nodes {
			if !slices.ContainsFunc(keep, func(n topo.Node) bool { return n.ID == id }) {
				return nil, fmt.Errorf("%w: node %d: the machine has nodes %s", ErrBadOptions, id, nodeList(p.nodes))
			}
		}
		p.nodes = keep
	}
	p.rep.Nodes = p.nodes
	p.describe()
	return p.rep, p.measure()
}

func nodeList(nodes []topo.Node) string {
	var ids []int
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	return numactl.Ranges(ids)
}

// prober runs one probe.
type prober struct {
	ctx     context.Context
	o       Options
	k       sys
	rep     *Report
	nodes   []topo.Node
	allowed []int // nil: unknown, every CPU allowed
	// pinRefused is set once pinning was refused: the note is said once
	// and the threads run unpinned from then on.
	pinRefused bool
	mu         sync.Mutex // guards pinRefused and rep.Notes from pinned goroutines
}

func (p *prober) note(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rep.Notes = append(p.rep.Notes, fmt.Sprintf(format, a...))
}

func (p *prober) progress(format string, a ...any) {
	if p.o.Progress != nil {
		fmt.Fprintf(p.o.Progress, format+"\n", a...)
	}
}

// cpusOf returns the CPUs of node n this process may run on.
func (p *prober) cpusOf(n *topo.Node) []int {
	var out []int
	for _, c := range n.CPUIDs() {
		if p.allowed == nil || slices.Contains(p.allowed, c) {
			out = append(out, c)
		}
	}
	return out
}

// describe fills the machine section.
func (p *prober) describe() {
	m := &p.rep.Machine
	m.Hostname, _ = os.Hostname()
	m.Kernel = readTrim(filepath.Join(p.o.Root, "proc/sys/kernel/osrelease"))
	m.THP = readTrim(filepath.Join(p.o.Root, "sys/kernel/mm/transparent_hugepage/enabled"))
	if s, err := os.ReadFile(filepath.Join(p.o.Root, "proc/cpuinfo")); err == nil {
		for line := range strings.SplitSeq(string(s), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	for i := range p.nodes {
		m.CPUs += len(p.nodes[i].CPUIDs())
	}
	m.AllowedCPUs = numactl.Ranges(p.allowed)
	m.LLCBytes = llcBytes(p.o.Root)
	if m.LLCBytes > 0 && p.o.BufferBytes < 2*m.LLCBytes {
		p.note("the buffer (%s) is not well beyond the largest CPU cache (%s): part of the loads hit the cache, so latency reads low and bandwidth high; --numa-buffer sets it",
			topo.Bytes(p.o.BufferBytes), topo.Bytes(m.LLCBytes))
	}
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// llcBytes is the largest cache of CPU 0 in sysfs ("491520K"), or 0.
func llcBytes(root string) int64 {
	dirs, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/cpu/cpu0/cache/index*"))
	var best int64
	for _, d := range dirs {
		s := readTrim(filepath.Join(d, "size"))
		mult := int64(1)
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && v*mult > best {
			best = v * mult
		}
	}
	return best
}

// measure runs every measurement: per memory node, its buffer, then the
// latency and bandwidth from every CPU node; then first touch per node.
func (p *prober) measure() error {
	var cpuNodes []*topo.Node
	for i := range p.nodes {
		if len(p.cpusOf(&p.nodes[i])) > 0 {
			cpuNodes = append(cpuNodes, &p.nodes[i])
		} else if len(p.nodes[i].CPUIDs()) > 0 {
			p.note("node %d: none of its CPUs (%s) is allowed to this process (%s): not measured from it",
				p.nodes[i].ID, p.nodes[i].CPUList, p.rep.Machine.AllowedCPUs)
		}
	}
	if len(cpuNodes) == 0 {
		p.note("no node has a CPU this process may run on: nothing measured")
		return nil
	}
	for j := range p.nodes {
		mem := &p.nodes[j]
		if err := p.ctx.Err(); err != nil {
			return err
		}
		// The buffer is first touched from the memory node itself where
		// it has CPUs, so that it lands there even if mbind is refused.
		toucher := cpuNodes[0]
		if len(p.cpusOf(mem)) > 0 {
			toucher = mem
		}
		buf, err := p.buffer(mem.ID, toucher)
		if err != nil {
			p.note("node %d: buffer: %v: not measured as a memory node", mem.ID, err)
			continue
		}
		for _, cn := range cpuNodes {
			if err := p.ctx.Err(); err != nil {
				p.free(buf)
				return err
			}
			p.rep.Latency = append(p.rep.Latency, p.latency(cn, mem.ID, buf))
			p.rep.Bandwidth = append(p.rep.Bandwidth, p.bandwidth(cn, mem.ID, buf))
		}
		p.free(buf)
	}
	for _, cn := range cpuNodes {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		p.rep.FirstTouch = append(p.rep.FirstTouch, p.firstTouch(cn))
	}
	return nil
}

func (p *prober) free(b []byte) {
	if err := p.k.munmap(b); err != nil {
		p.note("munmap: %v", err)
	}
}

// onCPU runs fn on a goroutine locked to an OS thread pinned to cpu and
// waits for it. It returns whether the thread was pinned: a refused pin is
// noted once and fn still runs, unpinned.
func (p *prober) onCPU(cpu int, fn func()) bool {
	pinned := make(chan bool, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine, and its
		// CPU mask with it.
		runtime.LockOSThread()
		ok := p.pin(cpu)
		fn()
		pinned <- ok
	}()
	return <-pinned
}

// pin pins the calling locked thread to cpu unless pinning was refused
// before; it reports whether the thread is pinned.
func (p *prober) pin(cpu int) bool {
	p.mu.Lock()
	skip := p.pinRefused
	p.mu.Unlock()
	if skip {
		return false
	}
	err := p.k.pin(cpu)
	if err == nil {
		return true
	}
	p.mu.Lock()
	first := !p.pinRefused
	p.pinRefused = true
	p.mu.Unlock()
	if first {
		p.note("%v: threads run unpinned, where the scheduler puts them; the rows are not per CPU node", err)
	}
	return false
}

// buffer maps BufferBytes, binds it to node and first-touches it from a
// thread on toucher, building the pointer chase as it goes, then records
// where its pages are.
func (p *prober) buffer(node int, toucher *topo.Node) ([]byte, error) {
	b, err := p.k.mmap(int(p.o.BufferBytes))
	if err != nil {
		return nil, err
	}
	// Huge pages keep TLB misses out of the latency, as MLC's use of
	// large pages does; where refused, 4 KiB pages add a page walk.
	if err := p.k.hugePages(b, true); err != nil && !refused(err) {
		p.note("node %d: %v", node, err)
	}
	policy := "mbind MPOL_BIND"
	if err := p.k.bind(b, node); err != nil {
		if !refused(err) {
			p.k.munmap(b)
			return nil, err
		}
		policy = fmt.Sprintf("first touch from node %d", toucher.ID)
		p.note("node %d: %v: the buffer is placed by first touch from node %d instead", node, err, toucher.ID)
	}
	cpus := p.cpusOf(toucher)
	p.progress("numa: node %d: building a %s pointer chase", node, topo.Bytes(len(b)))
	p.onCPU(cpus[0], func() { buildChase(words(b), p.o.Seed+uint64(node)) })
	pl := Placement{Node: node, Policy: policy, HugePageBytes: -1}
	if h, err := p.k.huge(b); err == nil {
		pl.HugePageBytes = h
	}
	pl.Pages, pl.OnNode, pl.ByNode, pl.Error = p.where(b, node, min(placementPages, len(b)/PageSize))
	if pl.Pages > 0 {
		pl.Fraction = float64(pl.OnNode) / float64(pl.Pages)
	}
	if pl.Error != "" {
		p.note("node %d: where its pages are is unknown: %s", node, pl.Error)
	}
	p.rep.Placement = append(p.rep.Placement, pl)
	return b, nil
}

// where asks move_pages about n pages spread evenly over b.
func (p *prober) where(b []byte, node, n int) (pages, on int, by map[int]int, errText string) {
	stride := len(b) / PageSize / n * PageSize
	offs := make([]int, n)
	for i := range offs {
		offs[i] = i * stride
	}
	st, err := p.k.where(b, offs)
	if err != nil {
		return 0, 0, map[int]int{}, err.Error()
	}
	by = map[int]int{}
	for _, s := range st {
		by[int(s)]++
		if int(s) == node {
			on++
		}
	}
	return n, on, by, ""
}

// buildChase links every line of w into one random cycle: the first word
// of each line holds the word index of the next line. The lines are
// first written in address order, so that the page faults (and the
// placement they decide) come in order and huge pages can form.
func buildChase(w []uint64, seed uint64) {
	const per = LineSize / 8
	lines := len(w) / per
	for i := 0; i < len(w); i += PageSize / 8 {
		w[i] = 0
	}
	order := make([]uint32, lines)
	for i := range order {
		order[i] = uint32(i)
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	r.Shuffle(lines, func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i, l := range order {
		next := order[(i+1)%lines]
		w[int(l)*per] = uint64(next) * per
	}
}

// sink keeps the chase's and the reads' results alive.
var sink uint64

// chase follows n links from the start of w and returns where it ended.
func chase(w []uint64, n int) uint64 {
	var i uint64
	for range n {
		i = w[i]
	}
	return i
}

// latency chases pointers in buf from the first allowed CPU of cn.
func (p *prober) latency(cn *topo.Node, memNode int, buf []byte) Pair {
	cpu := p.cpusOf(cn)[0]
	pr := Pair{CPUNode: cn.ID, MemNode: memNode, CPUs: []int{}, Unit: "ns",
		Method: fmt.Sprintf("one thread, %d dependent loads a sample through a random cycle over the %d-byte lines of a %s buffer; ns per load; one untimed sample first",
			p.o.Loads, LineSize, topo.Bytes(len(buf)))}
	w := words(buf)
	if p.onCPU(cpu, func() {
		sink += chase(w, p.o.Loads)
		for range p.o.Samples {
			t := time.Now()
			sink += chase(w, p.o.Loads)
			pr.Values = append(pr.Values, float64(time.Since(t).Nanoseconds())/float64(p.o.Loads))
		}
	}) {
		pr.CPUs = []int{cpu}
	}
	pr.Stat = statOf(pr.Values)
	p.progress("numa: latency CPU node %d -> memory node %d: %.1f ns", cn.ID, memNode, pr.Median)
	return pr
}

// read sums w eight words at a time, so that several loads are in flight.
func read(w []uint64) uint64 {
	var s0, s1, s2, s3 uint64
	for i := 0; i+8 <= len(w); i += 8 {
		s0 += w[i] + w[i+4]
		s1 += w[i+1] + w[i+5]
		s2 += w[i+2] + w[i+6]
		s3 += w[i+3] + w[i+7]
	}
	return s0 + s1 + s2 + s3
}

// bandwidth reads buf from threads pinned to cn's allowed CPUs (at most
// Threads), each its own contiguous share, Passes times per sample; a
// sample's time runs from releasing the waiting threads to the last
// one's end.
func (p *prober) bandwidth(cn *topo.Node, memNode int, buf []byte) Pair {
	cpus := p.cpusOf(cn)
	if p.o.Threads > 0 && len(cpus) > p.o.Threads {
		cpus = cpus[:p.o.Threads]
	}
	pr := Pair{CPUNode: cn.ID, MemNode: memNode, CPUs: []int{}, Unit: "MB/s",
		Method: fmt.Sprintf("%d threads, each reading its share of a %s buffer sequentially (8 words a step), %d passes a sample; 10^6 bytes/s; one untimed sample first",
			len(cpus), topo.Bytes(len(buf)), p.o.Passes)}
	w := words(buf)
	share := len(w) / len(cpus) / 8 * 8
	rounds := p.o.Samples + 1
	start := make([]chan struct{}, rounds)
	done := make([]sync.WaitGroup, rounds)
	for r := range rounds {
		start[r] = make(chan struct{})
		done[r].Add(len(cpus))
	}
	var ready, exited sync.WaitGroup
	ready.Add(len(cpus))
	exited.Add(len(cpus))
	pinned := make([]bool, len(cpus))
	sums := make([]uint64, len(cpus))
	for t, cpu := range cpus {
		part := w[t*share : (t+1)*share]
		go func() {
			defer exited.Done()
			runtime.LockOSThread() // never unlocked: see onCPU
			pinned[t] = p.pin(cpu)
			ready.Done()
			for r := range rounds {
				<-start[r]
				for range p.o.Passes {
					sums[t] += read(part)
				}
				done[r].Done()
			}
		}()
	}
	ready.Wait()
	bytes := float64(share*len(cpus)*8) * float64(p.o.Passes)
	for r := range rounds {
		t := time.Now()
		close(start[r])
		done[r].Wait()
		if r > 0 {
			pr.Values = append(pr.Values, bytes/time.Since(t).Seconds()/1e6)
		}
	}
	exited.Wait()
	for t := range cpus {
		sink += sums[t]
	}
	if !slices.Contains(pinned, false) {
		pr.CPUs = cpus
	}
	pr.Stat = statOf(pr.Values)
	p.progress("numa: bandwidth CPU node %d -> memory node %d: %.0f MB/s", cn.ID, memNode, pr.Median)
	return pr
}

// firstTouch maps TouchPages pages under the default policy, writes each
// from a thread on cn, and asks move_pages where they went.
func (p *prober) firstTouch(cn *topo.Node) FirstTouch {
	cpu := p.cpusOf(cn)[0]
	ft := FirstTouch{Node: cn.ID, CPU: -1, ByNode: map[int]int{}}
	b, err := p.k.mmap(p.o.TouchPages * PageSize)
	if err != nil {
		ft.Error = err.Error()
		p.note("first touch on node %d: %v", cn.ID, err)
		return ft
	}
	defer p.free(b)
	// 4 KiB pages, so that each page is placed by its own touch.
	if err := p.k.hugePages(b, false); err != nil && !refused(err) {
		p.note("first touch on node %d: %v", cn.ID, err)
	}
	var st []int32
	var qerr error
	if p.onCPU(cpu, func() {
		offs := make([]int, p.o.TouchPages)
		for i := range offs {
			offs[i] = i * PageSize
			b[offs[i]] = 1
		}
		st, qerr = p.k.where(b, offs)
	}) {
		ft.CPU = cpu
	}
	if qerr != nil {
		ft.Error = qerr.Error()
		p.note("first touch on node %d: where the pages went is unknown: %v", cn.ID, qerr)
		return ft
	}
	ft.Pages = len(st)
	for _, s := range st {
		ft.ByNode[int(s)]++
		if int(s) == cn.ID {
			ft.Local++
		}
	}
	ft.Fraction = float64(ft.Local) / float64(ft.Pages)
	p.progress("numa: first touch on node %d: %d of %d pages local", cn.ID, ft.Local, ft.Pages)
	return ft
}
