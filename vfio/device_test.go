package vfio_test

import (
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/vfio"
)

// openDevice gives nvme2 to vfio-pci and opens its device file through
// the legacy interface.
func (r *rig) openDevice(th *sim.Proc) int {
	r.assign(th, "nvme2")
	_, gfd := r.legacy(th, 1)
	return r.must(r.v.GroupGetDeviceFD(th, r.p, gfd, "nvme2"))
}

// TestRegions: the device's info and regions, mmap of BAR0 reaching the
// function's registers at the function's cost, and what cannot be
// mapped.
func TestRegions(t *testing.T) {
	r := newRig(t)
	f := r.fns["nvme2"]
	r.run(func(th *sim.Proc) {
		dfd := r.openDevice(th)
		info, err := r.v.DeviceGetInfo(r.p, dfd)
		if err != nil || info.Flags != vfio.DeviceFlagsPCI|vfio.DeviceFlagsReset || info.NumRegions != 9 || info.NumIRQs != 5 {
			t.Errorf("info %+v, %v", info, err)
		}
		rw := uint32(vfio.RegionInfoFlagRead | vfio.RegionInfoFlagWrite)
		for _, c := range []struct {
			index int
			size  uint64
			flags uint32
			err   syscall.Errno
		}{
			{0, 16 << 10, rw | vfio.RegionInfoFlagMmap, 0},
			{1, 0, 0, 0},
			{2, 256, rw, 0},
			{vfio.PCIConfigRegionIndex, 4096, rw, 0},
			{vfio.PCIROMRegionIndex, 0, 0, 0},
			{vfio.PCINumRegions, 0, 0, syscall.EINVAL},
		} {
			ri, err := r.v.DeviceGetRegionInfo(r.p, dfd, c.index)
			wantErrno(t, "region info", err, c.err)
			if err == nil && (ri.Size != c.size || ri.Flags != c.flags || ri.Offset != uint64(c.index)<<40) {
				t.Errorf("region %d: %+v, want size %#x flags %#x", c.index, ri, c.size, c.flags)
			}
		}
		for _, c := range []struct {
			what           string
			offset, length uint64
		}{
			{"BAR2 below a page", vfio.RegionOffset(2), 4096},
			{"BAR1 not implemented", vfio.RegionOffset(1), 4096},
			{"config space", vfio.RegionOffset(vfio.PCIConfigRegionIndex), 4096},
			{"past BAR0's end", vfio.RegionOffset(0) + 8192, 16 << 10},
			{"misaligned", vfio.RegionOffset(0) + 100, 4096},
		} {
			_, err := r.v.Mmap(th, r.p, dfd, c.offset, c.length)
			wantErrno(t, "mmap "+c.what, err, syscall.EINVAL)
		}
		bar, err := r.v.Mmap(th, r.p, dfd, vfio.RegionOffset(0)+4096, 8192)
		if err != nil {
			t.Fatal(err)
		}
		if vma, ok := r.p.MM.Find(bar.Addr()); !ok || vma.Size != 8192 {
			t.Errorf("no 8 KiB VMA at %v: %+v", bar.Addr(), vma)
		}
		t0 := th.Now()
		wantErrno(t, "store", bar.WriteReg(th, 0x14, 4, 0x460001), 0)
		if f.regs[4096+0x14] != 0x460001 {
			t.Errorf("the store did not reach BAR0+0x1014: %v", f.regs)
		}
		v, err := bar.ReadReg(th, 0x14, 4)
		if v != 0x460001 || err != nil {
			t.Errorf("load %#x, %v", v, err)
		}
		if d := th.Now() - t0; d != regWrite+regRead {
			t.Errorf("a store and a load cost %v, want the function's %v", d, regWrite+regRead)
		}
		_, err = bar.ReadReg(th, 8192, 4)
		wantErrno(t, "load past the mapping", err, syscall.EFAULT)
		wantErrno(t, "munmap", r.v.Munmap(th, r.p, bar.Addr()), 0)
		_, err = bar.ReadReg(th, 0x14, 4)
		wantErrno(t, "load after munmap", err, syscall.EFAULT)
		t0 = th.Now()
		wantErrno(t, "reset", r.v.DeviceReset(th, r.p, dfd), 0)
		if f.resets != 1 || th.Now()-t0 != flrTime {
			t.Errorf("reset: %d resets in %v, want 1 in %v", f.resets, th.Now()-t0, flrTime)
		}
	})
}

// TestIRQ: an MSI-X vector routed to an eventfd wakes the thread
// reading it at the interrupt's time plus the wake-up; errors of
// VFIO_DEVICE_SET_IRQS; disabling unroutes every vector.
func TestIRQ(t *testing.T) {
	r := newRig(t)
	f := r.fns["nvme2"]
	const raiseAt = 50 * sim.Microsecond
	var woke sim.Time
	var count uint64
	r.run(func(th *sim.Proc) {
		dfd := r.openDevice(th)
		efd, ev, err := r.p.Eventfd(0)
		if err != nil {
			t.Fatal(err)
		}
		trig := uint32(vfio.IRQSetDataEventFD | vfio.IRQSetActionTrigger)
		for _, c := range []struct {
			what string
			set  vfio.IRQSet
			want syscall.Errno
		}{
			{"INTx", vfio.IRQSet{Flags: trig, Index: vfio.PCIINTxIRQIndex, Count: 1, FDs: []int{efd}}, syscall.EINVAL},
			{"past the vectors", vfio.IRQSet{Flags: trig, Index: vfio.PCIMSIXIRQIndex, Start: 3, Count: 2, FDs: []int{efd, efd}}, syscall.EINVAL},
			{"mask", vfio.IRQSet{Flags: vfio.IRQSetDataNone | vfio.IRQSetActionMask, Index: vfio.PCIMSIXIRQIndex, Count: 1}, syscall.EINVAL},
			{"not an eventfd", vfio.IRQSet{Flags: trig, Index: vfio.PCIMSIXIRQIndex, Count: 1, FDs: []int{dfd}}, syscall.EINVAL},
			{"bad fd", vfio.IRQSet{Flags: trig, Index: vfio.PCIMSIXIRQIndex, Count: 1, FDs: []int{77}}, syscall.EBADF},
			{"vector 1", vfio.IRQSet{Flags: trig, Index: vfio.PCIMSIXIRQIndex, Start: 1, Count: 1, FDs: []int{efd}}, 0},
		} {
			wantErrno(t, "set irqs "+c.what, r.v.DeviceSetIRQs(th, r.p, dfd, c.set), c.want)
		}
		// The device raises vector 1 from its own thread later.
		r.sys.Engine.Spawn("nvme2.irq", func(dt *sim.Proc) {
			dt.Sleep(raiseAt - dt.Now())
			f.raise(dt, 1)
		})
		count = ev.Read(th)
		woke = th.Now()
		wantErrno(t, "disable", r.v.DeviceSetIRQs(th, r.p, dfd, vfio.IRQSet{Flags: vfio.IRQSetDataNone | vfio.IRQSetActionTrigger, Index: vfio.PCIMSIXIRQIndex}), 0)
		if len(f.irq) != 0 {
			t.Errorf("%d vectors still routed after disable", len(f.irq))
		}
	})
	if count != 1 || woke != raiseAt+kernel.EventFDWakeup {
		t.Errorf("read %d at %v, want 1 at %v", count, woke, raiseAt+kernel.EventFDWakeup)
	}
}
