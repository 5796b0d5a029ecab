package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/scenario"
)

// hint is what to try after a scenario: a what-if to --set and a
// scenario that answers the next question.
type hint struct {
	set, setWhy string
	next        string
}

// hints are the built-in scenarios' next steps; a scenario without one
// gets the generic what-if on its platform's fabric.
var hints = map[string]hint{
	"transfers":        {"platform.gpus.gpu0.link.gen=4", "the same copies on PCIe Gen4", "host-memory"},
	"host-memory":      {"size=16MiB", "a smaller workload, where the calls' overheads weigh more", "transfers"},
	"gpu-affinity":     {"platform.fabric.cross_traffic=0.2", "the socket link under reverse load", "numa-policies"},
	"gpudirect":        {"platform.fabric.cross_traffic=0.2", "the links under reverse load", "iommu-modes"},
	"bar-vs-dma":       {"platform.gpus.gpu0.link.gen=4", "the same loads and copies on PCIe Gen4", "transfers"},
	"dma-vs-memcpy":    {"platform.fabric.latency_factor=2", "slower interrupts and doorbells", "dma-streaming"},
	"dma-streaming":    {"platform.fabric.latency_factor=2", "slower interrupts and doorbells", "iommu-modes"},
	"iommu-modes":      {"platform.iommu.profile=amd-vi", "another IOMMU's costs", "iommu-attack"},
	"iommu-attack":     {"seed=2", "another sequence of random DMAs", "iommu-modes"},
	"numa-first-touch": {"platform.fabric.latency_factor=2", "a slower socket link", "numa-policies"},
	"numa-policies":    {"platform.fabric.latency_factor=2", "a slower socket link", "numa-first-touch"},
	"um-oversubscribe": {"platform.gpus.gpu0.link.gen=4", "migrations over PCIe Gen4", "um-prefetch"},
	"um-prefetch":      {"platform.gpus.gpu0.link.gen=4", "migrations over PCIe Gen4", "um-oversubscribe"},
	"vfio-user-driver": {"platform.iommu.mode=lazy", "the IOMMU's lazy invalidation", "iommu-modes"},
	"camera-pipeline":  {"", "", "gpudirect"},
	"dma-bugs":         {"", "", "dma-streaming"},
	"gpu-bugs":         {"", "", "host-memory"},
}

// writeHints ends the text output of a run with what to try next: a
// --set to try, a related scenario, and the checker. A scenario whose
// summary already says what to try (camera-pipeline) gets only the
// checker and the related scenario.
func writeHints(w io.Writer, s *scenario.Scenario, r *report.Result) {
	h, ok := hints[s.Name]
	if !ok {
		h = hint{set: "platform.fabric.bandwidth_factor=0.9", setWhy: "every link 10 % slower"}
	}
	for _, line := range r.Summary {
		if strings.HasPrefix(line, "Try:") {
			h.set = ""
		}
	}
	fmt.Fprintln(w, "\nnext:")
	if h.set != "" {
		fmt.Fprintf(w, "  dmalab run %s --set %s   (%s)\n", s.Name, h.set, h.setWhy)
	}
	if h.next != "" {
		if n, err := scenario.Lookup(h.next); err == nil {
			fmt.Fprintf(w, "  dmalab run %s   (%s)\n", n.Name, shorten(n.Summary, 70))
		}
	}
	fmt.Fprintf(w, "  dmalab check %s   (the same run under the DMA checker)\n", s.Name)
}

// shorten cuts s at a word boundary to at most n characters.
func shorten(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	r := []rune(s)[:n]
	if i := strings.LastIndexByte(string(r), ' '); i > 0 {
		return string(r)[:i] + " ..."
	}
	return string(r) + "..."
}
