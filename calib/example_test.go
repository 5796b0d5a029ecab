package calib_test

import (
	"fmt"

	"github.com/dmalab/dmalab/calib"
	"github.com/dmalab/dmalab/hw/probe"
	"github.com/dmalab/dmalab/platform"
)

// A row's name, its class, and how a calibrated platform's source names
// the row it was solved from.
func ExampleRowID() {
	m := probe.Measurement{Family: probe.FamilyCE, Path: "pinned", Direction: probe.H2D, SizeBytes: 1 << 30, Unit: probe.UnitGBps}
	fmt.Println(calib.RowID(0, &m), "|", calib.ClassOf(&m))

	spec, _ := platform.Preset("h200-pcie")
	spec, _ = platform.Set(spec, "gpus.gpu0.link.efficiency.source",
		`"calibrated from run.json (2026-11-21, vm, NVIDIA H200, driver 580.159.04) row [gpu0 ce_copy pinned h2d 1GiB]: 55.56 GB/s"`)
	fmt.Println(calib.CalibrationRows(spec, "/data/run.json"))
	// Output:
	// gpu0 ce_copy pinned h2d 1GiB | bandwidth
	// map[gpu0 ce_copy pinned h2d 1GiB:true]
}
