package fabric_test

import (
	"fmt"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/sim"
)

// Two host-to-device copies share a PCIe Gen5 x16 link (55.5 GB/s
// measured per direction) while a device-to-host copy runs the other way
// at full rate; a CPU memcpy is capped at its thread's rate.
func Example() {
	eng := sim.New(1)
	fab := fabric.New(eng, fabric.Factors{})
	host, gpu := fab.Node("host"), fab.Node("gpu0")
	pcie := fab.Connect("pcie0", host, gpu, 55.5e9, 1*sim.Microsecond, fabric.FullDuplex)
	fab.Hooks.Hook(func(ev *fabric.Event) {
		if ev.Kind == fabric.FlowRate {
			fmt.Printf("%v: %s at %.2f GB/s\n", ev.Time, ev.Flow.Name(), ev.Rate/1e9)
		}
	})

	h2d, _ := fab.Route(host, gpu)
	d2h, _ := fab.Route(gpu, host)
	a := fab.Start("h2d-a", h2d, 1<<30)
	b := fab.Start("h2d-b", h2d, 1<<29)
	c := fab.Start("d2h", d2h, 1<<29)
	cpu := fab.Start("memcpy", fabric.Route{}, 1<<29, fabric.MaxRate(10e9))
	eng.Run()

	for _, fl := range []*fabric.Flow{a, b, c, cpu} {
		fmt.Printf("%s ended at %v\n", fl.Name(), fl.End())
	}
	st := pcie.Stats()
	fmt.Printf("pcie0 host→gpu: %.0f B, busy %v\n", st.Bytes[fabric.AtoB], st.Busy[fabric.AtoB])
	// Output:
	// 0s: memcpy at 10.00 GB/s
	// 1us: h2d-a at 27.75 GB/s
	// 1us: h2d-b at 27.75 GB/s
	// 1us: d2h at 55.50 GB/s
	// 19.347699532ms: h2d-a at 55.50 GB/s
	// h2d-a ended at 29.021049298ms
	// h2d-b ended at 19.347699532ms
	// d2h ended at 9.674349766ms
	// memcpy ended at 53.6870912ms
	// pcie0 host→gpu: 1610612736 B, busy 29.020049298ms
}
