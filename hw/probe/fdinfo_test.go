package probe

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestParseDMABufFDInfo parses fdinfo texts in the formats kernels print:
// mainline since 4.20 (generic lines, then size, count, exp_name), with a
// name set, and with Android's dmabuf_inode_no; and refuses texts that
// are not a dma-buf's or whose numbers do not parse.
func TestParseDMABufFDInfo(t *testing.T) {
	tests := []struct {
		name, text string
		want       DMABufFDInfo
		err        string
	}{
		{
			// Read on the lent H100 (driver 580.159.04, Linux 6.18) after
			// cuMemGetHandleForAddressRange of 2 MiB, 2026-11-25.
			name: "nvidia on an H100",
			text: "pos:\t0\nflags:\t02000002\nmnt_id:\t12\nino:\t1\nsize:\t2097152\ncount:\t1\nexp_name:\tnv_dmabuf\n",
			want: DMABufFDInfo{Flags: "02000002", MntID: 12, Ino: 1, Size: 2 << 20, Count: 1, ExpName: "nv_dmabuf"},
		},
		{
			name: "named, shared by two descriptors",
			text: "pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t31\nsize:\t8294400\ncount:\t2\nexp_name:\tsystem\nname:\tframe0\n",
			want: DMABufFDInfo{Flags: "02", MntID: 15, Ino: 31, Size: 8294400, Count: 2, ExpName: "system", Name: "frame0"},
		},
		{
			name: "android inode line",
			text: "pos:\t0\nflags:\t02000002\nmnt_id:\t9\nino:\t7\ndmabuf_inode_no:\t7\nsize:\t4096\ncount:\t1\nexp_name:\tqcom,system\n",
			want: DMABufFDInfo{Flags: "02000002", MntID: 9, Ino: 7, Size: 4096, Count: 1, ExpName: "qcom,system",
				Other: map[string]string{"dmabuf_inode_no": "7"}},
		},
		{name: "an eventfd", text: "pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t1057\neventfd-count:\t0\n", err: "not a dma-buf"},
		{name: "bad size", text: "size:\tlots\nexp_name:\tnvidia\n", err: "size"},
		{name: "flags not octal", text: "flags:\t0x2\nexp_name:\tnvidia\n", err: "flags"},
		{name: "no key", text: "exp_name:\tnvidia\ngarbage\n", err: "no key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDMABufFDInfo(tt.text)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Size != tt.want.Size || got.Count != tt.want.Count || got.ExpName != tt.want.ExpName ||
				got.Flags != tt.want.Flags || got.Ino != tt.want.Ino || got.MntID != tt.want.MntID ||
				got.Name != tt.want.Name || len(got.Other) != len(tt.want.Other) {
				t.Fatalf("got %+v, want %+v", *got, tt.want)
			}
			for k, v := range tt.want.Other {
				if got.Other[k] != v {
					t.Errorf("other %s = %q, want %q", k, got.Other[k], v)
				}
			}
		})
	}
}

// TestCapabilitiesDMABufFDInfo: the capabilities family exports device
// memory max(samples, 3) times and records the kernel's fdinfo of the
// first fd (size, exporter, count), the export's times in µs, and their
// table lines; JSON carries the new fields. An fdinfo that does not
// parse is recorded as an error, and the export still counts.
func TestCapabilitiesDMABufFDInfo(t *testing.T) {
	opts := Options{Sizes: []int64{1 << 20}, Families: []string{FamilyCapabilities}}
	rep, err := run(t, NewFake(FakeConfig{CallCost: 3 * time.Microsecond}), opts)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.GPUs[0].Capabilities
	if c == nil || !c.DMABufExport || c.DMABufFDInfo == nil {
		t.Fatalf("capabilities %+v", c)
	}
	if i := c.DMABufFDInfo; i.ExpName != "nv_dmabuf" || i.Size != 2<<20 || i.Count != 1 || i.Flags != "02000002" {
		t.Errorf("fdinfo %+v, want nv_dmabuf's 2 MiB export held by one descriptor", *i)
	}
	if st := c.DMABufExportMicros; st == nil || len(c.DMABufExportValues) != 3 || st.Median < 3 || st.Min > st.Median || st.Max < st.Median {
		t.Errorf("export times %+v over %v, want 3 samples of at least the 3 µs call", st, c.DMABufExportValues)
	}
	var js, tb bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"dma_buf_fdinfo"`, `"exp_name": "nv_dmabuf"`, `"size": 2097152`, `"dma_buf_export_us"`, `"dma_buf_export_us_values"`} {
		if !strings.Contains(js.String(), k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
	if err := rep.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"dma-buf fdinfo: exp_name nv_dmabuf, size 2097152, count 1, flags 02000002", "us median", "3 samples"} {
		if !strings.Contains(tb.String(), k) {
			t.Errorf("table lacks %q:\n%s", k, tb.String())
		}
	}

	rep, err = run(t, NewFake(FakeConfig{FDInfo: "pos:\t0\nflags:\t02\n"}), opts)
	if err != nil {
		t.Fatal(err)
	}
	c = rep.GPUs[0].Capabilities
	if !c.DMABufExport || c.DMABufFDInfo != nil || !strings.Contains(c.DMABufFDInfoError, "not a dma-buf") {
		t.Errorf("unparsable fdinfo: %+v", c)
	}
}
