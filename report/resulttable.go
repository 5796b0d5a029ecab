package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// sections says which parts below the table a result has, and whether
// its table shows GB/s.
type sections struct {
	stages, links, note, rowStat, gbps bool
}

// ResultTable is a result's rows as a table: the columns of a copy
// (path, direction, size, time, GB/s) and those some row has a value
// for. The text output, --csv and the HTML report print it.
func ResultTable(r *Result) *Table {
	t, _ := resultTable(r)
	return t
}

// WriteCSV writes a result's rows as CSV: the table of the text output,
// with a header line.
func WriteCSV(w io.Writer, r *Result) error {
	return ResultTable(r).WriteCSV(w)
}

func resultTable(r *Result) (*Table, sections) {
	// Columns beyond the five of a copy appear when some row has them.
	var mode, ops, cpu, lat, step, um, attack, lineRate, plat, frames, numa bool
	var sec sections
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
		sec.note = sec.note || row.Note != ""
		plat = plat || row.Platform != ""
		frames = frames || row.FPS != 0 || row.Dropped != 0 || row.DRAMBytes != 0 || row.PCIeBytes != 0
		sec.stages = sec.stages || len(row.Stages) > 0
		sec.links = sec.links || len(row.Links) > 0
		numa = numa || row.ThreadGBps != 0 || row.LocalBytes != 0 || row.RemoteBytes != 0
		sec.rowStat = sec.rowStat || len(row.NUMAStat) > 0
		sec.gbps = sec.gbps || row.GBps != 0
		// An attack's faults are its own column; the unified-memory
		// columns appear for a migration only.
		um = um || !attack && row.Faults != 0 || row.MigratedBytes != 0 || row.Evictions != 0
	}
	// A table of frame pipelines has no copy rate: a column of zeros
	// says nothing.
	gbps := sec.gbps || !frames
	sec.gbps = gbps
	t := &Table{}
	col := func(name string, a Align) { t.Columns = append(t.Columns, Column{Name: name, Align: a}) }
	if plat {
		col("platform", AlignLeft)
	}
	col("path", AlignLeft)
	col("direction", AlignLeft)
	if mode {
		col("mode", AlignLeft)
	}
	if step {
		col("step", AlignRight)
	}
	col("size", AlignDecimal)
	if lineRate {
		col("line Gb/s", AlignDecimal)
	}
	if ops {
		col("ops", AlignRight)
	}
	col("time", AlignDecimal)
	if gbps {
		col("GB/s", AlignDecimal)
	}
	if cpu {
		col("CPU/op", AlignDecimal)
	}
	if numa {
		col("GB/s/thread", AlignDecimal)
		col("local", AlignDecimal)
	}
	if lat {
		col("p50", AlignDecimal)
		col("p99", AlignDecimal)
	}
	if um {
		col("faults", AlignRight)
		col("migrated", AlignDecimal)
		col("evictions", AlignRight)
	}
	if lineRate {
		col("IOTLB miss/op", AlignDecimal)
		col("map/op", AlignDecimal)
	}
	if attack {
		col("faults", AlignRight)
		col("escapes", AlignRight)
		col("stale", AlignRight)
		col("secret read", AlignLeft)
		col("changed pages", AlignRight)
	}
	if frames {
		col("fps", AlignDecimal)
		col("dropped", AlignRight)
		col("DRAM/frame", AlignDecimal)
		col("PCIe/frame", AlignDecimal)
	}
	for _, row := range r.Results {
		var c []string
		if plat {
			c = append(c, row.Platform)
		}
		c = append(c, row.Path, row.Direction)
		if mode {
			c = append(c, row.Mode)
		}
		if step {
			c = append(c, fmt.Sprint(row.Step))
		}
		c = append(c, FormatSize(row.Bytes))
		if lineRate {
			c = append(c, strconv.FormatFloat(row.LineGbps, 'g', -1, 64))
		}
		if ops {
			c = append(c, fmt.Sprint(row.Ops))
		}
		c = append(c, FormatSeconds(row.Seconds))
		if gbps {
			c = append(c, FormatRate(row.GBps))
		}
		if cpu {
			c = append(c, FormatSeconds(row.CPUSeconds))
		}
		if numa {
			c = append(c, formatThreadGBps(row.ThreadGBps), formatShare(row.LocalFraction()))
		}
		if lat {
			c = append(c, FormatSeconds(row.P50Seconds), FormatSeconds(row.P99Seconds))
		}
		if um {
			c = append(c, fmt.Sprint(row.Faults), FormatSize(row.MigratedBytes), fmt.Sprint(row.Evictions))
		}
		if lineRate {
			c = append(c, formatSig(row.IOTLBMisses, 3, true), FormatSeconds(row.MapSeconds))
		}
		if attack {
			c = append(c, fmt.Sprint(row.Faults), fmt.Sprint(row.Escapes), fmt.Sprint(row.StaleEscapes),
				fmt.Sprint(row.SecretRead), fmt.Sprint(row.Changed))
		}
		if frames {
			c = append(c, strconv.FormatFloat(row.FPS, 'f', 2, 64), fmt.Sprint(row.Dropped),
				FormatSize(row.DRAMBytes), FormatSize(row.PCIeBytes))
		}
		t.AddRow(c...)
	}
	return t, sec
}

// gbpsDefinition says once, under the table, what its GB/s column is:
// a rate over a whole round trip reads very differently from a copy's.
func gbpsDefinition(r *Result) string {
	var roundtrip, bidir, ops bool
	for _, row := range r.Results {
		roundtrip = roundtrip || row.Direction == "roundtrip"
		bidir = bidir || row.Direction == "bidir"
		ops = ops || row.Ops != 0
	}
	parts := []string{"GB/s is size / time in 10^9 bytes per second; time is one copy's, from the call to its completion, the call's overhead included"}
	if roundtrip {
		parts = append(parts, "a roundtrip's time is the whole round trip: the CPU writing the input, the copies and the kernel, the CPU reading the output")
	}
	if bidir {
		parts = append(parts, "bidir is per direction, as nvbandwidth reports it")
	}
	if ops {
		parts = append(parts, "where a row has ops, size is per operation and time the whole run's")
	}
	return "note: " + strings.Join(parts, "; ") + "."
}
