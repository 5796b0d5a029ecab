package probe

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// maxReps bounds the operations queued behind one spin kernel: a stream's
// queue is finite, and a full one would make the host wait for the held
// stream.
const maxReps = 128

// smallTarget is the bytes a sample of a small copy should move at least, so
// that the events' 0.5 µs resolution stays small against its duration.
const smallTarget = 16 << 20

// meter runs measurements on one Device.
type meter struct {
	ctx      context.Context
	d        Device
	o        Options
	gpu      int
	src, dst *pattern // source and destination fills
	scratch  []byte   // for reading device buffers back
}

// reps returns the timed repetitions of a copy of size bytes.
func (m *meter) reps(size int64) int {
	return int(min(max(int64(m.o.Repetitions), smallTarget/size), maxReps))
}

func (m *meter) progress(meas *Measurement) {
	if m.o.Progress == nil {
		return
	}
	fmt.Fprintf(m.o.Progress, "gpu %d: %-40s %10.3f %s  (min %.3f, max %.3f)\n",
		m.gpu, meas.Key(), meas.Median, meas.Unit, meas.Min, meas.Max)
}

// buffers allocates buffers and returns a function that frees them all.
func (m *meter) buffers(specs ...bufSpec) ([]*Buffer, func() error, error) {
	var bufs []*Buffer
	free := func() error {
		var errs []error
		for _, b := range bufs {
			errs = append(errs, m.d.Free(b))
		}
		return errors.Join(errs...)
	}
	for _, s := range specs {
		alloc := m.d.Alloc
		if s.kind == MemPeer {
			alloc = func(_ MemKind, size int64) (*Buffer, error) { return m.d.AllocPeer(s.peer, size) }
		}
		b, err := alloc(s.kind, s.size)
		if err != nil {
			return nil, nil, errors.Join(err, free())
		}
		bufs = append(bufs, b)
	}
	return bufs, free, nil
}

type bufSpec struct {
	kind MemKind
	size int64
	peer int // the GPU of MemPeer memory
}

// fill writes p's first size bytes into b.
func (m *meter) fill(b *Buffer, p *pattern, size int64) error {
	if b.Host != nil {
		p.fill(b.Host[:size])
		return nil
	}
	return m.d.Upload(b, p.bytes(size))
}

// verify checks that b's first size bytes hold p's.
func (m *meter) verify(b *Buffer, p *pattern, size int64) error {
	if b.Host != nil {
		return wrapVerify(b, p.verify(b.Host[:size]))
	}
	if int64(cap(m.scratch)) < size {
		m.scratch = make([]byte, size)
	}
	got := m.scratch[:size]
	if err := m.d.Download(b, got); err != nil {
		return err
	}
	return wrapVerify(b, p.verify(got))
}

func wrapVerify(b *Buffer, err error) error {
	if err != nil {
		return fmt.Errorf("destination %v: %w", b, err)
	}
	return nil
}

// spin holds streams with the spin kernel while enqueue queues work behind
// it, then releases them, waits for them and checks that no spin timed out.
// The streams are released and synchronized even when enqueue fails.
func (m *meter) spin(enqueue func() error, streams ...Stream) error {
	var errs []error
	blocked := 0
	for _, s := range streams {
		if err := m.d.Block(s, m.o.SpinTimeout); err != nil {
			errs = append(errs, err)
			break
		}
		blocked++
	}
	if blocked == len(streams) {
		errs = append(errs, enqueue())
	}
	errs = append(errs, m.d.Release())
	for _, s := range streams {
		errs = append(errs, m.d.Synchronize(s))
	}
	n, err := m.d.Settle()
	errs = append(errs, err)
	if n > 0 {
		errs = append(errs, fmt.Errorf("%w (%d of %d spins; SpinTimeout %v)", ErrSpinTimeout, n, len(streams), m.o.SpinTimeout))
	}
	return errors.Join(errs...)
}

