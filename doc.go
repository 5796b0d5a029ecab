// Package dmalab is the front door to the model: it boots a whole system
// from a platform and runs programs and scenarios on it.
//
// Boot (a preset name or a YAML file) and BootSpec (a platform.Spec) build,
// once, everything a program on a real machine would find: the machine
// (memory, caches, links, engines), the kernel (processes and their file
// descriptors), the DMA API over every device, the GPUs with the CUDA
// driver API façade, and, when asked, the checker and the trace. Each part
// gets the platform's own numbers (cache-line size, a device's segment
// limits), which a program wiring the packages by hand would have to copy
// out of the spec. System.Run runs a program — a Go function taking the
// process it runs in — to the end of virtual time and returns its error;
// System.Diagnostics gives what the checker saw.
//
// A scenario is a named program with typed parameters and a default
// platform. Register adds one to the catalogue (the built-in scenarios of
// package scenario register from init); RunScenario resolves the platform,
// applies "--set" assignments, parses every parameter once, boots a
// System and runs the scenario on it. Package cli turns the catalogue into
// the dmalab command, so a program that registers its own scenario and
// calls cli.Main gets run, check, --json and --trace for it.
//
// This is the composition root in the sense of cilium/ebpf's
// NewCollection: one place builds the system from its description, and
// nothing rebuilds part of it later. A scenario that needs a different
// platform than the one the user gave (um-oversubscribe's smaller GPU)
// says so through Scenario.Adjust, before the system boots.
package dmalab
