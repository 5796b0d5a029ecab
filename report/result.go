package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Result is the outcome of one scenario run. Its JSON form is documented
// in docs/json.md; field names are stable.
type Result struct {
	Scenario string `json:"scenario"`
	Platform string `json:"platform"`
	// Params holds every parameter's value for this run, defaults
	// included (JSON objects are written with sorted keys).
	Params  map[string]string `json:"params"`
	Results []Row             `json:"results"`
	// Factors are the efficiency factors the model applied, with their
	// source, so a number can always be traced to its assumptions.
	Factors map[string]Factor `json:"factors"`
	// Time says where the virtual time of the run's transfers went, by
	// cause; set when the run asked for it (dmalab run --attribution).
	Time *TimeSplit `json:"time_split,omitempty"`
	// Summary is the run's answer in sentences, for scenarios that have
	// one to give first (camera-pipeline: what zero-copy saves, what to
	// try next). Text output prints it under the title.
	Summary []string `json:"summary,omitempty"`
	// NUMAStat is numastat per node, set when the run placed anonymous
	// memory by NUMA policy (omitted otherwise).
	NUMAStat []NUMANode `json:"numastat,omitempty"`
	// Timeline is the run's engine and link activity over virtual time,
	// reduced for drawing (Trace.Timeline); set only when asked for
	// (dmalab run --html), so that other documents stay as they were.
	Timeline *Timeline `json:"timeline,omitempty"`
	// PlatformParams is every parameter of the platform the run used,
	// with its value and source, in the platform file's order; set only
	// when asked for (--html), as Timeline.
	PlatformParams []PlatformParam `json:"platform_params,omitempty"`
}

// PlatformParam is one field of a platform description: its --set path
// (gpus.gpu0.link.efficiency), its value as the YAML writes it, and its
// source when it has one.
type PlatformParam struct {
	Path   string `json:"path"`
	Value  string `json:"value"`
	Source string `json:"source,omitempty"`
}

// Measured is what a real machine measured for a row's path, direction
// and size (dmalab probe), beside the model's number: the median and
// the range of the samples in GB/s, and where it was measured.
type Measured struct {
	GBps    float64 `json:"gbps"`
	MinGBps float64 `json:"min_gbps,omitempty"`
	MaxGBps float64 `json:"max_gbps,omitempty"`
	// Samples is how many samples the median is of.
	Samples int `json:"samples,omitempty"`
	// Source says which machine, tool and method: "H200 (probe
	// ce_copy, spin_events)".
	Source string `json:"source,omitempty"`
}

// NUMANode is one node's numastat counters, in pages
// (/sys/devices/system/node/nodeN/numastat; zone_statistics in
// mm/page_alloc.c): numa_hit, allocated on the node that was intended;
// numa_miss, allocated here though another was; numa_foreign, intended
// here, allocated elsewhere; interleave_hit, an interleave policy's page
// on the node it chose; local_node and other_node, allocated here for a
// CPU of this node or of another.
type NUMANode struct {
	Node          int    `json:"node"`
	NumaHit       uint64 `json:"numa_hit"`
	NumaMiss      uint64 `json:"numa_miss"`
	NumaForeign   uint64 `json:"numa_foreign"`
	InterleaveHit uint64 `json:"interleave_hit"`
	LocalNode     uint64 `json:"local_node"`
	OtherNode     uint64 `json:"other_node"`
}

// TimeSplit is time summed over a run's transfers and accesses by what
// it was spent on, in seconds: the calls' fixed overheads, waiting for a
// busy engine, address translation, bytes on the wire (latency and
// flow), and waiting for unified-memory faults to be serviced.
// Transfers is how many transfers it covers; Stalls how many accesses
// waited on faults.
type TimeSplit struct {
	Call      float64 `json:"call_seconds"`
	Queue     float64 `json:"queue_seconds"`
	Translate float64 `json:"translate_seconds"`
	Transfer  float64 `json:"transfer_seconds"`
	Fault     float64 `json:"fault_seconds"`
	Transfers int64   `json:"transfers"`
	Stalls    int64   `json:"stalls"`
}

