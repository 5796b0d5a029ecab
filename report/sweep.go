package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Sweep is the document of a parameter sweep (dmalab run --sweep
// --json): the sweep's definition and, per point of the cartesian
// product, the values of its swept keys and the run's document. A shard
// (--shard I/N) holds some of the points and says which shard it is;
// merging every shard gives the document of the whole sweep, byte for
// byte. Its JSON form is documented in docs/json.md.
type Sweep struct {
	Sweep SweepDef `json:"sweep"`
	// Shard is set in a shard's document only.
	Shard  *SweepShard  `json:"shard,omitempty"`
	Points []SweepPoint `json:"points"`
}

// SweepDef is what defines a sweep: the command and everything given to
// it. Two shards belong to one sweep when their definitions are equal.
type SweepDef struct {
	// Command is the subcommand whose runs the points are: "run", or
	// "check" (then each point has its diagnostics too).
	Command  string `json:"command"`
	Scenario string `json:"scenario"`
	// Platform is --platform as given; empty for the scenario's own.
	Platform string `json:"platform,omitempty"`
	// Sets are the --set assignments every point shares, in order.
	Sets []string `json:"sets,omitempty"`
	// NUMACtl and Attribution are those of --numactl and --attribution.
	NUMACtl     string `json:"numactl,omitempty"`
	Attribution bool   `json:"attribution,omitempty"`
	// Axes are the swept keys in the order given: the first varies
	// slowest.
	Axes []SweepAxis `json:"axes"`
	// Points is the size of the product, every shard's points together.
	Points int `json:"points"`
}

// SweepAxis is one --sweep KEY=V1,V2,...: a --set key and its values.
type SweepAxis struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

// SweepShard says which shard of a sweep a document holds: the points
// whose index modulo Count is Index.
type SweepShard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// SweepPoint is one point of a sweep: its index in the product, the value
// of each swept key, and the run's document (Result's JSON), kept as the
// bytes it was written as, so that a merge reproduces them exactly.
type SweepPoint struct {
	Index  int               `json:"index"`
	Params map[string]string `json:"params"`
	Result json.RawMessage   `json:"result"`
	// Check is a check sweep's diagnostics at this point, the document
	// "dmalab check --json" prints.
	Check json.RawMessage `json:"check,omitempty"`
}

// Point returns the swept keys' values of point p, the first axis
// varying slowest (as nested loops in the order the axes were given).
func (d *SweepDef) Point(p int) []string {
	vals := make([]string, len(d.Axes))
	for i := len(d.Axes) - 1; i >= 0; i-- {
		n := len(d.Axes[i].Values)
		vals[i] = d.Axes[i].Values[p%n]
		p /= n
	}
	return vals
}

// Size is the number of points of the product.
func (d *SweepDef) Size() int {
	n := 1
	for _, a := range d.Axes {
		n *= len(a.Values)
	}
	return n
}

// InShard reports whether point p belongs to shard index of count.
func InShard(p, index, count int) bool { return p%count == index }

// WriteSweepJSON writes s as one indented JSON document, as WriteJSON
// writes a Result.
func WriteSweepJSON(w io.Writer, s *Sweep) error {
	if s.Points == nil {
		// An empty shard is an empty list, not null.
		s.Points = []SweepPoint{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// ReadSweep decodes a sweep document.
func ReadSweep(r io.Reader) (*Sweep, error) {
	dec := json.NewDecoder(r)
	var s Sweep
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("read sweep: %w", err)
	}
	if s.Sweep.Command == "" || len(s.Sweep.Axes) == 0 {
		return nil, fmt.Errorf("read sweep: not a sweep document (no \"sweep\" with axes)")
	}
	return &s, nil
}

// WriteSweepTable writes s for people: what was swept, one table of
// every point's rows with the swept keys as the first columns (the
// columns every scenario's rows have), then each point's own table
// (WriteTable) under a heading with its values.
func WriteSweepTable(w io.Writer, s *Sweep) error {
	d := &s.Sweep
	WriteSweepHeading(w, s)
	results := make([]Result, len(s.Points))
	var mode, plat bool
	for i, p := range s.Points {
		if err := json.Unmarshal(p.Result, &results[i]); err != nil {
			return fmt.Errorf("sweep point %d: %w", p.Index, err)
		}
		for _, row := range results[i].Results {
			mode = mode || row.Mode != ""
			plat = plat || row.Platform != ""
		}
	}
	if len(s.Points) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "point\t"
	for _, a := range d.Axes {
		// A platform field by its last words: the full path is above.
		head += shortKey(a.Key) + "\t"
	}
	if plat {
		head += "platform\t"
	}
	head += "path\tdirection\t"
	if mode {
		head += "mode\t"
	}
	fmt.Fprintln(tw, head+"size\ttime\tGB/s\t")
	for i, p := range s.Points {
		at := strconv.Itoa(p.Index+1) + "\t"
		for _, a := range d.Axes {
			at += p.Params[a.Key] + "\t"
		}
		for _, row := range results[i].Results {
			line := at
			if plat {
				line += row.Platform + "\t"
			}
			line += row.Path + "\t" + row.Direction + "\t"
			if mode {
				line += row.Mode + "\t"
			}
			fmt.Fprintln(tw, line+FormatBytes(row.Bytes)+"\t"+FormatSeconds(row.Seconds)+"\t"+FormatGBps(row.GBps)+"\t")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, p := range s.Points {
		fmt.Fprintf(w, "\n%s\n", s.PointHeading(p))
		if err := WriteTable(w, &results[i]); err != nil {
			return err
		}
	}
	return nil
}

// WriteSweepHeading writes the line that says what s swept.
func WriteSweepHeading(w io.Writer, s *Sweep) {
	d := &s.Sweep
	var keys []string
	for _, a := range d.Axes {
		keys = append(keys, fmt.Sprintf("%s (%d)", a.Key, len(a.Values)))
	}
	what := d.Scenario
	if d.Command != "run" {
		what = d.Command + " " + d.Scenario
	}
	fmt.Fprintf(w, "sweep of %s: %d points over %s", what, d.Points, strings.Join(keys, " × "))
	if s.Shard != nil {
		fmt.Fprintf(w, "; shard %d/%d holds %d", s.Shard.Index, s.Shard.Count, len(s.Points))
	}
	fmt.Fprintln(w)
}

// PointHeading is the line that names point p in text output.
func (s *Sweep) PointHeading(p SweepPoint) string {
	var at []string
	for _, a := range s.Sweep.Axes {
		at = append(at, a.Key+"="+p.Params[a.Key])
	}
	return fmt.Sprintf("[point %d of %d] %s", p.Index+1, s.Sweep.Points, strings.Join(at, " "))
}

// shortKey is a swept key as a column's heading: a platform field's path
// without "platform." and its parents when the last two words are enough
// (platform.gpus.gpu0.link.gen is "link.gen").
func shortKey(k string) string {
	if !strings.HasPrefix(k, "platform.") {
		return k
	}
	parts := strings.Split(k, ".")
	return strings.Join(parts[max(len(parts)-2, 1):], ".")
}

// SameSweep reports whether a and b define the same sweep.
func SameSweep(a, b *SweepDef) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
