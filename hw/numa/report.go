package numa

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/dmalab/dmalab/hw/topo"
)

// Schema names the JSON document's layout.
const Schema = "dmalab-numa-probe/1"

// Report is one run of the probe. Latency and Bandwidth hold one Pair per
// (CPU node, memory node) measured, CPU node first, in node order.
type Report struct {
	Schema  string     `json:"schema"`
	Started time.Time  `json:"started"`
	Machine Machine    `json:"machine"`
	Options ReportOpts `json:"options"`
	// Nodes are the NUMA nodes as sysfs describes them (one synthesized
	// node 0 holding every allowed CPU when the kernel shows none).
	Nodes         []topo.Node `json:"numa_nodes"`
	NUMABalancing int         `json:"numa_balancing"`
	Latency       []Pair      `json:"latency"`
	Bandwidth     []Pair      `json:"bandwidth"`
	// Placement says where each memory node's buffer landed.
	Placement []Placement `json:"placement"`
	// FirstTouch says where pages first touched from each CPU node went.
	FirstTouch []FirstTouch `json:"first_touch"`
	// Notes say what the kernel refused and what was therefore not done
	// or done otherwise; empty when everything ran as described.
	Notes []string `json:"notes"`
}

// Machine describes the machine measured.
type Machine struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	// CPUModel is /proc/cpuinfo's first "model name".
	CPUModel string `json:"cpu_model"`
	// CPUs is how many CPUs the nodes list; AllowedCPUs those this
	// process may run on (sched_getaffinity), as a cpulist.
	CPUs        int    `json:"cpus"`
	AllowedCPUs string `json:"allowed_cpus"`
	// LLCBytes is the largest CPU cache of CPU 0 (sysfs cache/index*);
	// zero when unknown.
	LLCBytes int64 `json:"llc_bytes"`
	// THP is /sys/kernel/mm/transparent_hugepage/enabled.
	THP string `json:"transparent_hugepage"`
}

// ReportOpts are the options the report was measured with.
type ReportOpts struct {
	BufferBytes int64 `json:"buffer_bytes"`
	Loads       int   `json:"loads"`
	Passes      int   `json:"passes"`
	Samples     int   `json:"samples"`
	Threads     int   `json:"threads"`
	TouchPages  int   `json:"touch_pages"`
}

// Pair is one measurement from CPU node CPUNode of memory on MemNode.
type Pair struct {
	CPUNode int `json:"cpu_node"`
	MemNode int `json:"mem_node"`
	// CPUs are the CPUs its threads were pinned to; empty when pinning
	// was refused and the threads ran wherever the scheduler put them.
	CPUs   []int  `json:"cpus"`
	Unit   string `json:"unit"`
	Method string `json:"method"`
	Stat
	// Values are the samples in the order measured.
	Values []float64 `json:"values"`
}

// Stat summarises samples.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func statOf(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// Placement is where the pages of a memory node's buffer are.
type Placement struct {
	Node int `json:"node"`
	// Policy is how the buffer was placed: "mbind MPOL_BIND" or, where
	// mbind was refused, "first touch from node N".
	Policy string `json:"policy"`
	// Pages is how many pages move_pages was asked about, OnNode how
	// many of them are on Node; Fraction is OnNode/Pages.
	Pages    int     `json:"pages"`
	OnNode   int     `json:"on_node"`
	Fraction float64 `json:"fraction"`
	// ByNode counts the pages per node ("-2" is -ENOENT: not present).
	ByNode map[int]int `json:"by_node"`
	// HugePageBytes is how much of the buffer transparent huge pages
	// back (AnonHugePages in /proc/self/smaps); -1 when unknown. Without
	// them every 4 KiB page costs the chase a TLB miss and a page walk.
	HugePageBytes int64 `json:"huge_page_bytes"`
	// Error says why the query was not answered; then the counts are 0.
	Error string `json:"error,omitempty"`
}

// FirstTouch is where pages first touched by a thread on Node went under
// the default (local) policy.
type FirstTouch struct {
	Node int `json:"node"`
	// CPU is the CPU the touching thread was pinned to; -1 when unpinned.
	CPU      int         `json:"cpu"`
	Pages    int         `json:"pages"`
	Local    int         `json:"local"`
	Fraction float64     `json:"fraction"`
	ByNode   map[int]int `json:"by_node"`
	Error    string      `json:"error,omitempty"`
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write NUMA report: %w", err)
	}
	return nil
}

// ReadJSON reads a report WriteJSON wrote.
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("read NUMA report: %w", err)
	}
	if rep.Schema != Schema {
		return nil, fmt.Errorf("read NUMA report: schema %q, want %q", rep.Schema, Schema)
	}
	return &rep, nil
}
