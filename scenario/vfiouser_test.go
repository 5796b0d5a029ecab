package scenario

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/report"
)

func vfioUserRows(t *testing.T, out *Outcome) map[string]report.Row {
	t.Helper()
	rows := map[string]report.Row{}
	for _, r := range out.Result.Results {
		key := r.Path + " " + r.Direction + " " + r.Mode
		rows[strings.TrimSpace(key)] = r
	}
	return rows
}

// TestVFIOUserDriver: both interfaces take the drive, map the buffer,
// bring the controller up and move every I/O, the reads verified
// against the writes (a mismatch fails the run); the rates stay below
// the drive's 7 GB/s; an interrupt-driven driver spends less CPU per
// I/O than a polling one; the run records the strict mode it forced
// on a platform whose IOMMU is off; and a correct driver is clean
// under the checker.
func TestVFIOUserDriver(t *testing.T) {
	s, _ := Lookup("vfio-user-driver")
	cpu := map[string]float64{}
	for _, irq := range []string{"poll", "eventfd"} {
		out, err := Run(s, Options{Check: true, Sets: []string{"ios=500", "irq=" + irq, "io_size=16KiB"}})
		if err != nil {
			t.Fatalf("irq=%s: %v", irq, err)
		}
		if got := out.Result.Params["iommu_mode"]; got != "strict" {
			t.Errorf("iommu_mode %q, want strict (the preset's IOMMU is off)", got)
		}
		rows := vfioUserRows(t, out)
		for _, iface := range []string{"legacy", "iommufd"} {
			m := rows[iface+" map"]
			if m.Bytes != 2<<20 || m.Seconds <= 0 || !strings.Contains(m.Note, "locked 2 MiB") {
				t.Errorf("%s map: %+v", iface, m)
			}
			if p := rows[iface+" probe"]; p.Seconds < 1e-3 {
				t.Errorf("%s probe took %g s: the controller's 1 ms ready time is missing", iface, p.Seconds)
			}
			for _, dir := range []string{"write", "read"} {
				r := rows[iface+" "+dir+" "+irq]
				if r.Ops != 500 || r.Bytes != 16<<10 || r.GBps <= 0 || r.GBps > 7 || r.P99Seconds < r.P50Seconds {
					t.Errorf("%s %s: %+v", iface, dir, r)
				}
			}
			cpu[irq] += rows[iface+" read "+irq].CPUSeconds
		}
		if out.Check == nil || len(out.Check.Diagnostics) != 0 {
			t.Errorf("irq=%s: a correct driver got diagnostics: %+v", irq, out.Check)
		}
	}
	if cpu["eventfd"] >= cpu["poll"]/2 {
		t.Errorf("CPU per read: eventfd %g s against poll %g s: sleeping in read(2) should cost far less than spinning", cpu["eventfd"], cpu["poll"])
	}
}

// TestVFIOUserDriverBugs: a PRP at an IOVA never mapped completes with
// Data Transfer Error and is the checker's vfio-dma-unmapped, once per
// interface; a mapping past RLIMIT_MEMLOCK is ENOMEM; a NIC taken from
// a group whose other devices keep their drivers is EPERM.
func TestVFIOUserDriverBugs(t *testing.T) {
	s, _ := Lookup("vfio-user-driver")
	out, err := Run(s, Options{Check: true, Sets: []string{"ios=64", "bugs=unmapped-iova,memlock,group", "memlock=8MiB"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := vfioUserRows(t, out)
	for key, want := range map[string]string{
		"legacy bug unmapped-iova":  "Data Transfer Error",
		"iommufd bug unmapped-iova": "Data Transfer Error",
		"legacy bug memlock":        "cannot allocate memory",
		"iommufd bug memlock":       "cannot allocate memory",
		"legacy bug group":          "operation not permitted",
	} {
		if r, ok := rows[key]; !ok || !strings.Contains(r.Note, want) {
			t.Errorf("%s: %q, want it to say %q", key, r.Note, want)
		}
	}
	if !strings.Contains(rows["legacy bug group"].Note, "viable false") {
		t.Errorf("group note %q: want the group reported not viable", rows["legacy bug group"].Note)
	}
	n := 0
	for _, d := range out.Check.Diagnostics {
		if d.Class != "vfio-dma-unmapped" {
			t.Errorf("unexpected diagnostic %s: %s", d.Class, d.Message)
			continue
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d vfio-dma-unmapped, want one per interface", n)
	}
}

// TestVFIOUserDriverDeterministic: byte-identical JSON from the same
// inputs.
func TestVFIOUserDriverDeterministic(t *testing.T) {
	s, _ := Lookup("vfio-user-driver")
	run := func() []byte {
		out, err := Run(s, Options{Sets: []string{"ios=200", "bugs=unmapped-iova"}})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := report.WriteJSON(&b, out.Result); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Error("two runs differ")
	}
}

// TestVFIOUserDriverUsage: bad input is a usage error naming it.
func TestVFIOUserDriverUsage(t *testing.T) {
	s, _ := Lookup("vfio-user-driver")
	for _, tc := range []struct {
		opt  Options
		want string
	}{
		{Options{Sets: []string{"io_size=1000"}}, "io_size"},
		{Options{Sets: []string{"device=nic0"}}, "not an NVMe drive"},
		{Options{Platform: "h200-pcie"}, "no NVMe drive"},
		{Options{Sets: []string{"memlock=1MiB"}}, "memlock"},
		{Options{Sets: []string{"ios=100000000"}}, "ios"},
	} {
		_, err := Run(s, tc.opt)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error naming %q", tc.opt, err, tc.want)
		}
	}
}

// TestVFIOUserDriverVerifyCost: checking every 128 KiB read costs the
// one driver thread more than the drive takes, so without it the reads
// run near the drive's rate and with it well below.
func TestVFIOUserDriverVerifyCost(t *testing.T) {
	s, _ := Lookup("vfio-user-driver")
	rate := map[string]float64{}
	for _, v := range []string{"true", "false"} {
		out, err := Run(s, Options{Sets: []string{"ios=300", "io_size=128KiB", "interfaces=legacy", "verify=" + v}})
		if err != nil {
			t.Fatal(err)
		}
		rate[v] = vfioUserRows(t, out)["legacy read poll"].GBps
	}
	if rate["false"] < 6 || rate["true"] > rate["false"]*0.8 {
		t.Errorf("128 KiB reads: %.2f GB/s verified, %.2f unverified; want the unverified near the drive's ~7 GB/s and the verified well below", rate["true"], rate["false"])
	}
}
