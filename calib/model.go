package calib

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/hw/probe"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/scenario"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/xfer"
)

// ErrNotModelled is wrapped by Predict for a row the model has no
// mechanism for; the error's text says why.
var ErrNotModelled = errors.New("not modelled")

func notModelled(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrNotModelled, fmt.Sprintf(format, a...))
}

// Class is the class of a row whose median error validate reports.
type Class string

// Classes, in the order validate prints them.
const (
	// ClassBandwidth: copies and zero-copy or remote access in GB/s,
	// prefetches included (they move at link speed without faults).
	ClassBandwidth Class = "bandwidth"
	// ClassLatency: times per operation (a small synchronous copy, a
	// pin, a pointer chase).
	ClassLatency Class = "latency"
	// ClassUnified: unified memory moved by page faults (GPU or CPU).
	ClassUnified Class = "unified"
)

// Classes lists the classes in output order.
func Classes() []Class { return []Class{ClassBandwidth, ClassLatency, ClassUnified} }

// ClassOf says which class a measurement counts in.
func ClassOf(m *probe.Measurement) Class {
	if m.Family == probe.FamilyUnified && (m.Path == probe.PathManagedFault || m.Path == probe.PathManagedCPUFault) {
		return ClassUnified
	}
	if m.Unit == probe.UnitGBps {
		return ClassBandwidth
	}
	return ClassLatency
}

// RowID names a row of a report: the GPU's ordinal and the
// measurement's key, "gpu0 ce_copy pinned h2d 1GiB". A single-thread
// fault row adds its stride, which its key lacks.
func RowID(ordinal int, m *probe.Measurement) string {
	id := fmt.Sprintf("gpu%d %s", ordinal, m.Key())
	if m.StrideBytes != 0 {
		id += " stride " + platform.Bytes(m.StrideBytes).String()
	}
	return id
}

// Model runs the model of one platform for probe rows. Close removes
// the platform file it runs scenarios from.
type Model struct {
	Spec *platform.Spec
	dir  string
	file string
}

// NewModel prepares spec for Predict.
func NewModel(spec *platform.Spec) (*Model, error) {
	out, err := platform.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("model of %s: %w", spec.Name, err)
	}
	dir, err := os.MkdirTemp("", "dmalab-calib-")
	if err != nil {
		return nil, fmt.Errorf("model of %s: %w", spec.Name, err)
	}
	// The scenario runner reads platforms by name or file: the spec goes
	// through a file, exactly as a user's platform file would.
	file := filepath.Join(dir, "platform.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("model of %s: %w", spec.Name, err)
	}
	return &Model{Spec: spec, dir: dir, file: file}, nil
}

// Close removes the model's temporary files.
func (m *Model) Close() error { return os.RemoveAll(m.dir) }

// Predict runs the model for row meas of GPU ordinal and returns its
// value in the row's unit. A row the model cannot compute is an error
// wrapping ErrNotModelled that says why.
func (m *Model) Predict(ordinal int, meas *probe.Measurement) (float64, error) {
	if ordinal < 0 || ordinal >= len(m.Spec.GPUs) {
		return 0, notModelled("the platform has %d GPU(s), no gpu%d", len(m.Spec.GPUs), ordinal)
	}
	size := meas.SizeBytes
	path, dir := xfer.Path(meas.Path), xfer.Direction(meas.Direction)
	switch meas.Family {
	case probe.FamilyCE:
		return m.ceCopy(ordinal, meas)
	case probe.FamilySM:
		if path != xfer.Mapped || (dir != xfer.H2D && dir != xfer.D2H) {
			return 0, notModelled("the model's SM copies are zero-copy kernels over mapped host memory; a kernel copying within or between VRAMs has no row (the model's device path is a copy engine's)")
		}
		// The launch is in the model's time and hidden behind the spin
		// kernel in the probe's: 3.2 us of a copy of about 20 ms.
		row, err := m.transfers(ordinal, -1, path, dir, size)
		return row.GBps, err
	case probe.FamilySync:
		row, err := m.transfers(ordinal, -1, path, dir, size)
		return row.GBps, err
	case probe.FamilyCallTime:
		row, err := m.transfers(ordinal, -1, path, dir, size)
		return row.Seconds * 1e6, err
	case probe.FamilyHostMemcpy:
		return m.hostMemcpy(ordinal, meas)
	case probe.FamilyPin:
		return m.pin(ordinal, meas)
	case probe.FamilyUnified:
		return m.unified(ordinal, meas)
	case probe.FamilyCallOverhead:
		return 0, notModelled("a driver call that does nothing (cuDriverGetVersion): the model charges time only to calls that act")
	case probe.FamilyLatency:
		return m.pointerChase(ordinal, meas)
	case probe.FamilyRegcache:
		return m.regcacheRow(ordinal, meas)
	}
	return 0, notModelled("family %q has no model counterpart", meas.Family)
}

