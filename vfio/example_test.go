package vfio_test

import (
	"fmt"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/vfio"
)

// A user-space driver takes nvme2 from the kernel, maps 2 MiB of its
// own memory for the device's DMA through a container, and unmaps it:
// the pinned memory counts against its RLIMIT_MEMLOCK meanwhile.
func ExampleVFIO_MapDMA() {
	spec, _ := platform.Parse("vfio-test.yaml", []byte(testPlatform))
	sys, err := dmalab.BootSpec(spec, dmalab.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sys.Close()
	v, _ := sys.VFIO()
	p, _ := sys.Kernel.NewProcess("udrv", 0)
	p.Spawn("", func(t *sim.Proc) {
		// echo nvme2 > /sys/bus/pci/devices/nvme2/driver/unbind, then
		// echo vfio-pci > .../driver_override and bind.
		_ = v.Unbind(t, "nvme2")
		_ = v.SetDriverOverride("nvme2", vfio.DriverVFIOPCI)
		_ = v.Bind(t, "nvme2", vfio.DriverVFIOPCI)
		g, _ := v.IOMMUGroup("nvme2")

		cfd, _ := v.Open(t, p, vfio.ContainerPath)
		gfd, _ := v.Open(t, p, fmt.Sprintf("/dev/vfio/%d", g))
		st, _ := v.GroupGetStatus(p, gfd)
		fmt.Printf("group %d viable: %v\n", g, st&vfio.GroupFlagsViable != 0)
		_ = v.GroupSetContainer(t, p, gfd, cfd)
		_ = v.SetIOMMU(t, p, cfd, vfio.Type1v2IOMMU)

		buf, _ := sys.Mem.Vmalloc(0, 2<<20)
		_ = p.MM.Map(kernel.VMA{Start: buf, Size: 2 << 20, Name: "anon"})
		err := v.MapDMA(t, p, cfd, vfio.DMAMap{Flags: vfio.DMAMapFlagRead | vfio.DMAMapFlagWrite, VAddr: buf, IOVA: 0x100000, Size: 2 << 20})
		fmt.Printf("MAP_DMA: %v, %d KiB locked\n", err, p.LockedVM()>>10)
		n, _ := v.UnmapDMA(t, p, cfd, vfio.DMAUnmap{IOVA: 0x100000, Size: 2 << 20})
		fmt.Printf("UNMAP_DMA: %d KiB, %d KiB locked\n", n>>10, p.LockedVM()>>10)
	})
	sys.Engine.Run()
	// Output:
	// group 1 viable: true
	// MAP_DMA: <nil>, 2048 KiB locked
	// UNMAP_DMA: 2048 KiB, 0 KiB locked
}
