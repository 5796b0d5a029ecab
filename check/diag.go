package check

import (
	"fmt"
	"strings"

	"github.com/dmalab/dmalab/sim"
)

// Diagnostic is one finding, with its provenance: when and by whom it was
// detected, on which device and buffer, and which call made the mapping
// it concerns.
type Diagnostic struct {
	// Class is the class code (UnmapSize, StaleRead, ...), Severity its
	// severity (Error, Warning).
	Class    string `json:"class"`
	Severity string `json:"severity"`
	// Time is the virtual time of the call or access that revealed it.
	Time sim.Time `json:"time_ps"`
	// Proc is the process (or, for a device access, the device) that made
	// that call or access.
	Proc string `json:"proc,omitempty"`
	// Device is the device whose mapping is concerned.
	Device string `json:"device"`
	// Buffer is the range concerned: "dma:0x1000 +1500" for bus
	// addresses, "pa:0x1000 +64" for physical ones.
	Buffer  string `json:"buffer,omitempty"`
	Message string `json:"message"`
	// Origin is the call that made the mapping concerned, with its time
	// and process: "dma_map_single(nic0, va:0x..., 1500,
	// DMA_FROM_DEVICE) at 12.3us by rx". Empty when no mapping is known.
	Origin string `json:"origin"`
}

// String is the diagnostic on one line, as `dmalab check` prints it.
func (d Diagnostic) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %s %s", d.Time, d.Severity, d.Class)
	if d.Device != "" {
		fmt.Fprintf(&b, " %s", d.Device)
	}
	if d.Proc != "" && d.Proc != d.Device {
		fmt.Fprintf(&b, " (%s)", d.Proc)
	}
	if d.Buffer != "" {
		fmt.Fprintf(&b, " [%s]", d.Buffer)
	}
	fmt.Fprintf(&b, ": %s", d.Message)
	if d.Origin != "" {
		fmt.Fprintf(&b, "; made by %s", d.Origin)
	}
	return b.String()
}

// Report is the document `dmalab check --json` prints.
type Report struct {
	Diagnostics []Diagnostic `json:"diagnostics"`
	// Dropped counts diagnostics detected beyond Options.MaxDiagnostics.
	Dropped int `json:"dropped,omitempty"`
}