// ceCopy is a copy-engine row: the transfers scenario's copy, less the
// per-call overhead the probe's method hides (its copies are queued
// behind a spin kernel and timed between events on the GPU, so the
// host's share of a call is not in them), plus what each copy queued in
// a stream costs the GPU (gpu.CopyStreamOverhead: the copy engine's
// method fetch, set-up and semaphore release, which back-to-back copies
// pay one after the other).
func (m *Model) ceCopy(ordinal int, meas *probe.Measurement) (float64, error) {
	path, dir := xfer.Path(meas.Path), xfer.Direction(meas.Direction)
	gi, peer := ordinal, -1
	scale := 1.0
	switch {
	case path == xfer.Pinned || path == xfer.WriteCombined || path == xfer.Registered:
		if dir != xfer.H2D && dir != xfer.D2H && dir != xfer.Bidir {
			return 0, notModelled("direction %q of %s", dir, path)
		}
	case path == xfer.Device && dir == xfer.D2D:
	case path == xfer.Peer:
		if meas.PeerGPU == nil {
			return 0, notModelled("a peer row without its peer GPU")
		}
		peer = *meas.PeerGPU
		if meas.Operation == "read" {
			// A read copies the peer's memory into this GPU's: the
			// model's copy from the peer.
			gi, peer = peer, ordinal
		}
		if dir != xfer.D2D && dir != xfer.Bidir {
			return 0, notModelled("direction %q of a peer copy", dir)
		}
	default:
		return 0, notModelled("copy-engine path %q", path)
	}
	if dir == xfer.Bidir {
		// The probe's figure is both directions' bytes over the span;
		// the model's row is per direction.
		scale = 2
	}
	row, err := m.transfers(gi, peer, path, dir, meas.SizeBytes)
	if err != nil {
		return 0, err
	}
	t := row.Seconds - m.Spec.GPUs[gi].CopyOverhead.V.Seconds() + gpu.CopyStreamOverhead.Seconds()
	if t <= 0 {
		return 0, fmt.Errorf("%s: the model's copy (%g s) is shorter than its overhead", meas.Key(), row.Seconds)
	}
	return scale * float64(meas.SizeBytes) / t / 1e9, nil
}

// transfers runs one row of the transfers scenario on the model's
// platform.
func (m *Model) transfers(gi, peer int, path xfer.Path, dir xfer.Direction, size int64) (report.Row, error) {
	if size <= 0 {
		return report.Row{}, notModelled("a copy of %d bytes", size)
	}
	s, err := scenario.Lookup("transfers")
	if err != nil {
		return report.Row{}, err
	}
	sets := []string{"paths=" + string(path), "directions=" + string(dir),
		"sizes=" + strconv.FormatInt(size, 10) + "B", "gpu=" + strconv.Itoa(gi)}
	if peer >= 0 {
		sets = append(sets, "peer="+strconv.Itoa(peer))
	}
	out, err := scenario.Run(s, scenario.Options{Platform: m.file, Sets: sets})
	if err != nil {
		if errors.Is(err, dmalab.ErrUsage) {
			return report.Row{}, notModelled("%s", scenario.UsageMessage(err))
		}
		return report.Row{}, err
	}
	if len(out.Result.Results) != 1 {
		return report.Row{}, notModelled("transfers gave %d rows for %s %s %d B", len(out.Result.Results), path, dir, size)
	}
	return out.Result.Results[0], nil
}

