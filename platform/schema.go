package platform

import (
	"reflect"
	"strings"

	"github.com/dmalab/dmalab/sim"
)

// The YAML format is derived from the Go types by reflection: a struct is
// a mapping, a slice a list, a Param a scalar or {value, source}, a bool
// a plain YAML boolean. Field
// names are the snake_case of the Go names, listed here rather than
// computed because acronyms (GPUs, NVLinks, BAR1, DRAMBandwidth) do not
// convert mechanically.
var yamlNames = map[string]string{
	"Name": "name", "Description": "description", "Nodes": "nodes", "Distances": "distances",
	"SocketLinks": "socket_links", "RootComplexes": "root_complexes", "Switches": "switches",
	"GPUs": "gpus", "Devices": "devices", "NVSwitches": "nvswitches", "NVLinks": "nvlinks",
	"Fabric": "fabric", "SWIOTLB": "swiotlb",

	"ID": "id", "Cores": "cores", "DRAM": "dram", "DRAMBandwidth": "dram_bandwidth",
	"DRAMLatency": "dram_latency", "CopyEfficiency": "copy_efficiency", "MemcpyRate": "memcpy_rate", "StreamRate": "stream_rate", "Cache": "cache",

	"LineSize": "line_size", "Size": "size", "Prefetch": "prefetch",
	"WritebackCost": "writeback_cost", "InvalidateCost": "invalidate_cost",
	"UncachedRate": "uncached_rate",

	"A": "a", "B": "b", "Bandwidth": "bandwidth", "Latency": "latency", "Node": "node",

	"Gen": "gen", "Width": "width", "Efficiency": "efficiency",
	"MaxPayload": "max_payload", "MaxReadRequest": "max_read_request", "TLPOverhead": "tlp_overhead", "AckOverhead": "ack_overhead",

	"Parent": "parent", "Link": "link", "Model": "model", "Arch": "arch",
	"VRAM": "vram", "VRAMBandwidth": "vram_bandwidth", "BAR1": "bar1",
	"CopyEngines": "copy_engines", "CopyOverhead": "copy_overhead", "CopyCompletion": "copy_completion", "SMRequest": "sm_request",
	"Integrated": "integrated", "KernelLaunch": "kernel_launch", "AllocCost": "alloc_cost",
	"PinCost": "pin_cost", "UnpinCost": "unpin_cost", "PinCallCost": "pin_call_cost", "UnpinCallCost": "unpin_call_cost", "StagingRate": "staging_rate", "PageableChunk": "pageable_chunk", "UVM": "uvm",
	"VRAMLatency": "vram_latency", "HubLatency": "hub_latency", "OutstandingReads": "outstanding_reads",
	"Payload": "payload", "Header": "header",

	"FaultBatch": "fault_batch", "MaxBatches": "max_batches", "PrefetchThreshold": "prefetch_threshold",
	"ThrashingThreshold": "thrashing_threshold", "ThrashingLapse": "thrashing_lapse",
	"ThrashingPinLapses": "thrashing_pin_lapses", "ThrashingEpochLapses": "thrashing_epoch_lapses",
	"FaultLatency": "fault_latency", "FaultEntryCost": "fault_entry_cost", "FaultPageCost": "fault_page_cost", "CPUMapCost": "cpu_map_cost",

	"Kind": "kind", "LineRate": "line_rate", "PixelRate": "pixel_rate", "DMAEngines": "dma_engines",
	"NonCoherentDMA": "noncoherent_dma", "DMAMaskBits": "dma_mask_bits", "ATS": "ats",
	"MaxSegment": "max_segment", "SegmentBoundary": "segment_boundary",
	"Slot": "slot", "Function": "function", "DMAAliases": "dma_aliases",

	"Links": "links", "LinkRate": "link_rate", "Protocol": "protocol",

	"BandwidthFactor": "bandwidth_factor", "LatencyFactor": "latency_factor",
	"CrossTraffic": "cross_traffic", "Sharing": "sharing", "WeightS": "weight_s",

	"NUMABalancing": "numa_balancing",

	"IOMMU": "iommu", "P2PEfficiency": "p2p_efficiency", "Profile": "profile", "Mode": "mode", "ACS": "acs",
}

// field is one YAML field of a struct type.
type field struct {
	name  string
	index int
}

// param is implemented by every Param[T]; reflection finds Params by it.
type param interface{ isParam() }

func (Param[T]) isParam() {}

var (
	paramType = reflect.TypeFor[param]()
	timeType  = reflect.TypeFor[sim.Time]()
	bytesType = reflect.TypeFor[Bytes]()
	rateType  = reflect.TypeFor[Rate]()
	specType  = reflect.TypeFor[Spec]()
	linkType  = reflect.TypeFor[PCIeLink]()
	gpuType   = reflect.TypeFor[GPU]()
	devType   = reflect.TypeFor[Device]()
)

// schema maps each struct type of a Spec to its fields, in Go order.
var schema = func() map[reflect.Type][]field {
	m := map[reflect.Type][]field{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		switch {
		case t.Implements(paramType):
		case t.Kind() == reflect.Slice:
			walk(t.Elem())
		case t.Kind() == reflect.Struct:
			if _, done := m[t]; done {
				return
			}
			fs := make([]field, t.NumField())
			for i := range fs {
				f := t.Field(i)
				name, ok := yamlNames[f.Name]
				if !ok {
					panic("platform: no YAML name for " + t.Name() + "." + f.Name)
				}
				fs[i] = field{name: name, index: i}
			}
			m[t] = fs
			for i := range fs {
				walk(t.Field(i).Type)
			}
		}
	}
	walk(specType)
	return m
}()

func lookupField(t reflect.Type, name string) (field, bool) {
	for _, f := range schema[t] {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}

func fieldNames(t reflect.Type) string {
	names := make([]string, len(schema[t]))
	for i, f := range schema[t] {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// closest returns the field of t nearest to name by edit distance, if it
// is near enough to be a likely typo.
func closest(t reflect.Type, name string) string {
	best, bestD := "", 3
	for _, f := range schema[t] {
		if d := editDistance(name, f.name); d < bestD {
			best, bestD = f.name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// what describes the scalar a type wants, for error messages.
func what(t reflect.Type) string {
	switch t {
	case timeType:
		return `a duration like "6.6us"`
	case bytesType:
		return `a size like "141 GiB"`
	case rateType:
		return `a rate like "55.5 GB/s"`
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "a list"
	}
	return "a mapping"
}