// resources creates streams and events and returns a function that destroys them.
func (m *meter) resources(nStreams, nEvents int) ([]Stream, []Event, func() error, error) {
	var ss []Stream
	var es []Event
	destroy := func() error {
		var errs []error
		for _, s := range ss {
			errs = append(errs, m.d.DestroyStream(s))
		}
		for _, e := range es {
			errs = append(errs, m.d.DestroyEvent(e))
		}
		return errors.Join(errs...)
	}
	for range nStreams {
		s, err := m.d.NewStream()
		if err != nil {
			return nil, nil, nil, errors.Join(err, destroy())
		}
		ss = append(ss, s)
	}
	for range nEvents {
		e, err := m.d.NewEvent()
		if err != nil {
			return nil, nil, nil, errors.Join(err, destroy())
		}
		es = append(es, e)
	}
	return ss, es, destroy, nil
}

// queued measures an operation queued reps times on a stream held by the
// spin kernel, between two events (MethodSpinEvents). op queues one
// operation of size bytes from src to dst.
func (m *meter) queued(meas Measurement, dst, src *Buffer, op func(s Stream) error) (Measurement, error) {
	size := meas.SizeBytes
	ss, es, destroy, err := m.resources(1, 2)
	if err != nil {
		return meas, err
	}
	s, start, end := ss[0], es[0], es[1]
	meas.Method, meas.Unit, meas.Warmup, meas.Samples = MethodSpinEvents, UnitGBps, m.o.Warmup, m.o.Samples
	for range m.o.Samples {
		if err = m.ctx.Err(); err != nil {
			break
		}
		if err = errors.Join(m.fill(src, m.src, size), m.fill(dst, m.dst, size)); err != nil {
			break
		}
		err = m.spin(func() error {
			for range meas.Warmup {
				if err := op(s); err != nil {
					return err
				}
			}
			if err := m.d.Record(start, s); err != nil {
				return err
			}
			for range meas.Repetitions {
				if err := op(s); err != nil {
					return err
				}
			}
			return m.d.Record(end, s)
		}, s)
		if err != nil {
			break
		}
		if err = m.verify(dst, m.src, size); err != nil {
			break
		}
		var el time.Duration
		if el, err = m.d.Elapsed(start, end); err != nil {
			break
		}
		meas.Values = append(meas.Values, gbps(size*int64(meas.Repetitions), el.Seconds()))
	}
	err = errors.Join(err, destroy())
	if err != nil {
		return meas, fmt.Errorf("%s: %w", meas.Key(), err)
	}
	meas.Stat, meas.Verified = summarize(meas.Values), true
	m.progress(&meas)
	return meas, nil
}

// ceCopy measures copy-engine copies from src to dst.
func (m *meter) ceCopy(path, dir string, dst, src *Buffer, size int64) (Measurement, error) {
	return m.ceCopyAs(Measurement{Family: FamilyCE, Path: path, Direction: dir, SizeBytes: size}, dst, src)
}

// ceCopyAs measures copy-engine copies of meas.SizeBytes from src to dst,
// filling in meas.
func (m *meter) ceCopyAs(meas Measurement, dst, src *Buffer) (Measurement, error) {
	size := meas.SizeBytes
	meas.Repetitions = m.reps(size)
	return m.queued(meas, dst, src, func(s Stream) error { return m.d.CopyAsync(dst, src, size, s) })
}

// smCopy measures the copy kernel from src to dst.
func (m *meter) smCopy(path, dir string, dst, src *Buffer, size int64) (Measurement, error) {
	return m.smCopyAs(Measurement{Family: FamilySM, Path: path, Direction: dir, SizeBytes: size}, dst, src)
}

// smCopyAs measures the copy kernel over meas.SizeBytes (rounded down to 16)
// from src to dst, filling in meas.
func (m *meter) smCopyAs(meas Measurement, dst, src *Buffer) (Measurement, error) {
	meas.SizeBytes &^= 15
	size := meas.SizeBytes
	meas.Repetitions = m.reps(size)
	return m.queued(meas, dst, src, func(s Stream) error { return m.d.CopyKernel(dst, src, size, s) })
}

