package v4l2

import (
	"bytes"
	"testing"
)

// TestAdjust: S_FMT's rules: sizes rounded to the format's blocks and
// clamped, strides aligned, sizeimage from the stride, an unknown
// fourcc replaced by the driver's first.
func TestAdjust(t *testing.T) {
	all := []PixFmt{PixFmtSRGGB10P, PixFmtSRGGB12P, PixFmtSRGGB10, PixFmtSRGGB12, PixFmtNV12}
	vi := Limits{MinWidth: 32, MinHeight: 32, MaxWidth: 8192, MaxHeight: 8192, StrideAlign: 64}
	for _, tc := range []struct {
		name string
		in   Format
		lim  Limits
		want Format
	}{
		{"1080p RAW10 packed", Format{Width: 1920, Height: 1080, PixelFormat: PixFmtSRGGB10P}, Limits{},
			Format{1920, 1080, PixFmtSRGGB10P, 2400, 2400 * 1080}},
		{"1080p RAW10 packed, VI stride", Format{Width: 1920, Height: 1080, PixelFormat: PixFmtSRGGB10P}, vi,
			Format{1920, 1080, PixFmtSRGGB10P, 2432, 2432 * 1080}},
		{"4K RAW12 packed", Format{Width: 3840, Height: 2160, PixelFormat: PixFmtSRGGB12P}, vi,
			Format{3840, 2160, PixFmtSRGGB12P, 5760, 5760 * 2160}},
		{"RAW12 in 16 bits", Format{Width: 1920, Height: 1080, PixelFormat: PixFmtSRGGB12}, vi,
			Format{1920, 1080, PixFmtSRGGB12, 3840, 3840 * 1080}},
		{"NV12", Format{Width: 1920, Height: 1080, PixelFormat: PixFmtNV12}, vi,
			Format{1920, 1080, PixFmtNV12, 1920, 1920 * 1080 * 3 / 2}},
		{"odd size rounded down", Format{Width: 1923, Height: 1081, PixelFormat: PixFmtSRGGB10P}, Limits{},
			Format{1920, 1080, PixFmtSRGGB10P, 2400, 2400 * 1080}},
		{"clamped", Format{Width: 10000, Height: 8, PixelFormat: PixFmtNV12}, vi,
			Format{8192, 32, PixFmtNV12, 8192, 8192 * 32 * 3 / 2}},
		{"larger stride kept", Format{Width: 64, Height: 32, PixelFormat: PixFmtSRGGB10, BytesPerLine: 200}, vi,
			Format{64, 32, PixFmtSRGGB10, 256, 256 * 32}},
		{"unknown fourcc", Format{Width: 64, Height: 32, PixelFormat: fourcc('Y', 'U', 'Y', 'V')}, Limits{},
			Format{64, 32, PixFmtSRGGB10P, 80, 80 * 32}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Adjust(tc.in, all, tc.lim); got != tc.want {
				t.Errorf("Adjust(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// TestPackedRoundTrip: every raw format stores and reads back each
// sample exactly, and Process is a pure function of its input.
func TestPackedRoundTrip(t *testing.T) {
	for _, pf := range []PixFmt{PixFmtSRGGB10P, PixFmtSRGGB12P, PixFmtSRGGB10, PixFmtSRGGB12} {
		f := Adjust(Format{Width: 64, Height: 32, PixelFormat: pf}, []PixFmt{pf}, Limits{StrideAlign: 64})
		info := formats[pf]
		raw := Pattern(f, 5)
		for y := range f.Height {
			for x := range f.Width {
				if got, want := getRaw(raw[y*f.BytesPerLine:], info, x), Sample(info.bits, 5, x, y); got != want {
					t.Fatalf("%v (%d,%d) = %d, want %d", pf, x, y, got, want)
				}
			}
		}
		out := Adjust(Format{Width: 64, Height: 32, PixelFormat: PixFmtNV12}, []PixFmt{PixFmtNV12}, Limits{})
		a, err := Process(f, raw, out)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Process(f, raw, out)
		if !bytes.Equal(a, b) || a[1] != byte(Sample(info.bits, 5, 1, 0)>>(info.bits-8)) {
			t.Errorf("%v: Process not deterministic or Y wrong: %d", pf, a[1])
		}
		if bytes.Equal(Pattern(f, 5), Pattern(f, 6)) {
			t.Errorf("%v: frames 5 and 6 have the same pattern", pf)
		}
	}
}
