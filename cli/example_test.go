package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/cli"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/xfer"
)

// txScenario is a user's own scenario: a driver transmitting one packet
// of size bytes through the Zynq's GEM, the buffer mapped with the
// direction the "dir" parameter names.
var txScenario = &dmalab.Scenario{
	Name:     "my-tx",
	Summary:  "one packet sent by my driver",
	Platform: "zynq-7000",
	Params: []dmalab.Param{
		{Name: "size", Kind: dmalab.ParamSize, Max: 64 << 10, Default: "1500B", Help: "the packet"},
		{Name: "dir", Kind: dmalab.ParamEnum, Values: []string{"to-device", "from-device"}, Default: "to-device", Help: "the mapping's direction"},
	},
	Run: func(c *dmalab.Context) error {
		gem, err := c.Device("gem0")
		if err != nil {
			return err
		}
		n := uint64(c.Size("size"))
		dir := dma.ToDevice
		if c.Value("dir") == "from-device" {
			dir = dma.FromDevice // wrong for a packet the CPU wrote
		}
		return c.Run("tx", func(p *dmalab.Process) error {
			buf, err := c.Mem.Kmalloc(p.Node(), n)
			if err != nil {
				return err
			}
			t0 := p.Now()
			c.Mem.Write(p.Thread, p.Node(), buf, n)
			h := gem.MapSingle(p.Thread, buf, n, dir)
			if gem.MappingError(h) {
				return errors.New("dma_map_single failed")
			}
			if _, err := gem.Read(h, n); err != nil {
				return err
			}
			gem.UnmapSingle(p.Thread, h, n, dir)
			took := p.Now() - t0
			c.Result.Results = append(c.Result.Results, report.Row{
				Name: "tx", Path: string(xfer.Streaming), Direction: string(xfer.Tx), Bytes: int64(n),
				Seconds: took.Seconds(), GBps: float64(n) / took.Seconds() / 1e9,
			})
			return nil
		})
	},
}

// A program registers its scenarios from init, as the built-in ones do.
func init() { dmalab.Register(txScenario) }

// A program that registered its own scenario hands the command line to
// cli: "run" and "check" (with --set, --platform, --json, --trace) work
// for it as for the built-in ones. Here the arguments are given; a real
// program's main would be os.Exit(cli.Main(os.Args[1:])).
func Example_userScenario() {
	code := cli.Run([]string{"check", "my-tx"}, os.Stdout, os.Stderr)
	fmt.Println("exit", code)
	code = cli.Run([]string{"check", "my-tx", "--set", "dir=from-device", "--set", "size=64B"}, os.Stdout, os.Stderr)
	fmt.Println("exit", code)
	code = cli.Run([]string{"run", "my-tx", "--set", "size=1MiB"}, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	code = cli.Run([]string{"run", "my-tx"}, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	// Output:
	// my-tx on zynq-7000: no diagnostics
	// exit 0
	// my-tx on zynq-7000: 1 diagnostic(s)
	//
	// error stale-read [gem0] at 226.667ns, device gem0, pa:0x100000 +64
	//   device read of pa:0x100000 +64 obtained version 0 at pa:0x100000, but the latest write there is version 1 (inside gem0's active DMA_FROM_DEVICE mapping dma:0x100000 +64)
	//   made by dma_map_single(gem0, va:0xffff888000100000, 64, DMA_FROM_DEVICE) at 226.667ns by tx
	//
	// by class:
	//   stale-read  1
	// exit 1
	// dmalab run: --set size=1MiB: size "1MiB": at most 64 KiB
	// exit 2
	// my-tx on zynq-7000
	// params: dir=to-device seed=1 size=1500B
	//
	// path       direction      size      time   GB/s
	// streaming  tx         1.46 KiB  6.025 us  0.249
	//
	// note: GB/s is size / time in 10^9 bytes per second; time is one copy's, from the call to its completion, the call's overhead included.
	//
	// factors:
	//   fabric.bandwidth_factor = 1  (default: no measured reason to scale link capacities)
	//   fabric.cross_traffic = 0  (default: no measured reverse-direction load)
	//   fabric.latency_factor = 1  (default: no measured reason to scale latencies)
	//
	// next:
	//   dmalab run my-tx --set platform.fabric.bandwidth_factor=0.9   (every link 10 % slower)
	//   dmalab check my-tx   (the same run under the DMA checker)
	// exit 0
}

// TestUserScenario: a scenario a program registered gets the whole
// command line: list shows it, run --help its parameters, run --json and
// --trace work, and a bad value of its parameters is bad usage.
func TestUserScenario(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Run(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, _ := run("list"); code != 0 || !strings.Contains(out, "my-tx") {
		t.Errorf("list: exit %d, lacks my-tx:\n%s", code, out)
	}
	if code, out, _ := run("run", "my-tx", "--help"); code != 0 || !strings.Contains(out, "the mapping's direction") {
		t.Errorf("run my-tx --help: exit %d:\n%s", code, out)
	}
	trace := filepath.Join(t.TempDir(), "trace.json")
	code, out, errs := run("run", "my-tx", "--json", "--trace", trace, "--set", "size=4KiB")
	if code != 0 {
		t.Fatalf("run --json: exit %d: %s", code, errs)
	}
	var doc report.Result
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("run --json printed no JSON: %v\n%s", err, out)
	}
	if doc.Scenario != "my-tx" || doc.Params["size"] != "4KiB" || len(doc.Results) != 1 || doc.Results[0].Bytes != 4096 {
		t.Errorf("run --json: %+v", doc)
	}
	if b, err := os.ReadFile(trace); err != nil || !bytes.Contains(b, []byte("traceEvents")) {
		t.Errorf("trace: %v, %.80q", err, b)
	}
	if code, _, errs := run("run", "my-tx", "--set", "dir=sideways"); code != 2 || !strings.Contains(errs, "dir=sideways") {
		t.Errorf("a bad dir: exit %d, stderr %q", code, errs)
	}
}