// ceBidir measures host-to-device and device-to-host copy-engine copies at
// once, on two streams released together.
func (m *meter) ceBidir(path string, hostKind MemKind, size int64) (Measurement, error) {
	meas := Measurement{Family: FamilyCE, Path: path, Direction: Bidir, SizeBytes: size}
	bufs, free, err := m.buffers(bufSpec{kind: hostKind, size: size}, bufSpec{kind: MemDevice, size: size}, bufSpec{kind: MemDevice, size: size}, bufSpec{kind: hostKind, size: size})
	if err != nil {
		return meas, fmt.Errorf("%s: %w", meas.Key(), err)
	}
	meas, err = m.bidir(meas, [2]*Buffer{bufs[1], bufs[0]}, [2]*Buffer{bufs[3], bufs[2]}, H2D, D2H)
	return meas, errors.Join(err, free())
}

// bidir measures two copy-engine copies at once, up[0] ← up[1] on one
// stream and down[0] ← down[1] on another, released together, in three
// spins per sample:
//
//   - both directions Repetitions copies: the value is the bytes of both
//     over the span from the common start to the later end, and
//     PerDirection's upName+SameSizeSuffix and downName+SameSizeSuffix
//     each direction over its own span. With equal work the faster
//     direction finishes first and the slower one runs its tail alone,
//     which lifts the slower one's figure.
//   - nvbandwidth's method, once per direction: the measured direction's
//     Repetitions copies beside twice as many of the other (nvbandwidth
//     doubles the interfering copy "to ensure it interferes correctly",
//     testcases_ce.cpp HostToDeviceBidirCE), timed between the measured
//     stream's own events: PerDirection's upName and downName, the figures
//     nvbandwidth's bidirectional testcases report.
func (m *meter) bidir(meas Measurement, up, down [2]*Buffer, upName, downName string) (Measurement, error) {
	size := meas.SizeBytes
	meas.Repetitions, meas.Method, meas.Unit, meas.Warmup, meas.Samples = m.reps(size), MethodSpinEvents, UnitGBps, m.o.Warmup, m.o.Samples
	ss, es, destroy, err := m.resources(2, 4)
	if err != nil {
		return meas, fmt.Errorf("%s: %w", meas.Key(), err)
	}
	su, sd := ss[0], ss[1]
	start, startDown, endUp, endDown := es[0], es[1], es[2], es[3]
	// copies queues nUp copies up and nDown down, alternating while both
	// have some left.
	copies := func(nUp, nDown int) error {
		var errs []error
		for i := range max(nUp, nDown) {
			if i < nUp {
				errs = append(errs, m.d.CopyAsync(up[0], up[1], size, su))
			}
			if i < nDown {
				errs = append(errs, m.d.CopyAsync(down[0], down[1], size, sd))
			}
		}
		return errors.Join(errs...)
	}
	// run is one spin: warm-up, then nUp and nDown timed copies; the
	// spans of each stream and from the common start to the down end.
	run := func(nUp, nDown int) (tUp, tDown, tAll time.Duration, err error) {
		if err = errors.Join(m.fill(up[1], m.src, size), m.fill(down[1], m.src, size),
			m.fill(up[0], m.dst, size), m.fill(down[0], m.dst, size)); err != nil {
			return
		}
		err = m.spin(func() error {
			if err := copies(meas.Warmup, meas.Warmup); err != nil {
				return err
			}
			// nvbandwidth's alignment of the two streams: the second waits
			// for the first's start event.
			if err := errors.Join(m.d.Record(start, su), m.d.WaitEvent(sd, start), m.d.Record(startDown, sd)); err != nil {
				return err
			}
			if err := copies(nUp, nDown); err != nil {
				return err
			}
			return errors.Join(m.d.Record(endUp, su), m.d.Record(endDown, sd))
		}, su, sd)
		if err != nil {
			return
		}
		if err = errors.Join(m.verify(up[0], m.src, size), m.verify(down[0], m.src, size)); err != nil {
			return
		}
		var e1, e2, e3 error
		tUp, e1 = m.d.Elapsed(start, endUp)
		tDown, e2 = m.d.Elapsed(startDown, endDown)
		tAll, e3 = m.d.Elapsed(start, endDown)
		err = errors.Join(e1, e2, e3)
		return
	}
	reps := meas.Repetitions
	var upVals, downVals, upSame, downSame []float64
	bytes := size * int64(reps)
	for range m.o.Samples {
		if err = m.ctx.Err(); err != nil {
			break
		}
		tUp, tDown, tAll, e := run(reps, reps)
		if err = e; err != nil {
			break
		}
		upSame = append(upSame, gbps(bytes, tUp.Seconds()))
		downSame = append(downSame, gbps(bytes, tDown.Seconds()))
		meas.Values = append(meas.Values, gbps(2*bytes, max(tAll, tUp).Seconds()))
		if tUp, _, _, err = run(reps, 2*reps); err != nil {
			break
		}
		upVals = append(upVals, gbps(bytes, tUp.Seconds()))
		if _, tDown, _, err = run(2*reps, reps); err != nil {
			break
		}
		downVals = append(downVals, gbps(bytes, tDown.Seconds()))
	}
	err = errors.Join(err, destroy())
	if err != nil {
		return meas, fmt.Errorf("%s: %w", meas.Key(), err)
	}
	meas.Stat, meas.Verified = summarize(meas.Values), true
	meas.PerDirection = map[string]Stat{
		upName: summarize(upVals), downName: summarize(downVals),
		upName + SameSizeSuffix: summarize(upSame), downName + SameSizeSuffix: summarize(downSame),
	}
	m.progress(&meas)
	return meas, nil
}

