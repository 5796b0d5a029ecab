package probe

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab/xfer"
)

// nvbandwidth's JSON layout (nvbandwidth -j, json_output.cpp): one object
// "nvbandwidth" holding the versions, the device list and "testcases", each
// with a bandwidth_matrix of strings (a row per CPU or GPU source, a column
// per GPU; "N/A" where not measured) and their sum. jsoncpp writes keys in
// sorted order; the struct fields below are in that order.
type nvbRoot struct {
	NVBandwidth nvbDoc `json:"nvbandwidth"`
}

type nvbDoc struct {
	CUDARuntimeVersion int           `json:"CUDA Runtime Version"`
	DriverVersion      string        `json:"Driver Version"`
	GPUDeviceList      []string      `json:"GPU Device list"`
	GitVersion         string        `json:"git_version"`
	Testcases          []nvbTestcase `json:"testcases"`
	Version            string        `json:"version"`
}

type nvbTestcase struct {
	BandwidthDescription string     `json:"bandwidth_description"`
	BandwidthMatrix      [][]string `json:"bandwidth_matrix"`
	Name                 string     `json:"name"`
	Status               string     `json:"status"`
	Sum                  float64    `json:"sum"`
}

// nvbCase maps one nvbandwidth testcase to the measurement that answers it.
type nvbCase struct {
	name, description string
	family, path, dir string
	part              string // for bidir: the PerDirection entry
	op                string // for peers: "read" or "write"
	// latency: the case is a pointer chase (Operation "pointer_chase"),
	// in nanoseconds, not a bandwidth.
	latency bool
}

// operation is the Measurement.Operation the case matches.
func (c nvbCase) operation() string {
	if c.latency {
		return "pointer_chase"
	}
	return c.op
}

// nvbCases are the testcases dmalab measures the way nvbandwidth does
// (pinned cuMemHostAlloc(PORTABLE) buffers, spin kernel, events). The host
// buffer of nvbandwidth's SM tests is that same pinned memory, which unified
// addressing maps; dmalab's "mapped" path asks for the mapping explicitly.
var nvbCases = []nvbCase{
	{"host_to_device_memcpy_ce", "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", FamilyCE, string(xfer.Pinned), H2D, "", "", false},
	{"device_to_host_memcpy_ce", "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)", FamilyCE, string(xfer.Pinned), D2H, "", "", false},
	{"host_to_device_bidirectional_memcpy_ce", "memcpy CE CPU(row) <-> GPU(column) bandwidth (GB/s)", FamilyCE, string(xfer.Pinned), Bidir, H2D, "", false},
	{"device_to_host_bidirectional_memcpy_ce", "memcpy CE CPU(row) <-> GPU(column) bandwidth (GB/s)", FamilyCE, string(xfer.Pinned), Bidir, D2H, "", false},
	{"device_local_copy", "memcpy local GPU(column) bandwidth (GB/s)", FamilyCE, string(xfer.Device), D2D, "", "", false},
	{"host_to_device_memcpy_sm", "memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)", FamilySM, string(xfer.Mapped), H2D, "", "", false},
	{"device_to_host_memcpy_sm", "memcpy SM CPU(row) <- GPU(column) bandwidth (GB/s)", FamilySM, string(xfer.Mapped), D2H, "", "", false},
	// One GPU thread chasing pointers through pinned host memory: the
	// probe's chase spans a larger region (up to 64 MiB, a node per
	// 16 KiB) than nvbandwidth's 2 MB buffer, so that no two loads share
	// a page or a cache line: every load is a round trip over the bus.
	{"host_device_latency_sm", "memory latency SM CPU(row) <-> GPU(column) (ns)", FamilyLatency, string(xfer.Mapped), H2D, "", "", true},
	// Peer testcases have a row per GPU, the one whose context ran the copy
	// (the copy's destination for read, its source for write), and a
	// column per peer.
	{"device_to_device_memcpy_read_ce", "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", FamilyCE, string(xfer.Peer), D2D, "", "read", false},
	{"device_to_device_memcpy_write_ce", "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)", FamilyCE, string(xfer.Peer), D2D, "", "write", false},
	{"device_to_device_memcpy_read_sm", "memcpy SM GPU(row) -> GPU(column) bandwidth (GB/s)", FamilySM, string(xfer.Peer), D2D, "", "read", false},
	{"device_to_device_memcpy_write_sm", "memcpy SM GPU(row) <- GPU(column) bandwidth (GB/s)", FamilySM, string(xfer.Peer), D2D, "", "write", false},
	// One GPU thread (the row's) chasing pointers through a peer's VRAM
	// (the column's), laid out as the chase through its own VRAM.
	{"device_to_device_latency_sm", "memory latency SM GPU(row) <-> GPU(column) (ns)", FamilyLatency, string(xfer.Peer), "", "", "", true},
}

