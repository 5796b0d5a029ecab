package vfio_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/vfio"
)

// TestBind: devices boot bound to their kernel driver; vfio-pci binds
// only through driver_override, a bound device takes no second driver,
// and a vfio-pci device gets a cdev and its group a node.
func TestBind(t *testing.T) {
	r := newRig(t)
	r.run(func(th *sim.Proc) {
		if d, _ := r.v.Driver("nvme2"); d != "nvme" {
			t.Errorf("nvme2 boots bound to %q, want nvme", d)
		}
		steps := []struct {
			what string
			do   func() error
			want syscall.Errno
		}{
			{"bind while bound", func() error { return r.v.Bind(th, "nvme2", vfio.DriverVFIOPCI) }, syscall.ENODEV},
			{"unbind", func() error { return r.v.Unbind(th, "nvme2") }, 0},
			{"unbind again", func() error { return r.v.Unbind(th, "nvme2") }, syscall.ENODEV},
			{"vfio-pci without override", func() error { return r.v.Bind(th, "nvme2", vfio.DriverVFIOPCI) }, syscall.ENODEV},
			{"unknown driver", func() error { return r.v.Bind(th, "nvme2", "e1000e") }, syscall.ENOENT},
			{"open group before vfio-pci", func() error { _, err := r.v.Open(th, r.p, "/dev/vfio/1"); return err }, syscall.ENOENT},
			{"override", func() error { return r.v.SetDriverOverride("nvme2", vfio.DriverVFIOPCI) }, 0},
			{"own driver against the override", func() error { return r.v.Bind(th, "nvme2", "nvme") }, syscall.ENODEV},
			{"vfio-pci with override", func() error { return r.v.Bind(th, "nvme2", vfio.DriverVFIOPCI) }, 0},
			{"unknown device", func() error { return r.v.Unbind(th, "nvme9") }, syscall.ENODEV},
		}
		for _, s := range steps {
			wantErrno(t, s.what, s.do(), s.want)
		}
		cdev, err := r.v.DeviceCdev("nvme2")
		if err != nil || cdev != "/dev/vfio/devices/vfio0" {
			t.Errorf("cdev %q, %v; want /dev/vfio/devices/vfio0", cdev, err)
		}
		if g, _ := r.v.IOMMUGroup("nvme2"); g != 1 {
			t.Errorf("nvme2 in group %d, want 1", g)
		}
		fd, err := r.v.Open(th, r.p, "/dev/vfio/1")
		wantErrno(t, "open group", err, 0)
		_, err = r.v.Open(th, r.p, "/dev/vfio/1")
		wantErrno(t, "open group twice", err, syscall.EBUSY)
		wantErrno(t, "close group", r.p.Close(th, fd), 0)
		// Back to the kernel driver: clear the override, probe.
		wantErrno(t, "unbind vfio-pci", r.v.Unbind(th, "nvme2"), 0)
		wantErrno(t, "clear override", r.v.SetDriverOverride("nvme2", ""), 0)
		wantErrno(t, "drivers_probe", r.v.DriversProbe(th, "nvme2"), 0)
		if d, _ := r.v.Driver("nvme2"); d != "nvme" {
			t.Errorf("after drivers_probe bound to %q, want nvme", d)
		}
		if _, err := r.v.DeviceCdev("nvme2"); err == nil {
			t.Error("a device bound to nvme has a VFIO cdev")
		}
	})
}

// TestUnbindReportsLeaks: unbinding a kernel driver that left IOVA
// mappings in the default domain is the iova-leak the IOMMU pack
// reports; a clean unbind reports nothing.
func TestUnbindReportsLeaks(t *testing.T) {
	r := newRig(t)
	r.run(func(th *sim.Proc) {
		dev, _ := r.sys.Device("nvme2")
		buf, err := r.sys.Mem.Kmalloc(0, 4096)
		if err != nil {
			t.Fatal(err)
		}
		dev.MapSingle(th, buf, 4096, dma.FromDevice)
		r.assign(th, "nvme2")
	})
	if n := r.classes()["iova-leak"]; n != 1 {
		t.Errorf("%d iova-leak diagnostics, want 1: %v", n, r.sys.Diagnostics())
	}
	clean := newRig(t)
	clean.run(func(th *sim.Proc) { clean.assign(th, "nvme2") })
	if d := clean.sys.Diagnostics(); len(d) != 0 {
		t.Errorf("clean unbind: %v", d)
	}
}

