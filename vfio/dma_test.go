package vfio_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/check/iommucheck"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/vfio"
)

// TestDeviceDMA: through either interface, a device's write to an IOVA
// the user mapped lands in the user's buffer; a write to one never
// mapped faults, changes no byte, and is vfio-dma-unmapped with the user
// process and its map call; correct use reports nothing.
func TestDeviceDMA(t *testing.T) {
	for _, path := range []string{"legacy", "iommufd"} {
		t.Run(path, func(t *testing.T) {
			r := newRig(t)
			f := r.fns["nvme2"]
			payload := bytes.Repeat([]byte("dmalab!!"), 512)
			var buf mem.VirtAddr
			var iova mem.DMAAddr
			r.run(func(th *sim.Proc) {
				r.assign(th, "nvme2")
				buf = r.malloc(64 << 10)
				switch path {
				case "legacy":
					cfd, gfd := r.legacy(th, 1)
					iova = 0x100000
					err := r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: vfio.DMAMapFlagRead | vfio.DMAMapFlagWrite, VAddr: buf, IOVA: iova, Size: 64 << 10})
					if err != nil {
						t.Fatal(err)
					}
					r.must(r.v.GroupGetDeviceFD(th, r.p, gfd, "nvme2"))
				case "iommufd":
					ifd := r.must(r.v.Open(th, r.p, vfio.IOMMUFDPath))
					id, err := r.v.IOASAlloc(th, r.p, ifd)
					if err != nil {
						t.Fatal(err)
					}
					if iova, err = r.v.IOASMapCall(th, r.p, ifd, vfio.IOASMap{Flags: vfio.IOASMapReadable | vfio.IOASMapWriteable, IOASID: id, UserVA: buf, Length: 64 << 10}); err != nil {
						t.Fatal(err)
					}
					cdev, _ := r.v.DeviceCdev("nvme2")
					dfd := r.must(r.v.Open(th, r.p, cdev))
					if _, err := r.v.DeviceBindIOMMUFD(th, r.p, dfd, ifd); err != nil {
						t.Fatal(err)
					}
					if _, err := r.v.DeviceAttachIOMMUFDPT(th, r.p, dfd, id); err != nil {
						t.Fatal(err)
					}
				}
				if err := f.write(th, iova+0x1000, payload); err != nil {
					t.Errorf("write to a mapped IOVA: %v", err)
				}
				got := make([]byte, len(payload))
				r.sys.Mem.ReadBytes(th, 0, buf+0x1000, got)
				if !bytes.Equal(got, payload) {
					t.Errorf("the device's bytes did not land: %q...", got[:16])
				}
				before := versions(t, r, buf, 64<<10)
				err := f.write(th, 0x40000000, payload)
				if !errors.Is(err, iommu.ErrFault) {
					t.Errorf("write to an IOVA never mapped: %v, want a translation fault", err)
				}
				if after := versions(t, r, buf, 64<<10); !slices.Equal(after, before) {
					t.Errorf("a blocked write changed the buffer: version %v -> %v", before, after)
				}
			})
			ds := r.sys.Diagnostics()
			if len(ds) != 1 || ds[0].Class != iommucheck.VFIOUnmapped {
				t.Fatalf("diagnostics %v, want one %s", ds, iommucheck.VFIOUnmapped)
			}
			d := ds[0]
			wantCall := map[string]string{"legacy": "VFIO_IOMMU_MAP_DMA(container1", "iommufd": "IOMMU_IOAS_MAP(iommufd1 ioas 1"}[path]
			if d.Proc != "udrv" || d.Device != "nvme2" || !strings.Contains(d.Origin, wantCall) || !strings.Contains(d.Message, "never mapped") {
				t.Errorf("diagnostic %+v: want process udrv, device nvme2, origin %s", d, wantCall)
			}
		})
	}
}

// versions are the latest versions of each physical piece of the
// user buffer [va, va+size).
func versions(t *testing.T, r *rig, va mem.VirtAddr, size uint64) []mem.Version {
	t.Helper()
	ranges, _, _, err := r.sys.Mem.Translate(va, size)
	if err != nil {
		t.Fatal(err)
	}
	var vs []mem.Version
	for _, pr := range ranges {
		vs = append(vs, r.sys.Mem.LatestIn(pr.Start, pr.Size))
	}
	return vs
}