// perGPU says whether the case has a row per GPU (the GPU that ran it)
// rather than one row: the peer testcases.
func (c nvbCase) perGPU() bool { return c.path == string(xfer.Peer) }

// WriteNVBandwidth writes the copy-engine and SM results and the
// host-device and peer pointer-chase latencies in nvbandwidth's JSON layout (as
// `nvbandwidth -j` prints it), so that tools which parse nvbandwidth
// (DCGM among them) read dmalab's numbers. Each value is the median at
// the largest size measured; a latency is in nanoseconds in the matrix
// nvbandwidth calls bandwidth_matrix for every testcase. The
// bidirectional testcases take PerDirection's nvbandwidth figures (the
// other direction doubled). GPUs not probed read "N/A".
func (r *Report) WriteNVBandwidth(w io.Writer) error {
	n := max(r.Machine.GPUCount, len(r.GPUs))
	for _, g := range r.GPUs {
		n = max(n, g.Device.Ordinal+1)
	}
	doc := nvbDoc{
		CUDARuntimeVersion: cudaVersionInt(r.Machine.CUDAVersion),
		DriverVersion:      r.Machine.DriverVersion,
		GPUDeviceList:      []string{},
		Version:            "dmalab " + Schema,
		Testcases:          []nvbTestcase{},
	}
	for _, g := range r.GPUs {
		doc.GPUDeviceList = append(doc.GPUDeviceList, fmt.Sprintf("%d: %s (%s): (%s)", g.Device.Ordinal, g.Device.Name, g.Device.PCIBusID, r.Machine.Hostname))
	}
	for _, c := range nvbCases {
		rows := 1
		if c.perGPU() {
			rows = n
		}
		matrix := make([][]string, rows)
		for i := range matrix {
			matrix[i] = make([]string, n)
			for j := range matrix[i] {
				matrix[i][j] = "N/A"
			}
		}
		sum, found := 0.0, false
		for _, g := range r.GPUs {
			for _, cell := range nvbValues(&g, c) {
				row := 0
				if c.perGPU() {
					row = g.Device.Ordinal
				}
				if row >= rows || cell.col >= n {
					continue
				}
				matrix[row][cell.col] = strconv.FormatFloat(cell.v, 'g', 6, 64)
				sum += cell.v
				found = true
			}
		}
		if !found {
			continue
		}
		doc.Testcases = append(doc.Testcases, nvbTestcase{
			BandwidthDescription: c.description, BandwidthMatrix: matrix,
			Name: c.name, Status: "Passed", Sum: sum,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "   ")
	enc.SetEscapeHTML(false) // nvbandwidth writes "->" as is
	return enc.Encode(nvbRoot{doc})
}

type nvbCell struct {
	col int
	v   float64
}

// nvbValues returns, per matrix column, the median of the largest-size
// measurement of g matching c: the GPU's own column, or one per peer.
func nvbValues(g *GPUReport, c nvbCase) []nvbCell {
	best := map[int]*Measurement{}
	for i, m := range g.Measurements {
		if m.Family != c.family || m.Path != c.path || m.Direction != c.dir || m.Operation != c.operation() {
			continue
		}
		col := g.Device.Ordinal
		if m.PeerGPU != nil {
			col = *m.PeerGPU
		}
		if b := best[col]; b == nil || m.SizeBytes > b.SizeBytes {
			best[col] = &g.Measurements[i]
		}
	}
	var cells []nvbCell
	for col, m := range best {
		v := m.Median
		if c.part != "" {
			s, ok := m.PerDirection[c.part]
			if !ok {
				continue
			}
			v = s.Median
		}
		cells = append(cells, nvbCell{col, v})
	}
	// In column order, so that the sum is the same on every run.
	slices.SortFunc(cells, func(a, b nvbCell) int { return a.col - b.col })
	return cells
}

// cudaVersionInt turns "13.0" into 13000, cuda.h's encoding.
func cudaVersionInt(v string) int {
	maj, mnr, _ := strings.Cut(v, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(mnr)
	if err1 != nil || err2 != nil {
		return 0
	}
	return a*1000 + b*10
}