// TestViability: nvme0 and nvme1 share group 0 (a switch without ACS).
// With only nvme0 given to vfio-pci the group is not viable and joining
// a container is EPERM (iommu_group_claim_dma_owner); with both it
// works, and the kernel driver cannot come back while user space owns
// the group (EBUSY).
func TestViability(t *testing.T) {
	r := newRig(t)
	r.run(func(th *sim.Proc) {
		r.assign(th, "nvme0")
		cfd := r.must(r.v.Open(th, r.p, vfio.ContainerPath))
		gfd := r.must(r.v.Open(th, r.p, "/dev/vfio/0"))
		st, err := r.v.GroupGetStatus(r.p, gfd)
		if err != nil || st != 0 {
			t.Errorf("status with nvme1 on nvme: %#x, %v; want 0", st, err)
		}
		err = r.v.GroupSetContainer(th, r.p, gfd, cfd)
		wantErrno(t, "set container of a group half bound to nvme", err, syscall.EPERM)
		if err != nil && !strings.Contains(err.Error(), "nvme1 (nvme)") {
			t.Errorf("message does not name the device in the way: %v", err)
		}
		r.assign(th, "nvme1")
		if st, _ := r.v.GroupGetStatus(r.p, gfd); st != vfio.GroupFlagsViable {
			t.Errorf("status with both on vfio-pci: %#x, want viable", st)
		}
		wantErrno(t, "set container", r.v.GroupSetContainer(th, r.p, gfd, cfd), 0)
		if st, _ := r.v.GroupGetStatus(r.p, gfd); st != vfio.GroupFlagsViable|vfio.GroupFlagsContainerSet {
			t.Errorf("status after set container: %#x", st)
		}
		wantErrno(t, "unbind nvme1 (not open)", r.v.Unbind(th, "nvme1"), 0)
		wantErrno(t, "clear override", r.v.SetDriverOverride("nvme1", ""), 0)
		wantErrno(t, "nvme into an owned group", r.v.Bind(th, "nvme1", "nvme"), syscall.EBUSY)
		// Every device of the group now sits in the blocking domain.
		dev, _ := r.sys.Device("nvme0")
		if tr, ok := dev.Translator().(*iommu.Translator); !ok || tr.Domain().TablePages() != 1 {
			t.Errorf("nvme0 translated by %s, want an empty (blocking) domain", dev.Translator().Name())
		}
	})
}

