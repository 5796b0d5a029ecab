package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/dmalab/dmalab/cli"
	"github.com/dmalab/dmalab/report"
)

// A sweep of a platform field: the pinned copy's bandwidth on a GPU link
// of PCIe Gen3, Gen4 and Gen5, one point per generation, read from the
// sweep document.
func Example_sweep() {
	var out bytes.Buffer
	code := cli.Run([]string{"run", "transfers", "--set", "paths=pinned", "--set", "sizes=64MiB", "--set", "directions=h2d",
		"--sweep", "platform.gpus.gpu0.link.gen=3,4,5", "--json"}, &out, io.Discard)
	doc, err := report.ReadSweep(&out)
	if err != nil {
		fmt.Println(code, err)
		return
	}
	for _, p := range doc.Points {
		var r report.Result
		if err := json.Unmarshal(p.Result, &r); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("Gen%s: %.0f GB/s\n", p.Params["platform.gpus.gpu0.link.gen"], r.Results[0].GBps)
	}
	// Output:
	// Gen3: 14 GB/s
	// Gen4: 28 GB/s
	// Gen5: 55 GB/s
}