// SameSizeSuffix ends the PerDirection keys of a bidirectional
// measurement's equal-work figures ("h2d_same_size"); the keys without it
// are nvbandwidth's (the other direction doubled).
const SameSizeSuffix = "_same_size"

// hostTimed measures op, a synchronous operation, with the host clock:
// Warmup calls, then reps timed calls per sample. value turns the elapsed
// time of reps calls into the reported number; check, if not nil, runs
// after each sample.
func (m *meter) hostTimed(meas Measurement, warmup int, op func() error, value func(time.Duration) float64, before, check func() error) (Measurement, error) {
	meas.Method, meas.Warmup, meas.Samples = MethodHostTimer, warmup, m.o.Samples
	var err error
	for range m.o.Samples {
		if err = m.ctx.Err(); err != nil {
			break
		}
		if before != nil {
			if err = before(); err != nil {
				break
			}
		}
		for range warmup {
			if err = op(); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
		t0 := m.d.Now()
		for range meas.Repetitions {
			if err = op(); err != nil {
				break
			}
		}
		el := m.d.Now() - t0
		if err != nil {
			break
		}
		if check != nil {
			if err = check(); err != nil {
				break
			}
		}
		meas.Values = append(meas.Values, value(el))
	}
	if err != nil {
		return meas, fmt.Errorf("%s: %w", meas.Key(), err)
	}
	meas.Stat, meas.Verified = summarize(meas.Values), check != nil
	m.progress(&meas)
	return meas, nil
}

// syncCopy measures synchronous copies of size bytes from src to dst.
func (m *meter) syncCopy(family, path, dir string, dst, src *Buffer, size int64, reps int, unit string) (Measurement, error) {
	meas := Measurement{Family: family, Path: path, Direction: dir, SizeBytes: size, Repetitions: reps, Unit: unit}
	value := func(el time.Duration) float64 { return gbps(size*int64(reps), el.Seconds()) }
	if unit == UnitUs {
		value = func(el time.Duration) float64 { return el.Seconds() * 1e6 / float64(reps) }
	}
	warmup := min(m.o.Warmup, 2)
	if unit == UnitUs {
		warmup = 16
	}
	before := func() error { return errors.Join(m.fill(src, m.src, size), m.fill(dst, m.dst, size)) }
	check := func() error { return m.verify(dst, m.src, size) }
	return m.hostTimed(meas, warmup, func() error { return m.d.Copy(dst, src, size) }, value, before, check)
}
