package probe

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dmalab/dmalab/hw/internal/libc"
	"github.com/dmalab/dmalab/hw/internal/ntcopy"
)

// collector gathers a family's measurements and failures: a failed
// measurement is reported and the family goes on with the next.
type collector struct {
	g    *GPUReport
	errs []error
}

func (c *collector) add(m Measurement, err error) {
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	c.g.Measurements = append(c.g.Measurements, m)
}

func (c *collector) fail(err error) {
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

func (c *collector) err() error { return errors.Join(c.errs...) }

// withBuffers allocates buffers, runs fn with them and frees them.
func (m *meter) withBuffers(c *collector, what string, fn func(b []*Buffer), specs ...bufSpec) {
	bufs, free, err := m.buffers(specs...)
	if err != nil {
		c.fail(fmt.Errorf("%s: %w", what, err))
		return
	}
	fn(bufs)
	c.fail(free())
}

// capabilities checks dma-buf export of device memory and whether the
// buffer id of an address changes when it is freed and allocated again.
func (m *meter) capabilities(g *GPUReport) error {
	const size = 2 << 20
	caps := &Capabilities{}
	c := collector{g: g}
	var ids []uint64
	for range 2 {
		m.withBuffers(&c, "capabilities", func(b []*Buffer) {
			if len(ids) == 0 {
				m.exportDMABuf(caps, b[0])
			}
			id, err := m.d.BufferID(b[0])
			c.fail(err)
			ids = append(ids, id)
		}, bufSpec{kind: MemDevice, size: size})
	}
	peers, err := m.d.Peers()
	c.fail(err)
	if err := c.err(); err != nil {
		return err
	}
	caps.PeerAccess = peers
	caps.GPUDirect = GPUDirectOf(g.Device.Attributes)
	caps.BufferIDFirst, caps.BufferIDReallocate, caps.BufferIDChanges = ids[0], ids[1], ids[0] != ids[1]
	g.Capabilities = caps
	return nil
}

// exportDMABuf exports b as a dma-buf max(Samples, 3) times, each fd
// closed before the next export, and records whether it worked, the
// kernel's fdinfo of the first fd, and the export call's times.
func (m *meter) exportDMABuf(caps *Capabilities, b *Buffer) {
	n := max(m.o.Samples, 3)
	var us []float64
	for i := range n {
		x, err := m.d.ExportDMABuf(b)
		if err != nil {
			if i == 0 {
				caps.DMABufError = err.Error()
				return
			}
			// A later failure leaves the samples taken so far.
			break
		}
		if i == 0 {
			caps.DMABufExport = true
			if info, err := ParseDMABufFDInfo(x.FDInfo); err != nil {
				caps.DMABufFDInfoError = err.Error()
			} else {
				caps.DMABufFDInfo = info
			}
		}
		us = append(us, float64(x.Elapsed)/float64(time.Microsecond))
	}
	st := summarize(us)
	caps.DMABufExportMicros, caps.DMABufExportValues = &st, us
}

// callOverhead measures one trivial driver call through the binding.
func (m *meter) callOverhead(g *GPUReport) error {
	const reps = 10000
	c := collector{g: g}
	meas := Measurement{Family: FamilyCallOverhead, Path: "null_call", Repetitions: reps, Unit: UnitUs}
	c.add(m.hostTimed(meas, 100, m.d.NullCall, perCall(reps), nil, nil))
	return c.err()
}

func perCall(reps int) func(time.Duration) float64 {
	return func(el time.Duration) float64 { return el.Seconds() * 1e6 / float64(reps) }
}

// ceFamily measures copy-engine copies: the pinned sweep both ways; at the
// largest size, pinned both ways at once, write-combined and registered
// memory each way, and device to device.
func (m *meter) ceFamily(g *GPUReport) error {
	c := collector{g: g}
	big := m.o.headline()
	m.withBuffers(&c, "ce pinned", func(b []*Buffer) {
		host, dev := b[0], b[1]
		for _, size := range m.o.Sizes {
			c.add(m.ceCopy(MemPinned.String(), H2D, dev, host, size))
			c.add(m.ceCopy(MemPinned.String(), D2H, host, dev, size))
		}
	}, bufSpec{kind: MemPinned, size: big}, bufSpec{kind: MemDevice, size: big})
	c.add(m.ceBidir(MemPinned.String(), MemPinned, big))
	for _, kind := range []MemKind{MemWriteCombined, MemRegistered} {
		m.withBuffers(&c, "ce "+kind.String(), func(b []*Buffer) {
			host, dev := b[0], b[1]
			c.add(m.ceCopy(kind.String(), H2D, dev, host, big))
			c.add(m.ceCopy(kind.String(), D2H, host, dev, big))
		}, bufSpec{kind: kind, size: big}, bufSpec{kind: MemDevice, size: big})
	}
	// Bytes are counted once, as nvbandwidth's device_local_copy counts.
	m.withBuffers(&c, "ce device", func(b []*Buffer) {
		c.add(m.ceCopy(MemDevice.String(), D2D, b[1], b[0], big))
	}, bufSpec{kind: MemDevice, size: big}, bufSpec{kind: MemDevice, size: big})
	peers, err := m.d.Peers()
	c.fail(err)
	for _, p := range peers {
		m.withBuffers(&c, fmt.Sprintf("ce peer gpu%d", p), func(b []*Buffer) {
			local, remote, local2, remote2 := b[0], b[1], b[2], b[3]
			c.add(m.ceCopyAs(peerMeasurement(FamilyCE, D2D, "write", p, big), remote, local))
			c.add(m.ceCopyAs(peerMeasurement(FamilyCE, D2D, "read", p, big), local, remote))
			c.add(m.bidir(peerMeasurement(FamilyCE, Bidir, "", p, big), [2]*Buffer{remote, local}, [2]*Buffer{local2, remote2}, "write", "read"))
		}, bufSpec{kind: MemDevice, size: big}, bufSpec{MemPeer, big, p}, bufSpec{kind: MemDevice, size: big}, bufSpec{MemPeer, big, p})
	}
	return c.err()
}

// peerMeasurement starts a measurement between this GPU and GPU peer.
func peerMeasurement(family, dir, op string, peer int, size int64) Measurement {
	return Measurement{Family: family, Path: MemPeer.String(), Direction: dir, Operation: op, SizeBytes: size, PeerGPU: &peer}
}

// smFamily measures the copy kernel: reading mapped host memory into device
// memory (h2d, zero-copy), writing device memory into mapped host memory
// (d2h), and within device memory.
func (m *meter) smFamily(g *GPUReport) error {
	c := collector{g: g}
	big := m.o.headline()
	m.withBuffers(&c, "sm mapped", func(b []*Buffer) {
		host, dev := b[0], b[1]
		c.add(m.smCopy(MemMapped.String(), H2D, dev, host, big))
		c.add(m.smCopy(MemMapped.String(), D2H, host, dev, big))
	}, bufSpec{kind: MemMapped, size: big}, bufSpec{kind: MemDevice, size: big})
	m.withBuffers(&c, "sm device", func(b []*Buffer) {
		c.add(m.smCopy(MemDevice.String(), D2D, b[1], b[0], big))
	}, bufSpec{kind: MemDevice, size: big}, bufSpec{kind: MemDevice, size: big})
	peers, err := m.d.Peers()
	c.fail(err)
	for _, p := range peers {
		m.withBuffers(&c, fmt.Sprintf("sm peer gpu%d", p), func(b []*Buffer) {
			local, remote := b[0], b[1]
			c.add(m.smCopyAs(peerMeasurement(FamilySM, D2D, "write", p, big), remote, local))
			c.add(m.smCopyAs(peerMeasurement(FamilySM, D2D, "read", p, big), local, remote))
		}, bufSpec{kind: MemDevice, size: big}, bufSpec{MemPeer, big, p})
	}
	return c.err()
}

// syncFamily measures synchronous copies at the largest size, from pageable
// memory (staged by the driver) and, for comparison, pinned memory.
func (m *meter) syncFamily(g *GPUReport) error {
	c := collector{g: g}
	big := m.o.headline()
	reps := max(1, min(m.o.Repetitions, int(smallTarget*16/big)))
	for _, kind := range []MemKind{MemPageable, MemPinned} {
		m.withBuffers(&c, "sync "+kind.String(), func(b []*Buffer) {
			host, dev := b[0], b[1]
			c.add(m.syncCopy(FamilySync, kind.String(), H2D, dev, host, big, reps, UnitGBps))
			c.add(m.syncCopy(FamilySync, kind.String(), D2H, host, dev, big, reps, UnitGBps))
		}, bufSpec{kind: kind, size: big}, bufSpec{kind: MemDevice, size: big})
	}
	return c.err()
}

// callTimeFamily measures the time per call of synchronous small copies,
// from pinned and from pageable memory.
func (m *meter) callTimeFamily(g *GPUReport) error {
	c := collector{g: g}
	if len(m.o.SmallSizes) == 0 {
		return nil
	}
	const reps = 200
	big := slices.Max(m.o.SmallSizes)
	for _, kind := range []MemKind{MemPinned, MemPageable} {
		m.withBuffers(&c, "sync_call "+kind.String(), func(b []*Buffer) {
			host, dev := b[0], b[1]
			for _, size := range m.o.SmallSizes {
				c.add(m.syncCopy(FamilyCallTime, kind.String(), H2D, dev, host, size, reps, UnitUs))
				c.add(m.syncCopy(FamilyCallTime, kind.String(), D2H, host, dev, size, reps, UnitUs))
			}
		}, bufSpec{kind: kind, size: big}, bufSpec{kind: MemDevice, size: big})
	}
	return c.err()
}

// Operations of the host_memcpy family: the value of Measurement.Operation.
const (
	opLibcMemcpy = "memcpy"     // the C library's memcpy, pageable to pinned
	opGoCopy     = "go_copy"    // Go's copy, pageable to pinned
	opStreamOut  = "stream_out" // Go's copy from a cache-resident ring into pageable memory
)

// streamChunk is the piece a staging ring's copy-out moves at a time, and the
// size of each half of the ring.
const streamChunk = 1 << 20

// hostMemcpyFamily measures one CPU thread copying pageable memory into
// pinned memory, the copy a pageable transfer pays before its DMA: with the
// C library's memcpy (operation memcpy, the rate C programs and the CUDA
// driver's staging copies get; left out when the C library cannot be
// loaded) and with Go's copy (go_copy). It also measures the copy-out of a
// staging ring (stream_out): the pinned buffer's first 2 MiB, cache-resident,
// copied 1 MiB at a time into the whole pageable buffer, which is what a
// driver's pageable device-to-host copy does after each DMA. It is CPU work,
// timed with the wall clock, not the Device's.
func (m *meter) hostMemcpyFamily(g *GPUReport) error {
	c := collector{g: g}
	big := m.o.headline()
	reps := max(2, int(smallTarget*4/big))
	meas := func(op string) Measurement {
		return Measurement{Family: FamilyHostMemcpy, Path: MemPageable.String(), Direction: "h2h", Operation: op, SizeBytes: big,
			Repetitions: reps, Unit: UnitGBps, Method: MethodHostTimer, Warmup: 1, Samples: m.o.Samples}
	}
	m.withBuffers(&c, "host_memcpy", func(b []*Buffer) {
		src, dst := b[0], b[1]
		m.src.fill(src.Host)
		out := dst.Host[:big]
		reset := func() { m.dst.fill(out) }
		check := func() error { return wrapVerify(dst, m.src.verify(out)) }
		if libc.Available() == nil {
			c.add(m.hostCopy(meas(opLibcMemcpy), func() error { return libc.Memcpy(out, src.Host) }, reset, check))
		}
		c.add(m.hostCopy(meas(opGoCopy), func() error { copy(out, src.Host); return nil }, reset, check))
		// The ring is the pinned buffer's start (allocated at least that
		// long), filled with the source pattern; pageable memory is now the
		// destination.
		ring := dst.Host[:2*streamChunk]
		m.src.fill(ring)
		c.add(m.hostCopy(meas(opStreamOut), func() error { streamOut(src.Host, ring); return nil },
			func() { m.dst.fill(src.Host) }, func() error { return wrapVerify(src, verifyStreamOut(src.Host, ring)) }))
	}, bufSpec{kind: MemPageable, size: big}, bufSpec{kind: MemPinned, size: max(big, 2*streamChunk)})
	return c.err()
}

// streamOut copies the halves of ring alternately into dst, streamChunk
// bytes at a time, as a staging copy-out drains its ring; the last piece may
// be short. It stores with non-temporal stores (ntcopy: SSE2 MOVNTDQ on
// amd64, Go's copy elsewhere), as a driver's streaming copy-out does, so
// that the rate is the write-bound one of a cache-resident source.
func streamOut(dst, ring []byte) {
	for i, off := 0, 0; off < len(dst); i, off = i+1, off+streamChunk {
		half := ring[i%2*streamChunk:][:streamChunk]
		ntcopy.Copy(dst[off:], half)
	}
}

// verifyStreamOut checks that each piece of dst holds the ring half
// streamOut copied into it.
func verifyStreamOut(dst, ring []byte) error {
	for i, off := 0, 0; off < len(dst); i, off = i+1, off+streamChunk {
		got := dst[off:min(off+streamChunk, len(dst))]
		if want := ring[i%2*streamChunk:][:len(got)]; !bytes.Equal(got, want) {
			return fmt.Errorf("%w: piece %d at byte %d differs from ring half %d", ErrVerify, i, off, i%2)
		}
	}
	return nil
}

// hostCopy measures copyAll, CPU work, with the wall clock: one untimed
// call, then per sample reset, Repetitions timed calls and check. Each call
// moves SizeBytes.
func (m *meter) hostCopy(meas Measurement, copyAll func() error, reset func(), check func() error) (Measurement, error) {
	err := copyAll()
	for range meas.Samples {
		if err != nil {
			break
		}
		if err = m.ctx.Err(); err != nil {
			break
		}
		reset()
		t0 := time.Now()
		for range meas.Repetitions {
			if err = copyAll(); err != nil {
				break
			}
		}
		el := time.Since(t0)
		if err != nil {
			break
		}
		if err = check(); err != nil {
			break
		}
		meas.Values = append(meas.Values, gbps(meas.SizeBytes*int64(meas.Repetitions), el.Seconds()))
	}
	if err != nil {
		return meas, fmt.Errorf("%s: %w", meas.Key(), err)
	}
	meas.Stat, meas.Verified = summarize(meas.Values), true
	m.progress(&meas)
	return meas, nil
}

// pinSizes are the sizes of the pinning-cost measurement that do not exceed
// the largest of Options.Sizes (that size itself when none fits).
func (m *meter) pinSizes() []int64 {
	var out []int64
	for _, s := range []int64{2 << 20, 64 << 20, 1 << 30} {
		if s <= m.o.headline() {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		out = []int64{m.o.headline()}
	}
	return out
}

// pinFamily measures cuMemHostRegister and cuMemHostUnregister of pageable
// memory whose pages are already present, so that the cost is pinning and
// mapping, not page allocation.
func (m *meter) pinFamily(g *GPUReport) error {
	c := collector{g: g}
	for _, size := range m.pinSizes() {
		m.withBuffers(&c, "pin", func(b []*Buffer) {
			buf := b[0]
			m.src.fill(buf.Host)
			var reg, unreg []float64
			var err error
			for range m.o.Samples {
				if err = m.ctx.Err(); err != nil {
					break
				}
				t0 := m.d.Now()
				if err = m.d.Pin(buf); err != nil {
					break
				}
				t1 := m.d.Now()
				if err = m.d.Unpin(buf); err != nil {
					break
				}
				t2 := m.d.Now()
				reg = append(reg, (t1-t0).Seconds()*1e6)
				unreg = append(unreg, (t2-t1).Seconds()*1e6)
			}
			for i, op := range []string{"register", "unregister"} {
				meas := Measurement{Family: FamilyPin, Path: MemPageable.String(), Operation: op, SizeBytes: size,
					Repetitions: 1, Unit: UnitUs, Method: MethodHostTimer, Samples: m.o.Samples}
				if err != nil {
					c.fail(fmt.Errorf("%s: %w", meas.Key(), err))
					return
				}
				meas.Values = [][]float64{reg, unreg}[i]
				meas.Stat = summarize(meas.Values)
				m.progress(&meas)
				c.add(meas, nil)
			}
		}, bufSpec{kind: MemPageable, size: size})
	}
	return c.err()
}
