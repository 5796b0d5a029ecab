package probe

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
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
}

// nvbCases are the testcases dmalab measures the way nvbandwidth does
// (pinned cuMemHostAlloc(PORTABLE) buffers, spin kernel, events). The host
// buffer of nvbandwidth's SM tests is that same pinned memory, which unified
// addressing maps; dmalab's "mapped" path asks for the mapping explicitly.
var nvbCases = []nvbCase{
	{"host_to_device_memcpy_ce", "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", FamilyCE, "pinned", H2D, ""},
	{"device_to_host_memcpy_ce", "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)", FamilyCE, "pinned", D2H, ""},
	{"host_to_device_bidirectional_memcpy_ce", "memcpy CE CPU(row) <-> GPU(column) bandwidth (GB/s)", FamilyCE, "pinned", Bidir, H2D},
	{"device_to_host_bidirectional_memcpy_ce", "memcpy CE CPU(row) <-> GPU(column) bandwidth (GB/s)", FamilyCE, "pinned", Bidir, D2H},
	{"device_local_copy", "memcpy local GPU(column) bandwidth (GB/s)", FamilyCE, "device", D2D, ""},
	{"host_to_device_memcpy_sm", "memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)", FamilySM, "mapped", H2D, ""},
	{"device_to_host_memcpy_sm", "memcpy SM CPU(row) <- GPU(column) bandwidth (GB/s)", FamilySM, "mapped", D2H, ""},
}

// WriteNVBandwidth writes the copy-engine and SM results in nvbandwidth's
// JSON layout (as `nvbandwidth -j` prints it), so that tools which parse
// nvbandwidth (DCGM among them) read dmalab's numbers. Each value is the
// median at the largest size measured. GPUs not probed read "N/A".
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
		row := make([]string, n)
		for i := range row {
			row[i] = "N/A"
		}
		sum, found := 0.0, false
		for _, g := range r.GPUs {
			v, ok := nvbValue(&g, c)
			if !ok {
				continue
			}
			row[g.Device.Ordinal] = strconv.FormatFloat(v, 'g', 6, 64)
			sum += v
			found = true
		}
		if !found {
			continue
		}
		doc.Testcases = append(doc.Testcases, nvbTestcase{
			BandwidthDescription: c.description, BandwidthMatrix: [][]string{row},
			Name: c.name, Status: "Passed", Sum: sum,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "   ")
	enc.SetEscapeHTML(false) // nvbandwidth writes "->" as is
	return enc.Encode(nvbRoot{doc})
}

// nvbValue returns the median of the largest-size measurement matching c.
func nvbValue(g *GPUReport, c nvbCase) (float64, bool) {
	var best *Measurement
	for i, m := range g.Measurements {
		if m.Family == c.family && m.Path == c.path && m.Direction == c.dir && (best == nil || m.SizeBytes > best.SizeBytes) {
			best = &g.Measurements[i]
		}
	}
	if best == nil {
		return 0, false
	}
	if c.part != "" {
		s, ok := best.PerDirection[c.part]
		return s.Median, ok
	}
	return best.Median, true
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