// Row is one measurement of the model.
type Row struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	Direction string `json:"direction"`
	Bytes     int64  `json:"bytes"`
	// Seconds is the time of one copy of Bytes, per-call overhead
	// included.
	Seconds float64 `json:"seconds"`
	// GBps is Bytes / Seconds in GB/s (1e9 B/s); for bidir, per
	// direction, as nvbandwidth reports it.
	GBps float64 `json:"gbps"`

	// Optional fields, set by scenarios that measure more than copies.

	// Mode is how completion is learnt ("interrupt", "polling") or what
	// does the work ("cpu").
	Mode string `json:"mode,omitempty"`
	// Ops is how many operations (packets, copies) the row sums up; then
	// Bytes is per operation and Seconds the whole run's.
	Ops int64 `json:"ops,omitempty"`
	// CPUSeconds is the CPU time spent per operation.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// P50Seconds and P99Seconds are latency percentiles per operation.
	P50Seconds float64 `json:"p50_seconds,omitempty"`
	P99Seconds float64 `json:"p99_seconds,omitempty"`
	// Step numbers the rows of a sequence (kernel 1, 2, ... or pass 1,
	// 2, ...); 0 for a setup row or a row that is not in one.
	Step int `json:"step,omitempty"`
	// Faults, MigratedBytes and Evictions are the unified-memory
	// driver's work during the row: GPU page faults, bytes migrated (by
	// faults, the prefetcher and prefetches; not evictions) and 2 MiB
	// chunks evicted.
	Faults        int64 `json:"faults,omitempty"`
	MigratedBytes int64 `json:"migrated_bytes,omitempty"`
	Evictions     int64 `json:"evictions,omitempty"`
	// Escapes, StaleEscapes, SecretRead and Changed are a malicious
	// device's results (iommu-attack): its DMAs that reached memory
	// outside its mappings, those of them through a stale IOTLB entry,
	// whether one read the secret, and the pages outside its mappings
	// whose versions changed. Faults then counts its DMAs refused.
	Escapes      int64 `json:"escapes,omitempty"`
	StaleEscapes int64 `json:"stale_escapes,omitempty"`
	SecretRead   bool  `json:"secret_read,omitempty"`
	Changed      int64 `json:"changed_pages,omitempty"`
	// LineGbps, IOTLBMisses and MapSeconds are a NIC's behind an IOMMU
	// (iommu-modes): its line rate in Gb/s, IOTLB misses per operation,
	// and the CPU time per operation of its DMA map and unmap (or sync)
	// calls.
	LineGbps    float64 `json:"line_gbps,omitempty"`
	IOTLBMisses float64 `json:"iotlb_misses,omitempty"`
	MapSeconds  float64 `json:"map_seconds,omitempty"`
	// Note says in words what a row's numbers cannot: the outcome of a
	// step (an errno, a status), what was set up. Text output prints it
	// last.
	Note string `json:"note,omitempty"`
	// Platform names the platform of the row, for scenarios that run
	// several side by side (camera-pipeline); empty means the result's.
	Platform string `json:"platform,omitempty"`
	// FPS, Dropped, DRAMBytes and PCIeBytes are a frame pipeline's
	// (camera-pipeline): the sustained frame rate, the frames lost
	// (never captured for want of a buffer, or never shown), and the
	// bytes per frame read and written in DRAM and carried over PCIe.
	// Ops is then the frames, P50Seconds and P99Seconds their
	// glass-to-glass latency, CPUSeconds the CPU time per frame spent
	// copying.
	FPS       float64 `json:"fps,omitempty"`
	Dropped   int64   `json:"dropped,omitempty"`
	DRAMBytes int64   `json:"dram_bytes,omitempty"`
	PCIeBytes int64   `json:"pcie_bytes,omitempty"`
	// Stages are a frame's mean time per stage of a pipeline, in order
	// (capture, isp, copy, inference, display, ...); text output prints
	// them under the table.
	Stages []Stage `json:"stages,omitempty"`
	// Links are the bytes each fabric link that matters carried during
	// the row (both directions), in the fabric's order (gpudirect: the
	// GPU's PCIe link, its switch's uplink, the root complex, the socket
	// link); text output prints them under the table.
	Links []LinkBytes `json:"links,omitempty"`
	// ThreadGBps, LocalBytes and RemoteBytes are CPU threads' use of
	// NUMA memory (numa-first-touch, numa-policies): the mean rate of
	// one thread in GB/s, and the bytes the threads accessed on their
	// own node's memory and on another node's; Ops is then the threads.
	// NUMAStat is the numastat counters the row's allocations added.
	ThreadGBps  float64    `json:"thread_gbps,omitempty"`
	LocalBytes  int64      `json:"local_bytes,omitempty"`
	RemoteBytes int64      `json:"remote_bytes,omitempty"`
	NUMAStat    []NUMANode `json:"numastat,omitempty"`
	// Measured is the real machine's measurement of the same copy,
	// where a command puts one beside the model (validate) or reports a
	// probe (then Seconds and GBps, the model's, are zero).
	Measured *Measured `json:"measured,omitempty"`
}

