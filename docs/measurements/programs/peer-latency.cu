// peer-latency.cu: one GPU thread chasing pointers, by dmalab probe's
// latency method (a random cycle of 4096 nodes, one per stride, timed in
// the kernel by %globaltimer), through: its own VRAM (256 MiB, 64 KiB
// stride), a peer GPU's VRAM over NVLink with peer access enabled (the
// same layout: nvbandwidth's device_to_device_latency_sm), and mapped
// pinned host memory (64 MiB, 16 KiB stride: host_device_latency_sm).
// Build: nvcc -O2 -o peer-latency peer-latency.cu
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <random>
#include <cstring>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
	fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ uint64_t gtimer() {
	uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}

__global__ void chase(uint64_t *start, int steps, uint64_t *out) {
	uint64_t *p = start;
	for (int i = 0; i < 64; i++) p = (uint64_t *)*p; // warm the TLBs' walk of the first nodes
	uint64_t t0 = gtimer();
	for (int i = 0; i < steps; i++) p = (uint64_t *)*p;
	uint64_t t1 = gtimer();
	out[0] = t1 - t0;
	out[1] = (uint64_t)p;
}

// build writes a random cycle over region bytes at dev (device address
// base) through host staging, and returns the start.
static uint64_t build(void *base, bool host, size_t region, size_t stride, int dev) {
	int nodes = (int)std::min(region / stride, (size_t)4096);
	std::vector<int> order(nodes);
	for (int i = 0; i < nodes; i++) order[i] = i;
	std::mt19937_64 rng(region ^ stride);
	std::shuffle(order.begin(), order.end(), rng);
	std::vector<uint8_t> img(region, 0);
	for (int i = 0; i < nodes; i++) {
		uint64_t next = (uint64_t)base + (uint64_t)order[(i + 1) % nodes] * stride;
		*(uint64_t *)&img[(size_t)order[i] * stride] = next;
	}
	if (host) memcpy(base, img.data(), region);
	else { CK(cudaSetDevice(dev)); CK(cudaMemcpy(base, img.data(), region, cudaMemcpyHostToDevice)); }
	return (uint64_t)base + (uint64_t)order[0] * stride;
}

static void run(const char *name, int on, uint64_t start, int steps) {
	CK(cudaSetDevice(on));
	uint64_t *out; CK(cudaMalloc(&out, 16));
	for (int s = 0; s < 5; s++) {
		chase<<<1, 1>>>((uint64_t *)start, steps, out);
		CK(cudaDeviceSynchronize());
		uint64_t h[2]; CK(cudaMemcpy(h, out, 16, cudaMemcpyDeviceToHost));
		printf("%s gpu%d sample %d: %.2f ns per load\n", name, on, s, (double)h[0] / steps);
	}
	CK(cudaFree(out));
}

int main() {
	int n; CK(cudaGetDeviceCount(&n));
	const size_t dreg = 256 << 20, dstride = 64 << 10, hreg = 64 << 20, hstride = 16 << 10;
	for (int g = 0; g < n; g++) {
		CK(cudaSetDevice(g));
		void *d; CK(cudaMalloc(&d, dreg));
		uint64_t s = build(d, false, dreg, dstride, g);
		run("device", g, s, 100000);
		void *h; CK(cudaHostAlloc(&h, hreg, cudaHostAllocMapped | cudaHostAllocPortable));
		uint64_t hs = build(h, true, hreg, hstride, g);
		run("host_mapped", g, hs, 20000);
		CK(cudaFreeHost(h));
		for (int p = 0; p < n; p++) {
			if (p == g) continue;
			int ok; CK(cudaDeviceCanAccessPeer(&ok, g, p));
			if (!ok) { printf("gpu%d cannot access gpu%d\n", g, p); continue; }
			CK(cudaSetDevice(g)); cudaDeviceEnablePeerAccess(p, 0); cudaGetLastError();
			CK(cudaSetDevice(p));
			void *pd; CK(cudaMalloc(&pd, dreg));
			uint64_t ps = build(pd, false, dreg, dstride, p);
			run("peer", g, ps, 100000);
			CK(cudaSetDevice(p)); CK(cudaFree(pd));
		}
		CK(cudaSetDevice(g)); CK(cudaFree(d));
	}
	return 0;
}
