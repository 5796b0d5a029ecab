package probe

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden reads reports measured on the lent H200 machines (2026-11-21,
// one GPU and two joined by NVLink) and checks that the writers reproduce
// what the device runs wrote.
func TestGolden(t *testing.T) {
	for _, base := range []string{"h200-2026-11-21", "h200x2-2026-11-21"} {
		t.Run(base, func(t *testing.T) { golden(t, base) })
	}
}

func golden(t *testing.T, base string) {
	in, err := os.Open(filepath.Join("testdata", base+".json"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	rep, err := ReadJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func(*bytes.Buffer) error{
		base + ".nvbandwidth.golden": func(b *bytes.Buffer) error { return rep.WriteNVBandwidth(b) },
		base + ".table.golden":       func(b *bytes.Buffer) error { return rep.WriteTable(b) },
	} {
		var got bytes.Buffer
		if err := write(&got); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s differs from what the writer produces now (run with -update if intended):\n%s", name, got.String())
		}
	}
	g := &rep.GPUs[0]
	if m := one(t, g, FamilyCE, "pinned", H2D, 256<<20); m.Median < 50 || m.Median > 64 {
		t.Errorf("recorded pinned h2d %g GB/s", m.Median)
	}
}