// run boots the platform and runs prog as a process on node with a
// primary context on GPU gi.
func (m *Model) run(gi int, prog func(p *sim.Proc, pr *cuda.Process, c *cuda.Context) error) error {
	sys, err := dmalab.BootSpec(m.Spec, dmalab.Options{Name: "calib"})
	if err != nil {
		return err
	}
	defer sys.Close()
	node := m.Spec.GPUs[gi].Node
	if !m.Spec.GPUs[gi].Integrated {
		if g, err := sys.Machine.GPU(gi); err == nil {
			node = g.Node
		}
	}
	return sys.RunOn(node, "calib", func(p *dmalab.Process) error {
		pr, err := p.CUDA()
		if err != nil {
			return err
		}
		c, err := pr.PrimaryContext(gi)
		if err != nil {
			return err
		}
		return prog(p.Thread, pr, c)
	})
}

// hostMemcpy is one CPU thread's copy on the GPU's node: memcpy (and
// Go's copy, which the model does not tell apart) at the node's
// memcpy rate, stream_out with non-temporal stores at its stream rate.
func (m *Model) hostMemcpy(gi int, meas *probe.Measurement) (float64, error) {
	var took sim.Time
	err := m.run(gi, func(p *sim.Proc, pr *cuda.Process, _ *cuda.Context) error {
		mc := pr.Driver().Machine()
		t0 := p.Now()
		var err error
		switch meas.Operation {
		case "", "memcpy", "go_copy":
			err = mc.CPUCopy(p, "memcpy", pr.Node(), meas.SizeBytes)
		case "stream_out":
			err = mc.CPUCopyOut(p, "stream_out", pr.Node(), meas.SizeBytes)
		default:
			return notModelled("host copy operation %q", meas.Operation)
		}
		took = p.Now() - t0
		return err
	})
	if err != nil {
		return 0, err
	}
	return gbps(meas.SizeBytes, took), nil
}

// resident is n bytes of the process's pageable memory, written once so
// that its pages are in (the probe fills its buffers before it pins
// them: its rows pay no first touch).
func resident(p *sim.Proc, pr *cuda.Process, c *cuda.Context, n uint64) (mem.VirtAddr, error) {
	va, err := pr.Malloc(n)
	if err != nil {
		return 0, err
	}
	return va, c.CPUAccess(p, mem.GPUAddr(va), n, true)
}

// pin is one cuMemHostRegister or cuMemHostUnregister of resident
// pageable memory, in microseconds.
func (m *Model) pin(gi int, meas *probe.Measurement) (float64, error) {
	if meas.Operation != "register" && meas.Operation != "unregister" {
		return 0, notModelled("pin operation %q", meas.Operation)
	}
	n := uint64(meas.SizeBytes)
	var took sim.Time
	err := m.run(gi, func(p *sim.Proc, pr *cuda.Process, c *cuda.Context) error {
		va, err := resident(p, pr, c, n)
		if err != nil {
			return err
		}
		t0 := p.Now()
		if err := c.MemHostRegister(p, va, n, cuda.HostRegisterPortable); err != nil {
			return err
		}
		if meas.Operation == "register" {
			took = p.Now() - t0
		}
		t1 := p.Now()
		if err := c.MemHostUnregister(p, va); err != nil {
			return err
		}
		if meas.Operation == "unregister" {
			took = p.Now() - t1
		}
		return nil
	})
	return took.Seconds() * 1e6, err
}