// LocalFraction is the share of the row's CPU accesses that were to the
// accessing thread's own node, 0 to 1; -1 when it has none.
func (r Row) LocalFraction() float64 {
	if r.LocalBytes+r.RemoteBytes == 0 {
		return -1
	}
	return float64(r.LocalBytes) / float64(r.LocalBytes+r.RemoteBytes)
}

// LinkBytes is the bytes one fabric link carried.
type LinkBytes struct {
	Link  string `json:"link"`
	Bytes int64  `json:"bytes"`
}

// Stage is one stage of a pipeline and the mean time a frame spends in
// it, in seconds.
type Stage struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Factor is one efficiency factor and where its value comes from.
type Factor struct {
	Value  float64 `json:"value"`
	Source string  `json:"source,omitempty"`
}

// WriteJSON writes r as one indented JSON document.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes r for people: a header, one line per row, the
// factors with their sources.
func WriteTable(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "%s on %s\n", r.Scenario, r.Platform)
	for _, line := range r.Summary {
		fmt.Fprintf(w, "  %s\n", line)
	}
	keys := slices.Sorted(mapKeys(r.Params))
	var ps []string
	for _, k := range keys {
		ps = append(ps, k+"="+r.Params[k])
	}
	fmt.Fprintf(w, "params: %s\n\n", strings.Join(ps, " "))
	// Columns beyond the five of a copy appear when some row has them.
	var mode, ops, cpu, lat, step, um, attack, lineRate, note, plat, frames, stages, links, numa, rowStat bool
	for _, row := range r.Results {
		attack = attack || row.Direction == "attack" || row.Escapes != 0 || row.StaleEscapes != 0 || row.SecretRead || row.Changed != 0
	}
	for _, row := range r.Results {
		mode = mode || row.Mode != ""
		ops = ops || row.Ops != 0
		cpu = cpu || row.CPUSeconds != 0
		lat = lat || row.P50Seconds != 0 || row.P99Seconds != 0
		step = step || row.Step != 0
		lineRate = lineRate || row.LineGbps != 0
		note = note || row.Note != ""
		plat = plat || row.Platform != ""
		frames = frames || row.FPS != 0 || row.Dropped != 0 || row.DRAMBytes != 0 || row.PCIeBytes != 0
		stages = stages || len(row.Stages) > 0
		links = links || len(row.Links) > 0
		numa = numa || row.ThreadGBps != 0 || row.LocalBytes != 0 || row.RemoteBytes != 0
		rowStat = rowStat || len(row.NUMAStat) > 0
		// An attack's faults are its own column; the unified-memory
		// columns appear for a migration only.
		um = um || !attack && row.Faults != 0 || row.MigratedBytes != 0 || row.Evictions != 0
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "path\tdirection\t"
	if plat {
		head = "platform\t" + head
	}
	if mode {
		head += "mode\t"
	}
	if step {
		head += "step\t"
	}
	head += "size\t"
	if lineRate {
		head += "line Gb/s\t"
	}
	if ops {
		head += "ops\t"
	}
	head += "time\tGB/s\t"
	if cpu {
		head += "CPU/op\t"
	}
	if numa {
		head += "GB/s/thread\tlocal\t"
	}
	if lat {
		head += "p50\tp99\t"
	}
	if um {
		head += "faults\tmigrated\tevictions\t"
	}
	if lineRate {
		head += "IOTLB miss/op\tmap/op\t"
	}
	if attack {
		head += "faults\tescapes\tstale\tsecret read\tchanged pages\t"
	}
	if frames {
		head += "fps\tdropped\tDRAM/frame\tPCIe/frame\t"
	}
	fmt.Fprintln(tw, head)
	for _, row := range r.Results {
		line := row.Path + "\t" + row.Direction + "\t"
		if plat {
			line = row.Platform + "\t" + line
		}
		if mode {
			line += row.Mode + "\t"
		}
		if step {
			line += fmt.Sprint(row.Step) + "\t"
		}
		line += FormatBytes(row.Bytes) + "\t"
		if lineRate {
			line += strconv.FormatFloat(row.LineGbps, 'g', -1, 64) + "\t"
		}
		if ops {
			line += fmt.Sprint(row.Ops) + "\t"
		}
		line += FormatSeconds(row.Seconds) + "\t" + FormatGBps(row.GBps) + "\t"
		if cpu {
			line += FormatSeconds(row.CPUSeconds) + "\t"
		}
		if numa {
			line += formatThreadGBps(row.ThreadGBps) + "\t" + formatShare(row.LocalFraction()) + "\t"
		}
		if lat {
			line += FormatSeconds(row.P50Seconds) + "\t" + FormatSeconds(row.P99Seconds) + "\t"
		}
		if um {
			line += fmt.Sprint(row.Faults) + "\t" + FormatBytes(row.MigratedBytes) + "\t" + fmt.Sprint(row.Evictions) + "\t"
		}
		if lineRate {
			line += fmt.Sprintf("%.3g", row.IOTLBMisses) + "\t" + FormatSeconds(row.MapSeconds) + "\t"
		}
		if attack {
			line += fmt.Sprint(row.Faults) + "\t" + fmt.Sprint(row.Escapes) + "\t" + fmt.Sprint(row.StaleEscapes) + "\t" +
				fmt.Sprint(row.SecretRead) + "\t" + fmt.Sprint(row.Changed) + "\t"
		}
		if frames {
			line += strconv.FormatFloat(row.FPS, 'f', 2, 64) + "\t" + fmt.Sprint(row.Dropped) + "\t" +
				FormatSize(row.DRAMBytes) + "\t" + FormatSize(row.PCIeBytes) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if stages {
		fmt.Fprintln(w, "\nper frame, by stage (mean):")
		for _, row := range r.Results {
			if len(row.Stages) == 0 {
				continue
			}
			what := strings.TrimSpace(strings.Join([]string{row.Platform, row.Path, row.Mode}, " "))
			var parts []string
			for _, st := range row.Stages {
				parts = append(parts, st.Name+" "+FormatSeconds(st.Seconds))
			}
			fmt.Fprintf(w, "  %s: %s\n", what, strings.Join(parts, ", "))
		}
	}
	if links {
		fmt.Fprintln(w, "\nbytes per link:")
		for _, row := range r.Results {
			if len(row.Links) == 0 {
				continue
			}
			what := strings.TrimSpace(strings.Join([]string{row.Platform, row.Path, row.Direction, row.Mode, FormatBytes(row.Bytes)}, " "))
			var parts []string
			for _, l := range row.Links {
				parts = append(parts, l.Link+" "+FormatSize(l.Bytes))
			}
			fmt.Fprintf(w, "  %s: %s\n", what, strings.Join(parts, ", "))
		}
	}
	if note {
		// Notes are sentences: below the table, one per row that has
		// one, named as the row is, rather than a column that would
		// widen every line.
		fmt.Fprintln(w, "\nnotes:")
		for _, row := range r.Results {
			if row.Note == "" {
				continue
			}
			what := strings.TrimSpace(strings.Join([]string{row.Path, row.Direction, row.Mode}, " "))
			fmt.Fprintf(w, "  %s: %s\n", what, row.Note)
		}
	}
	if len(r.NUMAStat) > 0 {
		fmt.Fprintln(w, "\nnumastat (pages):")
		if err := writeNUMAStat(w, "  ", r.NUMAStat); err != nil {
			return err
		}
	}
	if rowStat {
		// A line per row and node, not a block per row: a scenario
		// with many rows stays readable.
		fmt.Fprintln(w, "\nnumastat by row (pages):")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  row\tnode\t"+strings.Join(numastatRows, "\t")+"\t")
		for _, row := range r.Results {
			what := strings.TrimSpace(strings.Join([]string{row.Path, row.Direction, row.Mode}, " "))
			for _, n := range row.NUMAStat {
				fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", what, n.Node,
					n.NumaHit, n.NumaMiss, n.NumaForeign, n.InterleaveHit, n.LocalNode, n.OtherNode)
				what = ""
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if t := r.Time; t != nil {
		fmt.Fprintf(w, "\ntime by cause (%d transfers, %d fault stalls):\n", t.Transfers, t.Stalls)
		fmt.Fprintf(w, "  call %s  queue %s  translate %s  transfer %s  fault %s\n",
			FormatSeconds(t.Call), FormatSeconds(t.Queue), FormatSeconds(t.Translate), FormatSeconds(t.Transfer), FormatSeconds(t.Fault))
	}
	if len(r.Factors) > 0 {
		fmt.Fprintln(w, "\nfactors:")
		for _, k := range slices.Sorted(mapKeys(r.Factors)) {
			f := r.Factors[k]
			fmt.Fprintf(w, "  %s = %.6g", k, f.Value)
			if f.Source != "" {
				fmt.Fprintf(w, "  (%s)", f.Source)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// FormatBytes writes a size in the largest binary unit that divides it
// exactly: "8 B", "4 KiB", "1.5 MiB" only when exact, else bytes.
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for n >= 1024 && n%1024 == 0 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%d %s", n, units[i])
}

// FormatSize writes a byte count rounded to three significant digits in
// the largest decimal-free binary unit it reaches ("12.4 MiB"), for sizes
// that are measured rather than chosen (FormatBytes prints those
// exactly).
func FormatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(n)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.3g %s", v, units[i])
}

// FormatSeconds writes a duration with four significant digits in a
// readable unit.
func FormatSeconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.4g s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.4g ms", s*1e3)
	case s >= 1e-6:
		return fmt.Sprintf("%.4g us", s*1e6)
	default:
		return fmt.Sprintf("%.4g ns", s*1e9)
	}
}

// FormatGBps writes a bandwidth in GB/s with sensible precision.
func FormatGBps(g float64) string {
	if g >= 100 {
		return fmt.Sprintf("%.1f", g)
	}
	if g >= 0.01 {
		return fmt.Sprintf("%.2f", g)
	}
	return fmt.Sprintf("%.2g", g)
}

// numastatRows are numastat's counter names, in its order.
var numastatRows = []string{"numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node"}

// writeNUMAStat writes per-node counters as numastat does without
// options: a column per node ("node0"), a line per counter.
func writeNUMAStat(w io.Writer, indent string, nodes []NUMANode) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Names padded to one width stay left-aligned in right-aligned
	// columns, as numastat prints them.
	head := fmt.Sprintf("%s%-14s\t", indent, "")
	for _, n := range nodes {
		head += fmt.Sprintf("node%d\t", n.Node)
	}
	fmt.Fprintln(tw, head)
	for i, name := range numastatRows {
		line := fmt.Sprintf("%s%-14s\t", indent, name)
		for _, n := range nodes {
			v := [...]uint64{n.NumaHit, n.NumaMiss, n.NumaForeign, n.InterleaveHit, n.LocalNode, n.OtherNode}[i]
			line += strconv.FormatUint(v, 10) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// formatShare writes a share of 0 to 1 as a percentage, "-" for none.
func formatShare(f float64) string {
	if f < 0 {
		return "-"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64) + " %"
}

// formatThreadGBps is FormatGBps, "-" for a row without threads.
func formatThreadGBps(g float64) string {
	if g == 0 {
		return "-"
	}
	return FormatGBps(g)
}
