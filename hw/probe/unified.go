package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/dmalab/dmalab/hw/cuda"
)

// latencyFamily measures the latency of one dependent GPU load: a single
// thread follows a random cycle of pointers, one node per stride, through
// mapped host memory (each load crosses the bus and back), through
// device memory (a region larger than the L2 cache), and through each
// peer GPU's device memory with peer access enabled, the same layout as
// the device's (nvbandwidth's device_to_device_latency_sm: each load
// crosses NVLink or PCIe to the peer's memory and back).
func (m *meter) latencyFamily(g *GPUReport) error {
	c := collector{g: g}
	peers, err := m.d.Peers()
	c.fail(err)
	for _, p := range []struct {
		kind   MemKind
		region int64
		steps  int
	}{
		{MemMapped, min(m.o.headline(), 64<<20), 20000},
		{MemDevice, min(m.o.headline(), 256<<20), 100000},
	} {
		m.withBuffers(&c, "latency "+p.kind.String(), func(b []*Buffer) {
			c.add(m.chase(b[0], p.region, p.steps))
		}, bufSpec{kind: p.kind, size: p.region})
	}
	for _, peer := range peers {
		region := min(m.o.headline(), 256<<20)
		m.withBuffers(&c, fmt.Sprintf("latency peer gpu%d", peer), func(b []*Buffer) {
			c.add(m.chase(b[0], region, 100000))
		}, bufSpec{MemPeer, region, peer})
	}
	return c.err()
}

// chaseNodes is the length of the pointer cycle.
const chaseNodes = 4096

// chase builds a random cycle of chaseNodes pointers spread over region
// bytes of b and measures steps loads along it.
func (m *meter) chase(b *Buffer, region int64, steps int) (Measurement, error) {
	stride := max(region/chaseNodes&^63, 64)
	nodes := int(min(region/stride, chaseNodes))
	dir := H2D
	if !b.Kind.IsHost() {
		dir = ""
	}
	meas := Measurement{Family: FamilyLatency, Path: b.Kind.String(), Direction: dir, Operation: "pointer_chase",
		SizeBytes: region, StrideBytes: stride, Repetitions: steps, Samples: m.o.Samples,
		Method: MethodKernelTimer, Unit: UnitNs}
	if b.Kind == MemPeer {
		peer := b.Peer
		meas.PeerGPU = &peer
	}
	order := rand.New(rand.NewPCG(uint64(region), uint64(stride))).Perm(nodes)
	chain := make([]byte, region)
	for i, n := range order {
		next := order[(i+1)%nodes]
		binary.LittleEndian.PutUint64(chain[int64(n)*stride:], uint64(b.DevAddr)+uint64(int64(next)*stride))
	}
	if err := m.d.Upload(b, chain); err != nil {
		return meas, fmt.Errorf("%s: %w", meas.Key(), err)
	}
	start := b.DevAddr + cuda.DevicePtr(int64(order[0])*stride)
	want := b.DevAddr + cuda.DevicePtr(int64(order[steps%nodes])*stride)
	for range m.o.Samples {
		if err := m.ctx.Err(); err != nil {
			return meas, err
		}
		end, el, err := m.d.Chase(b, start, steps)
		if err == nil && end != want {
			err = fmt.Errorf("%w: the chase ended at %#x, want %#x", ErrVerify, end, want)
		}
		if err != nil {
			return meas, fmt.Errorf("%s: %w", meas.Key(), err)
		}
		meas.Values = append(meas.Values, float64(el.Nanoseconds())/float64(steps))
	}
	meas.Stat, meas.Verified = summarize(meas.Values), true
	m.progress(&meas)
	return meas, nil
}

// SlowTouch is the duration above which a touch counts as a fault in the
// single-thread fault-latency measurement: a resident page answers within a
// microsecond or two, a fault takes tens.
const SlowTouch = 5 * time.Microsecond

// faultStrides are the strides of the single-thread fault-latency
// measurement: one access per small page, per 64 KiB big page, per 2 MiB
// block.
var faultStrides = []int64{4 << 10, 64 << 10, 2 << 20}

// unifiedFamily measures managed memory. It never allocates more than a
// quarter of the GPU's free memory.
func (m *meter) unifiedFamily(g *GPUReport) error {
	c := collector{g: g}
	free, _, err := m.d.MemInfo()
	if err != nil {
		return err
	}
	size := min(max(m.o.headline(), 2<<20), 64<<20, free/4) &^ (2<<20 - 1)
	if size < 2<<20 {
		return fmt.Errorf("unified: %d B free on the GPU is too little", free)
	}
	u := &unified{meter: m, c: &c, size: size}
	u.firstTouch()
	m.withBuffers(&c, "unified", func(b []*Buffer) {
		ss, es, destroy, err := m.resources(1, 3)
		if err != nil {
			c.fail(err)
			return
		}
		u.b, u.dev, u.times, u.s, u.e = b[0], b[1], b[2], ss[0], es
		u.prefetch()
		u.faultMigration(false)
		u.faultMigration(true)
		u.faultLatency()
		u.cpuFaultBack()
		u.remote()
		c.fail(destroy())
	}, bufSpec{kind: MemManaged, size: size}, bufSpec{kind: MemDevice, size: size}, bufSpec{kind: MemDevice, size: size / (4 << 10) * 8})
	return c.err()
}