// TestContainerErrnos: each legacy call's errors, as the kernel returns
// them.
func TestContainerErrnos(t *testing.T) {
	r := newRig(t)
	r.run(func(th *sim.Proc) {
		r.assign(th, "nvme0", "nvme1", "nvme2")
		buf := r.malloc(1 << 20)
		cfd := r.must(r.v.Open(th, r.p, vfio.ContainerPath))
		gfd := r.must(r.v.Open(th, r.p, "/dev/vfio/0"))
		g1 := r.must(r.v.Open(th, r.p, "/dev/vfio/1"))
		if v, err := r.v.GetAPIVersion(r.p, cfd); v != vfio.APIVersion || err != nil {
			t.Errorf("api version %d, %v", v, err)
		}
		for ext, want := range map[int]int{vfio.Type1v2IOMMU: 1, vfio.UnmapAllExtension: 1, vfio.Type1IOMMU: 0, 7: 0} {
			if got, _ := r.v.CheckExtension(r.p, cfd, ext); got != want {
				t.Errorf("check extension %d: %d, want %d", ext, got, want)
			}
		}
		rw := uint32(vfio.DMAMapFlagRead | vfio.DMAMapFlagWrite)
		steps := []struct {
			what string
			do   func() error
			want syscall.Errno
		}{
			{"set iommu without a group", func() error { return r.v.SetIOMMU(th, r.p, cfd, vfio.Type1v2IOMMU) }, syscall.EINVAL},
			{"map without iommu", func() error {
				return r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf, IOVA: 1 << 20, Size: 4096})
			}, syscall.EINVAL},
			{"set container: not a container", func() error { return r.v.GroupSetContainer(th, r.p, gfd, g1) }, syscall.EBADFD},
			{"set container: bad fd", func() error { return r.v.GroupSetContainer(th, r.p, gfd, 99) }, syscall.EBADF},
			{"device fd without container", func() error { _, err := r.v.GroupGetDeviceFD(th, r.p, gfd, "nvme0"); return err }, syscall.EINVAL},
			{"set container", func() error { return r.v.GroupSetContainer(th, r.p, gfd, cfd) }, 0},
			{"set container twice", func() error { return r.v.GroupSetContainer(th, r.p, gfd, cfd) }, syscall.EINVAL},
			{"device fd before set iommu", func() error { _, err := r.v.GroupGetDeviceFD(th, r.p, gfd, "nvme0"); return err }, syscall.EINVAL},
			{"set iommu type1 (v1)", func() error { return r.v.SetIOMMU(th, r.p, cfd, vfio.Type1IOMMU) }, syscall.ENODEV},
			{"set iommu", func() error { return r.v.SetIOMMU(th, r.p, cfd, vfio.Type1v2IOMMU) }, 0},
			{"set iommu twice", func() error { return r.v.SetIOMMU(th, r.p, cfd, vfio.Type1v2IOMMU) }, syscall.EINVAL},
			{"device of another group", func() error { _, err := r.v.GroupGetDeviceFD(th, r.p, gfd, "nvme2"); return err }, syscall.ENODEV},
			{"group ioctl on a container", func() error { _, err := r.v.GroupGetStatus(r.p, cfd); return err }, syscall.ENOTTY},
			{"map: no permission", func() error { return r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{VAddr: buf, IOVA: 1 << 20, Size: 4096}) }, syscall.EINVAL},
			{"map: size 0", func() error { return r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf, IOVA: 1 << 20}) }, syscall.EINVAL},
			{"map: misaligned iova", func() error {
				return r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf, IOVA: 1<<20 + 512, Size: 4096})
			}, syscall.EINVAL},
			{"map: misaligned vaddr", func() error {
				return r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf + 8, IOVA: 1 << 20, Size: 4096})
			}, syscall.EINVAL},
			{"map: wraps", func() error {
				return r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf, IOVA: 1<<64 - 4096, Size: 8192})
			}, syscall.EOVERFLOW},
			{"map: beyond the aperture", func() error {
				return r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf, IOVA: 1 << 48, Size: 4096})
			}, syscall.EINVAL},
			{"map: memory not mapped in the process", func() error {
				return r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf + 1<<20, IOVA: 1 << 20, Size: 4096})
			}, syscall.EFAULT},
			{"map", func() error {
				return r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf, IOVA: 1 << 20, Size: 64 << 10})
			}, 0},
			{"map: overlap", func() error {
				return r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf, IOVA: 1<<20 + 32<<10, Size: 64 << 10})
			}, syscall.EEXIST},
			{"unmap: size 0", func() error { _, err := r.v.UnmapDMA(th, r.p, cfd, vfio.DMAUnmap{IOVA: 1 << 20}); return err }, syscall.EINVAL},
			{"unmap: cuts a mapping", func() error {
				_, err := r.v.UnmapDMA(th, r.p, cfd, vfio.DMAUnmap{IOVA: 1 << 20, Size: 4096})
				return err
			}, syscall.EINVAL},
			{"unmap all with a range", func() error {
				_, err := r.v.UnmapDMA(th, r.p, cfd, vfio.DMAUnmap{Flags: vfio.DMAUnmapFlagAll, Size: 4096})
				return err
			}, syscall.EINVAL},
		}
		for _, s := range steps {
			wantErrno(t, s.what, s.do(), s.want)
		}
		if n, err := r.v.UnmapDMA(th, r.p, cfd, vfio.DMAUnmap{IOVA: 1 << 30, Size: 1 << 20}); n != 0 || err != nil {
			t.Errorf("unmap of nothing: %d, %v; want 0, nil", n, err)
		}
		if n, err := r.v.UnmapDMA(th, r.p, cfd, vfio.DMAUnmap{Flags: vfio.DMAUnmapFlagAll}); n != 64<<10 || err != nil {
			t.Errorf("unmap all: %d, %v; want 64 KiB", n, err)
		}
	})
}

