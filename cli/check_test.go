package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check"
)

func TestCheckCommand(t *testing.T) {
	code, out, errs := dmalab(t, "check", "dma-bugs", "--set", "bug=unmap-size", "--json")
	if code != exitFindings {
		t.Fatalf("check of a buggy run: exit %d, want %d (stderr %q)", code, exitFindings, errs)
	}
	var doc struct {
		Diagnostics []map[string]any `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("check --json: %v\n%s", err, out)
	}
	if len(doc.Diagnostics) != 1 {
		t.Fatalf("diagnostics: %v", doc.Diagnostics)
	}
	d := doc.Diagnostics[0]
	for _, k := range []string{"class", "severity", "time_ps", "device", "message", "origin"} {
		if _, ok := d[k]; !ok {
			t.Errorf("diagnostic lacks %q: %v", k, d)
		}
	}
	if d["class"] != "unmap-size" || d["device"] != "gem0" || !strings.Contains(d["origin"].(string), "dma_map_single") {
		t.Errorf("diagnostic %v", d)
	}

	// A clean run exits 0: the transfers scenario makes no DMA API call.
	if code, out, _ := dmalab(t, "check", "transfers", "--set", "sizes=4KiB"); code != exitOK || !strings.Contains(out, "no diagnostics") {
		t.Errorf("check of a clean run: exit %d, %q", code, out)
	}
	// The readable form names the class, the time and the origin.
	_, out, _ = dmalab(t, "check", "dma-bugs", "--set", "bug=stale-read")
	for _, want := range []string{"stale-read", "gem0", "made by dma_map_single", "by class:"} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
}

func TestCheckClassesAndUsage(t *testing.T) {
	code, out, _ := dmalab(t, "check", "--classes")
	if code != exitOK || !strings.Contains(out, "unmap-unknown") || !strings.Contains(out, "stale-read") {
		t.Fatalf("check --classes: exit %d\n%s", code, out)
	}
	// A class's first line starts with its code; its meaning and source
	// continue on indented lines.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if !strings.HasPrefix(l, " ") {
			lines = append(lines, l)
		}
	}
	want := len(check.Classes())
	if n := len(lines); n != want || want != 52 || !strings.Contains(out, "use-after-free") {
		t.Errorf("check --classes printed %d classes, want %d: 52 classes with the GPU, IOMMU, VFIO, DMA-BUF, GPUDirect and registration-cache ones", n, want)
	}
	// The IOMMU pack's classes come after the first 27, then the
	// DMA-BUF pack's, then the GPUDirect pack's last, each pack's in its
	// order.
	last := []string{"iommu-fault", "iommu-permission", "iommu-stale-iotlb", "iova-leak", "vfio-dma-unmapped",
		"dmabuf-fence-race", "dmabuf-use-after-detach", "dmabuf-cpu-access-unsynced", "dmabuf-fd-not-owned",
		"dmabuf-fd-aliased", "dmabuf-release-mapped", "fence-never-signaled", "fence-double-signal",
		"gpudirect-put-pages-in-callback", "gpudirect-callback-blocks", "gpudirect-pin-unaligned", "gpudirect-bar1-exhausted",
		"gpudirect-token-not-owner", "gpudirect-read-before-visible", "gpudirect-write-during-kernel",
		"gpudirect-iommu-translating", "gpudirect-pin-leak",
		"regcache-stale-region", "regcache-unpin-in-use", "regcache-freed-pinned"}
	for i, code := range last {
		if l := lines[len(lines)-len(last)+i]; !strings.HasPrefix(l, code+" ") {
			t.Errorf("line %d of check --classes is %q, want %s", len(lines)-len(last)+i, l, code)
		}
	}
	for _, args := range [][]string{{"check"}, {"check", "nosuch"}, {"check", "dma-bugs", "--set", "bug=nosuch"}, {"check", "--classes", "dma-bugs"}} {
		if code, _, errs := dmalab(t, args...); code != exitUsage || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}
