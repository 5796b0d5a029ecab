// Command dmalab models, checks and measures data movement between CPUs,
// GPUs and I/O devices. Run "dmalab help" for the subcommands.
package main

import (
	"os"

	"github.com/dmalab/dmalab/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