// unified holds the buffers of the unified-memory measurements.
type unified struct {
	*meter
	c     *collector
	size  int64
	b     *Buffer // managed, size bytes
	dev   *Buffer // device, size bytes
	times *Buffer // device, one u64 per 4 KiB of b
	s     Stream
	e     []Event
}

// onHost fills the managed buffer with the source pattern and makes it
// resident in host memory.
func (u *unified) onHost() error {
	u.src.fill(u.b.Host)
	return errors.Join(u.d.Prefetch(u.b, false, u.s), u.d.Synchronize(u.s))
}

// timed queues op between two events and returns the time between them.
func (u *unified) timed(op func() error) (time.Duration, error) {
	if err := errors.Join(u.d.Record(u.e[0], u.s), op(), u.d.Record(u.e[1], u.s), u.d.Synchronize(u.s)); err != nil {
		return 0, err
	}
	return u.d.Elapsed(u.e[0], u.e[1])
}

// sample runs fn Samples times and adds the values, as a measurement, to
// the report. fn may set fields of *meas, such as Blocks.
func (u *unified) sample(meas *Measurement, fn func() (float64, error)) {
	meas.Samples = u.o.Samples
	for range u.o.Samples {
		if err := u.ctx.Err(); err != nil {
			u.c.fail(err)
			return
		}
		v, err := fn()
		if err != nil {
			u.c.fail(fmt.Errorf("%s: %w", meas.Key(), err))
			return
		}
		meas.Values = append(meas.Values, v)
	}
	meas.Stat = summarize(meas.Values)
	u.progress(meas)
	u.c.add(*meas, nil)
}

// firstTouch: the CPU writes one byte per 4 KiB page of fresh managed
// memory, which the driver populates in host memory fault by fault.
func (u *unified) firstTouch() {
	meas := Measurement{Family: FamilyUnified, Path: PathManagedCPUFault, Operation: "first_touch", SizeBytes: u.size,
		StrideBytes: 4 << 10, Repetitions: 1, Method: MethodHostTimer, Unit: UnitGBps, Verified: true}
	u.sample(&meas, func() (float64, error) {
		var v float64
		var err error
		u.withBuffers(u.c, "unified first touch", func(b []*Buffer) {
			t0 := u.d.Now()
			if err = u.d.HostTouch(b[0], u.size, 4<<10, true); err != nil {
				return
			}
			v = gbps(u.size, (u.d.Now() - t0).Seconds())
			for k, off := 0, int64(0); off < u.size; k, off = k+1, off+4<<10 {
				if b[0].Host[off] != byte(k) {
					err = fmt.Errorf("%w: first-touch byte %d is %d, want %d", ErrVerify, off, b[0].Host[off], byte(k))
					return
				}
			}
		}, bufSpec{kind: MemManaged, size: u.size})
		return v, err
	})
}

// prefetch: cuMemPrefetchAsync of host-resident data to the GPU and back.
func (u *unified) prefetch() {
	for _, toGPU := range []bool{true, false} {
		dir := D2H
		if toGPU {
			dir = H2D
		}
		meas := Measurement{Family: FamilyUnified, Path: PathManagedPrefetch, Direction: dir, SizeBytes: u.size,
			Repetitions: 1, Method: MethodEvents, Unit: UnitGBps, Verified: true}
		u.sample(&meas, func() (float64, error) {
			if err := u.onHost(); err != nil {
				return 0, err
			}
			if !toGPU {
				if err := errors.Join(u.d.Prefetch(u.b, true, u.s), u.d.Synchronize(u.s)); err != nil {
					return 0, err
				}
			}
			el, err := u.timed(func() error { return u.d.Prefetch(u.b, toGPU, u.s) })
			if err != nil {
				return 0, err
			}
			return gbps(u.size, el.Seconds()), u.verify(u.b, u.src, u.size)
		})
	}
}

// manyThreads is the thread count of many-thread touches.
func (u *unified) manyThreads(touches int64) int {
	return int(min(touches, int64(max(u.d.Info().Multiprocessors, 1))*1024))
}

// faultMigration: many GPU threads touch every 4 KiB page of host-resident
// managed memory; the faults migrate it. Bytes are the whole buffer.
func (u *unified) faultMigration(write bool) {
	op := "read"
	if write {
		op = "write"
	}
	const stride = 4 << 10
	meas := Measurement{Family: FamilyUnified, Path: PathManagedFault, Direction: H2D, Operation: op, SizeBytes: u.size,
		StrideBytes: stride, Repetitions: 1, Method: MethodEvents, Unit: UnitGBps, Verified: true}
	u.sample(&meas, func() (float64, error) {
		if err := u.onHost(); err != nil {
			return 0, err
		}
		el, err := u.timed(func() error {
			return u.d.Touch(u.b, u.size, stride, write, u.manyThreads(u.size/stride), nil, u.s)
		})
		if err != nil {
			return 0, err
		}
		return gbps(u.size, el.Seconds()), u.verifyTouched(stride, write)
	})
}

