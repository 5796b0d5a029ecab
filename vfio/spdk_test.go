package vfio_test

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/nvme"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/spdk"
	"github.com/dmalab/dmalab/vfio"
)

// TestSPDKThroughVFIO: the NVMe controller model given to a user-space
// driver through iommufd: the process maps its buffer, mmaps BAR0, and
// the SPDK-style driver brings the controller up through the mapping
// and writes and reads back a block, every DMA through the IOAS's
// domain; the checker finds nothing.
func TestSPDKThroughVFIO(t *testing.T) {
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	if spec, err = platform.Set(spec, "iommu.mode", platform.IOMMUStrict); err != nil {
		t.Fatal(err)
	}
	sys, err := dmalab.BootSpec(spec, dmalab.Options{Check: true, Payload: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	v, _ := sys.VFIO()
	ctrl, err := nvme.New(sys.Machine, sys.Mem, sys.DMA, "nvme0", nvme.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.AddFunction(ctrl); err != nil {
		t.Fatal(err)
	}
	p, _ := sys.Kernel.NewProcess("spdk", 0)
	if err := p.SetMemlockLimit(64 << 20); err != nil {
		t.Fatal(err)
	}
	var got, want []byte
	p.Spawn("", func(th *sim.Proc) {
		g, _ := v.IOMMUGroup("nvme0")
		members, _ := v.GroupDevices(g)
		for _, n := range members {
			for _, err := range []error{v.Unbind(th, n), v.SetDriverOverride(n, vfio.DriverVFIOPCI), v.Bind(th, n, vfio.DriverVFIOPCI)} {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		ifd, _ := v.Open(th, p, vfio.IOMMUFDPath)
		ioas, _ := v.IOASAlloc(th, p, ifd)
		const size = 4 << 20
		va, err := sys.Mem.Vmalloc(0, size)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.MM.Map(kernel.VMA{Start: va, Size: size, Name: "hugepages"}); err != nil {
			t.Fatal(err)
		}
		iova, err := v.IOASMapCall(th, p, ifd, vfio.IOASMap{Flags: vfio.IOASMapReadable | vfio.IOASMapWriteable, IOASID: ioas, UserVA: va, Length: size})
		if err != nil {
			t.Fatal(err)
		}
		cdev, _ := v.DeviceCdev("nvme0")
		dfd, _ := v.Open(th, p, cdev)
		if _, err := v.DeviceBindIOMMUFD(th, p, dfd, ifd); err != nil {
			t.Fatal(err)
		}
		if _, err := v.DeviceAttachIOMMUFDPT(th, p, dfd, ioas); err != nil {
			t.Fatal(err)
		}
		ri, _ := v.DeviceGetRegionInfo(p, dfd, vfio.PCIBAR0RegionIndex)
		bar, err := v.Mmap(th, p, dfd, ri.Offset, ri.Size)
		if err != nil {
			t.Fatal(err)
		}
		dm := &spdk.Memory{Mem: sys.Mem, Node: 0, VA: va, IOVA: iova, Size: size}
		c, err := spdk.Probe(th, bar, dm, spdk.Options{})
		if err != nil {
			t.Fatal(err)
		}
		q, err := c.AllocIOQPair(th, 32, 0)
		if err != nil {
			t.Fatal(err)
		}
		wb, _ := dm.Alloc(4096, 4096)
		rb, _ := dm.Alloc(4096, 4096)
		want = bytes.Repeat([]byte("vfio"), 1024)
		if err := dm.Write(th, wb, 0, want); err != nil {
			t.Fatal(err)
		}
		done := 0
		nlb := int(4096 / c.BlockSize())
		if err := q.Write(th, 8, nlb, wb, func(nvme.Completion) { done++ }); err != nil {
			t.Fatal(err)
		}
		for done < 1 {
			q.Process(th, 0)
			th.Sleep(sim.Microsecond)
		}
		if err := q.Read(th, 8, nlb, rb, func(nvme.Completion) { done++ }); err != nil {
			t.Fatal(err)
		}
		for done < 2 {
			q.Process(th, 0)
			th.Sleep(sim.Microsecond)
		}
		got, _ = dm.Read(th, rb, 0, 4096)
		if err := c.Shutdown(th); err != nil {
			t.Error(err)
		}
		if err := p.Exit(th); err != nil {
			t.Error(err)
		}
	})
	sys.Engine.Run()
	if b := sys.Engine.Blocked(); len(b) > 0 {
		t.Fatalf("blocked: %v", b)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("read back %q..., want %q...", got[:8], want[:8])
	}
	if d := sys.Diagnostics(); len(d) != 0 {
		t.Errorf("diagnostics: %v", d)
	}
	if u := v.Unit().Stats(); u.Faults != 0 {
		t.Errorf("%d IOMMU faults", u.Faults)
	}
}