// TestMemlock: pinning counts against RLIMIT_MEMLOCK (8 MiB by
// default): up to it maps, past it is ENOMEM with nothing pinned, and
// unmap and exit give it back.
func TestMemlock(t *testing.T) {
	r := newRig(t)
	if r.p.MemlockLimit() != 8<<20 {
		t.Fatalf("default RLIMIT_MEMLOCK %d, want 8 MiB", r.p.MemlockLimit())
	}
	rw := uint32(vfio.DMAMapFlagRead | vfio.DMAMapFlagWrite)
	var pinTime sim.Time
	r.run(func(th *sim.Proc) {
		r.assign(th, "nvme2")
		cfd, _ := r.legacy(th, 1)
		buf := r.malloc(16 << 20)
		t0 := th.Now()
		wantErrno(t, "map 8 MiB", r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf, IOVA: 0, Size: 8 << 20}), 0)
		pinTime = th.Now() - t0
		if r.p.LockedVM() != 8<<20 {
			t.Errorf("locked %d after 8 MiB, want 8 MiB", r.p.LockedVM())
		}
		wantErrno(t, "one page more", r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf + 8<<20, IOVA: 8 << 20, Size: 4096}), syscall.ENOMEM)
		if r.p.LockedVM() != 8<<20 {
			t.Errorf("a failed map left locked %d", r.p.LockedVM())
		}
		if n, err := r.v.UnmapDMA(th, r.p, cfd, vfio.DMAUnmap{IOVA: 0, Size: 8 << 20}); n != 8<<20 || err != nil {
			t.Errorf("unmap: %d, %v", n, err)
		}
		if r.p.LockedVM() != 0 {
			t.Errorf("locked %d after unmap, want 0", r.p.LockedVM())
		}
		wantErrno(t, "setrlimit 16 MiB", r.p.SetMemlockLimit(16<<20), 0)
		wantErrno(t, "map 16 MiB", r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: rw, VAddr: buf, IOVA: 0, Size: 16 << 20}), 0)
		wantErrno(t, "exit", r.p.Exit(th), 0)
		if r.p.LockedVM() != 0 {
			t.Errorf("locked %d after exit, want 0", r.p.LockedVM())
		}
	})
	if want := sim.Time(2048) * vfio.DefaultPinCost; pinTime < want {
		t.Errorf("pinning 8 MiB took %v, want at least %v (2048 pages)", pinTime, want)
	}
}

// TestNoIOMMU: a platform whose IOMMU does not translate has no VFIO.
func TestNoIOMMU(t *testing.T) {
	for _, mode := range []string{platform.IOMMUOff, platform.IOMMUPassthrough} {
		spec, err := platform.Parse("vfio-test.yaml", []byte(testPlatform))
		if err != nil {
			t.Fatal(err)
		}
		if spec, err = platform.Set(spec, "iommu.mode", mode); err != nil {
			t.Fatal(err)
		}
		sys, err := dmalab.BootSpec(spec, dmalab.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if v, err := sys.VFIO(); v != nil || !strings.Contains(err.Error(), mode) || !errorsIs(err, vfio.ErrNoIOMMU) {
			t.Errorf("mode %s: %v, %v; want ErrNoIOMMU naming the mode", mode, v, err)
		}
		sys.Close()
	}
}