// regcacheRow is a row of the probe's regcache family (hw/probe,
// regcacheSize), in microseconds: the driver calls each step of a
// registration cache makes on a buffer of the row's size. A miss
// registers the first half; a merging miss unregisters it and registers
// the whole; invalidating unregisters the whole; a Get after the memory
// was freed and allocated again registers the new memory. The cache's
// own work (its interval tree, in Go) costs no virtual time, so hits,
// which are only that, are not modelled; in the misses it is under a
// microsecond (the hit rows) against the driver's tens.
func (m *Model) regcacheRow(gi int, meas *probe.Measurement) (float64, error) {
	n, half := uint64(meas.SizeBytes), uint64(meas.SizeBytes/2)
	switch meas.Operation {
	case probe.RegcacheMiss, probe.RegcacheMergeMiss, probe.RegcacheInvalidate, probe.RegcacheStaleGet:
	case probe.RegcacheHit, probe.RegcacheHitAfterMerge:
		return 0, notModelled("a hit is the cache's own lookup, Go code on the host; the model charges no time for it")
	default:
		return 0, notModelled("regcache operation %q", meas.Operation)
	}
	if half < mem.PageSize {
		return 0, notModelled("a regcache row of %d B: less than two pages", n)
	}
	var took sim.Time
	err := m.run(gi, func(p *sim.Proc, pr *cuda.Process, c *cuda.Context) error {
		va, err := resident(p, pr, c, n)
		if err != nil {
			return err
		}
		timed := func(op func() error) error {
			t0 := p.Now()
			err := op()
			took = p.Now() - t0
			return err
		}
		register := func(n uint64) func() error {
			return func() error { return c.MemHostRegister(p, va, n, cuda.HostRegisterPortable) }
		}
		unregister := func() error { return c.MemHostUnregister(p, va) }
		switch meas.Operation {
		case probe.RegcacheMiss:
			if err := timed(register(half)); err != nil {
				return err
			}
		case probe.RegcacheMergeMiss:
			if err := register(half)(); err != nil {
				return err
			}
			if err := timed(func() error { return errors.Join(unregister(), register(n)()) }); err != nil {
				return err
			}
		case probe.RegcacheInvalidate, probe.RegcacheStaleGet:
			if err := register(n)(); err != nil {
				return err
			}
			if meas.Operation == probe.RegcacheInvalidate {
				return timed(unregister)
			}
			// Freed and allocated again at the same address: the
			// memory is resident again before the Get.
			if err := unregister(); err != nil {
				return err
			}
			if err := c.CPUAccess(p, mem.GPUAddr(va), n, true); err != nil {
				return err
			}
			if err := timed(register(n)); err != nil {
				return err
			}
		}
		return unregister()
	})
	return took.Seconds() * 1e6, err
}

// unified is a managed-memory row.
func (m *Model) unified(gi int, meas *probe.Measurement) (float64, error) {
	path, dir := xfer.Path(meas.Path), xfer.Direction(meas.Direction)
	switch {
	case path == xfer.ManagedPrefetch && (dir == xfer.H2D || dir == xfer.D2H),
		path == xfer.ManagedFault && meas.Operation == "read",
		path == xfer.ManagedCPUFault && meas.Operation == "read":
		row, err := m.transfers(gi, -1, path, dir, meas.SizeBytes)
		return row.GBps, err
	case path == xfer.ManagedFault && meas.Operation == "write":
		return m.managedKernel(gi, meas, true, false)
	case path == xfer.ManagedRemote && meas.Operation == "accessed_by":
		return m.managedKernel(gi, meas, false, true)
	case path == xfer.ManagedFault && meas.Operation == "single_thread_read":
		return m.faultLatency(gi, meas)
	case path == xfer.ManagedCPUFault && meas.Operation == "first_touch":
		return m.firstTouch(gi, meas)
	}
	return 0, notModelled("unified-memory measurement %s %s %s", path, dir, meas.Operation)
}

