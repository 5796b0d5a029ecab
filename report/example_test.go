package report_test

import (
	"os"

	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

// A trace streamed to its writer as events come: a GPU's copy engine
// with one copy, the PCIe link's load while it ran, and the run's
// parameters as metadata when it is closed.
func ExampleNewTraceTo() {
	t := report.NewTraceTo(os.Stdout, "dmalab example on h200-pcie")
	link := t.Machine().Counter("rc0 → gpu0 (PCIe Gen5 x16)", "bytes/s")
	gpu := t.Process("gpu0 (GPU, PCIe Gen5 x16 below rc0)")
	us := sim.Microsecond
	link.Set(0, 55.5e9)
	link.Set(19*us, 0)
	gpu.Thread("gpu0.ce0").Slice("transfer", "h2d 1 MiB", 0, 19*us, report.Arg{Key: "bytes", Value: 1 << 20})
	t.SetMeta(report.TraceMeta{Scenario: "example", Platform: "h200-pcie", Params: map[string]string{"seed": "1"}})
	if err := t.Close(); err != nil {
		panic(err)
	}
	// Output:
	// {"displayTimeUnit":"ns","traceEvents":[
	// {"ph":"M","pid":1,"tid":0,"name":"process_name","args":{"name":"dmalab example on h200-pcie"}},
	// {"ph":"M","pid":1,"tid":0,"name":"process_sort_index","args":{"sort_index":1}},
	// {"ph":"M","pid":2,"tid":0,"name":"process_name","args":{"name":"gpu0 (GPU, PCIe Gen5 x16 below rc0)"}},
	// {"ph":"M","pid":2,"tid":0,"name":"process_sort_index","args":{"sort_index":2}},
	// {"ph":"C","pid":1,"tid":0,"name":"rc0 → gpu0 (PCIe Gen5 x16)","ts":0,"args":{"bytes/s":5.55e+10}},
	// {"ph":"C","pid":1,"tid":0,"name":"rc0 → gpu0 (PCIe Gen5 x16)","ts":19,"args":{"bytes/s":0}},
	// {"ph":"M","pid":2,"tid":1,"name":"thread_name","args":{"name":"gpu0.ce0"}},
	// {"ph":"M","pid":2,"tid":1,"name":"thread_sort_index","args":{"sort_index":1}},
	// {"ph":"X","cat":"transfer","pid":2,"tid":1,"name":"h2d 1 MiB","ts":0,"dur":19,"args":{"bytes":1048576}}
	// ],"metadata":{"scenario":"example","platform":"h200-pcie","params":{"seed":"1"},"version":""}}
}
