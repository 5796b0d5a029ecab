package scenario

import (
	"runtime"
	"testing"
)

// BenchmarkDefaultRun is "dmalab run" with no arguments, minus printing.
// Goal (issue 2): under a second.
func BenchmarkDefaultRun(b *testing.B) {
	s, err := Lookup(Default)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Run(s, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/run")
}

// BenchmarkSweepBytes runs the same sweep shape moving 1 MiB or 1 TiB per
// copy: time and memory must not depend on bytes moved (flows, not
// packets). Compare the allocs/op and B/op of the two.
func BenchmarkSweepBytes(b *testing.B) {
	s, err := Lookup("transfers")
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []string{"1MiB", "1TiB"} {
		b.Run(size, func(b *testing.B) {
			opt := Options{Platform: "2s-4gpu-pcie", Sets: []string{"sizes=" + size}}
			b.ReportAllocs()
			var ms runtime.MemStats
			for b.Loop() {
				if _, err := Run(s, opt); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		})
	}
}
