// Package rcachecheck is the checker's rule pack for the registration
// cache (package regcache): the misuses that UCX, libfabric, Open MPI
// and NCCL registration caches have shipped. It watches a cache from
// outside — a Pinner wrapper sees every pin and unpin, and the caller
// tells it of Gets, Puts, uses and frees — so it proves the cache's
// own buffer-ID check independently instead of trusting it.
package rcachecheck