// managedKernel times a kernel on a fresh managed buffer the CPU wrote
// first: the probe's page-touch kernel (one word per 4 KiB page, written
// when write) or, remote, its copy kernel streaming the buffer under
// PreferredLocation(CPU) and AccessedBy(GPU).
func (m *Model) managedKernel(gi int, meas *probe.Measurement, write, remote bool) (float64, error) {
	n := uint64(meas.SizeBytes)
	var took sim.Time
	err := m.run(gi, func(p *sim.Proc, _ *cuda.Process, c *cuda.Context) error {
		buf, err := c.MemAllocManaged(p, n, cuda.MemAttachGlobal)
		if err != nil {
			return err
		}
		defer c.MemFree(p, buf)
		if remote {
			if err := c.MemAdvise(p, buf, n, cuda.AdviseSetPreferredLocation, cuda.DeviceCPU); err != nil {
				return err
			}
			if err := c.MemAdvise(p, buf, n, cuda.AdviseSetAccessedBy, c.Device()); err != nil {
				return err
			}
		}
		if err := c.CPUAccess(p, buf, n, true); err != nil {
			return err
		}
		a := gpu.Access{Addr: buf, Size: n, Bytes: n, Pattern: gpu.Streaming{}}
		if !remote {
			pages := (n + mem.PageSize - 1) / mem.PageSize
			a = gpu.Access{Addr: buf, Size: n, Bytes: pages * 4, Pattern: gpu.Strided{Stride: mem.PageSize, Elem: 4}, Write: write}
		}
		t0 := p.Now()
		if err := c.LaunchKernel(p, gpu.Kernel{Name: meas.Key(), Accesses: []gpu.Access{a}}, nil); err != nil {
			return err
		}
		err = c.Synchronize(p)
		took = p.Now() - t0
		return err
	})
	if err != nil {
		return 0, err
	}
	return gbps(meas.SizeBytes, took), nil
}