// TestIOMMUFDErrnos: each iommufd call's errors, and pinning deferred
// to the first attach, where RLIMIT_MEMLOCK then applies.
func TestIOMMUFDErrnos(t *testing.T) {
	r := newRig(t)
	r.run(func(th *sim.Proc) {
		r.assign(th, "nvme0", "nvme2")
		buf := r.malloc(16 << 20)
		ifd := r.must(r.v.Open(th, r.p, vfio.IOMMUFDPath))
		id, err := r.v.IOASAlloc(th, r.p, ifd)
		if err != nil {
			t.Fatal(err)
		}
		cdev, _ := r.v.DeviceCdev("nvme2")
		dfd := r.must(r.v.Open(th, r.p, cdev))
		cdev0, _ := r.v.DeviceCdev("nvme0")
		dfd0 := r.must(r.v.Open(th, r.p, cdev0))
		rw := uint32(vfio.IOASMapReadable | vfio.IOASMapWriteable)
		fixed := rw | vfio.IOASMapFixedIOVA
		mapc := func(m vfio.IOASMap) func() error {
			return func() error { _, err := r.v.IOASMapCall(th, r.p, ifd, m); return err }
		}
		steps := []struct {
			what string
			do   func() error
			want syscall.Errno
		}{
			{"map: unknown flags", mapc(vfio.IOASMap{Flags: rw | 1<<5, IOASID: id, UserVA: buf, Length: 4096}), syscall.EOPNOTSUPP},
			{"map: no permission", mapc(vfio.IOASMap{IOASID: id, UserVA: buf, Length: 4096}), syscall.EINVAL},
			{"map: unknown IOAS", mapc(vfio.IOASMap{Flags: rw, IOASID: 77, UserVA: buf, Length: 4096}), syscall.ENOENT},
			{"map: length 0", mapc(vfio.IOASMap{Flags: rw, IOASID: id, UserVA: buf}), syscall.EINVAL},
			{"map 12 MiB, no domain yet", mapc(vfio.IOASMap{Flags: fixed, IOASID: id, UserVA: buf, Length: 12 << 20, IOVA: 0}), 0},
			{"map: fixed overlap", mapc(vfio.IOASMap{Flags: fixed, IOASID: id, UserVA: buf, Length: 4096, IOVA: 4 << 20}), syscall.EEXIST},
			{"map: fixed misaligned", mapc(vfio.IOASMap{Flags: fixed, IOASID: id, UserVA: buf, Length: 4096, IOVA: 64<<20 + 100}), syscall.EINVAL},
			{"ioctl before bind", func() error { _, err := r.v.DeviceGetInfo(r.p, dfd); return err }, syscall.EINVAL},
			{"attach before bind", func() error { _, err := r.v.DeviceAttachIOMMUFDPT(th, r.p, dfd, id); return err }, syscall.EINVAL},
			{"bind to a device file", func() error { _, err := r.v.DeviceBindIOMMUFD(th, r.p, dfd, dfd0); return err }, syscall.EBADFD},
			{"bind", func() error { _, err := r.v.DeviceBindIOMMUFD(th, r.p, dfd, ifd); return err }, 0},
			{"bind twice", func() error { _, err := r.v.DeviceBindIOMMUFD(th, r.p, dfd, ifd); return err }, syscall.EINVAL},
			{"bind nvme0, nvme1 still on nvme", func() error { _, err := r.v.DeviceBindIOMMUFD(th, r.p, dfd0, ifd); return err }, syscall.EPERM},
			{"attach to an unknown id", func() error { _, err := r.v.DeviceAttachIOMMUFDPT(th, r.p, dfd, 99); return err }, syscall.ENOENT},
			{"attach: 12 MiB pinned past the 8 MiB limit", func() error { _, err := r.v.DeviceAttachIOMMUFDPT(th, r.p, dfd, id); return err }, syscall.ENOMEM},
		}
		for _, s := range steps {
			wantErrno(t, s.what, s.do(), s.want)
		}
		if r.p.LockedVM() != 0 {
			t.Errorf("a failed attach left %d bytes locked", r.p.LockedVM())
		}
		wantErrno(t, "setrlimit", r.p.SetMemlockLimit(64<<20), 0)
		if _, err := r.v.DeviceAttachIOMMUFDPT(th, r.p, dfd, id); err != nil {
			t.Fatal(err)
		}
		if r.p.LockedVM() != 12<<20 {
			t.Errorf("locked %d after attach, want 12 MiB", r.p.LockedVM())
		}
		iova, err := r.v.IOASMapCall(th, r.p, ifd, vfio.IOASMap{Flags: rw, IOASID: id, UserVA: buf + 12<<20, Length: 2 << 20})
		if err != nil || iova != 12<<20 {
			t.Errorf("kernel-chosen IOVA %v, %v; want the lowest free 2 MiB-aligned one, dma:0xc00000", iova, err)
		}
		unmap := func(iova mem.DMAAddr, n uint64) (uint64, error) {
			return r.v.IOASUnmapCall(th, r.p, ifd, vfio.IOASUnmap{IOASID: id, IOVA: iova, Length: n})
		}
		_, err = unmap(0, 4096)
		wantErrno(t, "unmap: cuts an area", err, syscall.ENOENT)
		_, err = unmap(1<<30, 4096)
		wantErrno(t, "unmap: nothing there", err, syscall.ENOENT)
		_, err = unmap(0, 0)
		wantErrno(t, "unmap: length 0", err, syscall.EINVAL)
		if n, err := unmap(0, ^uint64(0)); n != 14<<20 || err != nil {
			t.Errorf("unmap all: %#x, %v; want 14 MiB", n, err)
		}
		if r.p.LockedVM() != 0 {
			t.Errorf("locked %d after unmap all", r.p.LockedVM())
		}
	})
}

