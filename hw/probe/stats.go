package probe

import (
	"math"
	"slices"
)

// Stat summarises the samples of one measurement.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// summarize returns the median (mean of the middle two for an even count),
// minimum and maximum of xs.
func summarize(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Stat{Median: med, Min: s[0], Max: s[n-1]}
}

// gbps converts bytes moved in d seconds to GB/s (10^9 bytes per second, as
// nvbandwidth counts).
func gbps(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return math.Inf(1)
	}
	return float64(bytes) / seconds / 1e9
}
