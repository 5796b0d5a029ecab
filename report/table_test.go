package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestTableText: words left-aligned, integers right-aligned, decimal
// columns aligned on the point and on the unit, no trailing spaces.
func TestTableText(t *testing.T) {
	tb := &Table{Columns: []Column{{Name: "path"}, {Name: "n", Align: AlignRight}, {Name: "time", Align: AlignDecimal}, {Name: "GB/s", Align: AlignDecimal}}}
	tb.AddRow("pinned", "1", "87.57 ms", "0.00121")
	tb.AddRow("managed-fault", "131072", "156 ms", "55.5")
	tb.AddRow("x", "2", "-", "-")
	var b bytes.Buffer
	if err := tb.WriteText(&b, "  "); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"  path                n       time      GB/s\n" +
		"  pinned              1   87.57 ms   0.00121\n" +
		"  managed-fault  131072  156    ms  55.5\n" +
		"  x                   2    -         -\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestTableWrap: a wrapped column breaks at words onto rows of its own,
// a line break in a cell starts a new one.
func TestTableWrap(t *testing.T) {
	tb := &Table{Columns: []Column{{Name: "code"}, {Name: "meaning", Wrap: 12}}}
	tb.AddRow("a", "one two three four\n(src)")
	var b bytes.Buffer
	tb.WriteText(&b, "")
	want := "code  meaning\na     one two\n      three four\n      (src)\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}

// TestTableCSV: RFC 4180 quoting, the header first, the cells as given.
func TestTableCSV(t *testing.T) {
	tb := &Table{Columns: []Column{{Name: "row"}, {Name: "note"}}}
	tb.AddRow("a", `x, "y"`)
	var b bytes.Buffer
	if err := tb.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	if want := "row,note\na,\"x, \"\"y\"\"\"\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	var rb bytes.Buffer
	WriteCSV(&rb, &Result{Results: []Row{{Path: "pinned", Direction: "h2d", Bytes: 1 << 30, Seconds: 0.0194, GBps: 55.48}}})
	if want := "path,direction,size,time,GB/s\npinned,h2d,1 GiB,19.4 ms,55.5\n"; !strings.HasPrefix(rb.String(), want) {
		t.Errorf("WriteCSV = %q, want %q", rb.String(), want)
	}
}

// TestCompressKeys: runs of numbered keys become ranges, numbers in
// numeric order; lone keys and keys without numbers stay as they are.
func TestCompressKeys(t *testing.T) {
	in := []string{"fabric.x", "gpu0.link.efficiency", "gpu1.link.efficiency", "gpu10.link.efficiency", "gpu2.link.efficiency",
		"gpu9.link.efficiency", "nic3.link.efficiency", "nvlink.gpu0-nvswitch.efficiency", "nvlink.gpu1-nvswitch.efficiency"}
	want := []string{"fabric.x", "gpu[0-2].link.efficiency", "gpu[9-10].link.efficiency", "nic3.link.efficiency", "nvlink.gpu[0-1]-nvswitch.efficiency"}
	if got := compressKeys(in); !slices.Equal(got, want) {
		t.Errorf("compressKeys = %q, want %q", got, want)
	}
}
