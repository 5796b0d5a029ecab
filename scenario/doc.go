// Package scenario holds dmalab's built-in scenarios: programs that run
// on a modelled machine and fill a report, each with typed parameters
// (set with --set key=value) and a default platform. They register in the
// root package's catalogue (dmalab.Register) from init and run on a
// System booted through the front door (dmalab.RunScenario), as a
// program's own scenarios do.
//
// A scenario is the model's counterpart of a benchmark on real hardware:
// "transfers" is what nvbandwidth and CUDA's bandwidthTest measure, with
// the path and direction names (package xfer) "dmalab probe" uses, so the
// model's predictions and the hardware's measurements print side by side.
package scenario
