package fabric

import (
	"math"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestWeightedSharing shares one 10 GB/s link between a flow that crosses
// it alone (short route) and one that comes from afar over two more links
// with latency (long route). Plain max-min gives them equal halves; LV08's
// weighted sharing gives each a share inversely proportional to its
// penalty, the route's latency plus weight-S over each link's bandwidth
// (SimGrid's NetworkCm02Model::communicate), so the short route gets more.
func TestWeightedSharing(t *testing.T) {
	const S = 20537
	for _, tc := range []struct {
		name    string
		weightS float64
	}{{"plain", 0}, {"lv08", S}} {
		t.Run(tc.name, func(t *testing.T) {
			eng := sim.New(1)
			fab := New(eng, Factors{WeightS: tc.weightS})
			a, b, c, d := fab.Node("a"), fab.Node("b"), fab.Node("c"), fab.Node("d")
			fab.Connect("shared", a, b, 10e9, 1*us, FullDuplex)
			fab.Connect("far1", c, d, 100e9, 5*us, FullDuplex)
			fab.Connect("far2", d, a, 100e9, 5*us, FullDuplex)
			short, err := fab.Route(a, b)
			if err != nil {
				t.Fatal(err)
			}
			long, err := fab.Route(c, b)
			if err != nil {
				t.Fatal(err)
			}
			// Start the short flow later, so that both become active at
			// once, at 11 µs.
			var fs *Flow
			fl := fab.Start("long", long, 1e9)
			eng.At(10*us, func() { fs = fab.Start("short", short, 1e9) })
			checked(t, fab)
			eng.RunUntil(12 * us)
			if fl.Rate() == 0 || fs.Rate() == 0 {
				t.Fatalf("rates %g, %g: both should be transferring", fl.Rate(), fs.Rate())
			}
			var wantShort, wantLong float64
			if tc.weightS == 0 {
				wantShort, wantLong = 5e9, 5e9
			} else {
				pShort := 1e-6 + S/10e9
				pLong := 11e-6 + S/10e9 + 2*S/100e9
				wShort, wLong := 1/pShort, 1/pLong
				wantShort, wantLong = 10e9*wShort/(wShort+wLong), 10e9*wLong/(wShort+wLong)
				if !(wantShort > 1.5*wantLong) {
					t.Fatalf("test set-up: short share %g not well above long %g", wantShort, wantLong)
				}
			}
			for _, x := range []struct {
				fl   *Flow
				want float64
			}{{fs, wantShort}, {fl, wantLong}} {
				if math.Abs(x.fl.Rate()-x.want) > 1e-9*x.want {
					t.Errorf("%s: rate %g, want %g", x.fl.Name(), x.fl.Rate(), x.want)
				}
			}
		})
	}
}
