package drm

import (
	"fmt"
	"math/bits"
	"syscall"

	"github.com/dmalab/dmalab/sim"
)

// Mode is struct drm_mode_modeinfo: the visible size, the totals with
// blanking, and the pixel clock. The refresh rate follows from them
// (clock / (htotal × vtotal)), as drm_mode_vrefresh computes it.
type Mode struct {
	// Name is the mode's name ("3840x2160@60").
	Name string
	// HDisplay and VDisplay are the visible pixels and lines.
	HDisplay, VDisplay int
	// HTotal and VTotal include the blanking intervals.
	HTotal, VTotal int
	// ClockKHz is the pixel clock in kHz (drm_mode_modeinfo.clock).
	ClockKHz int
}

// CVT reduced-blanking constants of VESA's Coordinated Video Timings
// 1.2, §5.4 (the same names in drivers/gpu/drm/drm_modes.c's
// drm_cvt_mode).
const (
	cvtRBHBlank    = 160 // pixels of horizontal blanking
	cvtRBMinVBlank = 460 // µs of vertical blanking at least
	cvtRBVFPorch   = 3   // lines of front porch
	cvtRBMinVBPor  = 6   // lines of back porch at least
	cvtClockStepK  = 250 // kHz: the pixel clock's granule
)

// CVTRB is the CVT reduced-blanking (version 1) mode for width × height
// at refresh Hz, computed as VESA CVT 1.2 §5.4 does: 160 pixels of
// horizontal blanking, at least 460 µs of vertical blanking, the pixel
// clock rounded down to 0.25 MHz from refresh × htotal × vtotal. It
// gives the published timings: 1920x1080@60 is 2080 × 1111 at
// 138.5 MHz, 3840x2160@60 is 4000 × 2222 at 533.25 MHz (so 59.997 Hz).
// The vertical sync width depends on the aspect ratio (4 for 4:3, 5 for
// 16:9, 6 for 16:10, 7 for 5:4 and 15:9, 10 otherwise).
func CVTRB(width, height, refresh int) (Mode, error) {
	if width <= 0 || height <= 0 || refresh <= 0 || width%8 != 0 {
		return Mode{}, fmt.Errorf("cvt mode %dx%d@%d: width a positive multiple of 8, height and refresh positive: %w", width, height, refresh, syscall.EINVAL)
	}
	vsync := 10
	switch {
	case height*4/3 == width:
		vsync = 4
	case height*16/9 == width:
		vsync = 5
	case height*16/10 == width:
		vsync = 6
	case height*5/4 == width, height*15/9 == width:
		vsync = 7
	}
	// The line period in ns (×1000 of CVT's µs), as drm_cvt_mode's
	// HV_FACTOR integer arithmetic keeps it.
	hperiod := (1_000_000_000 - cvtRBMinVBlank*1000*refresh) / (height * refresh)
	if hperiod <= 0 {
		return Mode{}, fmt.Errorf("cvt mode %dx%d@%d: no time left for the visible lines: %w", width, height, refresh, syscall.EINVAL)
	}
	vbi := cvtRBMinVBlank*1000/hperiod + 1
	if min := cvtRBVFPorch + vsync + cvtRBMinVBPor; vbi < min {
		vbi = min
	}
	m := Mode{Name: fmt.Sprintf("%dx%d@%d", width, height, refresh), HDisplay: width, VDisplay: height,
		HTotal: width + cvtRBHBlank, VTotal: height + vbi}
	khz := int64(refresh) * int64(m.HTotal) * int64(m.VTotal) / 1000
	m.ClockKHz = int(khz - khz%cvtClockStepK)
	return m, m.validate()
}

func (m Mode) validate() error {
	if m.HDisplay <= 0 || m.VDisplay <= 0 || m.HTotal < m.HDisplay || m.VTotal <= m.VDisplay || m.ClockKHz <= 0 {
		return fmt.Errorf("mode %q: %dx%d in %dx%d at %d kHz: the totals must include a vertical blanking interval: %w",
			m.Name, m.HDisplay, m.VDisplay, m.HTotal, m.VTotal, m.ClockKHz, syscall.EINVAL)
	}
	return nil
}

// Refresh is the refresh rate in Hz: clock / (htotal × vtotal).
func (m Mode) Refresh() float64 {
	return float64(m.ClockKHz) * 1000 / float64(m.HTotal*m.VTotal)
}

// Period is one refresh: htotal × vtotal pixel clocks, rounded down to
// the picosecond. The vblank timeline does not accumulate the rounding:
// it places refresh k at FrameStart(k).
func (m Mode) Period() sim.Time { return m.lines(int64(m.VTotal)) }

// Active is the scanout of the visible lines: vdisplay × htotal pixel
// clocks. The vertical blanking interval is the rest of the period.
func (m Mode) Active() sim.Time { return m.lines(int64(m.VDisplay)) }

// FrameStart is when refresh k begins its first visible line, counted
// from the CRTC's enable (refresh 0): exactly k × htotal × vtotal pixel
// clocks, rounded down to the picosecond.
func (m Mode) FrameStart(k uint64) sim.Time { return m.lines(int64(k) * int64(m.VTotal)) }

// lines is the duration of n lines of htotal pixels.
func (m Mode) lines(n int64) sim.Time {
	hi, lo := bits.Mul64(uint64(n)*uint64(m.HTotal), uint64(sim.Second))
	q, _ := bits.Div64(hi, lo, uint64(m.ClockKHz)*1000)
	return sim.Time(q)
}
