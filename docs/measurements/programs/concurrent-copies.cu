// concurrent-copies.cu: copy-engine copies that run at the same time, to
// see which links they share. (1) one GPU writing to every peer at once
// (cudaMemcpyPeerAsync on a stream per peer): on an NVSwitch system each
// GPU's NVLinks go to the switches, so its writes to all peers share its
// own links; with a bundle per pair they would not. (2) every GPU reading
// the same pinned host buffer's copy at once (host to all) and (3) every
// GPU writing into pinned host memory at once (all to host): what the
// host's PCIe side and memory give several GPUs together. Each case: a
// warm-up, then the median of 5 runs; GB/s counts every byte moved, and
// each copy's own rate is its bytes over the whole span.
// Build: nvcc -O2 -o concurrent-copies concurrent-copies.cu
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
	fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

static const size_t N = 256ull << 20;

// timed runs launch(), which queues the copies and returns, then waits for
// every device, five times after a warm-up, and returns the median span.
template <class F> static double timed(int ngpu, F launch) {
	std::vector<double> t;
	for (int r = 0; r < 6; r++) {
		for (int d = 0; d < ngpu; d++) { CK(cudaSetDevice(d)); CK(cudaDeviceSynchronize()); }
		auto t0 = std::chrono::steady_clock::now();
		launch();
		for (int d = 0; d < ngpu; d++) { CK(cudaSetDevice(d)); CK(cudaDeviceSynchronize()); }
		double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
		if (r > 0) t.push_back(s);
	}
	std::sort(t.begin(), t.end());
	return t[t.size() / 2];
}

int main() {
	int n = 0;
	CK(cudaGetDeviceCount(&n));
	printf("gpus %d, %zu MiB per copy\n", n, N >> 20);
	std::vector<void *> buf(n), buf2(n);
	std::vector<cudaStream_t> st(n * n);
	for (int d = 0; d < n; d++) {
		CK(cudaSetDevice(d));
		CK(cudaMalloc(&buf[d], N * n));
		CK(cudaMalloc(&buf2[d], N));
		for (int p = 0; p < n; p++) {
			CK(cudaStreamCreateWithFlags(&st[d * n + p], cudaStreamNonBlocking));
			if (p != d) CK(cudaDeviceEnablePeerAccess(p, 0));
		}
	}
	// (1) GPU s writes N bytes to each peer at once, one stream per peer.
	for (int s = 0; s < n; s++) {
		for (int k = 1; k < n; k++) {
			// k peers at once: s+1 .. s+k (mod n)
			double sec = timed(n, [&] {
				CK(cudaSetDevice(s));
				for (int j = 1; j <= k; j++) {
					int p = (s + j) % n;
					CK(cudaMemcpyPeerAsync((char *)buf[p] + (size_t)s * N, p, buf2[s], s, N, st[s * n + p]));
				}
			});
			printf("gpu%d writes to %d peer(s) at once: %.1f GB/s total, %.1f GB/s each\n", s, k, k * N / sec / 1e9, N / sec / 1e9);
		}
	}
	// (2) host to all and (3) all to host: pinned host buffers, one per GPU.
	std::vector<void *> host(n);
	for (int d = 0; d < n; d++) CK(cudaMallocHost(&host[d], N));
	for (int k = 1; k <= n; k++) {
		double h2d = timed(n, [&] {
			for (int d = 0; d < k; d++) {
				CK(cudaSetDevice(d));
				CK(cudaMemcpyAsync(buf2[d], host[d], N, cudaMemcpyHostToDevice, st[d * n + d]));
			}
		});
		double d2h = timed(n, [&] {
			for (int d = 0; d < k; d++) {
				CK(cudaSetDevice(d));
				CK(cudaMemcpyAsync(host[d], buf2[d], N, cudaMemcpyDeviceToHost, st[d * n + d]));
			}
		});
		printf("host to %d gpu(s) at once: %.1f GB/s total, %.1f each; %d gpu(s) to host at once: %.1f GB/s total, %.1f each\n",
			k, k * N / h2d / 1e9, N / h2d / 1e9, k, k * N / d2h / 1e9, N / d2h / 1e9);
	}
	return 0;
}
