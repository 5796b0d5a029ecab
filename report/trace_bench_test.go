package report

import (
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// BenchmarkTraceWrite feeds b.N synthetic events through a streaming
// trace to io.Discard: slices on engine tracks, counter changes, async
// transfers, as a run produces them. It reports the peak heap in use
// (sampled every 2^20 events) and the document's size per event, to show
// that memory does not grow with the trace. CI's -benchtime=1x writes one
// event; the measurement of 10 million is
//
//	go test -run '^$' -bench BenchmarkTraceWrite -benchtime=10000000x ./report
func BenchmarkTraceWrite(b *testing.B) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	cw := &countWriter{}
	t := NewTraceTo(cw, "bench")
	dev := t.Process("gpu0 (GPU)")
	var engines [3]*Track
	for i := range engines {
		engines[i] = dev.Thread(fmt.Sprintf("gpu0.ce%d", i))
	}
	links := [4]*Counter{}
	for i := range links {
		links[i] = t.Machine().Counter(fmt.Sprintf("link%d", i), "bytes/s")
	}
	us := sim.Microsecond
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		at := sim.Time(i) * us
		switch i % 4 {
		case 0, 1:
			engines[i%3].Slice("transfer", "copy", at, at+us, Arg{"bytes", int64(4096)}, Arg{"queue_us", sim.Time(0)})
		case 2:
			links[i%4].Set(at, float64(i%1000)*1e6)
		case 3:
			dev.Async("transfer", "gpu0 SMs", at, at+2*us, Arg{"transfer", "load"})
		}
		if i&(1<<20-1) == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	if err := t.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapInuse)
	b.ReportMetric(float64(peak), "peak-heap-B")
	b.ReportMetric(float64(peak-min(peak, base)), "heap-growth-B")
	b.ReportMetric(float64(cw.n)/float64(b.N), "trace-B/event")
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return io.Discard.Write(p) }
