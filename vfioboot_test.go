package dmalab

import (
	"testing"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/vfio"
)

// TestBootVFIO: with a translating IOMMU the system has a VFIO layer with
// every device bound to its kernel driver by kind and GPUs to nvidia, and
// HookAll sees its events.
func TestBootVFIO(t *testing.T) {
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	if spec, err = platform.Set(spec, "iommu.mode", platform.IOMMUStrict); err != nil {
		t.Fatal(err)
	}
	sys, err := BootSpec(spec, Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	v, err := sys.VFIO()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"gpu0": "nvidia", "nic0": "nic"} {
		if d, err := v.Driver(name); d != want || err != nil {
			t.Errorf("%s bound to %q (%v), want %s", name, d, err, want)
		}
	}
	var binds int
	sys.HookAll(func(e sim.Event) {
		if ve, ok := e.(*vfio.Event); ok && ve.Op == vfio.OpBind {
			binds++
		}
	})
	sys.Engine.Spawn("admin", func(p *sim.Proc) {
		if err := v.Unbind(p, "nic0"); err != nil {
			t.Error(err)
		}
		if err := v.DriversProbe(p, "nic0"); err != nil {
			t.Error(err)
		}
	})
	sys.Engine.Run()
	if binds != 1 {
		t.Errorf("HookAll saw %d binds, want 1", binds)
	}
}
