package kernels

import (
	"regexp"
	"strings"
	"testing"
)

var (
	entryRE = regexp.MustCompile(`\.visible \.entry (\w+)\(([^)]*)\)`)
	paramRE = regexp.MustCompile(`\.param \.(u64|u32|b64|b32) (\w+)`)
)

// TestPTXMatchesParams checks each PTX file's header and that its entry's
// parameter list is exactly what the Go side documents and launches with.
func TestPTXMatchesParams(t *testing.T) {
	for _, k := range All {
		t.Run(k.Entry, func(t *testing.T) {
			src := string(k.PTX())
			for _, h := range []string{".version 7.0\n", ".target sm_70\n", ".address_size 64\n"} {
				if !strings.Contains(src, h) {
					t.Errorf("missing header %q", strings.TrimSpace(h))
				}
			}
			m := entryRE.FindAllStringSubmatch(src, -1)
			if len(m) != 1 {
				t.Fatalf("want one .entry, found %d", len(m))
			}
			if m[0][1] != k.Entry {
				t.Errorf("entry %q, Go says %q", m[0][1], k.Entry)
			}
			ps := paramRE.FindAllStringSubmatch(m[0][2], -1)
			if len(ps) != len(k.Params) {
				t.Fatalf("PTX has %d params, Go says %d", len(ps), len(k.Params))
			}
			for i, p := range ps {
				size := 8
				if strings.HasSuffix(p[1], "32") {
					size = 4
				}
				if p[2] != k.Params[i].Name || size != k.Params[i].Bytes {
					t.Errorf("param %d: PTX %s (%d B), Go %s (%d B)", i, p[2], size, k.Params[i].Name, k.Params[i].Bytes)
				}
				if !strings.Contains(src, "["+p[2]+"]") {
					t.Errorf("param %s is never loaded", p[2])
				}
			}
			if strings.Count(src, "{") != strings.Count(src, "}") {
				t.Error("unbalanced braces")
			}
		})
	}
}

func TestArgs(t *testing.T) {
	if _, err := Copy.Args(1, 2); err == nil {
		t.Error("Copy.Args with 2 values succeeded")
	}
	if _, err := Touch.Args(1, 2, 3, 0, 1<<32); err == nil {
		t.Error("Touch.Args accepted a 33-bit write flag")
	}
	if a, err := Touch.Args(1, 2, 3, 0, 1); err != nil || len(a) != 5 {
		t.Errorf("Touch.Args = %v, %v", a, err)
	}
}
