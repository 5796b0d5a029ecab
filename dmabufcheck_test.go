package dmalab

import (
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check/dmabufcheck"
	"github.com/dmalab/dmalab/dmabuf"
)

// TestSystemDMABufCheck: a checking system watches its DMA-BUF layer
// and finishes the checker when the run ends. A program that waits for
// a fence nobody signals never finishes, and the end of the run names
// the fence and the program; one that signals a fence twice is told at
// once; one that signals it once hears nothing.
func TestSystemDMABufCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		prog     func(p *Process, f *dmabuf.Fence) error
		finished bool
		code     string
		words    []string
	}{
		{"signalled once", func(p *Process, f *dmabuf.Fence) error {
			if err := f.Signal(p.Thread); err != nil {
				return err
			}
			return f.Wait(p.Thread)
		}, true, "", nil},
		{"signalled twice", func(p *Process, f *dmabuf.Fence) error {
			_ = f.Signal(p.Thread)
			_ = f.Signal(p.Thread)
			return nil
		}, true, dmabufcheck.FenceDoubleSignal, []string{"already signalled at 0s by display"}},
		{"never signalled", func(p *Process, f *dmabuf.Fence) error {
			return f.Wait(p.Thread)
		}, false, dmabufcheck.FenceNeverSignal, []string{"drm:crtc0 1:1 never signalled", "waited on by display from 0s, still blocked"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys, err := Boot("jetson-orin", Options{Check: true})
			if err != nil {
				t.Fatal(err)
			}
			defer sys.Close()
			l := sys.DMABuf()
			f := l.NewFence("drm", "crtc0", l.ContextAlloc(1), 1)
			err = sys.Run("display", func(p *Process) error { return tc.prog(p, f) })
			if tc.finished != (err == nil) {
				t.Fatalf("run: %v", err)
			}
			var got []string
			for _, d := range sys.Diagnostics() {
				got = append(got, d.String())
				if d.Class != tc.code {
					t.Errorf("unexpected %s", d)
					continue
				}
				for _, w := range tc.words {
					if !strings.Contains(d.String(), w) {
						t.Errorf("%s lacks %q", d, w)
					}
				}
			}
			want := 1
			if tc.code == "" {
				want = 0
			}
			if len(got) != want {
				t.Errorf("diagnostics %q, want %d of %s", got, want, tc.code)
			}
		})
	}
}