// TestRelease: the process's exit closes everything: mappings unpinned,
// the user domain gone, the devices back in their default domain and
// still bound to vfio-pci, their vectors masked, and reset.
func TestRelease(t *testing.T) {
	for _, path := range []string{"legacy", "iommufd"} {
		t.Run(path, func(t *testing.T) {
			r := newRig(t)
			dev, _ := r.sys.Device("nvme2")
			def := dev.Translator()
			f := r.fns["nvme2"]
			r.run(func(th *sim.Proc) {
				r.assign(th, "nvme2")
				buf := r.malloc(1 << 20)
				var dfd int
				switch path {
				case "legacy":
					cfd, gfd := r.legacy(th, 1)
					wantErrno(t, "map", r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: vfio.DMAMapFlagRead, VAddr: buf, IOVA: 0, Size: 1 << 20}), 0)
					dfd = r.must(r.v.GroupGetDeviceFD(th, r.p, gfd, "nvme2"))
				case "iommufd":
					ifd := r.must(r.v.Open(th, r.p, vfio.IOMMUFDPath))
					id, _ := r.v.IOASAlloc(th, r.p, ifd)
					_, err := r.v.IOASMapCall(th, r.p, ifd, vfio.IOASMap{Flags: vfio.IOASMapReadable, IOASID: id, UserVA: buf, Length: 1 << 20})
					wantErrno(t, "map", err, 0)
					cdev, _ := r.v.DeviceCdev("nvme2")
					dfd = r.must(r.v.Open(th, r.p, cdev))
					_, err = r.v.DeviceBindIOMMUFD(th, r.p, dfd, ifd)
					wantErrno(t, "bind", err, 0)
					_, err = r.v.DeviceAttachIOMMUFDPT(th, r.p, dfd, id)
					wantErrno(t, "attach", err, 0)
				}
				efd, _, err := r.p.Eventfd(0)
				if err != nil {
					t.Fatal(err)
				}
				wantErrno(t, "set irqs", r.v.DeviceSetIRQs(th, r.p, dfd, vfio.IRQSet{Flags: vfio.IRQSetDataEventFD | vfio.IRQSetActionTrigger, Index: vfio.PCIMSIXIRQIndex, Count: 1, FDs: []int{efd}}), 0)
				if _, err := r.v.Mmap(th, r.p, dfd, vfio.RegionOffset(0), 4096); err != nil {
					t.Fatal(err)
				}
				if dev.Translator() == def || r.p.LockedVM() != 1<<20 || len(f.irq) != 1 {
					t.Fatalf("before exit: translator %s, locked %d, %d vectors", dev.Translator().Name(), r.p.LockedVM(), len(f.irq))
				}
				wantErrno(t, "unbind while open", r.v.Unbind(th, "nvme2"), syscall.EBUSY)
				wantErrno(t, "exit", r.p.Exit(th), 0)
			})
			if dev.Translator() != def {
				t.Errorf("after exit nvme2 is translated by %s, want its default domain %s", dev.Translator().Name(), def.Name())
			}
			if d, _ := r.v.Driver("nvme2"); d != vfio.DriverVFIOPCI {
				t.Errorf("after exit bound to %q, want vfio-pci", d)
			}
			if r.p.LockedVM() != 0 || len(f.irq) != 0 || f.resets != 1 {
				t.Errorf("after exit: locked %d, %d vectors routed, %d resets; want 0, 0, 1", r.p.LockedVM(), len(f.irq), f.resets)
			}
		})
	}
}

// TestUnmapInvalidatesInLazyMode: the kernel's lazy flush queue is for
// its own DMA domains; VFIO_IOMMU_UNMAP_DMA invalidates before it
// returns, so a device write after it faults instead of going through
// a stale IOTLB entry, and reports the use after unmap.
func TestUnmapInvalidatesInLazyMode(t *testing.T) {
	r := newRigMode(t, "lazy")
	f := r.fns["nvme2"]
	r.run(func(th *sim.Proc) {
		r.assign(th, "nvme2")
		cfd, _ := r.legacy(th, 1)
		buf := r.malloc(4096)
		wantErrno(t, "map", r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: vfio.DMAMapFlagWrite, VAddr: buf, IOVA: 0x100000, Size: 4096}), 0)
		if err := f.write(th, 0x100000, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		t0 := th.Now()
		if _, err := r.v.UnmapDMA(th, r.p, cfd, vfio.DMAUnmap{IOVA: 0x100000, Size: 4096}); err != nil {
			t.Fatal(err)
		}
		if d := th.Now() - t0; d < r.v.Unit().Params().InvalidateCost {
			t.Errorf("unmap took %v, less than one synchronous invalidation", d)
		}
		if err := f.write(th, 0x100000, make([]byte, 64)); !errors.Is(err, iommu.ErrFault) {
			t.Errorf("write after unmap: %v, want a fault", err)
		}
	})
	if s := r.v.Unit().Stats(); s.StaleHits != 0 || s.Faults != 1 {
		t.Errorf("unit stats %+v, want no stale hit and one fault", s)
	}
	if c := r.classes(); c["iommu-fault"] != 1 || len(c) != 1 {
		t.Errorf("diagnostics %v, want one iommu-fault", r.sys.Diagnostics())
	}
}