// verifyTouched checks the managed buffer after a touch: the source pattern,
// except that a write touch stored k in the 32-bit word at k*stride.
func (u *unified) verifyTouched(stride int64, write bool) error {
	if !write {
		return wrapVerify(u.b, u.src.verify(u.b.Host))
	}
	want := u.src.bytes(u.size)
	got := u.b.Host
	for off, k := int64(0), uint32(0); off < u.size; off, k = off+stride, k+1 {
		if w := binary.LittleEndian.Uint32(got[off:]); w != k {
			return fmt.Errorf("destination %v: %w: touch %d left %d at byte %d", u.b, ErrVerify, k, w, off)
		}
		end := min(off+stride, u.size)
		if !slices.Equal(got[off+4:end], want[off+4:end]) {
			return fmt.Errorf("destination %v: %w: a write touch changed bytes %d..%d", u.b, ErrVerify, off+4, end)
		}
	}
	return nil
}

// faultLatency: one GPU thread reads host-resident managed memory in
// address order, timing each touch; a fault shows as a slow touch. The
// value is the median slow touch; Blocks records which touches of each
// 2 MiB block were slow, the driver's prefetcher's footprint.
func (u *unified) faultLatency() {
	region := min(u.size, 32<<20)
	for _, stride := range faultStrides {
		if stride > region/4 {
			continue
		}
		touches := region / stride
		meas := Measurement{Family: FamilyUnified, Path: PathManagedFault, Direction: H2D, Operation: "single_thread_read",
			SizeBytes: region, StrideBytes: stride, Repetitions: int(touches), Method: MethodKernelTimer, Unit: UnitUs, Verified: true}
		raw := make([]byte, touches*8)
		u.sample(&meas, func() (float64, error) {
			if err := u.onHost(); err != nil {
				return 0, err
			}
			if err := errors.Join(u.d.Touch(u.b, region, stride, false, 1, u.times, u.s), u.d.Synchronize(u.s)); err != nil {
				return 0, err
			}
			if err := u.d.Download(u.times, raw); err != nil {
				return 0, err
			}
			var slow, all []float64
			perBlock := int((2 << 20) / stride)
			meas.Blocks = meas.Blocks[:0]
			for k := range int(touches) {
				t := time.Duration(binary.LittleEndian.Uint64(raw[k*8:]))
				all = append(all, t.Seconds()*1e6)
				if t <= SlowTouch {
					continue
				}
				slow = append(slow, t.Seconds()*1e6)
				blk := k / perBlock
				if n := len(meas.Blocks); n == 0 || meas.Blocks[n-1].Block != blk {
					meas.Blocks = append(meas.Blocks, FaultBlock{Block: blk})
				}
				last := &meas.Blocks[len(meas.Blocks)-1]
				last.SlowTouches = append(last.SlowTouches, k%perBlock)
			}
			if len(slow) == 0 {
				slow = all
			}
			return summarize(slow).Median, u.verify(u.b, u.src, region)
		})
	}
}

// cpuFaultBack: the CPU reads one byte per 4 KiB page of managed memory
// that the GPU holds; each fault migrates a page back.
func (u *unified) cpuFaultBack() {
	meas := Measurement{Family: FamilyUnified, Path: PathManagedCPUFault, Direction: D2H, Operation: "read", SizeBytes: u.size,
		StrideBytes: 4 << 10, Repetitions: 1, Method: MethodHostTimer, Unit: UnitGBps, Verified: true}
	u.sample(&meas, func() (float64, error) {
		if err := errors.Join(u.onHost(), u.d.Prefetch(u.b, true, u.s), u.d.Synchronize(u.s)); err != nil {
			return 0, err
		}
		t0 := u.d.Now()
		if err := u.d.HostTouch(u.b, u.size, 4<<10, false); err != nil {
			return 0, err
		}
		v := gbps(u.size, (u.d.Now() - t0).Seconds())
		return v, u.verify(u.b, u.src, u.size)
	})
}

// remote: with PreferredLocation=CPU and AccessedBy=GPU the data stays in
// host memory and the copy kernel reads it over the bus, like zero-copy.
func (u *unified) remote() {
	if err := u.d.AdviseRemote(u.b, true); err != nil {
		u.c.fail(fmt.Errorf("unified remote: %w", err))
		return
	}
	size := u.size &^ 15
	meas := Measurement{Family: FamilyUnified, Path: PathManagedRemote, Direction: H2D, Operation: "accessed_by",
		SizeBytes: size, Repetitions: 1, Method: MethodEvents, Unit: UnitGBps, Verified: true}
	u.sample(&meas, func() (float64, error) {
		if err := errors.Join(u.onHost(), u.fill(u.dev, u.dst, size)); err != nil {
			return 0, err
		}
		el, err := u.timed(func() error { return u.d.CopyKernel(u.dev, u.b, size, u.s) })
		if err != nil {
			return 0, err
		}
		return gbps(size, el.Seconds()), u.verify(u.dev, u.src, size)
	})
	u.c.fail(u.d.AdviseRemote(u.b, false))
}
