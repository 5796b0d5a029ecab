package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
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
	t, sec := resultTable(r)
	if err := t.WriteText(w, ""); err != nil {
		return err
	}
	if def := gbpsDefinition(r); def != "" && sec.gbps {
		fmt.Fprintf(w, "\n%s\n", def)
	}
	stages, links, note, rowStat := sec.stages, sec.links, sec.note, sec.rowStat
	if stages {
		fmt.Fprintln(w, "\nper frame, by stage (mean):")
		for _, row := range r.Results {
			if len(row.Stages) == 0 {
				continue
			}
			what := strings.TrimSpace(strings.Join([]string{row.Platform, row.Path, row.Mode}, " "))
			var total float64
			for _, st := range row.Stages {
				total += st.Seconds
			}
			var parts []string
			for _, st := range row.Stages {
				parts = append(parts, st.Name+" "+FormatSeconds(st.Seconds)+percentOf(st.Seconds, total))
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
		t := &Table{Columns: []Column{{Name: "row"}, {Name: "node", Align: AlignRight}}}
		for _, name := range numastatRows {
			t.Columns = append(t.Columns, Column{Name: name, Align: AlignRight})
		}
		for _, row := range r.Results {
			what := strings.TrimSpace(strings.Join([]string{row.Path, row.Direction, row.Mode}, " "))
			for _, n := range row.NUMAStat {
				t.AddRow(what, fmt.Sprint(n.Node), fmt.Sprint(n.NumaHit), fmt.Sprint(n.NumaMiss), fmt.Sprint(n.NumaForeign),
					fmt.Sprint(n.InterleaveHit), fmt.Sprint(n.LocalNode), fmt.Sprint(n.OtherNode))
				what = ""
			}
		}
		if err := t.WriteText(w, "  "); err != nil {
			return err
		}
	}
	if t := r.Time; t != nil {
		fmt.Fprintf(w, "\ntime by cause (%d transfers, %d fault stalls):\n", t.Transfers, t.Stalls)
		total := t.Call + t.Queue + t.Translate + t.Transfer + t.Fault
		var parts []string
		for _, c := range []struct {
			name string
			s    float64
		}{{"call", t.Call}, {"queue", t.Queue}, {"translate", t.Translate}, {"transfer", t.Transfer}, {"fault", t.Fault}} {
			// Causes that took no time say nothing.
			if c.s > 0 {
				parts = append(parts, c.name+" "+FormatSeconds(c.s)+percentOf(c.s, total))
			}
		}
		if len(parts) == 0 {
			parts = []string{"none"}
		}
		fmt.Fprintf(w, "  %s\n", strings.Join(parts, "  "))
		// Where rows run one after the other (no row sums up
		// operations), the rows' time beside the transfers' says how
		// much of a rate is not moving bytes at all: a round trip's
		// CPU work, a kernel.
		var rows float64
		serial := true
		for _, row := range r.Results {
			rows += row.Seconds
			serial = serial && row.Ops == 0
		}
		if serial && rows > 0 && total > 0 && total <= rows {
			fmt.Fprintf(w, "  transfers %s of the rows' %s%s; the rest is work outside transfers (CPU copies and accesses, kernels, waits)\n",
				FormatSeconds(total), FormatSeconds(rows), percentOf(total, rows))
		}
	}
	if len(r.Factors) > 0 {
		fmt.Fprintln(w, "\nfactors:")
		// Factors with one value and one source are one line: eight
		// GPUs' links calibrated alike say it once.
		type group struct {
			f    Factor
			keys []string
		}
		var groups []*group
		for _, k := range slices.Sorted(mapKeys(r.Factors)) {
			f := r.Factors[k]
			i := slices.IndexFunc(groups, func(g *group) bool { return g.f == f })
			if i < 0 {
				groups = append(groups, &group{f: f})
				i = len(groups) - 1
			}
			groups[i].keys = append(groups[i].keys, k)
		}
		for _, g := range groups {
			fmt.Fprintf(w, "  %s = %.6g", strings.Join(compressKeys(g.keys), ", "), g.f.Value)
			if g.f.Source != "" {
				fmt.Fprintf(w, "  (%s)", g.f.Source)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// compressKeys writes runs of keys that differ only in one number as a
// range: gpu0.link.efficiency ... gpu7.link.efficiency is
// gpu[0-7].link.efficiency. keys are sorted; the result keeps their
// order.
func compressKeys(keys []string) []string {
	type parsed struct {
		pre, post string
		n         int
		ok        bool
	}
	parse := func(k string) parsed {
		i := strings.IndexAny(k, "0123456789")
		if i < 0 {
			return parsed{pre: k}
		}
		j := i
		for j < len(k) && k[j] >= '0' && k[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(k[i:j])
		return parsed{k[:i], k[j:], n, err == nil}
	}
	ps := make([]parsed, len(keys))
	for i, k := range keys {
		ps[i] = parse(k)
	}
	// Sorted as strings, gpu10 comes before gpu2: order each prefix's
	// keys by number.
	slices.SortStableFunc(ps, func(a, b parsed) int {
		if c := strings.Compare(a.pre, b.pre); c != 0 || !a.ok || !b.ok {
			return c
		}
		if c := strings.Compare(a.post, b.post); c != 0 {
			return c
		}
		return a.n - b.n
	})
	var out []string
	for i := 0; i < len(ps); {
		p := ps[i]
		j := i + 1
		for p.ok && j < len(ps) && ps[j].ok && ps[j].pre == p.pre && ps[j].post == p.post && ps[j].n == ps[j-1].n+1 {
			j++
		}
		switch {
		case !p.ok:
			out = append(out, p.pre)
		case j-i > 1:
			out = append(out, fmt.Sprintf("%s[%d-%d]%s", p.pre, p.n, ps[j-1].n, p.post))
		default:
			out = append(out, fmt.Sprintf("%s%d%s", p.pre, p.n, p.post))
		}
		i = j
	}
	return out
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

// FormatSize writes a byte count in binary units, the one rule for
// sizes in tables: the largest unit the count reaches, at most three
// significant digits, trailing zeros dropped ("8 B", "1000 B", "1.5 GiB",
// "2.79 GiB", "12.4 MiB"). FormatBytes, exact, names the sizes a user
// chose (row names, --set echoes).
func FormatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(n)
	i := 0
	for (v >= 1024 || v <= -1024) && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return formatSig(v, 3, false) + " " + units[i]
}

// FormatSig writes x with digits significant digits in plain decimal
// notation, trailing zeros kept: the rule for rates and ratios in
// tables (FormatRate is FormatSig(g, 3)).
func FormatSig(x float64, digits int) string { return formatSig(x, digits, true) }

// formatSig writes x with digits significant digits in plain decimal
// notation (never an exponent): 0.00121, 0.610, 55.5, 1230. keepZeros
// keeps trailing zeros after the point, so that a column's numbers all
// show the same precision.
func formatSig(x float64, digits int, keepZeros bool) string {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	// Round to the digits first: 9.996 is 10.0, not 9.996 shown as "10.00".
	r, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'e', digits-1, 64), 64)
	d := digits - 1 - int(math.Floor(math.Log10(math.Abs(r))))
	s := strconv.FormatFloat(r, 'f', max(d, 0), 64)
	if !keepZeros && strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
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

// FormatRate writes a bandwidth in GB/s with three significant digits,
// in plain decimal notation (0.00121, 0.610, 8.42, 55.5, 123): the one
// rule for rates in every table, text, CSV and HTML alike, so that a
// column never shows "0.02" beside "0.00033".
func FormatRate(g float64) string {
	return formatSig(g, 3, true)
}

// FormatGBps writes a bandwidth in GB/s as scenarios' sentences have
// always written it (two decimals, one above 100, two significant digits
// below 0.01). Those sentences are part of the JSON documents
// (summary, note), which do not change under text formatting; tables
// use FormatRate.
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
	t := &Table{Columns: []Column{{Name: ""}}}
	for _, n := range nodes {
		t.Columns = append(t.Columns, Column{Name: fmt.Sprintf("node%d", n.Node), Align: AlignRight})
	}
	for i, name := range numastatRows {
		row := []string{name}
		for _, n := range nodes {
			v := [...]uint64{n.NumaHit, n.NumaMiss, n.NumaForeign, n.InterleaveHit, n.LocalNode, n.OtherNode}[i]
			row = append(row, strconv.FormatUint(v, 10))
		}
		t.AddRow(row...)
	}
	return t.WriteText(w, indent)
}

// percentOf writes part's share of total as " (12 %)", nothing when
// total is zero: the phases of a time say more as shares than as sums.
func percentOf(part, total float64) string {
	if total <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%.0f %%)", 100*part/total)
}

// formatShare writes a share of 0 to 1 as a percentage, "-" for none.
func formatShare(f float64) string {
	if f < 0 {
		return "-"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64) + " %"
}

// formatThreadGBps is FormatRate, "-" for a row without threads.
func formatThreadGBps(g float64) string {
	if g == 0 {
		return "-"
	}
	return FormatRate(g)
}
