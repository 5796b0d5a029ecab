package probe

import (
	"errors"
	"testing"
	"time"
)

func umOpts() Options {
	return Options{Sizes: []int64{4 << 20}, SmallSizes: []int64{8}, Families: []string{FamilyLatency, FamilyUnified}}
}

func TestLatencyFollowsTheFormula(t *testing.T) {
	f := NewFake(FakeConfig{HostLoad: 1234 * time.Nanosecond, DeviceLoad: 567 * time.Nanosecond})
	rep, err := run(t, f, umOpts())
	if err != nil {
		t.Fatal(err)
	}
	g := &rep.GPUs[0]
	if m := one(t, g, FamilyLatency, "mapped", H2D, 0); m.Median != 1234 || !m.Verified || m.StrideBytes == 0 {
		t.Errorf("mapped chase %+v", m)
	}
	if m := one(t, g, FamilyLatency, "device", "", 0); m.Median != 567 {
		t.Errorf("device chase %+v", m)
	}
}

func TestUnifiedFollowsTheFormula(t *testing.T) {
	f := NewFake(FakeConfig{})
	rep, err := run(t, f, umOpts())
	if err != nil {
		t.Fatal(err)
	}
	g := &rep.GPUs[0]
	c := f.Config()
	size := int64(4 << 20)
	// MethodEvents: the first event runs as it is queued, the operation
	// only once the host has queued it, so one enqueue cost is included.
	chunk := float64(umChunk) / (c.MigrateGBps * 1e9)

	pf := one(t, g, FamilyUnified, PathManagedPrefetch, H2D, size)
	if w := float64(size) / (c.EnqueueCost.Seconds() + c.CopyLatency.Seconds() + float64(size)/(c.PrefetchGBps*1e9)) / 1e9; !near(pf.Median, w, 1e-4) {
		t.Errorf("prefetch h2d %g GB/s, formula %g", pf.Median, w)
	}
	for _, op := range []string{"read", "write"} {
		var m Measurement
		for _, x := range g.Find(FamilyUnified, PathManagedFault, H2D) {
			if x.Operation == op {
				m = x
			}
		}
		chunks := float64(size / umChunk)
		faults := chunks // one faulting touch per 64 KiB chunk at a 4 KiB stride
		w := float64(size) / (c.EnqueueCost.Seconds() + c.LaunchLatency.Seconds() + chunks*chunk + float64((int64(faults)+255)/256)*c.GPUFault.Seconds()) / 1e9
		if !near(m.Median, w, 1e-4) || !m.Verified {
			t.Errorf("fault migration %s: %g GB/s, formula %g", op, m.Median, w)
		}
	}
	var lat []Measurement
	for _, x := range g.Find(FamilyUnified, PathManagedFault, H2D) {
		if x.Operation == "single_thread_read" {
			lat = append(lat, x)
		}
	}
	if len(lat) != 2 { // 4 KiB and 64 KiB strides; 2 MiB is over a quarter of 4 MiB
		t.Fatalf("fault latency measurements: %d", len(lat))
	}
	for _, m := range lat {
		if w := (c.GPUFault.Seconds() + chunk) * 1e6; !near(m.Median, w, 1e-3) {
			t.Errorf("stride %d: per-fault %g us, formula %g", m.StrideBytes, m.Median, w)
		}
		if len(m.Blocks) != 2 {
			t.Fatalf("stride %d: %d blocks", m.StrideBytes, len(m.Blocks))
		}
		// The fake migrates 64 KiB per fault: at a 4 KiB stride every
		// 16th touch faults, at 64 KiB every touch.
		step := int(umChunk / m.StrideBytes)
		for _, b := range m.Blocks {
			for i, k := range b.SlowTouches {
				if k != i*step {
					t.Fatalf("stride %d block %d: slow touches %v", m.StrideBytes, b.Block, b.SlowTouches)
				}
			}
		}
	}
	back := one(t, g, FamilyUnified, PathManagedCPUFault, D2H, size)
	pages := float64(size / umPage)
	if w := float64(size) / (pages * (c.CPUFault.Seconds() + float64(umPage)/(c.CPUMigrateGBps*1e9))) / 1e9; !near(back.Median, w, 1e-3) {
		t.Errorf("cpu fault-back %g GB/s, formula %g", back.Median, w)
	}
	ft := one(t, g, FamilyUnified, PathManagedCPUFault, "", size)
	if w := float64(size) / (pages * c.FirstTouch.Seconds()) / 1e9; !near(ft.Median, w, 1e-3) || ft.Operation != "first_touch" {
		t.Errorf("first touch %+v, formula %g", ft, w)
	}
	rm := one(t, g, FamilyUnified, PathManagedRemote, H2D, size)
	if w := float64(size) / (c.EnqueueCost.Seconds() + c.LaunchLatency.Seconds() + float64(size)/(c.RemoteGBps*1e9)) / 1e9; !near(rm.Median, w, 1e-4) {
		t.Errorf("remote %g GB/s, formula %g", rm.Median, w)
	}
}

func TestUnifiedStaysWithinFreeMemory(t *testing.T) {
	f := NewFake(FakeConfig{TotalMemory: 24 << 20})
	opts := umOpts()
	opts.Sizes = []int64{64 << 20}
	opts.Families = []string{FamilyUnified}
	rep, err := run(t, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.GPUs[0].Measurements {
		if m.SizeBytes > 24<<20/4 {
			t.Errorf("%s uses %d B of managed memory on a 24 MiB GPU", m.Key(), m.SizeBytes)
		}
	}
	f = NewFake(FakeConfig{TotalMemory: 4 << 20})
	if _, err := run(t, f, opts); err == nil {
		t.Error("unified memory measured on a GPU with 4 MiB")
	}
}

func TestUnifiedRemoteCorruptionIsCaught(t *testing.T) {
	f := NewFake(FakeConfig{Corrupt: func(op string) bool { return op == "CopyKernel" }})
	opts := umOpts()
	opts.Families = []string{FamilyUnified}
	_, err := run(t, f, opts)
	if !errors.Is(err, ErrVerify) {
		t.Fatalf("Run = %v, want ErrVerify", err)
	}
}

func TestChaseDetectsABrokenChain(t *testing.T) {
	f := NewFake(FakeConfig{})
	err := f.WithDevice(0, func(d Device) error {
		m := &meter{ctx: t.Context(), d: d, o: Options{Samples: 3}}
		b, err := d.Alloc(MemMapped, 1<<20)
		if err != nil {
			return err
		}
		defer d.Free(b)
		// A chain that leaves the buffer fails; Chase reports it.
		if _, _, err := d.Chase(b, b.DevAddr, 3); err == nil {
			return errors.New("chase through zeros succeeded")
		}
		_, err = m.chase(b, 1<<20, 100)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
