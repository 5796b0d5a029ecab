package gpu

import (
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// BenchmarkStreamWork is the cost of stream work in the model: each
// iteration enqueues a kernel on one stream and a copy on another and
// waits for both. The goal is that it does not grow with bytes: the
// copy is 1 GiB and the kernel reads 4 GiB, each one flow.
func BenchmarkStreamWork(b *testing.B) {
	r := h200(b)
	host := r.hostBuf(1<<30, 0)
	b.ReportAllocs()
	r.m.Engine.Spawn("app", func(p *sim.Proc) {
		dev := r.alloc(p, r.d, 2<<30)
		k, c := r.d.NewStream(0), r.d.NewStream(0)
		kern := Kernel{Name: "k", Accesses: []Access{{Addr: dev, Size: 1 << 30, Bytes: 4 << 30}}, Compute: 50 * sim.Microsecond}
		for b.Loop() {
			if err := k.Launch(p, kern); err != nil {
				b.Error(err)
				return
			}
			if err := c.Memcpy(p, dev+1<<30, host, 1<<30); err != nil {
				b.Error(err)
				return
			}
			r.d.Synchronize(p)
		}
	})
	r.m.Engine.Run()
	b.ReportMetric(float64(r.m.Engine.Fired())/float64(b.N), "events/op")
}
