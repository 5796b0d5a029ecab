package platform

import (
	"math"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Bytes
		err  string
	}{
		{"141 GiB", 141 << 30, ""},
		{"80 GB", 80e9, ""},
		{"64KiB", 64 << 10, ""},
		{"4096", 4096, ""},
		{"4096 B", 4096, ""},
		{"1.5 KiB", 1536, ""},
		{"143771 MiB", 143771 << 20, ""},
		{"8 PiB", 8 << 50, ""},
		{"-2 KB", -2000, ""},
		{"12 GiX", 0, `bad size "12 GiX": unknown unit "GiX" (want ` + sizeUnitList + `)`},
		{"1.5 B", 0, `bad size "1.5 B": not a whole number of bytes`},
		{"1e3 B", 0, `bad size "1e3 B": unknown unit "e3 B" (want ` + sizeUnitList + `)`},
		{"GiB", 0, `bad size "GiB": want a number and a unit (` + sizeUnitList + `)`},
		{"9 EiB", 0, `bad size "9 EiB": unknown unit "EiB" (want ` + sizeUnitList + `)`},
		{"8192 PiB", 0, `bad size "8192 PiB": too large`},
		{"", 0, `bad size "": want a number and a unit (` + sizeUnitList + `)`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBytes(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %d, %v; want %d", got, err, tc.want)
			}
			back, err := ParseBytes(got.String())
			if err != nil || back != got {
				t.Errorf("String %q reads back as %d, %v", got.String(), back, err)
			}
		})
	}
}

func TestBytesString(t *testing.T) {
	for _, tc := range []struct {
		b    Bytes
		want string
	}{
		{0, "0"},
		{1, "1"},
		{1000, "1 KB"},
		{1001, "1001"},
		{1024, "1 KiB"},
		{143771 << 20, "143771 MiB"},
		{80e9, "80 GB"},
		{256 << 30, "256 GiB"},
		{1 << 40, "1 TiB"},
		{-(3 << 20), "-3 MiB"},
		{math.MinInt64, "-8192 PiB"},
	} {
		if got := tc.b.String(); got != tc.want {
			t.Errorf("Bytes(%d).String() = %q, want %q", int64(tc.b), got, tc.want)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rate
		err  string
	}{
		{"55.5 GB/s", 55.5e9, ""},
		{"4.8 TB/s", 4.8e12, ""},
		{"400 Gb/s", 50e9, ""},
		{"100 Gbps", 12.5e9, ""},
		{"1 Mbps", 125e3, ""},
		{"12 GiB/s", 12 << 30, ""},
		{"250e6", 250e6, ""},
		{"1e9 B/s", 1e9, ""},
		{"0.1 GB/s", 1e8, ""},
		{"2.5e-3 GB/s", 2.5e6, ""},
		{"55.5 GX/s", 0, `bad rate "55.5 GX/s": unknown unit "GX/s" (want ` + rateUnitList + `)`},
		{"Inf", 0, `bad rate "Inf": want a number and a unit (` + rateUnitList + `)`},
		{"1e400 B/s", 0, `bad rate "1e400 B/s": out of range`},
		{"1e99999999999 B/s", 0, `bad rate "1e99999999999 B/s": exponent out of range`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRate(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %v, %v; want %v", float64(got), err, float64(tc.want))
			}
		})
	}
}

func TestRateString(t *testing.T) {
	for _, tc := range []struct {
		r    Rate
		want string
	}{
		{0, "0"},
		{55.5e9, "55.5 GB/s"},
		{4.8e12, "4.8 TB/s"},
		{4384e9, "4.384 TB/s"},
		{50e9, "50 GB/s"},
		{125e3, "125 KB/s"},
		{999, "999 B/s"},
		{0.5, "0.5"},
		{1e30, "1e+30"},
		{-55.5e9, "-55.5 GB/s"},
		{32e9 * 16 * 128 / 130 / 8, "63.01538461538461 GB/s"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("Rate(%v).String() = %q, want %q", float64(tc.r), got, tc.want)
		}
		if back, err := ParseRate(tc.r.String()); err != nil || back != tc.r {
			t.Errorf("Rate(%v).String() reads back as %v, %v", float64(tc.r), float64(back), err)
		}
	}
}

// Every float64 that String writes must read back identically.
func FuzzRateString(f *testing.F) {
	for _, v := range []float64{55.5e9, 63015384615.38461, 1e-300, 5e-324, 1.7976931348623157e308, 123456789.123456789} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		s := Rate(v).String()
		back, err := ParseRate(s)
		if err != nil || float64(back) != v {
			t.Fatalf("Rate(%v).String() = %q reads back as %v, %v", v, s, float64(back), err)
		}
	})
}