// faultLatency is the probe's single-thread fault latency, in
// microseconds (hw/probe/unified.go, faultLatency): one GPU thread reads
// a word every stride bytes of host-resident managed memory, in address
// order, each touch timed; a touch slower than probe.SlowTouch is a
// fault, and the value is the median slow touch. Here each touch is a
// one-word kernel timed less the same kernel on resident memory, so the
// prefetcher's growing migrations (16, 16, 32, 64, 128, 256 pages of a
// block at small strides) weigh in as they do on the GPU.
func (m *Model) faultLatency(gi int, meas *probe.Measurement) (float64, error) {
	size, stride := uint64(meas.SizeBytes), uint64(meas.StrideBytes)
	if size == 0 || stride == 0 || stride > size {
		return 0, notModelled("a single-thread fault row of %d B at stride %d B", size, stride)
	}
	var slow []float64
	err := m.run(gi, func(p *sim.Proc, _ *cuda.Process, c *cuda.Context) error {
		buf, err := c.MemAllocManaged(p, size, cuda.MemAttachGlobal)
		if err != nil {
			return err
		}
		defer c.MemFree(p, buf)
		if err := c.CPUAccess(p, buf, size, true); err != nil {
			return err
		}
		touch := func(off uint64) (sim.Time, error) {
			k := gpu.Kernel{Name: "touch", Accesses: []gpu.Access{{Addr: buf + mem.GPUAddr(off), Size: 4, Bytes: 4, Pattern: gpu.Streaming{}}}}
			t0 := p.Now()
			if err := c.LaunchKernel(p, k, nil); err != nil {
				return 0, err
			}
			err := c.Synchronize(p)
			return p.Now() - t0, err
		}
		var times []sim.Time
		for off := uint64(0); off+4 <= size; off += stride {
			t, err := touch(off)
			if err != nil {
				return err
			}
			times = append(times, t)
		}
		// The first word is resident now: its kernel is the launch and
		// the synchronization a touch's time carries besides the fault.
		base, err := touch(0)
		if err != nil {
			return err
		}
		var all []float64
		for _, t := range times {
			us := (t - base).Seconds() * 1e6
			all = append(all, us)
			if us > probe.SlowTouch.Seconds()*1e6 {
				slow = append(slow, us)
			}
		}
		if len(slow) == 0 {
			slow = all
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return medianOf(slow), nil
}

// medianOf is the median of xs (the mean of the middle two when even),
// as the probe's summaries take it.
func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// firstTouch is the CPU writing a fresh managed buffer: every page
// populated on the CPU's first touch.
func (m *Model) firstTouch(gi int, meas *probe.Measurement) (float64, error) {
	n := uint64(meas.SizeBytes)
	var took sim.Time
	err := m.run(gi, func(p *sim.Proc, _ *cuda.Process, c *cuda.Context) error {
		buf, err := c.MemAllocManaged(p, n, cuda.MemAttachGlobal)
		if err != nil {
			return err
		}
		defer c.MemFree(p, buf)
		t0 := p.Now()
		err = c.CPUAccess(p, buf, n, true)
		took = p.Now() - t0
		return err
	})
	if err != nil {
		return 0, err
	}
	return gbps(meas.SizeBytes, took), nil
}

// chaseHops is how many dependent loads the model's pointer chase
// makes: enough that the launch, subtracted, leaves whole round trips.
const chaseHops = 1000

// pointerChase is the probe's latency row: one GPU thread following
// pointers through mapped pinned host memory (path mapped), through its
// own VRAM (path device) or through a peer GPU's VRAM with peer access
// enabled (path peer: nvbandwidth's device_to_device_latency_sm), in
// nanoseconds per load. The model's kernel is a gpu.PointerChase, each
// hop one read round trip; the launch is taken out by timing the same
// kernel with no access.
func (m *Model) pointerChase(gi int, meas *probe.Measurement) (float64, error) {
	path := xfer.Path(meas.Path)
	if meas.Operation != "pointer_chase" || (path != xfer.Mapped && path != xfer.Device && path != xfer.Peer) {
		return 0, notModelled("latency measurement %s %s", path, meas.Operation)
	}
	peer := -1
	if path == xfer.Peer {
		if meas.PeerGPU == nil || *meas.PeerGPU < 0 || *meas.PeerGPU >= len(m.Spec.GPUs) || *meas.PeerGPU == gi {
			return 0, notModelled("a peer row without its peer GPU")
		}
		peer = *meas.PeerGPU
	}
	n := uint64(meas.SizeBytes)
	if n == 0 {
		n = 64 << 20
	}
	var chase, empty sim.Time
	err := m.run(gi, func(p *sim.Proc, pr *cuda.Process, c *cuda.Context) error {
		var buf mem.GPUAddr
		if peer >= 0 {
			pc, err := pr.PrimaryContext(peer)
			if err != nil {
				return err
			}
			if err := c.EnablePeerAccess(pc); err != nil {
				return err
			}
			if buf, err = pc.MemAlloc(p, n); err != nil {
				return err
			}
			defer pc.MemFree(p, buf)
		} else if path == xfer.Mapped {
			va, err := c.MemHostAlloc(p, n, cuda.HostAllocDeviceMap)
			if err != nil {
				return err
			}
			defer c.MemFreeHost(p, va)
			if buf, err = c.MemHostGetDevicePointer(va, 0); err != nil {
				return err
			}
		} else {
			var err error
			if buf, err = c.MemAlloc(p, n); err != nil {
				return err
			}
			defer c.MemFree(p, buf)
		}
		timed := func(k gpu.Kernel) (sim.Time, error) {
			t0 := p.Now()
			if err := c.LaunchKernel(p, k, nil); err != nil {
				return 0, err
			}
			err := c.Synchronize(p)
			return p.Now() - t0, err
		}
		var err error
		a := gpu.Access{Addr: buf, Size: n, Pattern: gpu.PointerChase{Hops: chaseHops}}
		if chase, err = timed(gpu.Kernel{Name: "chase", Accesses: []gpu.Access{a}}); err != nil {
			return err
		}
		empty, err = timed(gpu.Kernel{Name: "empty"})
		return err
	})
	if err != nil {
		return 0, err
	}
	return float64(chase-empty) / float64(sim.Nanosecond) / chaseHops, nil
}

func gbps(n int64, t sim.Time) float64 {
	if t <= 0 {
		return 0
	}
	return float64(n) / t.Seconds() / 1e9
}
